/**
 * The fused native PPO pass (float32 in, float32 per-token math and gradient, float64 accumulation),
 * sync and async.
 *
 * @module
 */
import { fail } from '../../core/errors.js';
import type { AsyncControl, AsyncOp } from '../../core/addon_types.js';
import { asyncOp } from '../../core/invoke.js';
import { signalOpt } from '../../core/validate.js';
import type { AggMode, AggregateOptions } from '../aggregate.js';
import type { Semantics } from '../compat.js';
import { type PpoSettings, ppoSettings } from './ppo.js';
import { policyLossTs, prepare } from './run.js';
import type { PolicyLossArgs, PolicyLossResult } from './types.js';

// ---- native contract: the fused PPO pass ----
// What this file calls in the addon; the `declare module` block adds it to NativeAddon (ts/core/addon_types.ts).

/** 0 token-mean, 1 token-sum, 2 seq-mean-token-sum, 3 seq-mean-token-mean, 4 seq-mean-token-sum-norm. @internal */
export type AggModeCode = 0 | 1 | 2 | 3 | 4;
/** 0 verl, 1 verl-legacy, 2 verl-agent. @internal */
export type AggSemanticsCode = 0 | 1 | 2;
/** @internal */
export interface PolicyLossPpoParams extends AsyncControl {
  logprob: Float32Array;
  oldLogprob: Float32Array;
  advantages: Float32Array;
  offsets: Int32Array;
  mask?: Uint8Array | null;
  clipLow: number;
  clipHigh: number;
  /** Dual-clip constant (> 1). */
  clipC: number;
  /** Clamp of the log-ratio; absent: no clamp. */
  logRatioClamp?: number;
  /** Absent: this call's token count. */
  globalTokens?: number;
  /** Absent: this call's row count. */
  globalRows?: number;
  /** Absent: the longest row. */
  lossScaleFactor?: number;
  /** Absent: 1. */
  dpSize?: number;
  agg: AggModeCode;
  semantics: AggSemanticsCode;
  out?: Float32Array | null;
}
/** gear::PpoStats by name, with the per-token gradient. @internal */
export interface PolicyLossPpoResult {
  grad: Float32Array;
  loss: number;
  /** Valid tokens. */
  tokens: number;
  /** Valid tokens whose clipped term was taken (pg_clipfrac numerator). */
  clipped: number;
  /** Valid tokens with A < 0 where the dual clip was taken (pg_clipfrac_lower numerator). */
  lower: number;
  /** Sum of -clamp(log ratio) over valid tokens (ppo_kl numerator). */
  negKl: number;
  ratioSum: number;
  ratioMin: number;
  ratioMax: number;
  /** The peer's loss is NaN for this input. */
  nan: boolean;
}

declare module '../../core/addon_types.js' {
  interface NativeAddon {
    policyLossPpo: AsyncOp<PolicyLossPpoParams, PolicyLossPpoResult>;
  }
}
// Writes `out` (every other array of its parameter object is read: ts/core/invoke.ts).
const policyLossPpoOp = asyncOp('policyLossPpo', { writes: ['out'] });

const AGG_INDEX: Record<AggMode, AggModeCode> = {
  'token-mean': 0, 'token-sum': 1, 'seq-mean-token-sum': 2, 'seq-mean-token-mean': 3, 'seq-mean-token-sum-norm': 4,
};
const SEM_INDEX: Record<Semantics, AggSemanticsCode> = { verl: 0, 'verl-legacy': 1, 'verl-agent': 2 };

/**
 * The parameters of the fused native PPO pass, as one literal (no spread: the addon reads them through
 * Node-API, several times slower on the shapes a spread leaves behind).
 */
function ppoParams(lp: Float32Array, old: Float32Array, A: Float32Array, offsets: Int32Array,
  mask: Uint8Array | undefined, out: Float32Array | undefined, o: PpoSettings, agg: AggMode, ao: AggregateOptions,
  async: boolean): PolicyLossPpoParams {
  const sem = ao.semantics ?? 'verl';
  if (sem !== 'verl' && agg === 'token-sum') {
    fail('ERR_OPTION', 'mode', `one of the ${sem} modes (token-sum exists in current verl only)`, agg);
  }
  // Absent settings (undefined) take the kernel's defaults: no clamp, this call's counts, dpSize 1.
  return {
    logprob: lp, oldLogprob: old, advantages: A, offsets, mask, out,
    clipLow: o.lo, clipHigh: o.hi, clipC: o.c, logRatioClamp: Number.isFinite(o.clamp) ? o.clamp : undefined,
    globalTokens: ao.globalTokens ?? undefined, globalRows: ao.globalRows ?? undefined,
    lossScaleFactor: ao.lossScaleFactor ?? undefined, dpSize: ao.dpSize ?? undefined,
    agg: AGG_INDEX[agg], semantics: SEM_INDEX[sem], async, abort: null,
  };
}

/** Turns the kernel's statistics into a result. */
function ppoResult(r: PolicyLossPpoResult): PolicyLossResult {
  const cnt = r.tokens;
  return {
    loss: r.nan ? NaN : r.loss,
    grad: r.grad,
    metrics: {
      pg_clipfrac: r.clipped / (cnt + 1e-8),
      pg_clipfrac_lower: r.lower / (cnt + 1e-8),
      ppo_kl: r.negKl / (cnt + 1e-8),
      ratio_mean: cnt > 0 ? r.ratioSum / cnt : 0,
      ratio_min: cnt > 0 ? r.ratioMin : 0,
      ratio_max: cnt > 0 ? r.ratioMax : 0,
    },
  };
}

/** @internal The sync native PPO pass over validated float32 inputs. */
export function policyLossPpoNative(
  lp: Float32Array, old: Float32Array, A: Float32Array, offsets: Int32Array, mask: Uint8Array | undefined,
  o: PpoSettings, agg: AggMode, ao: AggregateOptions, out: Float32Array | undefined,
): PolicyLossResult {
  return ppoResult(policyLossPpoOp.call(ppoParams(lp, old, A, offsets, mask, out, o, agg, ao, false)));
}

/**
 * Options of {@link policyLossAsync}.
 *
 * @category Losses
 */
export interface PolicyLossAsyncOptions {
  /** Aborting rejects the Promise with `ERR_ABORTED`. */
  signal?: AbortSignal;
}

/**
 * Async form of {@link policyLoss}: the fused native PPO pass runs off the main thread (abortable);
 * the other kinds compute synchronously and resolve.
 *
 * @param a the same arguments as {@link policyLoss}
 * @param opts `signal` to abort
 * @returns a Promise of the same result
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const offsets = Int32Array.of(0, 2, 4);
 * const { loss, grad } = await rl.policyLossAsync({
 *   logprob: Float32Array.of(-1, -0.5, -2, -0.1),
 *   oldLogprob: Float32Array.of(-1.1, -0.5, -1.8, -0.2),
 *   advantages: Float32Array.of(1, 1, -0.5, -0.5),
 *   offsets,
 * }, { signal: AbortSignal.timeout(10_000) });
 * console.log(loss, grad);
 * ```
 * @category Losses
 */
export async function policyLossAsync(a: PolicyLossArgs, opts?: PolicyLossAsyncOptions): Promise<PolicyLossResult> {
  const signal = signalOpt(opts, 'policyLossAsync: opts');
  const p = prepare(a);
  if ('trl' in p) return p.trl;
  if (!p.useNative) return policyLossTs(p);
  // useNative: logprob, oldLogprob, advantages (and out) are Float32Arrays
  const lp = p.lp as Float32Array, old = p.old as Float32Array, A = p.A as Float32Array, out = p.out as Float32Array | undefined;
  const o = ppoSettings(p.args);
  return ppoResult(await policyLossPpoOp.callAsync(ppoParams(lp, old, A, p.offsets, p.mask, out, o, p.agg, p.aggOpts, true), signal));
}
