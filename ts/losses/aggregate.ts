/**
 * Loss aggregation (verl's `agg_loss`) over packed rows. Every mode is linear in the per-token values,
 * so the aggregate is `Σ_t w_t · L_t` with a per-token weight `w_t`; the gradient is `w_t` itself.
 * Global normalisers (`globalTokens`, `globalRows`, `lossScaleFactor`) make the sum of micro-batch
 * losses equal the full-batch loss, so micro-batching never changes the gradient.
 *
 * @module
 */
import { fail } from '../core/errors.js';
import * as v from '../core/validate.js';
import { SEMANTICS, type Semantics, compatOpt } from './compat.js';
import { FloatArray, finite, floats, rowsOf, sameType } from './inputs.js';

/**
 * How per-token values are reduced to one scalar.
 *
 * @category Losses
 */
export type AggMode =
  | 'token-mean'
  | 'token-sum'
  | 'seq-mean-token-sum'
  | 'seq-mean-token-mean'
  | 'seq-mean-token-sum-norm';

/**
 * Every {@link AggMode}.
 *
 * @category Losses
 */
export const AGG_MODES: readonly AggMode[] = [
  'token-mean', 'token-sum', 'seq-mean-token-sum', 'seq-mean-token-mean', 'seq-mean-token-sum-norm',
];

/**
 * Normalisers and version switches for {@link aggregate}.
 *
 * @category Losses
 */
export interface AggregateOptions {
  /**
   * `token-mean` denominator: valid tokens of the whole (global) batch, across micro-batches and
   * data-parallel ranks (verl's `batch_num_tokens`). Default: this call's valid tokens.
   *
   * @defaultValue this call's valid tokens
   */
  globalTokens?: number;
  /**
   * `seq-mean-*` denominator: non-empty rows of the whole (global) batch (verl's `global_batch_size`).
   * Default: this call's non-empty rows.
   *
   * @defaultValue this call's non-empty rows
   */
  globalRows?: number;
  /**
   * `seq-mean-token-sum-norm` divisor (Dr. GRPO's constant). Default: the longest row's length (verl:
   * the padded length T). Pass a constant when micro-batching.
   *
   * @defaultValue the longest row's length
   */
  lossScaleFactor?: number;
  /**
   * Data-parallel size multiplier, as verl (default 1): each rank's loss is scaled so ranks' mean is right.
   *
   * @defaultValue `1`
   */
  dpSize?: number;
  /**
   * `'verl'` (default, current verl), `'verl-legacy'` (`seq-mean-token-sum-norm` not divided by the row
   * count; no `token-sum`) or `'verl-agent'` (token-mean with `+1e-8`, seq modes averaging over all rows,
   * an empty row making `seq-mean-token-mean` NaN, `seq-mean-token-sum-norm` = Σ/T). The peer switch,
   * under its one name across the library (docs/compat.md).
   *
   * @defaultValue `'verl'`
   */
  compat?: Semantics;
  /** @deprecated Use `compat` (same values). */
  semantics?: Semantics;
}

/**
 * Result of {@link aggregate}.
 *
 * @category Losses
 */
export interface AggregateResult {
  /** The aggregated scalar. */
  value: number;
  /** d value / d values[t]; same float type as `values`; 0 on masked tokens. */
  grad: FloatArray;
}

/** @internal Per-token weights of a mode, and whether the peer's value is NaN (verl-agent empty row). */
export interface AggWeights {
  w: Float64Array;
  nan: boolean;
}

const AGG_KEYS = ['globalTokens', 'globalRows', 'lossScaleFactor', 'dpSize', 'compat', 'semantics'] as const;

/**
 * @internal The fields of an {@link AggregateOptions} object, each read once into a plain copy (its
 * getters run now, before the arrays they could detach are checked); `undefined` or a non-object as it
 * is, for {@link checkAggOptions} to refuse.
 */
export function readAggOptions(opts: unknown): AggregateOptions | undefined {
  if (typeof opts !== 'object' || opts === null) return opts as undefined;
  const o: Record<string, unknown> = {};
  for (const k of Object.keys(opts)) o[k] = (opts as Record<string, unknown>)[k];
  return o as AggregateOptions;
}

/**
 * @internal Checks an {@link AggregateOptions} object. `semantics`: the caller's already checked
 * peer (then `opts` holds no `semantics` / `compat` of its own).
 */
export function checkAggOptions(
  opts: AggregateOptions | undefined, what = 'opts', semantics0?: Semantics,
): Required<Pick<AggregateOptions, 'semantics' | 'dpSize'>> & AggregateOptions {
  v.knownKeys(opts, what, AGG_KEYS);
  // each option read once, before any check
  const o: Record<string, unknown> = {};
  if (opts !== undefined) for (const k of AGG_KEYS) { const x = (opts as Record<string, unknown>)[k]; if (x !== undefined) o[k] = x; }
  const semantics = semantics0 ?? compatOpt(o as Record<string, unknown>, `${what}.`, SEMANTICS, 'verl', { key: 'semantics', values: SEMANTICS });
  const dpSize = v.numOpt(o.dpSize, `${what}.dpSize`, 1, { min: 1, int: true });
  if (o.globalTokens !== undefined) v.numOpt(o.globalTokens, `${what}.globalTokens`, 0, { min: 0, minOpen: true, max: Number.MAX_SAFE_INTEGER });
  if (o.globalRows !== undefined) v.numOpt(o.globalRows, `${what}.globalRows`, 0, { min: 0, minOpen: true, max: Number.MAX_SAFE_INTEGER });
  if (o.lossScaleFactor !== undefined) v.numOpt(o.lossScaleFactor, `${what}.lossScaleFactor`, 0, { min: 0, minOpen: true, finite: true });
  return { ...(o as AggregateOptions), semantics, dpSize };
}

/**
 * @internal Per-token aggregation weights. `offsets` and `mask` are assumed validated. The weight of a
 * masked token is 0.
 */
export function aggWeights(
  offsets: Int32Array, mask: Uint8Array | undefined, mode: AggMode, o: AggregateOptions,
): AggWeights {
  const rows = offsets.length - 1;
  const n = offsets[rows]!;
  const w = new Float64Array(n);
  const sem = o.semantics ?? o.compat ?? 'verl';
  const dp = o.dpSize ?? 1;
  let nTok = 0;
  let nSeq = 0;
  let maxLen = 0;
  const cnt = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    let c = 0;
    for (let t = offsets[r]!; t < offsets[r + 1]!; t++) c += mask === undefined ? 1 : mask[t]!;
    cnt[r] = c;
    nTok += c;
    if (c > 0) nSeq++;
    maxLen = Math.max(maxLen, offsets[r + 1]! - offsets[r]!);
  }
  if (o.globalTokens !== undefined && o.globalTokens < nTok) {
    fail('ERR_OPTION', 'globalTokens', `>= the ${nTok} valid tokens of this call`, o.globalTokens);
  }
  if (o.globalRows !== undefined && o.globalRows < nSeq) {
    fail('ERR_OPTION', 'globalRows', `>= the ${nSeq} non-empty rows of this call`, o.globalRows);
  }
  if (sem !== 'verl' && mode === 'token-sum') {
    fail('ERR_OPTION', 'mode', `one of the ${sem} modes (token-sum exists in current verl only)`, mode);
  }
  const lsf = o.lossScaleFactor ?? maxLen;
  const fill = (r: number, wt: number) => {
    for (let t = offsets[r]!; t < offsets[r + 1]!; t++) w[t] = mask === undefined || mask[t] ? wt : 0;
  };
  let nan = false;
  if (sem === 'verl-agent') {
    // Older verl: token-mean adds 1e-8; seq modes average over ALL rows (empty rows count as 0).
    const gRows = o.globalRows ?? rows;
    for (let r = 0; r < rows; r++) {
      switch (mode) {
        case 'token-mean': fill(r, dp / (o.globalTokens ?? nTok + 1e-8)); break;
        case 'seq-mean-token-sum': fill(r, dp / gRows); break;
        case 'seq-mean-token-mean':
          if (cnt[r] === 0) nan = true; // 0/0 for an empty row, as the peer
          else fill(r, dp / cnt[r]! / gRows);
          break;
        case 'seq-mean-token-sum-norm': fill(r, dp / lsf); break;
        default: break;
      }
    }
    return { w, nan };
  }
  const gRows = o.globalRows ?? nSeq;
  for (let r = 0; r < rows; r++) {
    if (cnt[r] === 0) continue; // fully masked rows carry no weight
    switch (mode) {
      case 'token-mean': fill(r, dp / (o.globalTokens ?? nTok)); break;
      case 'token-sum': fill(r, dp); break;
      case 'seq-mean-token-sum': fill(r, dp / gRows); break;
      case 'seq-mean-token-mean': fill(r, dp / (cnt[r]! + 1e-8) / gRows); break;
      case 'seq-mean-token-sum-norm':
        fill(r, sem === 'verl-legacy' ? dp / lsf : dp / gRows / lsf);
        break;
    }
  }
  return { w, nan };
}

/**
 * Aggregates per-token values (a per-token loss matrix in packed rows) to one scalar, verl's
 * `agg_loss`, and returns the gradient of the scalar with respect to every value.
 *
 * Modes (n_tok valid tokens, n_seq non-empty rows, |y_i| valid tokens of row i, T the longest row):
 * `token-mean` Σ L / n_tok; `token-sum` Σ L; `seq-mean-token-sum` Σ_i Σ_t L / n_seq;
 * `seq-mean-token-mean` Σ_i (Σ_t L / (|y_i| + 1e-8)) / n_seq; `seq-mean-token-sum-norm`
 * Σ_i Σ_t L / n_seq / T. `globalTokens` / `globalRows` replace n_tok / n_seq so that micro-batches of one
 * global batch add up to the full-batch loss. With zero valid tokens the value is 0 with a zero gradient
 * (verl would give 0/0).
 *
 * @param values per-token values, length N (Float32Array or Float64Array; NaN allowed only where masked)
 * @param offsets Int32Array of length R+1 (packed rows)
 * @param mask optional Uint8Array of 0/1, length N (1 = counts)
 * @param mode the aggregation mode
 * @param opts global normalisers and version switches
 * @returns the value and the gradient d value / d values (same float type as `values`)
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const values = Float32Array.of(1, 2, 3, 4, 5);
 * const offsets = Int32Array.of(0, 3, 5);
 * console.log(rl.aggregate(values, offsets, undefined, 'token-mean').value);          // 3
 * console.log(rl.aggregate(values, offsets, undefined, 'seq-mean-token-mean').value); // ~3.25 = (2 + 4.5) / 2
 * // micro-batching: divide by the token count of the whole batch
 * const { value, grad } = rl.aggregate(values, offsets, undefined, 'token-mean', { globalTokens: 20 });
 * console.log(value, grad); // 0.75, every grad entry 1/20
 * ```
 * @category Losses
 */
export function aggregate(
  values: FloatArray, offsets: Int32Array, mask: Uint8Array | undefined, mode: AggMode,
  opts?: AggregateOptions,
): AggregateResult {
  const o = checkAggOptions(opts); // first: its getters run before the arrays are checked
  const x = floats(values, 'values');
  rowsOf(offsets, x.length);
  const mk = v.optMask(mask, 'mask', x.length);
  const md = v.enumOpt(mode, 'mode', AGG_MODES, 'token-mean');
  // NaN outside the mask is ignored, as current verl's masked_sum does.
  finite(x, 'values', mk);
  const { w, nan } = aggWeights(offsets, mk, md, o);
  let value = 0;
  const grad = sameType(x, x.length);
  for (let t = 0; t < x.length; t++) {
    if (w[t] === 0) continue;
    value += w[t]! * x[t]!;
    grad[t] = w[t]!;
  }
  return { value: nan ? NaN : value, grad };
}

/**
 * Each row's total weight in the aggregated loss under a mode: `Σ_t∈row w_t`. A row's contribution to
 * the loss is its mean per-token value times this weight, so comparing it across rows of different
 * lengths shows the mode's length bias (e.g. `token-mean` weights a row by its length, `seq-mean-token-mean`
 * gives every non-empty row the same weight).
 *
 * @param offsets Int32Array of length R+1
 * @param mask optional Uint8Array of 0/1, length N
 * @param mode the aggregation mode
 * @param opts the same normalisers as {@link aggregate}
 * @returns Float64Array of length R
 * @example
 * ```ts
 * import { effectiveRowWeights } from 'gear-rl/diagnostics';
 *
 * // rows of 1 and 4 tokens: token-mean weights rows by length, seq-mean-token-mean equally
 * const offsets = Int32Array.of(0, 1, 5);
 * console.log(effectiveRowWeights(offsets, undefined, 'token-mean'));          // Float64Array [0.2, 0.8]
 * console.log(effectiveRowWeights(offsets, undefined, 'seq-mean-token-mean')); // Float64Array [~0.5, ~0.5]
 * ```
 * @category Losses
 */
export function effectiveRowWeights(
  offsets: Int32Array, mask: Uint8Array | undefined, mode: AggMode, opts?: AggregateOptions,
): Float64Array {
  const o = checkAggOptions(opts); // first: its getters run before the arrays are checked
  const rows = v.offsets(offsets, 'offsets');
  const n = offsets[rows]!;
  const mk = v.optMask(mask, 'mask', n);
  const md = v.enumOpt(mode, 'mode', AGG_MODES, 'token-mean');
  const { w } = aggWeights(offsets, mk, md, o);
  const out = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    let s = 0;
    for (let t = offsets[r]!; t < offsets[r + 1]!; t++) s += w[t]!;
    out[r] = s;
  }
  return out;
}
