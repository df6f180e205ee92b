/**
 * From per-token loss gradients to the gradient with respect to the logits, in one call: the policy
 * loss's d loss / d logprob, an entropy bonus (`− coef · agg(H)`, verl's `entropy_coeff`) and an
 * optional self-distillation term (`coef · agg(D(student || teacher))`) are combined and pushed through
 * {@link tokenStatsBackward} and {@link divergenceBackward}.
 *
 * @module
 */
import { fail } from '../core/errors.js';
import { divergenceBackward } from '../ops/divergence.js';
import { tokenStatsBackward } from '../ops/token_stats.js';
import type { Logits, TokenStats } from '../ops/token_stats.js';
import * as v from '../core/validate.js';
import { AGG_MODES, AggMode, AggregateOptions, aggWeights, checkAggOptions } from './aggregate.js';
import { FloatArray, finite, floats, rowsOf } from './common.js';

/** Result of {@link entropyBonus}. */
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
 */
export function entropyBonus(entropy: FloatArray, offsets: Int32Array, mask: Uint8Array | undefined, coef: number,
  mode: AggMode = 'token-mean', opts?: AggregateOptions): EntropyBonusResult {
  const h = floats(entropy, 'entropy');
  rowsOf(offsets, h.length);
  const mk = v.optMask(mask, 'mask', h.length);
  const c = v.numOpt(coef, 'coef', 0);
  const md = v.enumOpt(mode, 'mode', AGG_MODES, 'token-mean');
  finite(h, 'entropy', mk);
  const { w, nan } = aggWeights(offsets, mk, md, checkAggOptions(opts));
  let s = 0;
  const g = new Float32Array(h.length);
  for (let t = 0; t < h.length; t++) {
    if (w[t] === 0) continue;
    s += w[t]! * h[t]!;
    g[t] = -c * w[t]!;
  }
  return { value: nan ? NaN : -c * s, gradEntropy: g };
}

/** A self-distillation term added to the loss: `coef · agg(D)` or an explicit d loss / d D per row. */
export interface DistillTerm {
  /** Teacher logits (same shape and dtype as the student's). */
  teacher: Logits;
  /** d loss / d divergence per row; or give `coef` (with the chain's `offsets`) to aggregate. */
  gradValue?: Float32Array;
  /** Coefficient of the aggregated divergence (used when `gradValue` is absent). */
  coef?: number;
  /** Aggregation of the divergence (default `'token-mean'`). */
  agg?: AggMode;
  /** Divergence kind (default `'reverse_kl'`). */
  kind?: 'reverse_kl' | 'forward_kl' | 'jsd';
  /** JSD mixture weight (default 0.5). */
  beta?: number;
  /** Cap used in the forward (capped rows get no gradient). */
  klCap?: number;
}

/** Arguments of {@link lossGradToLogits}. */
export interface LossGradToLogitsArgs {
  /** Student logits, one row per token. */
  logits: Logits;
  /** Sampled token ids, one per row. */
  targets: Int32Array;
  /** d loss / d logprob per row (e.g. `policyLoss(...).grad`). */
  gradLogprob: FloatArray;
  /** Extra d loss / d entropy per row (e.g. `trlLoss(...).gradEntropy`). */
  gradEntropy?: FloatArray;
  /** Entropy bonus coefficient: adds `− coef · agg(H)` (needs `offsets`). */
  entropyCoef?: number;
  /** Aggregation of the entropy bonus (default `'token-mean'`). */
  entropyAgg?: AggMode;
  /** Packed rows (needed by the aggregated entropy / distillation terms). */
  offsets?: Int32Array;
  /** 0/1 loss mask of the aggregated terms. */
  mask?: Uint8Array;
  /** Global normalisers of the aggregated terms. */
  aggOptions?: AggregateOptions;
  /** Self-distillation term. */
  distill?: DistillTerm;
  /** Sampling temperature used in the forward (default 1). */
  temperature?: number;
  /** The forward's `tokenStats` output (skips recomputing each row's statistics). */
  stats?: TokenStats;
  /** Output buffer (Float32Array of rows × vocab). */
  out?: Float32Array;
}

const to32 = (x: FloatArray) => (x instanceof Float32Array ? x : Float32Array.from(x));

/**
 * d loss / d logits for `loss = f(logprob) − entropyCoef · agg(H) + distill`, given d f / d logprob.
 * Gradients are with respect to the unscaled logits (the temperature is applied inside, as the
 * forward did).
 *
 * @param a logits, targets, the upstream gradients and the optional terms
 * @returns Float32Array of rows × vocab
 */
export function lossGradToLogits(a: LossGradToLogitsArgs): Float32Array {
  v.knownKeys(a, 'lossGradToLogits', ['logits', 'targets', 'gradLogprob', 'gradEntropy', 'entropyCoef', 'entropyAgg',
    'offsets', 'mask', 'aggOptions', 'distill', 'temperature', 'stats', 'out']);
  if (a.logits === null || typeof a.logits !== 'object') fail('ERR_OPTION', 'logits', 'a Logits object', a.logits);
  const rows = a.logits.rows;
  const gl = to32(floats(a.gradLogprob, 'gradLogprob', rows));
  let ge: Float32Array | undefined = a.gradEntropy === undefined ? undefined : Float32Array.from(floats(a.gradEntropy, 'gradEntropy', rows));
  const needAgg = (a.entropyCoef !== undefined && a.entropyCoef !== 0) || (a.distill !== undefined && a.distill.gradValue === undefined);
  if (needAgg && a.offsets === undefined) fail('ERR_OPTION', 'offsets', 'packed rows (needed by entropyCoef / distill.coef)', undefined);
  if (a.offsets !== undefined) rowsOf(a.offsets, rows);
  const mask = v.optMask(a.mask, 'mask', rows);
  const ao = checkAggOptions(a.aggOptions, 'aggOptions');
  if (a.entropyCoef !== undefined && a.entropyCoef !== 0) {
    const c = v.numOpt(a.entropyCoef, 'entropyCoef', 0);
    const { w } = aggWeights(a.offsets!, mask, v.enumOpt(a.entropyAgg, 'entropyAgg', AGG_MODES, 'token-mean'), ao);
    ge ??= new Float32Array(rows);
    for (let t = 0; t < rows; t++) ge[t] = ge[t]! - c * w[t]!;
  }
  let dz: Float32Array | undefined;
  if (a.distill !== undefined) {
    const d = a.distill;
    v.knownKeys(d, 'distill', ['teacher', 'gradValue', 'coef', 'agg', 'kind', 'beta', 'klCap']);
    let gv: Float32Array;
    if (d.gradValue !== undefined) gv = to32(floats(d.gradValue, 'distill.gradValue', rows));
    else {
      const c = v.numOpt(d.coef, 'distill.coef', 1);
      const { w } = aggWeights(a.offsets!, mask, v.enumOpt(d.agg, 'distill.agg', AGG_MODES, 'token-mean'), ao);
      gv = Float32Array.from(w, (x) => c * x);
    }
    // before the logits-gradient pass: it may write over a caller-supplied buffer
    dz = divergenceBackward(a.logits, d.teacher, gv, {
      kind: d.kind, beta: d.beta, temperature: a.temperature, ...(d.klCap !== undefined ? { klCap: d.klCap } : {}),
    });
  }
  const out = tokenStatsBackward(a.logits, a.targets, { logprob: gl, ...(ge ? { entropy: ge } : {}) }, {
    temperature: a.temperature, ...(a.stats ? { stats: a.stats } : {}), ...(a.out ? { out: a.out } : {}),
  });
  if (dz) for (let i = 0; i < out.length; i++) out[i] = out[i]! + dz[i]!;
  return out;
}
