/**
 * KL penalty estimators (verl `kl_penalty`, Schulman's k1/k2/k3) per token with their gradient, and the
 * KL-in-reward form with fixed and adaptive controllers (verl `apply_kl_penalty`).
 *
 * @module
 */
import { GearError, fail } from '../core/errors.js';
import * as v from '../core/validate.js';
import { compatOpt } from './compat.js';
import { AGG_MODES, AggMode, AggregateOptions, aggWeights, checkAggOptions, readAggOptions } from './aggregate.js';
import { FloatArray, finite, floats, rowsOf, sameType } from './inputs.js';

/**
 * Estimator names: ours (k1, abs, k2, k3) and verl's (kl, mse, low_var_kl), each optionally with `+`.
 *
 * @category Losses
 */
export type KlEstimator =
  | 'k1' | 'abs' | 'k2' | 'k3' | 'kl' | 'mse' | 'low_var_kl'
  | 'k1+' | 'abs+' | 'k2+' | 'k3+' | 'kl+' | 'mse+' | 'low_var_kl+';

/**
 * Clamping convention: `'verl'` (current and legacy verl: k3's exponent clamped to ±20 and its value
 * to ±10), `'verl-legacy'` (as `'verl'`, but the `+` types raise as they do there), `'verl-agent'` (value
 * clamped to ±10, exponent unclamped) or `'trl'` (k3 with no clamp at all, TRL's KL).
 *
 * @category Losses
 */
export type KlSemantics = 'verl' | 'verl-legacy' | 'verl-agent' | 'trl';
const KL_SEMANTICS: readonly KlSemantics[] = ['verl', 'verl-legacy', 'verl-agent', 'trl'];

const BASE: Record<string, 'k1' | 'abs' | 'k2' | 'k3'> = {
  k1: 'k1', kl: 'k1', abs: 'abs', k2: 'k2', mse: 'k2', k3: 'k3', low_var_kl: 'k3',
};

/**
 * Arguments of {@link klPenalty}.
 *
 * @category Losses
 */
export interface KlPenaltyArgs {
  /** Current (or old) policy log-probs ℓ, per token. */
  logprob: FloatArray;
  /** Reference policy log-probs ℓ_ref, per token, same length. */
  refLogprob: FloatArray;
  /** The estimator; a trailing `+` keeps the value and takes k2's gradient (straight-through). */
  estimator: KlEstimator;
  /**
   * Which peer's clamping convention (default `'verl'`; docs/compat.md).
   *
   * @defaultValue `'verl'`
   */
  compat?: KlSemantics;
  /** @deprecated Use `compat` (same values). */
  semantics?: KlSemantics;
}

/**
 * Result of {@link klPenalty}.
 *
 * @category Losses
 */
export interface KlPenaltyResult {
  /** Per-token KL estimate (same float type as `logprob`). */
  kl: FloatArray;
  /** d Σ kl / d logprob, per token. */
  grad: FloatArray;
}

/** @internal Resolves an estimator name to its base and straight-through flag; rejects 'full'. */
export function parseEstimator(est: unknown, semantics: KlSemantics, what = 'estimator'): { base: 'k1' | 'abs' | 'k2' | 'k3'; st: boolean } {
  if (typeof est !== 'string') fail('ERR_OPTION', what, 'an estimator name', est);
  if (est === 'full' || est === 'full+') {
    fail('ERR_OPTION', what, "k1, abs, k2, k3 (or kl, mse, low_var_kl); 'full' needs every vocabulary entry and is not an estimator here", est);
  }
  const st = est.endsWith('+');
  const base = BASE[st ? est.slice(0, -1) : est];
  if (base === undefined) fail('ERR_OPTION', what, 'one of k1, abs, k2, k3, kl, mse, low_var_kl (optionally with +)', est);
  if (st && semantics === 'verl-legacy') {
    fail('ERR_OPTION', what, "a type without '+' (legacy verl raises for every straight-through type)", est);
  }
  return { base, st };
}

/** @internal Value and derivative (w.r.t. ℓ) of one token's estimate, d = ℓ − ℓ_ref. */
export function klToken(lp: number, ref: number, base: 'k1' | 'abs' | 'k2' | 'k3', st: boolean, sem: KlSemantics): [number, number] {
  const d = lp - ref;
  let val: number;
  let g: number;
  switch (base) {
    case 'k1': val = d; g = 1; break;
    case 'abs': val = Math.abs(d); g = d > 0 ? 1 : d < 0 ? -1 : 0; break;
    case 'k2': val = 0.5 * d * d; g = d; break;
    default: {
      // k3 = e^u − u − 1 with u = ℓ_ref − ℓ
      let u = ref - lp;
      let du = -1;
      if (sem === 'verl' || sem === 'verl-legacy') {
        if (u > 20) { u = 20; du = 0; } else if (u < -20) { u = -20; du = 0; }
      }
      const e = Math.exp(u);
      val = e - u - 1;
      g = (e - 1) * du;
      if (sem !== 'trl') {
        if (val > 10) { val = 10; g = 0; } else if (val < -10) { val = -10; g = 0; }
      }
    }
  }
  if (st) g = d; // straight-through: k2's gradient
  return [val, g];
}

/**
 * Per-token KL penalty estimate between the policy and a reference policy, with d Σ kl / d logprob.
 * `k1` = d, `abs` = |d|, `k2` = ½d², `k3` = e^u − u − 1 with u = −d (verl clamps u to ±20 and the value
 * to ±10; see {@link KlSemantics}). `<type>+` keeps `<type>`'s value with k2's gradient (current verl).
 * `'full'` is rejected (`ERR_OPTION`).
 *
 * @param a the log-probs, the estimator and the clamping convention
 * @returns per-token `kl` and `grad`, in the float type of `logprob`
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const { kl, grad } = rl.klPenalty({
 *   logprob: Float32Array.of(-1, -0.5, -2),
 *   refLogprob: Float32Array.of(-1.2, -0.5, -1.5),
 *   estimator: 'low_var_kl', // k3
 * });
 * console.log(kl, grad);
 * ```
 * @category Losses
 */
export function klPenalty(a: KlPenaltyArgs): KlPenaltyResult {
  v.argsObject(a, 'klPenalty');
  v.knownKeys(a, 'klPenalty', ['logprob', 'refLogprob', 'estimator', 'compat', 'semantics']);
  // every field read once before anything is checked
  const { logprob, refLogprob, estimator, compat, semantics } = a;
  const lp = floats(logprob, 'logprob');
  const ref = floats(refLogprob, 'refLogprob', lp.length);
  const sem = compatOpt({ compat, semantics }, '', KL_SEMANTICS, 'verl', { key: 'semantics', values: KL_SEMANTICS });
  const { base, st } = parseEstimator(estimator, sem);
  finite(lp, 'logprob');
  finite(ref, 'refLogprob');
  const kl = sameType(lp, lp.length);
  const grad = sameType(lp, lp.length);
  for (let t = 0; t < lp.length; t++) {
    const [val, g] = klToken(lp[t]!, ref[t]!, base, st, sem);
    kl[t] = val;
    grad[t] = g;
  }
  return { kl, grad };
}

/**
 * A KL coefficient controller: `value` is β; `update` adapts it after each batch.
 *
 * @category Losses
 */
export interface KlController {
  /** The current coefficient β. */
  readonly value: number;
  /** Updates β from the batch's mean KL (`nSteps` = the batch size, as verl passes it). */
  update(currentKl: number, nSteps: number): void;
}

/**
 * Fixed coefficient (verl `FixedKLController`): `update` does nothing.
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const controller = new rl.FixedKlController(0.01);
 * controller.update(0.5, 64);   // no effect
 * console.log(controller.value); // 0.01
 * ```
 * @category Losses
 */
export class FixedKlController implements KlController {
  /** The coefficient β. */
  readonly value: number;
  /** @param klCoef β (verl default 0.001) */
  constructor(klCoef = 0.001) {
    this.value = v.numOpt(klCoef, 'klCoef', 0.001, { min: 0 });
  }
  /** No-op (the coefficient is fixed). */
  update(_currentKl: number, _nSteps: number): void { /* fixed */ }
}

/**
 * Adaptive coefficient (verl `AdaptiveKLController`, Ziegler et al.):
 * `β ← β · (1 + clip(kl / target − 1, −0.2, 0.2) · nSteps / horizon)`.
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const controller = new rl.AdaptiveKlController(0.001, 0.1, 10_000);
 * controller.update(0.3, 256);   // KL above target: beta grows by 0.2 * 256 / 10000
 * console.log(controller.value, controller.target, controller.horizon);
 * ```
 * @category Losses
 */
export class AdaptiveKlController implements KlController {
  private beta: number;
  /** Target KL. */
  readonly target: number;
  /** Horizon (in samples). */
  readonly horizon: number;
  /**
   * @param initKlCoef initial β (verl default 0.001)
   * @param targetKl target KL (default 0.1)
   * @param horizon horizon (default 10000)
   */
  constructor(initKlCoef = 0.001, targetKl = 0.1, horizon = 10000) {
    this.beta = v.numOpt(initKlCoef, 'initKlCoef', 0.001, { min: 0 });
    this.target = v.numOpt(targetKl, 'targetKl', 0.1, { min: 0, minOpen: true });
    this.horizon = v.numOpt(horizon, 'horizon', 10000, { min: 0, minOpen: true });
  }
  /** The current β. */
  get value(): number { return this.beta; }
  /** Applies verl's proportional update. */
  update(currentKl: number, nSteps: number): void {
    v.numOpt(currentKl, 'currentKl', 0);
    v.numOpt(nSteps, 'nSteps', 0, { min: 0 });
    if (!Number.isFinite(currentKl)) throw new GearError('ERR_NON_FINITE', `currentKl: expected a finite number, got ${currentKl}`);
    const err = Math.min(Math.max(currentKl / this.target - 1, -0.2), 0.2);
    this.beta *= 1 + (err * nSteps) / this.horizon;
  }
}

/**
 * Arguments of {@link applyKlPenalty}.
 *
 * @category Losses
 */
export interface ApplyKlPenaltyArgs {
  /** Per-token rewards (verl `token_level_scores`), length N. */
  tokenRewards: FloatArray;
  /** Behaviour (old) policy log-probs, per token. */
  oldLogprob: FloatArray;
  /** Reference policy log-probs, per token. */
  refLogprob: FloatArray;
  /** Packed rows, Int32Array of length R+1. */
  offsets: Int32Array;
  /** Optional 0/1 response mask. */
  mask?: Uint8Array;
  /**
   * The estimator (verl default `'kl'`).
   *
   * @defaultValue `'kl'`
   */
  estimator?: KlEstimator;
  /** The coefficient controller; updated in place with this batch's KL (verl does the same). */
  controller: KlController;
  /**
   * Which peer's clamping convention (default `'verl'`; docs/compat.md).
   *
   * @defaultValue `'verl'`
   */
  compat?: KlSemantics;
  /** @deprecated Use `compat` (same values). */
  semantics?: KlSemantics;
}

/**
 * Result of {@link applyKlPenalty}.
 *
 * @category Losses
 */
export interface ApplyKlPenaltyResult {
  /** `tokenRewards − β · kl · mask`, float32. */
  rewards: Float32Array;
  /** The masked per-token KL used (float32). */
  kl: Float32Array;
  /** Mean over rows of each row's masked KL mean (verl's `current_kl`). */
  currentKl: number;
  /** The β that was applied (before the controller's update). */
  beta: number;
}

/**
 * KL in the reward (verl `apply_kl_penalty`): `R' = R − β · kl(ℓ_old, ℓ_ref) · m`, then the controller
 * is updated with `current_kl = mean_i(masked_mean(kl_i))` and `nSteps` = the row count.
 *
 * @param a rewards, log-probs, rows and the controller
 * @returns the penalised rewards, the KL, `currentKl` and the β applied
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * // verl's use_kl_in_reward: reward - beta * kl per token, with an adaptive beta
 * const controller = new rl.AdaptiveKlController(0.05, 0.1, 10_000);
 * const { rewards, currentKl, beta } = rl.applyKlPenalty({
 *   tokenRewards: Float32Array.of(0, 0, 1, 0, 1),
 *   oldLogprob: Float32Array.of(-1, -0.5, -2, -0.3, -1),
 *   refLogprob: Float32Array.of(-1.2, -0.5, -1.5, -0.3, -0.8),
 *   offsets: Int32Array.of(0, 3, 5),
 *   estimator: 'kl',
 *   controller,
 * });
 * console.log(rewards, currentKl, beta, controller.value); // the controller is updated with this batch's KL
 * ```
 * @category Losses
 */
export function applyKlPenalty(a: ApplyKlPenaltyArgs): ApplyKlPenaltyResult {
  v.argsObject(a, 'applyKlPenalty');
  v.knownKeys(a, 'applyKlPenalty', ['tokenRewards', 'oldLogprob', 'refLogprob', 'offsets', 'mask', 'estimator', 'controller', 'compat', 'semantics']);
  // Every field read once, and the controller's β read once, before anything is checked: no caller code
  // runs between the checks of the arrays and their use (its update runs after the result is computed).
  const { tokenRewards, oldLogprob, refLogprob, offsets: off, mask: mask0, estimator, controller: ctl, compat, semantics } = a;
  const isController = ctl !== null && typeof ctl === 'object';
  const update = isController ? ctl.update : undefined;
  const beta = isController ? ctl.value : undefined;
  const r = floats(tokenRewards, 'tokenRewards');
  const n = r.length;
  const old = floats(oldLogprob, 'oldLogprob', n);
  const ref = floats(refLogprob, 'refLogprob', n);
  const rows = rowsOf(off, n);
  const mask = v.optMask(mask0, 'mask', n);
  const sem = compatOpt({ compat, semantics }, '', KL_SEMANTICS, 'verl', { key: 'semantics', values: KL_SEMANTICS });
  const { base, st } = parseEstimator(estimator ?? 'kl', sem);
  if (typeof update !== 'function' || typeof beta !== 'number') {
    fail('ERR_OPTION', 'controller', 'a KlController (FixedKlController or AdaptiveKlController)', ctl);
  }
  finite(r, 'tokenRewards');
  finite(old, 'oldLogprob', mask);
  finite(ref, 'refLogprob', mask);
  const rewards = new Float32Array(n);
  const kl = new Float32Array(n);
  let sumRows = 0;
  for (let i = 0; i < rows; i++) {
    let s = 0;
    let c = 0;
    for (let t = off[i]!; t < off[i + 1]!; t++) {
      const mt = mask === undefined ? 1 : mask[t]!;
      const k = mt ? klToken(old[t]!, ref[t]!, base, st, sem)[0] : 0;
      kl[t] = k;
      rewards[t] = r[t]! - beta * k;
      s += k;
      c += mt;
    }
    sumRows += s / (c + 1e-8);
  }
  const currentKl = rows > 0 ? sumRows / rows : 0;
  update.call(ctl, currentKl, rows);
  return { rewards, kl, currentKl, beta };
}

/**
 * Arguments of {@link klLoss}.
 *
 * @category Losses
 */
export interface KlLossArgs {
  /** Current policy log-probs ℓ, per token (the gradient's variable). */
  logprob: FloatArray;
  /** Reference policy log-probs, per token. */
  refLogprob: FloatArray;
  /** Packed rows, Int32Array of length R+1. */
  offsets: Int32Array;
  /** Optional 0/1 loss mask. */
  mask?: Uint8Array;
  /**
   * Estimator (verl's `kl_loss_type`, default `'low_var_kl'`).
   *
   * @defaultValue `'low_var_kl'`
   */
  estimator?: KlEstimator;
  /**
   * Coefficient (verl's `kl_loss_coef`, default 0.001).
   *
   * @defaultValue `0.001`
   */
  coef?: number;
  /**
   * Aggregation (verl uses the actor's `loss_agg_mode`; default `'token-mean'`).
   *
   * @defaultValue `'token-mean'`
   */
  agg?: AggMode;
  /** Global normalisers / aggregation semantics, as {@link AggregateOptions}. */
  aggOptions?: AggregateOptions;
  /**
   * Which peer's clamping convention (default `'verl'`; docs/compat.md).
   *
   * @defaultValue `'verl'`
   */
  compat?: KlSemantics;
  /** @deprecated Use `compat` (same values). */
  semantics?: KlSemantics;
}

/**
 * Result of {@link klLoss}.
 *
 * @category Losses
 */
export interface KlLossResult {
  /** `coef · agg(kl)`. */
  value: number;
  /** d value / d logprob per token (float type of `logprob`). */
  grad: FloatArray;
  /** Unweighted aggregated KL (`agg(kl)`, the peers' `actor/kl_loss` metric). */
  kl: number;
}

/**
 * The KL term of verl's actor loss (`use_kl_loss`): `coef · agg_loss(kl_penalty(ℓ, ℓ_ref, type), mask, mode)`,
 * added to the policy loss after aggregation (TRL instead adds β·k3 per token before its reduction; use
 * `trlLoss({ beta })` for that).
 *
 * @param a log-probs, rows, estimator, coefficient and aggregation
 * @returns value, gradient and the unweighted KL
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * // verl's use_kl_loss: coef * agg(kl) added to the actor loss
 * const r = rl.klLoss({
 *   logprob: Float32Array.of(-1, -0.5, -2, -0.3),
 *   refLogprob: Float32Array.of(-1.2, -0.5, -1.5, -0.3),
 *   offsets: Int32Array.of(0, 2, 4),
 *   estimator: 'low_var_kl', coef: 0.001, agg: 'token-mean',
 * });
 * console.log(r.value, r.kl, r.grad);
 * ```
 * @category Losses
 */
export function klLoss(a: KlLossArgs): KlLossResult {
  v.argsObject(a, 'klLoss');
  v.knownKeys(a, 'klLoss', ['logprob', 'refLogprob', 'offsets', 'mask', 'estimator', 'coef', 'agg', 'aggOptions', 'compat', 'semantics']);
  // Every field read once, and the aggregation options' own getters run, before anything is checked:
  // no caller code runs between the checks of the arrays and their use.
  const { logprob, refLogprob, offsets: off, mask: mask0, estimator, coef: coef0, agg, compat, semantics } = a;
  const aggOptions = readAggOptions(a.aggOptions);
  const lp = floats(logprob, 'logprob');
  const n = lp.length;
  const ref = floats(refLogprob, 'refLogprob', n);
  rowsOf(off, n);
  const mask = v.optMask(mask0, 'mask', n);
  const sem = compatOpt({ compat, semantics }, '', KL_SEMANTICS, 'verl', { key: 'semantics', values: KL_SEMANTICS });
  const { base, st } = parseEstimator(estimator ?? 'low_var_kl', sem);
  const coef = v.numOpt(coef0, 'coef', 0.001);
  const mode = v.enumOpt(agg, 'agg', AGG_MODES, 'token-mean');
  const { w, nan } = aggWeights(off, mask, mode, checkAggOptions(aggOptions, 'aggOptions'));
  finite(lp, 'logprob', mask);
  finite(ref, 'refLogprob', mask);
  let kl = 0;
  const grad = sameType(lp, n);
  for (let t = 0; t < n; t++) {
    if (w[t] === 0) continue;
    const [val, g] = klToken(lp[t]!, ref[t]!, base, st, sem);
    kl += w[t]! * val;
    grad[t] = coef * w[t]! * g;
  }
  if (nan) kl = NaN;
  return { value: coef * kl, grad, kl };
}
