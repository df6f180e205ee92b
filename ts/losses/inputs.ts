/**
 * Input checks of the loss modules: per-token float arrays may be float32 or float64; all
 * arithmetic is float64 and the gradient comes back in the dtype of the current log-probs.
 *
 * @module
 */
import { fail } from '../core/errors.js';
import * as v from '../core/validate.js';

/**
 * A per-token float array: `Float32Array` (usual) or `Float64Array` (exact float64 paths).
 *
 * @category Losses
 */
export type FloatArray = Float32Array | Float64Array;

/** @internal Requires a Float32Array or Float64Array of length `len` (when given). */
export function floats(x: unknown, what: string, len?: number): FloatArray {
  if (!(v.isTyped(x, Float32Array) || v.isTyped(x, Float64Array))) fail('ERR_DTYPE', what, 'Float32Array or Float64Array', x);
  if (len !== undefined && x.length !== len) fail('ERR_SHAPE', `${what}.length`, String(len), x.length);
  return v.attached(x, what);
}

/** @internal Requires every element to be finite (NaN / ±Infinity rejected). */
export function finite(x: ArrayLike<number>, what: string, mask?: Uint8Array): void {
  for (let i = 0; i < x.length; i++) {
    if (!Number.isFinite(x[i]!) && (mask === undefined || mask[i] !== 0)) {
      fail('ERR_NON_FINITE', `${what}[${i}]`, 'a finite number', x[i]);
    }
  }
}

/** @internal A new array of the same float type as `like`. */
export function sameType(like: FloatArray, n: number): FloatArray {
  return v.isTyped(like, Float64Array) ? new Float64Array(n) : new Float32Array(n);
}

/** @internal Validates offsets against the token count and returns the row count. */
export function rowsOf(offsets: unknown, n: number): number {
  return v.offsets(offsets, 'offsets', n);
}

/** @internal verl's `masked_mean`: Σ x·m / (Σ m + 1e-8). */
export function maskedMeanEps(x: (t: number) => number, n: number, mask: Uint8Array | undefined): number {
  let s = 0;
  let c = 0;
  for (let t = 0; t < n; t++) {
    if (mask !== undefined && mask[t] === 0) continue;
    s += x(t);
    c += 1;
  }
  return s / (c + 1e-8);
}
