/**
 * verl's masked reductions (`verl.utils.torch_functional`): `masked_mean`, `masked_var`,
 * `masked_whiten`, with their exact epsilons (`+1e-8` on the count, `+1e-8` under the square root).
 * REINFORCE++, REINFORCE++-baseline and GDPO whiten their advantages with these over every counted
 * token of the batch.
 *
 * @module
 */
import { GearError, fail } from '../core/errors.js';
import * as v from '../core/validate.js';

function valuesArg(values: unknown, what: string): ArrayLike<number> {
  if (!(v.isTyped(values, Float32Array) || v.isTyped(values, Float64Array) || Array.isArray(values))) {
    fail('ERR_DTYPE', what, 'Float32Array, Float64Array or an array of numbers', values);
  }
  return v.numArray(values, what);
}

/**
 * verl `masked_mean` over all elements: `Σ_{m≠0} x / (Σ m + 1e-8)`. Values under a 0 mask are ignored
 * even when NaN (current verl).
 *
 * @param values per-element values
 * @param mask optional 0/1 mask of the same length (all ones when omitted)
 * @returns the masked mean
 * @example
 * ```ts
 * import { maskedMean } from 'gear-rl/diagnostics';
 *
 * console.log(maskedMean([1, 2, 100], Uint8Array.of(1, 1, 0))); // ~1.5 (verl adds 1e-8 to the count)
 * ```
 * @category Advantages
 */
export function maskedMean(values: ArrayLike<number>, mask?: Uint8Array): number {
  const x = valuesArg(values, 'values');
  const m = v.optMask(mask, 'mask', x.length);
  let s = 0;
  let c = 0;
  for (let i = 0; i < x.length; i++) {
    if (m && !m[i]) continue;
    s += x[i]!;
    c++;
  }
  return s / (c + 1e-8);
}

/**
 * verl `masked_mean(..., axis=-1)` on packed rows: per row `Σ_{m≠0} x / (Σ m + 1e-8)` (0 for a row
 * without counted tokens).
 *
 * @param values per-token values, length N
 * @param offsets packed-row offsets, length R + 1
 * @param mask optional 0/1 mask of length N (all ones when omitted)
 * @returns per-row means (Float64Array, length R)
 * @example
 * ```ts
 * import { maskedRowMean } from 'gear-rl/diagnostics';
 *
 * const means = maskedRowMean([1, 3, 100, 4], Int32Array.of(0, 3, 4), Uint8Array.of(1, 1, 0, 1));
 * console.log(means); // Float64Array [~2, ~4]
 * ```
 * @category Advantages
 */
export function maskedRowMean(values: ArrayLike<number>, offsets: Int32Array, mask?: Uint8Array): Float64Array {
  const x = valuesArg(values, 'values');
  const m = v.optMask(mask, 'mask', x.length);
  const R = v.offsets(offsets, 'offsets', x.length);
  const out = new Float64Array(R);
  for (let r = 0; r < R; r++) {
    let s = 0;
    let c = 0;
    for (let t = offsets[r]!; t < offsets[r + 1]!; t++) {
      if (m && !m[t]) continue;
      s += x[t]!;
      c++;
    }
    out[r] = s / (c + 1e-8);
  }
  return out;
}

/**
 * verl `masked_var`: `mean_m((x - mean_m(x))²)`, times `n / (n - 1)` when `unbiased` (default) with
 * `n = Σ m`. Throws `ERR_SHAPE` when no element is counted, or when `unbiased` and exactly one is
 * (verl raises there too).
 *
 * @param values per-element values
 * @param mask optional 0/1 mask (all ones when omitted)
 * @param unbiased Bessel correction (default true)
 * @example
 * ```ts
 * import { maskedVar } from 'gear-rl/diagnostics';
 *
 * console.log(maskedVar([1, 2, 3, 100], Uint8Array.of(1, 1, 1, 0)));        // ~1 (unbiased)
 * console.log(maskedVar([1, 2, 3, 100], Uint8Array.of(1, 1, 1, 0), false)); // ~0.667
 * ```
 * @category Advantages
 */
export function maskedVar(values: ArrayLike<number>, mask?: Uint8Array, unbiased = true): number {
  const x = valuesArg(values, 'values');
  const m = v.optMask(mask, 'mask', x.length);
  return weightedVar(x, m ? (i) => m[i]! : () => 1, x.length, unbiased).variance;
}

/**
 * verl `masked_whiten`: `(x - mean_m(x)) / sqrt(var_m(x) + 1e-8)` with the unbiased masked variance;
 * with `shiftMean: false` the mean is added back. Statistics are over every counted element (the whole
 * batch), exactly as verl. Elements under a 0 mask are whitened too (multiply by the mask if they
 * should be 0). Throws `ERR_SHAPE` when fewer than two elements are counted.
 *
 * @param values per-element values
 * @param mask optional 0/1 mask (all ones when omitted)
 * @param opts `shiftMean` (default true)
 * @returns whitened values (Float64Array, same length)
 * @example
 * ```ts
 * import { maskedWhiten } from 'gear-rl/diagnostics';
 *
 * const w = maskedWhiten([1, 2, 3, 4], Uint8Array.of(1, 1, 1, 1));
 * const kept = maskedWhiten([1, 2, 3, 4], undefined, { shiftMean: false });
 * console.log(w, kept); // mean 0 and unit variance; the second keeps the mean 2.5
 * ```
 * @category Advantages
 */
export function maskedWhiten(values: ArrayLike<number>, mask?: Uint8Array, opts: { shiftMean?: boolean } = {}): Float64Array {
  v.knownKeys(opts, 'opts', ['shiftMean']);
  const shiftMean = (opts as { shiftMean?: unknown } | undefined)?.shiftMean; // read once, before the arrays are checked
  if (shiftMean !== undefined && typeof shiftMean !== 'boolean') fail('ERR_OPTION', 'opts.shiftMean', 'a boolean', shiftMean);
  const x = valuesArg(values, 'values');
  const m = v.optMask(mask, 'mask', x.length);
  const { mean, variance } = weightedVar(x, m ? (i) => m[i]! : () => 1, x.length, true);
  const inv = 1 / Math.sqrt(variance + 1e-8);
  const out = new Float64Array(x.length);
  const back = shiftMean === false ? mean : 0;
  for (let i = 0; i < x.length; i++) out[i] = (x[i]! - mean) * inv + back;
  return out;
}

/**
 * masked_mean / masked_var over elements with integer weights (a weight w means "w tokens with this
 * value", which is how a row-constant advantage is whitened over its tokens without expanding it).
 * @internal
 */
export function weightedVar(
  x: ArrayLike<number>, weight: (i: number) => number, n: number, unbiased: boolean,
): { mean: number; variance: number } {
  let s = 0;
  let c = 0;
  for (let i = 0; i < n; i++) {
    const w = weight(i);
    if (w === 0) continue;
    s += w * x[i]!;
    c += w;
  }
  if (c === 0) throw new GearError('ERR_SHAPE', 'mask: expected at least one counted element, got 0');
  const mean = s / (c + 1e-8);
  let ss = 0;
  for (let i = 0; i < n; i++) {
    const w = weight(i);
    if (w === 0) continue;
    const d = x[i]! - mean;
    ss += w * d * d;
  }
  let variance = ss / (c + 1e-8);
  if (unbiased) {
    if (c === 1) {
      throw new GearError('ERR_SHAPE', 'mask: expected at least two counted elements for an unbiased variance, got 1');
    }
    variance *= c / (c - 1);
  }
  return { mean, variance };
}

/**
 * Whitens one value per row as if each row's value were repeated over its `lengths[r]` counted tokens
 * (verl whitens the broadcast per-token tensor; this is the same arithmetic without the broadcast).
 * @internal
 */
export function whitenRows(a: Float64Array, lengths: ArrayLike<number> | undefined): Float64Array {
  const w = lengths ? (i: number) => lengths[i]! : () => 1;
  const { mean, variance } = weightedVar(a, w, a.length, true);
  const inv = 1 / Math.sqrt(variance + 1e-8);
  const out = new Float64Array(a.length);
  for (let i = 0; i < a.length; i++) out[i] = (a[i]! - mean) * inv;
  return out;
}

/** Validates per-row counted-token lengths (non-negative integers). @internal */
export function lengthsArg(x: unknown, what: string, rows: number): Float64Array | undefined {
  if (x === undefined) return undefined;
  const a = v.numArray(x, what, rows);
  const out = Float64Array.from(a);
  for (let i = 0; i < out.length; i++) {
    const l = out[i]!;
    if (!(Number.isInteger(l) && l >= 0)) fail('ERR_OPTION', `${what}[${i}]`, 'a non-negative integer', l);
  }
  return out;
}
