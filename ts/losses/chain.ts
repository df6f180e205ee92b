/**
 * From per-token loss gradients to the gradient with respect to the logits, in one call: the policy
 * loss's d loss / d logprob, an entropy bonus (`− coef · agg(H)`, verl's `entropy_coeff`) and an
 * optional self-distillation term (`coef · agg(D(student || teacher))`) are combined and pushed through
 * {@link tokenStatsBackward} and {@link divergenceBackward}.
 *
 * @module
 */
import { fail } from '../core/errors.js';
import { checkLogits } from '../core/logits.js';
import { divergenceBackward } from '../ops/divergence.js';
import { tokenStatsBackward } from '../ops/token_stats.js';
import type { Logits, TokenStats } from '../ops/token_stats.js';
import * as v from '../core/validate.js';
import { AGG_MODES, AggMode, AggregateOptions, aggWeights, checkAggOptions, readAggOptions } from './aggregate.js';
import { FloatArray, finite, floats, rowsOf } from './inputs.js';

/**
 * Result of {@link entropyBonus}.
 *
 * @category Losses
 */
export interface EntropyBonusResult {
  /** The bonus's contribution to the loss: `− coef · agg(H)`. */
  value: number;
  /** Its gradient with respect to each token's entropy (float32). */
  gradEntropy: Float32Array;
}

/**
 * Entropy bonus as verl adds it to the actor loss: `− coef · agg_loss(H, mask, mode)`.
 *
 * @param entropy per-token entropies, length N
 * @param offsets packed rows (Int32Array of length R+1)
 * @param mask optional 0/1 mask
 * @param coef the entropy coefficient (verl `entropy_coeff`)
 * @param mode aggregation mode (default `'token-mean'`)
 * @param opts global normalisers (as {@link AggregateOptions})
 * @returns the value and d value / d entropy
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const entropy = Float32Array.of(1.5, 2, 0.5, 1);
 * const { value, gradEntropy } = rl.entropyBonus(entropy, Int32Array.of(0, 2, 4), undefined, 0.01, 'token-mean');
 * console.log(value, gradEntropy); // -0.01 * 1.25, each -0.01 / 4
 * ```
 * @category Losses
 */
export function entropyBonus(entropy: FloatArray, offsets: Int32Array, mask: Uint8Array | undefined, coef: number,
  mode: AggMode = 'token-mean', opts?: AggregateOptions): EntropyBonusResult {
  const o = readAggOptions(opts); // first: its getters run before the arrays are checked
  const h = floats(entropy, 'entropy');
  rowsOf(offsets, h.length);
  const mk = v.optMask(mask, 'mask', h.length);
  const c = v.numOpt(coef, 'coef', 0);
  const md = v.enumOpt(mode, 'mode', AGG_MODES, 'token-mean');
  finite(h, 'entropy', mk);
  const { w, nan } = aggWeights(offsets, mk, md, checkAggOptions(o));
  let s = 0;
  const g = new Float32Array(h.length);
  for (let t = 0; t < h.length; t++) {
    if (w[t] === 0) continue;
    s += w[t]! * h[t]!;
    g[t] = -c * w[t]!;
  }
  return { value: nan ? NaN : -c * s, gradEntropy: g };
}

/**
 * A self-distillation term added to the loss: `coef · agg(D)` or an explicit d loss / d D per row.
 *
 * @category Losses
 */
export interface DistillTerm {
  /** Teacher logits (same shape and dtype as the student's). */
  teacher: Logits;
  /** d loss / d divergence per row; or give `coef` (with the chain's `offsets`) to aggregate. */
  gradValue?: Float32Array;
  /**
   * Coefficient of the aggregated divergence (used when `gradValue` is absent).
   *
   * @defaultValue `1`
   */
  coef?: number;
  /**
   * Aggregation of the divergence (default `'token-mean'`).
   *
   * @defaultValue `'token-mean'`
   */
  agg?: AggMode;
  /**
   * Divergence kind (default `'reverse_kl'`).
   *
   * @defaultValue `'reverse_kl'`
   */
  kind?: 'reverse_kl' | 'forward_kl' | 'jsd';
  /**
   * JSD mixture weight (default 0.5).
   *
   * @defaultValue `0.5`
   */
  beta?: number;
  /**
   * Cap used in the forward (capped rows get no gradient).
   *
   * @defaultValue `Infinity` (no cap)
   */
  klCap?: number;
}

/**
 * Arguments of {@link lossGradToLogits}.
 *
 * @category Losses
 */
export interface LossGradToLogitsArgs {
  /** Student logits, one row per token. */
  logits: Logits;
  /** Sampled token ids, one per row. */
  targets: Int32Array;
  /** d loss / d logprob per row (e.g. `policyLoss(...).grad`). */
  gradLogprob: FloatArray;
  /** Extra d loss / d entropy per row (e.g. `trlLoss(...).gradEntropy`). */
  gradEntropy?: FloatArray;
  /**
   * Entropy bonus coefficient: adds `− coef · agg(H)` (needs `offsets`).
   *
   * @defaultValue `0`
   */
  entropyCoef?: number;
  /**
   * Aggregation of the entropy bonus (default `'token-mean'`).
   *
   * @defaultValue `'token-mean'`
   */
  entropyAgg?: AggMode;
  /** Packed rows (needed by the aggregated entropy / distillation terms). */
  offsets?: Int32Array;
  /** 0/1 loss mask of the aggregated terms. */
  mask?: Uint8Array;
  /** Global normalisers of the aggregated terms. */
  aggOptions?: AggregateOptions;
  /** Self-distillation term. */
  distill?: DistillTerm;
  /**
   * Sampling temperature used in the forward (default 1).
   *
   * @defaultValue `1`
   */
  temperature?: number;
  /** The forward's `tokenStats` output (skips recomputing each row's statistics). */
  stats?: TokenStats;
  /** Output buffer (Float32Array of rows × vocab). */
  out?: Float32Array;
}

const to32 = (x: FloatArray) => (v.isTyped(x, Float32Array) ? x : Float32Array.from(x));

/**
 * d loss / d logits for `loss = f(logprob) − entropyCoef · agg(H) + distill`, given d f / d logprob.
 * Gradients are with respect to the unscaled logits (the temperature is applied inside, as the
 * forward did).
 *
 * @param a logits, targets, the upstream gradients and the optional terms
 * @returns Float32Array of rows × vocab
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const rows = 4, vocab = 8;
 * const logits = { data: Float32Array.from({ length: rows * vocab }, () => Math.random()), rows, vocab };
 * const targets = Int32Array.of(1, 5, 2, 7);
 * const offsets = Int32Array.of(0, 2, 4);
 * const stats = rl.tokenStats(logits, targets);
 * const pg = rl.policyLoss({
 *   logprob: stats.logprob, oldLogprob: stats.logprob, advantages: Float32Array.of(1, 1, -1, -1), offsets,
 * });
 * // policy gradient plus an entropy bonus, chained to d loss / d logits in one pass
 * const dlogits = rl.lossGradToLogits({ logits, targets, gradLogprob: pg.grad, entropyCoef: 0.01, offsets, stats });
 * console.log(dlogits.length); // rows * vocab
 * ```
 * @category Losses
 */
export function lossGradToLogits(a: LossGradToLogitsArgs): Float32Array {
  v.argsObject(a, 'lossGradToLogits');
  v.knownKeys(a, 'lossGradToLogits', ['logits', 'targets', 'gradLogprob', 'gradEntropy', 'entropyCoef', 'entropyAgg',
    'offsets', 'mask', 'aggOptions', 'distill', 'temperature', 'stats', 'out']);
  // Each field is read once (a getter may answer differently on a second read), and so are the fields
  // of the aggregation options and of `distill`, before anything is checked: no caller code runs
  // between the checks of the arrays and their use.
  const { logits, targets, gradLogprob, gradEntropy, entropyCoef, entropyAgg, offsets, mask: mask0, distill, temperature, stats, out: out0 } = a;
  const aggOptions = readAggOptions(a.aggOptions);
  const distillFields = distill !== null && typeof distill === 'object'
    ? (({ teacher, gradValue, coef, agg, kind, beta, klCap }) => ({ teacher, gradValue, coef, agg, kind, beta, klCap }))(distill)
    : undefined;
  if (logits === null || typeof logits !== 'object') fail('ERR_OPTION', 'logits', 'a Logits object', logits);
  // read once: the ops below get the checked value
  const L = checkLogits(logits, 'logits');
  const checked = L.logits as Logits;
  const rows = L.rows;
  const gl = to32(floats(gradLogprob, 'gradLogprob', rows));
  let ge: Float32Array | undefined = gradEntropy === undefined ? undefined : Float32Array.from(floats(gradEntropy, 'gradEntropy', rows));
  let d: DistillTerm | undefined;
  let dGradValue: unknown;
  if (distill !== undefined) {
    v.knownKeys(distill, 'distill', ['teacher', 'gradValue', 'coef', 'agg', 'kind', 'beta', 'klCap']);
    d = distillFields!;
    dGradValue = d.gradValue;
  }
  const needAgg = (entropyCoef !== undefined && entropyCoef !== 0) || (d !== undefined && dGradValue === undefined);
  if (needAgg && offsets === undefined) fail('ERR_OPTION', 'offsets', 'packed rows (needed by entropyCoef / distill.coef)', undefined);
  if (offsets !== undefined) rowsOf(offsets, rows);
  const mask = v.optMask(mask0, 'mask', rows);
  const ao = checkAggOptions(aggOptions, 'aggOptions');
  if (entropyCoef !== undefined && entropyCoef !== 0) {
    const c = v.numOpt(entropyCoef, 'entropyCoef', 0);
    const { w } = aggWeights(offsets!, mask, v.enumOpt(entropyAgg, 'entropyAgg', AGG_MODES, 'token-mean'), ao);
    ge ??= new Float32Array(rows);
    for (let t = 0; t < rows; t++) ge[t] = ge[t]! - c * w[t]!;
  }
  let dz: Float32Array | undefined;
  if (d !== undefined) {
    let gv: Float32Array;
    if (dGradValue !== undefined) gv = to32(floats(dGradValue, 'distill.gradValue', rows));
    else {
      const c = v.numOpt(d.coef, 'distill.coef', 1);
      const { w } = aggWeights(offsets!, mask, v.enumOpt(d.agg, 'distill.agg', AGG_MODES, 'token-mean'), ao);
      gv = Float32Array.from(w, (x) => c * x);
    }
    // before the logits-gradient pass: it may write over a caller-supplied buffer
    dz = divergenceBackward(checked, d.teacher, gv, {
      kind: d.kind, beta: d.beta, temperature, ...(d.klCap !== undefined ? { klCap: d.klCap } : {}),
    });
  }
  const out = tokenStatsBackward(checked, targets, { logprob: gl, ...(ge ? { entropy: ge } : {}) }, {
    temperature, ...(stats ? { stats } : {}), ...(out0 ? { out: out0 } : {}),
  });
  if (dz) for (let i = 0; i < out.length; i++) out[i] = out[i]! + dz[i]!;
  return out;
}
