/**
 * Controls for experiments with GEAR: what a referee asks to see next to the adaptive rule.
 *
 * * {@link shuffleWithinRows}: the divergence permuted within each row, so every row keeps its values
 *   (hence its z-scores, spikes and weights) while their positions are random: "same weights, no
 *   location". Feed the result to `gearAdvantages` in place of the divergence.
 * * {@link gearFromSegments}: GEAR's weight family (`1 + alpha * sigma` per unit, one weight per segment,
 *   the per-row mean-one normalisation and the sign modes of docs/gear.md) on segments given by the
 *   caller, e.g. the true departure segments of a task whose credit is known: the ceiling of the family.
 *
 * The library's own ablations (`ablation: 'random_anchors' | 'fixed_length' | 'token_only'`) are options
 * of `gearAdvantages`.
 *
 * @module
 */
import { fail } from '../core/errors.js';
import { mulberry32 } from '../core/prng.js';
import * as v from '../core/validate.js';
import type { GearNormalize } from './options.js';

/**
 * Options of {@link shuffleWithinRows}.
 *
 * @category GEAR
 */
export interface ShuffleWithinRowsOptions {
  /** 0/1 per token: only tokens with mask 1 are permuted (among themselves); the others keep their values. */
  mask?: Uint8Array;
  /**
   * Seed of the permutation (integer in [0, 2^32)); each row's permutation is drawn from the seed and the row index.
   *
   * @defaultValue `0`
   */
  seed?: number;
}

/** The row's own stream: the seed mixed with the row index (rows are independent of each other's lengths). */
function rowStream(seed: number, row: number): () => number {
  let h = (seed ^ 0x9e3779b9) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0;
  h = (h + Math.imul(row + 1, 0xc2b2ae35)) >>> 0;
  h = Math.imul(h ^ (h >>> 13), 0x27d4eb2f) >>> 0;
  return mulberry32((h ^ (h >>> 16)) >>> 0);
}

/**
 * Permutes a per-token signal within each row: the values of a row's valid tokens (mask 1) are shuffled
 * among those tokens by a seeded Fisher–Yates draw; masked tokens keep their values. The multiset of
 * each row's values is unchanged, so per-row statistics (mean, std, z-scores, the number of spikes and
 * their heights) are too; only where the values sit changes. With GEAR this is the shuffled-divergence
 * control: the same weights, at random places.
 *
 * @param values per-token signal (e.g. the divergence), length N = `offsets[R]`
 * @param offsets packed-row offsets, length R + 1
 * @param options mask and seed
 * @returns a new Float32Array with each row's valid values permuted
 * @throws GearError `ERR_DTYPE` / `ERR_SHAPE` / `ERR_OFFSETS` on mismatched inputs, `ERR_OPTION` on a bad seed or mask value
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const offsets = Int32Array.of(0, 4, 7);
 * const divergence = Float32Array.of(0.01, 3.5, 0.02, 0.01, 0.2, 0, 4);
 * const shuffled = rl.shuffleWithinRows(divergence, offsets, { seed: 7 });
 * console.log(shuffled); // row 0 holds 0.01, 3.5, 0.02, 0.01 in some order; row 1 holds 0.2, 0, 4
 * const entropy = Float32Array.of(0.3, 2, 0.1, 0.1, 1.5, 0, 0.2);
 * const control = rl.gearAdvantages({ advantages: [1, -1], offsets, divergence: shuffled, entropy });
 * console.log(control.weights);
 * ```
 * @category GEAR
 */
export function shuffleWithinRows(values: Float32Array, offsets: Int32Array, options?: ShuffleWithinRowsOptions): Float32Array {
  const x = v.f32(values, 'values');
  const n = x.length;
  const rows = v.offsets(offsets, 'offsets', n);
  if (options !== undefined && (typeof options !== 'object' || options === null)) fail('ERR_OPTION', 'options', 'an object', options);
  v.knownKeys(options, 'options', ['mask', 'seed']);
  const maskArg = options?.mask, seedArg = options?.seed;
  const mask = v.optMask(maskArg, 'options.mask', n);
  const seed = v.numOpt(seedArg, 'options.seed', 0, { min: 0, max: 4294967295, int: true });
  // Copies first: the result never depends on the caller's arrays changing under the call.
  const off = Int32Array.from(offsets);
  const m = mask ? Uint8Array.from(mask) : undefined;
  const out = Float32Array.from(x);
  const idx: number[] = [];
  for (let r = 0; r < rows; r++) {
    idx.length = 0;
    for (let t = off[r]!; t < off[r + 1]!; t++) if (!m || m[t]) idx.push(t);
    const rnd = rowStream(seed, r);
    for (let i = idx.length - 1; i > 0; i--) {
      const j = Math.floor(rnd() * (i + 1));
      const a = idx[i]!, b = idx[j]!;
      const tmp = out[a]!;
      out[a] = out[b]!;
      out[b] = tmp;
    }
  }
  return out;
}

/**
 * Segments given to {@link gearFromSegments}: segment s covers tokens `[start[s], start[s] + length[s])`.
 *
 * @category GEAR
 */
export interface GearSegments {
  /** Token index of each segment's first token (its anchor). */
  start: Int32Array;
  /** Tokens each segment spans (>= 1); a segment lies inside one row and never overlaps another. */
  length: Int32Array;
  /**
   * Per segment, its signal sigma in [0, 1]: the unit weighs `1 + alpha * sigma`.
   *
   * @defaultValue 1 for every segment (the full weight `1 + alpha`)
   */
  strength?: Float32Array;
}

/**
 * Arguments of {@link gearFromSegments}.
 *
 * @category GEAR
 */
export interface GearFromSegmentsInput {
  /** Per row: the trajectory-level (GRPO) advantage. Length R. */
  advantages: ArrayLike<number>;
  /** Packed-row offsets, length R + 1. */
  offsets: Int32Array;
  /** Optional 0/1 mask per token (0: tool output or padding, weight 0). */
  mask?: Uint8Array;
  /** The segments (the units of more than one token, or single tokens given a segment's weight). */
  segments: GearSegments;
  /**
   * Per token, sigma in [0, 1] of the tokens outside every segment (each its own unit).
   *
   * @defaultValue 0 for every token (weight 1)
   */
  tokenStrength?: Float32Array;
  /**
   * Weight strength: a unit weighs `1 + alpha * sigma` (>= 0).
   *
   * @defaultValue `1`
   */
  alpha?: number;
  /**
   * `'mean_one'`: weights rescaled to mean 1 over each row's valid tokens (the row's summed advantage is
   * GRPO's); `'none'`: raw weights.
   *
   * @defaultValue `'mean_one'`
   */
  normalize?: GearNormalize;
  /**
   * `'symmetric'`: the same weights for both signs of the row advantage; `'negative_only'`: weights only
   * where the row advantage is negative (weight 1 elsewhere).
   *
   * @defaultValue `'symmetric'`
   */
  signMode?: 'symmetric' | 'negative_only';
}

/**
 * Result of {@link gearFromSegments}.
 *
 * @category GEAR
 */
export interface GearFromSegmentsResult {
  /** Per token: the row's advantage times the token's weight, 0 on masked tokens. */
  advantages: Float32Array;
  /** Per token: the final (normalised) weight, 0 on masked tokens. */
  weights: Float32Array;
  /** Per token: the index of its segment in `segments`, -1 outside every segment and on masked tokens. */
  segmentId: Int32Array;
}

/**
 * GEAR's weight family on segments you give: steps 4–6 of the GEAR-proposed design (docs/gear.md) with
 * the units known instead of found. Each given segment is one unit of weight `1 + alpha * sigma_s`
 * (`sigma_s` = `segments.strength[s]`, default 1); every other valid token is its own unit of weight
 * `1 + alpha * tokenStrength[t]` (default 1); `'negative_only'` uses weight 1 in rows whose advantage is
 * not negative; `'mean_one'` rescales each row to mean weight 1 over its valid tokens (equal unit weights
 * give exactly 1); the output is `A_row * weight` per valid token. With `gearAdvantages`' own segments and
 * signals (`sigma = min(D / D_ref, 1)`) it reproduces `gearAdvantages`; with the true departure segments of
 * a task whose credit is known it is the ceiling of the family (the oracle weights).
 *
 * @param a advantages per row, layout, segments, optional per-token strengths and the family's options
 * @returns per-token advantages, weights and segment ids
 * @throws GearError `ERR_DTYPE` / `ERR_SHAPE` / `ERR_OFFSETS` on mismatched inputs, `ERR_NON_FINITE` on
 *   non-finite advantages or strengths, `ERR_OPTION` on segments outside a row, overlapping, empty or
 *   with a strength outside [0, 1], and on bad options
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * // two rows of 4 tokens; the departure of row 1 is known: tokens 5..6 (a decision and its forced subword)
 * const r = rl.gearFromSegments({
 *   advantages: [0.8, -0.8], offsets: Int32Array.of(0, 4, 8),
 *   segments: { start: Int32Array.of(5), length: Int32Array.of(2) },
 * });
 * console.log(r.weights);    // row 0: 1 1 1 1; row 1: 2/3 4/3 4/3 2/3 (mean 1)
 * console.log(r.advantages); // the blame of row 1 sits on its departure
 * ```
 * @category GEAR
 */
export function gearFromSegments(a: GearFromSegmentsInput): GearFromSegmentsResult {
  v.argsObject(a, 'gearFromSegments(a)');
  v.knownKeys(a, 'gearFromSegments(a)', ['advantages', 'offsets', 'mask', 'segments', 'tokenStrength', 'alpha', 'normalize', 'signMode']);
  // Every field is read once, in order, into locals.
  const advArg = a.advantages, offArg = a.offsets, maskArg = a.mask, segArg = a.segments, tsArg = a.tokenStrength;
  const alphaArg = a.alpha, normArg = a.normalize, signArg = a.signMode;
  const alpha = v.numOpt(alphaArg, 'alpha', 1, { min: 0, finite: true });
  const normalize = v.enumOpt(normArg, 'normalize', ['mean_one', 'none'] as const, 'mean_one');
  const signMode = v.enumOpt(signArg, 'signMode', ['symmetric', 'negative_only'] as const, 'symmetric');
  const rows = v.offsets(offArg, 'offsets');
  const off = Int32Array.from(offArg);
  const n = off[rows]!;
  // a copy, each element read once (numArray): the segments' getters run later
  const adv = Float64Array.from(v.numArray(advArg, 'advantages', rows));
  v.allFinite(adv, 'advantages');
  const mask = v.optMask(maskArg, 'mask', n);
  const m = mask ? Uint8Array.from(mask) : undefined;
  v.argsObject(segArg, 'segments');
  v.knownKeys(segArg, 'segments', ['start', 'length', 'strength']);
  const startArg = segArg.start, lengthArg = segArg.length, strengthArg = segArg.strength;
  const start = Int32Array.from(v.i32(startArg, 'segments.start'));
  const S = start.length;
  const len = Int32Array.from(v.i32(lengthArg, 'segments.length', S));
  const strength = strengthArg === undefined ? undefined : Float32Array.from(v.f32(strengthArg, 'segments.strength', S));
  const tokenStrength = tsArg === undefined ? undefined : Float32Array.from(v.f32(tsArg, 'tokenStrength', n));
  const unit01 = (x: number, what: string) => {
    if (Number.isNaN(x)) fail('ERR_NON_FINITE', what, 'a number in [0, 1]', x);
    if (!(x >= 0 && x <= 1)) fail('ERR_OPTION', what, 'a number in [0, 1]', x);
  };
  if (strength) for (let s = 0; s < S; s++) unit01(strength[s]!, `segments.strength[${s}]`);
  if (tokenStrength) for (let t = 0; t < n; t++) unit01(tokenStrength[t]!, `tokenStrength[${t}]`);

  // Token -> row, then each segment's tokens (one row, no overlap).
  const rowOf = new Int32Array(n);
  for (let r = 0; r < rows; r++) for (let t = off[r]!; t < off[r + 1]!; t++) rowOf[t] = r;
  const segmentId = new Int32Array(n).fill(-1);
  for (let s = 0; s < S; s++) {
    const b = start[s]!, l = len[s]!;
    if (!(b >= 0 && b < n)) fail('ERR_OPTION', `segments.start[${s}]`, `a token index in [0, ${n})`, b);
    if (!(l >= 1 && b + l <= off[rowOf[b]! + 1]!)) fail('ERR_OPTION', `segments.length[${s}]`, `>= 1 and within row ${rowOf[b]} (at most ${off[rowOf[b]! + 1]! - b})`, l);
    for (let t = b; t < b + l; t++) {
      if (segmentId[t] !== -1) fail('ERR_OPTION', `segments[${s}]`, `no overlap (token ${t} is already in segment ${segmentId[t]})`, b);
      segmentId[t] = s;
    }
  }

  const advantages = new Float32Array(n), weights = new Float32Array(n);
  const w = new Float64Array(n);
  for (let r = 0; r < rows; r++) {
    const A = adv[r]!;
    const lo = off[r]!, hi = off[r + 1]!;
    let sum = 0, valid = 0, first = NaN, uniform = true;
    for (let t = lo; t < hi; t++) {
      if (m && !m[t]) { segmentId[t] = -1; continue; }
      const s = segmentId[t]!;
      const sigma = s >= 0 ? (strength ? strength[s]! : 1) : tokenStrength ? tokenStrength[t]! : 0;
      const wt = signMode === 'negative_only' && !(A < 0) ? 1 : 1 + alpha * sigma;
      w[t] = wt;
      sum += wt;
      valid++;
      if (Number.isNaN(first)) first = wt; else if (wt !== first) uniform = false;
    }
    for (let t = lo; t < hi; t++) {
      if (m && !m[t]) continue;
      const wt = normalize === 'none' ? w[t]! : uniform ? 1 : (w[t]! * valid) / sum;
      weights[t] = wt;
      advantages[t] = A * wt;
    }
  }
  return { advantages, weights, segmentId };
}
