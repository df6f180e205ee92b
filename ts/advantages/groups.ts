/**
 * Hardened group statistics shared by every advantage estimator: group-id factorisation, two-pass
 * float64 mean / unbiased standard deviation, exact-tie detection and the standard-deviation floor.
 * Every estimator in this directory goes through {@link groupIndex} and {@link groupStats}, so the same
 * edge cases (singletons, ties, NaN rewards) behave the same everywhere.
 *
 * @module
 */
import { fail } from '../core/errors.js';
import * as v from '../core/validate.js';

/**
 * A group id as accepted by the estimators: a number or a string.
 *
 * @category Advantages
 */
export type GroupId = number | string;

/**
 * Smallest denominator an estimator divides by. `(r - mean) / (std + epsilon)` uses
 * `max(std + epsilon, STD_FLOOR)`: with the default epsilons (1e-6 verl, 1e-4 TRL) it is never reached;
 * with `epsilon: 0` it keeps a group whose rewards differ only by rounding noise (std below 1e-12)
 * from being blown up to advantages of order 1 (or to Infinity for a std that underflowed to 0).
 *
 * @category Advantages
 */
export const STD_FLOOR = 1e-12;

/**
 * Dense group indexing of a batch: `ids[row]` in `0..count-1`, numbered in order of first appearance.
 *
 * @category Advantages
 */
export interface GroupIndex {
  /** Dense group index per row. */
  ids: Int32Array;
  /** Number of distinct groups. */
  count: number;
  /** Rows per group. */
  sizes: Int32Array;
  /** First row of each group. */
  firstRow: Int32Array;
  /** The original id of each group (in dense order). */
  labels: GroupId[];
}

/** An integer typed array of ids (the kinds with a lookup-table fast path). */
function isIntIds(g: unknown): g is Int32Array | Uint32Array | Uint16Array | Int16Array | Uint8Array | Int8Array {
  return v.isTyped(g, Int32Array) || v.isTyped(g, Uint32Array) || v.isTyped(g, Uint16Array) ||
    v.isTyped(g, Int16Array) || v.isTyped(g, Uint8Array) || v.isTyped(g, Int8Array);
}

/**
 * Factorises group ids (numbers or strings; `1` and `1.0` are the same id, `1` and `'1'` are not)
 * into dense indices in order of first appearance. Rows of a group need not be contiguous.
 *
 * @param groups one id per row
 * @param what name used in error messages
 * @param rows expected number of rows (checked when given)
 * @example
 * ```ts
 * import { groupIndex } from 'gear-rl/diagnostics';
 *
 * const { ids, count, sizes, labels } = groupIndex(['q7', 'q3', 'q7', 'q7']);
 * console.log(ids, count, sizes, labels); // Int32Array [0, 1, 0, 0]  2  Int32Array [3, 1]  ['q7', 'q3']
 * ```
 * @category Advantages
 */
export function groupIndex(groups: ArrayLike<GroupId>, what?: string, rows?: number): GroupIndex {
  return groupIndexOf(groups, v.nameArg(what, 'groups'), rows === undefined ? undefined : v.numOpt(rows, 'rows', 0, { min: 0, int: true }));
}

function groupIndexOf(groups: ArrayLike<GroupId>, what: string, rows: number | undefined): GroupIndex {
  if (!(Array.isArray(groups) || v.isTypedArray(groups))) fail('ERR_DTYPE', what, 'an array of numbers or strings', groups);
  if (!Array.isArray(groups)) v.attached(groups, what);
  const n = groups.length;
  if (rows !== undefined && n !== rows) fail('ERR_SHAPE', `${what}.length`, `the row count ${rows}`, n);
  if (isIntIds(groups)) {
    const dense = denseIntegers(groups);
    if (dense) return dense;
  }
  const ids = new Int32Array(n);
  const map = new Map<GroupId, number>();
  const labels: GroupId[] = [];
  const first: number[] = [];
  const sizes: number[] = [];
  // The previous row's id: rows of a group are usually side by side, and an equal id needs no lookup.
  let prevKey: GroupId | undefined;
  let prevId = -1;
  for (let i = 0; i < n; i++) {
    const g = groups[i]!;
    if (typeof g === 'number') {
      if (Number.isNaN(g)) fail('ERR_GROUP', `${what}[${i}]`, 'a number or string id', g);
    } else if (typeof g !== 'string') {
      fail('ERR_DTYPE', `${what}[${i}]`, 'a number or string id', g);
    }
    const key = g === 0 ? 0 : g; // -0 and 0 are one id
    if (key === prevKey) {
      sizes[prevId]!++;
      ids[i] = prevId;
      continue;
    }
    let id = map.get(key);
    if (id === undefined) {
      id = labels.length;
      map.set(key, id);
      labels.push(key);
      first.push(i);
      sizes.push(0);
    }
    sizes[id]!++;
    ids[i] = id;
    prevKey = key;
    prevId = id;
  }
  return { ids, count: labels.length, sizes: Int32Array.from(sizes), firstRow: Int32Array.from(first), labels };
}

/**
 * Fast path for integer typed-array ids spanning a compact range: a lookup table instead of a Map.
 * Same numbering (order of first appearance) as the general path.
 */
function denseIntegers(groups: ArrayLike<number>): GroupIndex | null {
  const sorted = sortedIntegers(groups);
  if (sorted) return sorted;
  const n = groups.length;
  let lo = Infinity;
  let hi = -Infinity;
  for (let i = 0; i < n; i++) {
    const g = groups[i]!;
    if (g < lo) lo = g;
    if (g > hi) hi = g;
  }
  if (n === 0 || hi - lo > 4 * n + 1024) return null;
  const span = hi - lo + 1;
  const table = new Int32Array(span).fill(-1);
  const ids = new Int32Array(n);
  const counts = new Int32Array(Math.min(span, n));
  const first = new Int32Array(Math.min(span, n));
  let G = 0;
  for (let i = 0; i < n; i++) {
    const k = groups[i]! - lo;
    let id = table[k]!;
    if (id < 0) {
      id = G++;
      table[k] = id;
      first[id] = i;
    }
    ids[i] = id;
    counts[id]!++;
  }
  const firstRow = first.slice(0, G);
  const labels: GroupId[] = new Array(G);
  for (let g = 0; g < G; g++) labels[g] = groups[firstRow[g]!]!;
  return { ids, count: G, sizes: counts.slice(0, G), firstRow, labels };
}

/**
 * Non-decreasing integer ids (the usual layout: prompt after prompt): every change of value starts a
 * new group, so one pass numbers them without a lookup table. Returns null (after at most one pass)
 * as soon as a value decreases.
 */
function sortedIntegers(groups: ArrayLike<number>): GroupIndex | null {
  const n = groups.length;
  if (n === 0) return null;
  const ids = new Int32Array(n);
  // Worst case one group per row; trimmed at the end.
  const first = new Int32Array(n);
  let prev = groups[0]!;
  let G = 1;
  for (let i = 1; i < n; i++) {
    const g = groups[i]!;
    if (g !== prev) {
      if (g < prev) return null;
      prev = g;
      first[G++] = i;
    }
    ids[i] = G - 1;
  }
  const firstRow = first.slice(0, G);
  const sizes = new Int32Array(G);
  for (let g = 0; g + 1 < G; g++) sizes[g] = firstRow[g + 1]! - firstRow[g]!;
  sizes[G - 1] = n - firstRow[G - 1]!;
  const labels: GroupId[] = new Array(G);
  for (let g = 0; g < G; g++) labels[g] = groups[firstRow[g]!]!;
  return { ids, count: G, sizes, firstRow, labels };
}

/**
 * Per-group statistics from {@link groupStats}.
 *
 * @category Advantages
 */
export interface GroupStats {
  /** Group mean (for an exact-tie group: the common value itself, bit for bit). */
  mean: Float64Array;
  /** Unbiased (n - 1) standard deviation; exactly 0 for exact-tie groups and groups of one value. */
  std: Float64Array;
  /** Number of values that entered the statistics (NaN values are skipped when `skipNaN`). */
  count: Int32Array;
  /** 1 where every counted value of the group is identical (this includes groups of one value). */
  tie: Uint8Array;
}

/**
 * Two-pass float64 statistics per group: `mean = Σx / n`, then `std = sqrt(Σ(x - mean)² / (n - 1))`.
 * A group whose counted values are all identical gets `mean` equal to that value and `std = 0` exactly,
 * so `x - mean` is exactly 0 there (a one-pass or naively summed mean can be off by an ulp, which turns
 * a tie into a huge advantage after dividing by a tiny std). Groups without counted values get mean 0,
 * std 0, count 0.
 *
 * @param values one value per row
 * @param idx the batch's {@link GroupIndex}
 * @param opts `skipNaN` leaves NaN values out (TRL's `nanmean` / `nanstd`); `weights` (one per row,
 *   >= 0) weights the mean (used by OPO's length-weighted baseline; the std stays unweighted)
 * @throws GearError `ERR_DTYPE` / `ERR_SHAPE` on arrays of the wrong kind or length, `ERR_OPTION` on a
 *   `count` that is not an integer in [0, rows], `ERR_GROUP` on ids, sizes or first rows that disagree
 *
 * @example
 * ```ts
 * import { groupIndex, groupStats } from 'gear-rl/diagnostics';
 *
 * const idx = groupIndex([0, 0, 1, 1, 1]);
 * const { mean, std, count, tie } = groupStats([1, 3, 2, 2, 2], idx);
 * console.log(mean, std, count, tie); // [2, 2]  [1.414..., 0]  [2, 3]  [0, 1]
 * ```
 * @category Advantages
 */
export function groupStats(
  values: ArrayLike<number>, idx: GroupIndex, opts: { skipNaN?: boolean; weights?: ArrayLike<number> } = {},
): GroupStats {
  // values, options and weights read (and copied) before the index is checked: no getter runs after
  const vals = v.numArray(values, 'values');
  v.knownKeys(opts, 'opts', ['skipNaN', 'weights']);
  const { skipNaN, weights } = opts;
  const w = weights === undefined ? undefined : v.numArray(weights, 'opts.weights');
  const index = checkGroupIndex(idx, 'idx');
  const n = index.ids.length;
  if (vals.length !== n) fail('ERR_SHAPE', 'values.length', String(n), vals.length);
  if (skipNaN !== undefined && typeof skipNaN !== 'boolean') fail('ERR_OPTION', 'opts.skipNaN', 'a boolean', skipNaN);
  if (w !== undefined && w.length !== n) fail('ERR_SHAPE', 'opts.weights.length', String(n), w.length);
  return groupStatsOf(vals, index, { skipNaN, weights: w });
}

/**
 * A {@link GroupIndex} that {@link groupStats} can walk: `ids` of dense indices in `[0, count)`,
 * `count` at most the row count, and `sizes` / `firstRow` agreeing with `ids` (a count of -1 or 2^31
 * would otherwise size the per-group arrays). Returns a copy whose fields were each read once.
 */
function checkGroupIndex(idx: unknown, what: string): GroupIndex {
  if (typeof idx !== 'object' || idx === null) fail('ERR_DTYPE', what, 'a GroupIndex (from groupIndex)', idx);
  const { ids, count, sizes, firstRow, labels } = idx as GroupIndex;
  const n = v.i32(ids, `${what}.ids`).length;
  const G = v.numOpt(count, `${what}.count`, NaN, { min: 0, max: n, int: true });
  if (count === undefined) fail('ERR_OPTION', `${what}.count`, `an integer >= 0 and <= ${n}`, count);
  v.i32(sizes, `${what}.sizes`, G);
  v.i32(firstRow, `${what}.firstRow`, G);
  const seen = new Int32Array(G);
  for (let i = 0; i < n; i++) {
    const g = ids[i]!;
    if (!(g >= 0 && g < G)) fail('ERR_GROUP', `${what}.ids[${i}]`, `a group index in [0, ${G})`, g);
    if (seen[g]++ === 0 && firstRow[g] !== i) fail('ERR_GROUP', `${what}.firstRow[${g}]`, `${i}, the first row of group ${g}`, firstRow[g]);
  }
  for (let g = 0; g < G; g++) {
    if (sizes[g] !== seen[g]) fail('ERR_GROUP', `${what}.sizes[${g}]`, `${seen[g]}, the rows of group ${g}`, sizes[g]);
  }
  return { ids, count: G, sizes, firstRow, labels };
}

/** {@link groupStats} on inputs already checked (or built here): the estimators' path. @internal */
export function groupStatsOf(
  values: ArrayLike<number>, idx: GroupIndex, opts: { skipNaN?: boolean; weights?: ArrayLike<number> } = {},
): GroupStats {
  if (opts.skipNaN !== true && opts.weights === undefined) return plainStats(values, idx);
  const G = idx.count;
  const n = idx.ids.length;
  const ids = idx.ids;
  const skip = opts.skipNaN === true;
  const w = opts.weights;
  const sum = new Float64Array(G);
  const wsum = new Float64Array(G);
  const count = new Int32Array(G);
  const firstVal = new Float64Array(G);
  const tie = new Uint8Array(G).fill(1);
  for (let i = 0; i < n; i++) {
    const x = values[i]!;
    if (skip && x !== x) continue;
    const g = ids[i]!;
    if (count[g] === 0) firstVal[g] = x;
    else if (x !== firstVal[g] || (x !== x)) tie[g] = 0;
    count[g]!++;
    if (w) {
      sum[g] += w[i]! * x;
      wsum[g] += w[i]!;
    } else {
      sum[g] += x;
    }
  }
  const mean = new Float64Array(G);
  for (let g = 0; g < G; g++) {
    if (count[g] === 0) {
      tie[g] = 0;
      continue;
    }
    if (tie[g] && firstVal[g] === firstVal[g]) mean[g] = firstVal[g]!;
    else if (w) mean[g] = wsum[g]! > 0 ? sum[g]! / wsum[g]! : NaN;
    else mean[g] = sum[g]! / count[g]!;
  }
  const ss = new Float64Array(G);
  for (let i = 0; i < n; i++) {
    const x = values[i]!;
    if (skip && x !== x) continue;
    const g = ids[i]!;
    if (tie[g]) continue;
    const d = x - mean[g]!;
    ss[g] += d * d;
  }
  const std = new Float64Array(G);
  for (let g = 0; g < G; g++) {
    if (!tie[g] && count[g]! > 1) std[g] = Math.sqrt(ss[g]! / (count[g]! - 1));
  }
  return { mean, std, count, tie };
}

/**
 * True when every group's rows form one contiguous run (the usual layout: a prompt's samples side by
 * side). Dense ids are numbered in order of first appearance, so that holds exactly when they never
 * decrease.
 *
 * @internal
 */
export function contiguousGroups(ids: Int32Array): boolean {
  for (let i = 1; i < ids.length; i++) if (ids[i]! < ids[i - 1]!) return false;
  return true;
}

/**
 * Group boundaries of a batch whose groups are contiguous runs: `starts[g]` is group g's first row
 * and `starts[count]` the row count.
 *
 * @internal
 */
export function runStarts(idx: GroupIndex): Int32Array {
  const starts = new Int32Array(idx.count + 1);
  starts.set(idx.firstRow);
  starts[idx.count] = idx.ids.length;
  return starts;
}

/**
 * {@link runStarts} straight from the ids when they are an integer typed array of `n` values that
 * never decrease (every change of value starts the next group, numbered as {@link groupIndex}
 * would); null for any other ids, or as soon as a value decreases.
 *
 * @internal
 */
export function sortedRunStarts(groups: unknown, n: number): Int32Array | null {
  if (!isIntIds(groups)) return null;
  if (groups.length !== n || n === 0) return null;
  // Room for one group per row; only the pages actually written are touched.
  const starts = new Int32Array(n + 1);
  let G = 1;
  let prev = groups[0]!;
  for (let i = 1; i < n; i++) {
    const g = groups[i]!;
    if (g !== prev) {
      if (g < prev) return null;
      prev = g;
      starts[G++] = i;
    }
  }
  starts[G] = n;
  return starts.subarray(0, G + 1);
}

/** {@link groupStats} without NaN skipping or weights: the hot path of every row-level estimator. */
function plainStats(values: ArrayLike<number>, idx: GroupIndex): GroupStats {
  if (contiguousGroups(idx.ids)) return runStats(values, idx);
  const G = idx.count;
  const n = idx.ids.length;
  const ids = idx.ids;
  const sum = new Float64Array(G);
  const firstVal = new Float64Array(G);
  const tie = new Uint8Array(G).fill(1);
  const count = new Int32Array(G);
  const firstRow = idx.firstRow;
  for (let g = 0; g < G; g++) firstVal[g] = values[firstRow[g]!]!;
  for (let i = 0; i < n; i++) {
    const g = ids[i]!;
    const x = values[i]!;
    sum[g] += x;
    if (x !== firstVal[g]) tie[g] = 0;
  }
  const mean = new Float64Array(G);
  const sizes = idx.sizes;
  for (let g = 0; g < G; g++) {
    const c = sizes[g]!;
    count[g] = c;
    const f = firstVal[g]!;
    if (f !== f) tie[g] = 0;
    mean[g] = tie[g] ? f : sum[g]! / c;
  }
  const ss = new Float64Array(G);
  for (let i = 0; i < n; i++) {
    const g = ids[i]!;
    const d = values[i]! - mean[g]!;
    ss[g] += d * d;
  }
  const std = new Float64Array(G);
  for (let g = 0; g < G; g++) {
    const c = count[g]!;
    if (!tie[g] && c > 1) std[g] = Math.sqrt(ss[g]! / (c - 1));
  }
  return { mean, std, count, tie };
}

/**
 * The statistics of one group whose rows are the contiguous range `values[s..e)`, written to `out` as
 * `[mean, std, tie]` (tie 1 or 0). Same definitions as {@link groupStats}, and bit for bit the same
 * values: the sum runs in row order from 0, as the scattered per-group accumulator of the general loop
 * does. Both passes run while the group's rows are in cache.
 *
 * @internal
 */
export function runMoments(values: ArrayLike<number>, s: number, e: number, out: Float64Array): void {
  const c = e - s;
  const f = values[s]!;
  let sum = 0;
  let same = f === f;
  for (let i = s; i < e; i++) {
    const x = values[i]!;
    sum += x;
    if (x !== f) same = false;
  }
  if (same) {
    out[0] = f;
    out[1] = 0;
    out[2] = 1;
    return;
  }
  const m = sum / c;
  let ss = 0;
  for (let i = s; i < e; i++) {
    const d = values[i]! - m;
    ss += d * d;
  }
  out[0] = m;
  out[1] = c > 1 ? Math.sqrt(ss / (c - 1)) : 0;
  out[2] = 0;
}

/** {@link plainStats} for contiguous groups (see {@link runMoments}). */
function runStats(values: ArrayLike<number>, idx: GroupIndex): GroupStats {
  const G = idx.count;
  const firstRow = idx.firstRow;
  const sizes = idx.sizes;
  const mean = new Float64Array(G);
  const std = new Float64Array(G);
  const tie = new Uint8Array(G);
  const m = new Float64Array(3);
  for (let g = 0; g < G; g++) {
    const s = firstRow[g]!;
    runMoments(values, s, s + sizes[g]!, m);
    mean[g] = m[0]!;
    std[g] = m[1]!;
    tie[g] = m[2]!;
  }
  return { mean, std, count: sizes.slice(), tie };
}

/**
 * Two-pass unbiased std of all values (NaN skipped when `skipNaN`), with exact ties giving 0;
 * `mean` likewise. Fewer than two values give std NaN (as torch / TRL `nanstd`).
 *
 * @example
 * ```ts
 * import { batchStats } from 'gear-rl/diagnostics';
 *
 * console.log(batchStats([1, 2, NaN, 3], true)); // { mean: 2, std: 1, count: 3 }
 * ```
 * @category Advantages
 */
export function batchStats(values: ArrayLike<number>, skipNaN = false): { mean: number; std: number; count: number } {
  const vals = v.numArray(values, 'values');
  let s = 0;
  let c = 0;
  let first = NaN;
  let tie = true;
  for (let i = 0; i < vals.length; i++) {
    const x = vals[i]!;
    if (skipNaN && x !== x) continue;
    if (c === 0) first = x;
    else if (x !== first) tie = false;
    s += x;
    c++;
  }
  if (c === 0) return { mean: NaN, std: NaN, count: 0 };
  const mean = tie ? first : s / c;
  if (c < 2) return { mean, std: NaN, count: c };
  if (tie) return { mean, std: 0, count: c };
  let ss = 0;
  for (let i = 0; i < vals.length; i++) {
    const x = vals[i]!;
    if (skipNaN && x !== x) continue;
    const d = x - mean;
    ss += d * d;
  }
  return { mean, std: Math.sqrt(ss / (c - 1)), count: c };
}

/**
 * `num / (std + epsilon)` with the shared conventions: an exactly zero numerator gives exactly 0
 * (exact ties stay 0 even with `epsilon = 0`), the denominator is floored at {@link STD_FLOOR}, and a
 * NaN std (undefined: fewer than two values) gives NaN.
 */
export function scaled(num: number, std: number, epsilon: number): number {
  if (num === 0) return 0;
  const d = std + epsilon;
  if (d !== d) return NaN; // an undefined std (fewer than two values) stays undefined
  return num / (d > STD_FLOOR ? d : STD_FLOOR);
}

/**
 * The denominators {@link scaled} divides by, once per group: `num / den[g]` for `num !== 0` (and 0
 * for `num === 0`) is exactly `scaled(num, std[g], epsilon)`, without redoing the floor and NaN tests
 * for every row.
 *
 * @internal
 */
export function scaledDenominators(std: Float64Array, epsilon: number): Float64Array {
  const den = new Float64Array(std.length);
  for (let g = 0; g < std.length; g++) {
    const d = std[g]! + epsilon;
    den[g] = d !== d ? NaN : d > STD_FLOOR ? d : STD_FLOOR;
  }
  return den;
}

/**
 * verl's fallback standard deviation for a group of one (`torch.tensor(1.0) + epsilon`, evaluated in
 * float32): dividing a singleton's raw score by it reproduces verl bit for bit.
 */
export function singletonDenominator(epsilon: number): number {
  return Math.fround(1 + Math.fround(epsilon));
}

/**
 * Singleton-group policy shared by the estimators: `raw` keeps the score (verl), `zero` gives 0 (TRL).
 *
 * @category Advantages
 */
export type SingletonPolicy = 'raw' | 'zero';
/** @internal */
export const SINGLETON: readonly SingletonPolicy[] = ['raw', 'zero'];

/**
 * Reads per-row rewards: any numeric array-like, finite values only unless `allowNaN`. Always a copy
 * of the caller's array (one value per row: cheap), so that the getters of the arguments read after it
 * (group ids, lengths) cannot detach or change what was checked.
 */
export function rewardsArg(x: unknown, what: string, rows?: number, allowNaN = false): Float64Array {
  const read = v.numbers(x, what, rows);
  const out = read === x ? read.slice() : read;
  for (let i = 0; i < out.length; i++) {
    const r = out[i]!;
    if (!Number.isFinite(r) && !(allowNaN && r !== r)) {
      fail('ERR_NON_FINITE', `${what}[${i}]`, allowNaN ? 'a finite number or NaN' : 'a finite number', r);
    }
  }
  return out;
}

/**
 * @internal The reward components of a multi-reward estimator: each element of `list` read once (a
 * hole reads as undefined and is refused) and checked as a reward array; `nan` lets NaN through.
 */
export function components(list: unknown[], what: string, nan: boolean): Float64Array[] {
  const out: Float64Array[] = [];
  for (let k = 0; k < list.length; k++) out.push(rewardsArg(list[k], `${what}[${k}]`, undefined, nan));
  return out;
}
