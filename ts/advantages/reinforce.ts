/**
 * REINFORCE++ family (verl `reinforce_plus_plus_baseline` and `reinforce_plus_plus`): batch-whitened
 * advantages, at row level (group baseline) and at token level (discounted token returns).
 *
 * @module
 */
import { fail } from '../core/errors.js';
import * as v from '../core/validate.js';
import { type AdvantageEstimatorDefinition, estimatorArgs } from './registry.js';
import { OPT_DATA, ROW_OPTIONS, TOKEN_OPTIONS, rowArgs } from './row_args.js';
import { type GroupId, type SingletonPolicy, groupStatsOf } from './groups.js';
import { lengthsArg, weightedVar, whitenRows } from './masked.js';

/**
 * Arguments of {@link reinforcePlusPlusBaseline}.
 *
 * @category Advantages
 */
export interface ReinforcePlusPlusBaselineArgs {
  /** Outcome reward per row. */
  rewards: ArrayLike<number>;
  /** Group id per row (numbers or strings). */
  groups: ArrayLike<GroupId>;
  /** Counted (mask 1) tokens per row. verl whitens over tokens, so a row weighs as many times as it
   *  has counted tokens; omitted, every row counts once. */
  lengths?: ArrayLike<number>;
  /**
   * A group of one row: `'raw'` keeps its score before whitening (verl, default), `'zero'` uses 0.
   *
   * @defaultValue `'raw'`
   */
  singleton?: SingletonPolicy;
}

const RPP_BASELINE_OPTIONS = Object.freeze({ ...ROW_OPTIONS, lengths: OPT_DATA } as const);

/**
 * REINFORCE++-baseline: `a_i = r_i - mean_g`, then whitened over the whole batch exactly as verl's
 * `masked_whiten` (statistics over every counted token, `+1e-8` on the count and under the square
 * root). Throws `ERR_SHAPE` when fewer than two tokens are counted in the batch (verl raises).
 *
 * @param a rewards, groups, lengths, singleton policy
 * @returns one (whitened) advantage per row (Float64Array); broadcast with `segmentBroadcast`
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const adv = rl.reinforcePlusPlusBaseline({ rewards: [1, 0, 0.5, 0], groups: [0, 0, 1, 1], lengths: [3, 5, 2, 4] });
 * console.log(adv); // group-mean baseline, then whitened over the batch's tokens
 * ```
 * @category Advantages
 */
export function reinforcePlusPlusBaseline(a: ReinforcePlusPlusBaselineArgs): Float64Array {
  const { a: o, rewards, idx, singleton } = rowArgs(a, 'reinforcePlusPlusBaseline', RPP_BASELINE_OPTIONS);
  const lengths = lengthsArg(o.lengths, 'reinforcePlusPlusBaseline: lengths', rewards.length);
  const st = groupStatsOf(rewards, idx);
  const centred = new Float64Array(rewards.length);
  for (let i = 0; i < rewards.length; i++) {
    const g = idx.ids[i]!;
    if (idx.sizes[g] === 1) centred[i] = singleton === 'raw' ? rewards[i]! : 0;
    else centred[i] = rewards[i]! - st.mean[g]!;
  }
  return whitenRows(centred, lengths);
}

/**
 * Arguments of {@link reinforcePlusPlus} and {@link tokenReturns}.
 *
 * @category Advantages
 */
export interface ReinforcePlusPlusArgs {
  /** Reward per token (packed rows), e.g. the outcome reward on the last token of each response. */
  tokenRewards: Float32Array | Float64Array;
  /** Packed-row offsets, length R + 1. */
  offsets: Int32Array;
  /**
   * 1 = generated token, 0 = tool output / observation / padding. All ones when omitted.
   *
   * @defaultValue all ones
   */
  mask?: Uint8Array;
  /**
   * Discount per token (default 1).
   *
   * @defaultValue `1`
   */
  gamma?: number;
  /** Which peer's handling of masked gaps (docs/compat.md): `'verl'` (default, current verl): masked tokens
   *  are skipped and the running return is carried through them. `'verl-legacy'` or `'verl-agent'` (older
   *  verl, which verl-agent builds on): the running return is reset to 0 at masked tokens.
   *
   * @defaultValue `'verl'`
   */
  compat?: 'verl' | 'verl-legacy' | 'verl-agent';
  /** @deprecated Use `compat`: `'current'` is `compat: 'verl'`, `'legacy'` is `compat: 'verl-legacy'`. */
  semantics?: 'current' | 'legacy';
  /**
   * Output precision: `'float32'` (default, per-token convention) or `'float64'`.
   *
   * @defaultValue `'float32'`
   */
  precision?: 'float32' | 'float64';
}

const RPP_OPTIONS = Object.freeze({
  ...TOKEN_OPTIONS,
  gamma: { type: 'number', min: 0, max: 1, default: 1, description: 'discount per token' },
  compat: { type: 'string', values: ['verl', 'verl-legacy', 'verl-agent'], description: 'masked gaps: skipped (verl) or reset (verl-legacy, verl-agent)' },
  semantics: { type: 'string', values: ['current', 'legacy'], description: 'deprecated: compat' },
  precision: { type: 'string', values: ['float32', 'float64'], default: 'float32', description: 'output precision' },
  baselines: OPT_DATA,
} as const);

function tokenArgs(a: unknown, fn: string) {
  const o = estimatorArgs(RPP_OPTIONS, a, fn);
  const x = o.tokenRewards;
  if (!(v.isTyped(x, Float32Array) || v.isTyped(x, Float64Array))) fail('ERR_DTYPE', `${fn}: tokenRewards`, 'Float32Array or Float64Array', x);
  v.attached(x, `${fn}: tokenRewards`);
  v.allFinite(x, `${fn}: tokenRewards`);
  const R = v.offsets(o.offsets, `${fn}: offsets`, x.length);
  const mask = v.optMask(o.mask, `${fn}: mask`, x.length);
  const { gamma, compat, precision } = o;
  const byAlias = o.semantics ?? 'current';
  const byCompat = compat === undefined ? undefined : compat === 'verl' ? 'current' : 'legacy';
  if (byCompat !== undefined && o.semantics !== undefined && byCompat !== byAlias) {
    fail('ERR_OPTION', `${fn}: compat`, `a value agreeing with the deprecated semantics '${byAlias}' (give compat only)`, compat);
  }
  const semantics = byCompat ?? byAlias;
  return { o, x, offsets: o.offsets as Int32Array, R, mask, gamma, semantics, precision };
}

function returnsOf(x: ArrayLike<number>, off: Int32Array, R: number, mask: Uint8Array | undefined, gamma: number, legacy: boolean) {
  const ret = new Float64Array(x.length);
  for (let r = 0; r < R; r++) {
    let run = 0;
    for (let t = off[r + 1]! - 1; t >= off[r]!; t--) {
      const m = mask ? mask[t]! : 1;
      if (legacy) {
        const g = x[t]! + gamma * run;
        ret[t] = g;
        run = m ? g : 0;
      } else {
        const g = x[t]! + gamma * run;
        ret[t] = m ? g : 0;
        if (m) run = g;
      }
    }
  }
  return ret;
}

/**
 * Discounted token returns of REINFORCE++ (backwards within each row, `G_t = R_t + γ G_{t+1}`), with
 * the masked-gap handling of {@link ReinforcePlusPlusArgs.compat}. `'verl'` returns 0 at masked tokens
 * (verl multiplies by the mask); `'verl-legacy'` / `'verl-agent'` return the unmasked running value there.
 *
 * @param a token rewards, offsets, mask, gamma, compat
 * @returns per-token returns (Float64Array)
 * @example
 * ```ts
 * import { tokenReturns } from 'gear-rl/diagnostics';
 *
 * // outcome reward on the last token of each row; the discounted return flows back over the row
 * const tokenRewards = Float32Array.of(0, 0, 1, 0, 2);
 * const returns = tokenReturns({ tokenRewards, offsets: Int32Array.of(0, 3, 5), gamma: 0.5 });
 * console.log(returns); // Float64Array [0.25, 0.5, 1, 1, 2]
 * ```
 * @category Advantages
 */
export function tokenReturns(a: ReinforcePlusPlusArgs): Float64Array {
  const p = tokenArgs(a, 'tokenReturns');
  return returnsOf(p.x, p.offsets, p.R, p.mask, p.gamma, p.semantics === 'legacy');
}

/**
 * REINFORCE++ (token-level): discounted token returns ({@link tokenReturns}), whitened over every
 * counted token of the batch (verl `masked_whiten`), 0 on masked tokens. Throws `ERR_SHAPE` when fewer
 * than two tokens are counted.
 *
 * @param a token rewards, offsets, mask, gamma, compat, precision
 * @returns per-token advantages (Float32Array, or Float64Array with `precision: 'float64'`)
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const tokenRewards = Float32Array.of(0, 0, 1, 0, 0, -1);
 * const offsets = Int32Array.of(0, 3, 6);
 * const mask = Uint8Array.of(1, 1, 1, 1, 0, 1); // token 4 is a tool token
 * const adv = rl.reinforcePlusPlus({ tokenRewards, offsets, mask, gamma: 1 }); // Float32Array, whitened
 * const adv64 = rl.reinforcePlusPlus({ tokenRewards, offsets, mask, precision: 'float64' });
 * console.log(adv, adv64);
 * ```
 * @category Advantages
 */
export function reinforcePlusPlus(a: ReinforcePlusPlusArgs & { precision: 'float64' }): Float64Array;
/** With the default `precision: 'float32'`: the advantages as a Float32Array (described with the first signature). */
export function reinforcePlusPlus(a: ReinforcePlusPlusArgs): Float32Array;
export function reinforcePlusPlus(a: ReinforcePlusPlusArgs): Float32Array | Float64Array {
  const p = tokenArgs(a, 'reinforcePlusPlus');
  if (p.o.baselines !== undefined) fail('ERR_OPTION', 'reinforcePlusPlus: baselines', 'no such option (see remax)', 'a value');
  const ret = returnsOf(p.x, p.offsets, p.R, p.mask, p.gamma, p.semantics === 'legacy');
  const m = p.mask;
  const { mean, variance } = weightedVar(ret, m ? (i) => m[i]! : () => 1, ret.length, true);
  const inv = 1 / Math.sqrt(variance + 1e-8);
  const out = p.precision === 'float64' ? new Float64Array(ret.length) : new Float32Array(ret.length);
  for (let i = 0; i < ret.length; i++) out[i] = m && !m[i] ? 0 : (ret[i]! - mean) * inv;
  return out;
}

/** @internal Estimator `reinforce_plus_plus_baseline`. */
export const reinforcePlusPlusBaselineEstimator: AdvantageEstimatorDefinition<ReinforcePlusPlusBaselineArgs> = {
  name: 'reinforce_plus_plus_baseline', level: 'row', description: 'group-mean baseline, then batch whitening',
  options: RPP_BASELINE_OPTIONS, compute: reinforcePlusPlusBaseline,
};
/** @internal Estimator `reinforce_plus_plus`. */
export const reinforcePlusPlusEstimator: AdvantageEstimatorDefinition<ReinforcePlusPlusArgs> = {
  name: 'reinforce_plus_plus', level: 'token', description: 'whitened discounted token returns', options: RPP_OPTIONS, compute: reinforcePlusPlus,
};
