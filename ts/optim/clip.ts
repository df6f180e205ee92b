/**
 * Global gradient-norm clipping (`torch.nn.utils.clip_grad_norm_`).
 *
 * @module
 */
import { asyncOp, syncOp } from '../core/invoke.js';
import * as v from '../core/validate.js';
import { checkDisjoint } from './state.js';
import { fail } from '../core/errors.js';
import type { AsyncControl, AsyncOp } from '../core/addon_types.js';

// ---- native contract: gradient norms ----
// What this file calls in the addon; the `declare module` block adds it to NativeAddon (ts/core/addon_types.ts).

/** @internal */
export interface GradNormParams {
  grads: readonly Float32Array[];
}
/** @internal */
export interface ClipGradNormParams extends AsyncControl {
  grads: readonly Float32Array[];
  maxNorm: number;
  errorIfNonfinite: boolean;
  /** A Float64Array of 1 that also receives the norm. */
  out?: Float64Array | null;
}
/** @internal */
export interface NormResult {
  /** Total L2 norm before clipping. */
  norm: number;
}

declare module '../core/addon_types.js' {
  interface NativeAddon {
    gradNorm(params: GradNormParams): NormResult;
    clipGradNorm: AsyncOp<ClipGradNormParams, NormResult>;
  }
}
// The parameters each writes (every other array of its parameter object is read: ts/core/invoke.ts).
const gradNormOp = syncOp('gradNorm');
const clipGradNormOp = asyncOp('clipGradNorm', { writes: ['grads', 'out'] });

/**
 * Options of {@link clipGradNorm}.
 *
 * @category Optimizers
 */
export interface ClipGradNormOptions {
  /**
   * Default `true`: a non-finite total norm throws `ERR_NON_FINITE` and leaves every gradient untouched
   * (the caller skips the step, as verl does). `false` gives PyTorch's behaviour: the gradients are
   * scaled anyway (an infinite norm zeroes the finite entries, a NaN norm makes everything NaN) and the
   * norm is returned.
   *
   * @defaultValue `true`
   */
  errorIfNonfinite?: boolean;
}

/**
 * Options of {@link clipGradNormAsync}.
 *
 * @category Optimizers
 */
export interface ClipGradNormAsyncOptions extends ClipGradNormOptions {
  /** Aborting before the job starts rejects with `ERR_ABORTED` and leaves the gradients untouched. */
  signal?: AbortSignal;
}

function args(grads: unknown, maxNorm: unknown, opts: ClipGradNormAsyncOptions | undefined) {
  // the options first, then each gradient once: no getter runs after the arrays are checked
  v.knownKeys(opts, 'options', ['errorIfNonfinite', 'signal']);
  const e = opts?.errorIfNonfinite;
  const signal = opts?.signal;
  const list = v.f32List(grads, 'grads');
  checkDisjoint(list, 'grads');
  const max = v.numOpt(maxNorm, 'maxNorm', NaN, { min: 0 });
  if (Number.isNaN(max)) fail('ERR_OPTION', 'maxNorm', 'a number >= 0', maxNorm);
  if (e !== undefined && typeof e !== 'boolean') fail('ERR_OPTION', 'errorIfNonfinite', 'a boolean', e);
  return { grads: list, max, err: e ?? true, signal };
}

/**
 * Scales all gradients in place so that their total L2 norm (over every tensor, as if concatenated) is
 * at most `maxNorm`, with PyTorch's arithmetic: `coef = min(1, maxNorm / (norm + 1e-6))` evaluated in
 * float32 and each gradient multiplied by it (so a norm just under `maxNorm` still shrinks slightly).
 *
 * The norm is computed natively over all threads in float64, deterministically: each tensor is cut into
 * fixed blocks whose partial sums are added in a fixed order, so the result is the same for every thread
 * count and instruction set (it can differ from PyTorch's float32 norm in the last float32 bit).
 *
 * @param grads gradient tensors, modified in place; none may share memory with another
 * @param maxNorm the largest total norm allowed, >= 0 (`Infinity` only measures)
 * @param opts `errorIfNonfinite` (default true; see {@link ClipGradNormOptions})
 * @returns the total norm before clipping (float64)
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const grads = [Float32Array.of(3, 0), Float32Array.of(4)];
 * const norm = rl.clipGradNorm(grads, 1.0);
 * console.log(norm, grads); // 5, gradients scaled by about 1/5 in place
 * try {
 *   rl.clipGradNorm([Float32Array.of(NaN)], 1.0);
 * } catch (e) {
 *   if (e instanceof rl.GearError && e.code === 'ERR_NON_FINITE') console.log('skip this step');
 * }
 * ```
 * @category Optimizers
 */
export function clipGradNorm(grads: Float32Array[], maxNorm: number, opts?: ClipGradNormOptions): number {
  const a = args(grads, maxNorm, opts);
  return clipGradNormOp.call({ grads: a.grads, maxNorm: a.max, errorIfNonfinite: a.err }).norm;
}

/**
 * {@link clipGradNorm} off the main thread. The gradients must not be touched until it settles.
 *
 * @param grads gradient tensors, modified in place
 * @param maxNorm the largest total norm allowed, >= 0
 * @param opts `errorIfNonfinite`, `signal`
 * @returns the total norm before clipping
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const grads = [new Float32Array(1 << 16).fill(0.01)];
 * const norm = await rl.clipGradNormAsync(grads, 1.0, { signal: AbortSignal.timeout(10_000) });
 * console.log(norm); // about 2.56: the norm before clipping
 * ```
 * @category Optimizers
 */
export async function clipGradNormAsync(
  grads: Float32Array[], maxNorm: number, opts?: ClipGradNormAsyncOptions,
): Promise<number> {
  const a = args(grads, maxNorm, opts);
  return (await clipGradNormOp.callAsync({ grads: a.grads, maxNorm: a.max, errorIfNonfinite: a.err }, a.signal)).norm;
}

/**
 * Total L2 norm of all gradients (float64, deterministic as in {@link clipGradNorm}) without changing them.
 *
 * @param grads gradient tensors
 * @returns sqrt of the sum of squares of every element
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * console.log(rl.gradNorm([Float32Array.of(3), Float32Array.of(4)])); // 5 (the gradients are not changed)
 * ```
 * @category Optimizers
 */
export function gradNorm(grads: Float32Array[]): number {
  const list = v.f32List(grads, 'grads');
  return gradNormOp.call({ grads: list }).norm;
}
