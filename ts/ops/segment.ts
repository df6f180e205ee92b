/**
 * Segmented reductions and broadcasts over packed rows (`offsets`, `mask`).
 *
 * @module
 */
import { fail } from '../core/errors.js';
import type { AsyncControl, AsyncOp } from '../core/addon_types.js';
import * as v from '../core/validate.js';
import { type AsyncOptions, asyncOp } from '../core/invoke.js';

// ---- native contract: packed rows ----
// What this file calls in the addon; the `declare module` block adds it to NativeAddon (ts/core/addon_types.ts).

/** 0 sum, 1 mean, 2 max, 3 min, 4 count. @internal */
export type SegmentOpCode = 0 | 1 | 2 | 3 | 4;
/** @internal */
export interface SegmentReduceParams extends AsyncControl {
  values: Float32Array | Float64Array;
  offsets: Int32Array;
  mask?: Uint8Array | null;
  op: SegmentOpCode;
  out?: Float64Array | null;
}
/** @internal */
export interface SegmentReduceResult {
  rowValues: Float64Array;
}
/** @internal */
export interface SegmentBroadcastParams extends AsyncControl {
  rowValues: Float64Array;
  offsets: Int32Array;
  mask?: Uint8Array | null;
  out?: Float32Array | null;
}
/** @internal */
export interface SegmentBroadcastResult {
  tokenValues: Float32Array;
}

declare module '../core/addon_types.js' {
  interface NativeAddon {
    segmentReduce: AsyncOp<SegmentReduceParams, SegmentReduceResult>;
    segmentBroadcast: AsyncOp<SegmentBroadcastParams, SegmentBroadcastResult>;
  }
}
// The parameters each writes (every other array of its parameter object is read: ts/core/invoke.ts).
const segmentReduceOp = asyncOp('segmentReduce', { writes: ['out'] });
const segmentBroadcastOp = asyncOp('segmentBroadcast', { writes: ['out'] });

/**
 * Reduction applied by {@link segmentReduce}.
 *
 * @category Segment ops
 */
export type SegmentOp = 'sum' | 'mean' | 'max' | 'min' | 'count';
const OPS: readonly SegmentOp[] = ['sum', 'mean', 'max', 'min', 'count'];

function reduceArgs(values: unknown, offsets: Int32Array, op: unknown, mask: unknown) {
  if (!(v.isTyped(values, Float32Array) || v.isTyped(values, Float64Array))) {
    fail('ERR_DTYPE', 'values', 'Float32Array or Float64Array', values);
  }
  v.attached(values, 'values');
  v.offsets(offsets, 'offsets', values.length);
  const opIndex = OPS.indexOf(v.enumOpt(op, 'op', OPS, 'sum')) as SegmentOpCode;
  // The kernel checks the mask values (0/1) in its own pass over the tokens.
  return { values, opIndex, mask: v.optMaskShape(mask, 'mask', values.length) ?? null };
}

/**
 * Reduces each packed row to one float64 value. Masked-out tokens (mask 0) are skipped. An empty or
 * fully masked row gives sum 0, count 0, mean 0, max `-Infinity`, min `+Infinity`.
 *
 * @param values per-token values, length N = `offsets[R]`
 * @param offsets Int32Array of length R+1, `offsets[0] = 0`, non-decreasing
 * @param op `'sum' | 'mean' | 'max' | 'min' | 'count'`
 * @param mask optional Uint8Array of 0/1, length N
 * @returns Float64Array of length R
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * // two packed rows: tokens 0..2 and 3..4; the mask drops token 1
 * const values = Float32Array.of(1, 100, 3, 4, 6);
 * const offsets = Int32Array.of(0, 3, 5);
 * const mask = Uint8Array.of(1, 0, 1, 1, 1);
 * console.log(rl.segmentReduce(values, offsets, 'mean', mask)); // Float64Array [2, 5]
 * ```
 * @category Segment ops
 */
export function segmentReduce(
  values: Float32Array | Float64Array, offsets: Int32Array, op: SegmentOp, mask?: Uint8Array,
): Float64Array {
  const a = reduceArgs(values, offsets, op, mask);
  return segmentReduceOp.call({ values: a.values, offsets, mask: a.mask, op: a.opIndex }).rowValues;
}

/**
 * Async form of {@link segmentReduce}: runs off the main thread; abortable.
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const values = Float64Array.of(1, 2, 3, 4, 5);
 * const offsets = Int32Array.of(0, 3, 5);
 * console.log(await rl.segmentReduceAsync(values, offsets, 'max')); // Float64Array [3, 5]
 * ```
 * @category Segment ops
 */
export async function segmentReduceAsync(
  values: Float32Array | Float64Array, offsets: Int32Array, op: SegmentOp, mask?: Uint8Array,
  opts: AsyncOptions = {},
): Promise<Float64Array> {
  v.knownKeys(opts, 'options', ['signal']);
  const a = reduceArgs(values, offsets, op, mask);
  return (await segmentReduceOp.callAsync({ values: a.values, offsets, mask: a.mask, op: a.opIndex }, opts.signal)).rowValues;
}

/**
 * Options of {@link segmentBroadcast}.
 *
 * @category Segment ops
 */
export interface BroadcastOptions {
  /**
   * Output to fill instead of allocating (Float32Array of length N): reusing one across calls saves
   * the allocation and its first-touch page faults, which cost more than the broadcast itself at
   * 10^7 tokens. Returned as the result.
   */
  out?: Float32Array;
}

/**
 * Options of {@link segmentBroadcastAsync}.
 *
 * @category Segment ops
 */
export interface BroadcastAsyncOptions extends AsyncOptions, BroadcastOptions {}

function broadcastArgs(rowValues: unknown, offsets: Int32Array, mask: unknown, out: unknown) {
  const rows = v.offsets(offsets, 'offsets');
  const vals = v.numbers(rowValues, 'rowValues');
  if (vals.length !== rows) fail('ERR_SHAPE', 'rowValues.length', `the row count ${rows}`, vals.length);
  const n = offsets[rows]!;
  return {
    vals,
    // The kernel checks the mask values (0/1) in its own pass over the tokens.
    mask: v.optMaskShape(mask, 'mask', n) ?? null,
    out: out === undefined ? null : v.f32(out, 'out', n),
  };
}

/**
 * Broadcasts one value per row to every token of the row (float32), writing 0 where `mask` is 0 —
 * how row-level advantages become per-token advantages.
 *
 * @param rowValues one value per row (length R)
 * @param offsets Int32Array of length R+1
 * @param mask optional Uint8Array of 0/1, length N
 * @param opts `out`: an output array to fill instead of allocating one
 * @returns Float32Array of length N (`opts.out` when given)
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const advantages = [0.5, -1];              // one per row
 * const offsets = Int32Array.of(0, 3, 5);
 * const mask = Uint8Array.of(1, 1, 0, 1, 1); // token 2 is a tool token
 * const out = new Float32Array(5);           // reusable output
 * rl.segmentBroadcast(advantages, offsets, mask, { out });
 * console.log(out); // Float32Array [0.5, 0.5, 0, -1, -1]
 * ```
 * @category Segment ops
 */
export function segmentBroadcast(
  rowValues: ArrayLike<number>, offsets: Int32Array, mask?: Uint8Array, opts: BroadcastOptions = {},
): Float32Array {
  v.knownKeys(opts, 'options', ['out']);
  const a = broadcastArgs(rowValues, offsets, mask, opts.out);
  return segmentBroadcastOp.call({ rowValues: a.vals, offsets, mask: a.mask, out: a.out }).tokenValues;
}

/**
 * Async form of {@link segmentBroadcast}; `opts.signal` aborts, `opts.out` as in the sync form.
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const perToken = await rl.segmentBroadcastAsync([1, 2], Int32Array.of(0, 2, 3));
 * console.log(perToken); // Float32Array [1, 1, 2]
 * ```
 * @category Segment ops
 */
export async function segmentBroadcastAsync(
  rowValues: ArrayLike<number>, offsets: Int32Array, mask?: Uint8Array, opts: BroadcastAsyncOptions = {},
): Promise<Float32Array> {
  v.knownKeys(opts, 'options', ['out', 'signal']);
  const a = broadcastArgs(rowValues, offsets, mask, opts.out);
  return (await segmentBroadcastOp.callAsync({ rowValues: a.vals, offsets, mask: a.mask, out: a.out }, opts.signal)).tokenValues;
}
