/**
 * Zero-copy views of other runtimes' tensors as the {@link Logits} the ops take: onnxruntime-node's
 * `Tensor` and TensorFlow.js's `Tensor`. Neither runtime is imported: the adapters read the tensor's
 * own fields (both are optional peer dependencies).
 *
 * @module
 */
import { fail } from '../core/errors.js';
import * as v from '../core/validate.js';
import type { Logits } from '../core/logits.js';

/**
 * Which rows of the flattened `[..., vocab]` tensor to view (a zero-copy subarray).
 * @category Logits kernels
 */
export interface TensorRowRange {
  /**
   * First row (default 0).
   *
   * @defaultValue `0`
   */
  start?: number;
  /**
   * Number of rows (default: to the end).
   *
   * @defaultValue to the end
   */
  count?: number;
}

/**
 * Options of the tensor adapters.
 * @category Logits kernels
 */
export interface TensorLogitsOptions {
  /** Expected vocabulary size (the last dimension); checked when given. */
  vocab?: number;
  /** Rows to view, counting over all leading dimensions flattened (e.g. `batch * seq`). */
  rows?: TensorRowRange;
}

/**
 * The structural part of an onnxruntime `Tensor` that the adapter reads.
 * @category Logits kernels
 */
export interface OrtTensorLike {
  /** Element type, e.g. `'float32'` or `'float16'`. */
  readonly type: string;
  /** Dimensions. */
  readonly dims: readonly number[];
  /** The CPU data (throws for tensors that live on a GPU). */
  readonly data: unknown;
  /** Where the data lives (`'cpu'`, `'gpu-buffer'`, ...). */
  readonly location?: string;
}

/**
 * The structural part of a TensorFlow.js `Tensor` that the adapter reads.
 * @category Logits kernels
 */
export interface TfjsTensorLike {
  /** Element type, e.g. `'float32'`. */
  readonly dtype: string;
  /** Dimensions. */
  readonly shape: readonly number[];
  /** The values (the backend's own array on the CPU backend). */
  dataSync(): unknown;
  /** Whether the tensor was disposed. */
  readonly isDisposed?: boolean;
}

function shapeOf(dims: unknown, what: string): { rows: number; vocab: number } {
  if (!Array.isArray(dims) || dims.length < 1) fail('ERR_SHAPE', what, 'a shape [..., vocab] with at least one dimension', dims);
  let rows = 1;
  for (let i = 0; i < dims.length; i++) {
    const d = dims[i];
    if (!Number.isSafeInteger(d) || d < 0) fail('ERR_SHAPE', `${what}[${i}]`, 'a dimension (integer >= 0)', d);
    if (i < dims.length - 1) rows *= d;
  }
  const vocab = dims[dims.length - 1] as number;
  if (dims.length === 1) rows = 1;
  return { rows, vocab };
}

function view(data: Float32Array | Uint16Array, dtype: Logits['dtype'], rows: number, vocab: number, what: string,
  opts: TensorLogitsOptions | undefined): Logits {
  if (opts !== undefined && (typeof opts !== 'object' || opts === null)) fail('ERR_OPTION', `${what}: options`, 'an options object', opts);
  for (const k of Object.keys(opts ?? {})) if (k !== 'vocab' && k !== 'rows') fail('ERR_OPTION', `${what}: options.${k}`, 'a known option (vocab, rows)', k);
  if (vocab < 1) fail('ERR_SHAPE', `${what}: vocab (last dimension)`, 'at least 1', vocab);
  if (opts?.vocab !== undefined && opts.vocab !== vocab) fail('ERR_SHAPE', `${what}: vocab (last dimension)`, String(opts.vocab), vocab);
  if (data.length !== rows * vocab) fail('ERR_SHAPE', `${what}: data.length`, `the shape's ${rows} x ${vocab} = ${rows * vocab}`, data.length);
  const r = opts?.rows;
  let start = 0;
  let count = rows;
  if (r !== undefined) {
    if (typeof r !== 'object' || r === null) fail('ERR_OPTION', `${what}: options.rows`, 'a range { start?, count? }', r);
    start = r.start ?? 0;
    if (!Number.isSafeInteger(start) || start < 0 || start > rows) fail('ERR_OPTION', `${what}: options.rows.start`, `an integer in [0, ${rows}]`, start);
    count = r.count ?? rows - start;
    if (!Number.isSafeInteger(count) || count < 0 || start + count > rows) fail('ERR_OPTION', `${what}: options.rows.count`, `an integer in [0, ${rows - start}]`, count);
  }
  const sub = start === 0 && count === rows ? data : data.subarray(start * vocab, (start + count) * vocab);
  return dtype === 'float32' ? { data: sub, rows: count, vocab } : { data: sub, rows: count, vocab, dtype };
}

/**
 * Views an onnxruntime-node (or onnxruntime-web) `Tensor` of logits, shape `[..., vocab]`, as
 * {@link Logits} without copying: the result's `data` is the tensor's own array (a subarray of it with
 * `options.rows`). `float32` tensors give float32 logits, `float16` tensors (raw `Uint16Array` words)
 * give float16 logits. The leading dimensions are flattened into rows (`[batch, seq, vocab]` gives
 * `batch * seq` rows).
 *
 * @param tensor an onnxruntime `Tensor` whose data is on the CPU
 * @param options expected `vocab`, and a `rows` range to view
 * @returns the logits view
 * @throws GearError `ERR_DTYPE` (another element type, data not on the CPU), `ERR_SHAPE` (shape and
 *   data disagree, vocab differs from `options.vocab`), `ERR_OPTION` (bad range)
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 * // any object shaped like an onnxruntime Tensor, e.g. (await session.run(feeds)).logits
 * const tensor = { type: 'float32', dims: [1, 2, 3], data: new Float32Array([0, 1, 2, 2, 1, 0]), location: 'cpu' };
 * const logits = rl.logitsFromOrt(tensor);
 * const stats = rl.tokenStats(logits, new Int32Array([2, 0]));
 * console.log(logits.rows, stats.logprob.length); // 2 2
 * ```
 * @category Logits kernels
 */
export function logitsFromOrt(tensor: OrtTensorLike, options?: TensorLogitsOptions): Logits {
  const what = 'logitsFromOrt';
  if (typeof tensor !== 'object' || tensor === null) fail('ERR_DTYPE', what, 'an onnxruntime Tensor', tensor);
  if (tensor.location !== undefined && tensor.location !== 'cpu' && tensor.location !== 'cpu-pinned') {
    fail('ERR_DTYPE', `${what}: tensor.location`, "'cpu' (download it first: await tensor.getData())", tensor.location);
  }
  const { rows, vocab } = shapeOf(tensor.dims, `${what}: tensor.dims`);
  const data = tensor.data;
  if (tensor.type === 'float32') {
    if (!(data instanceof Float32Array)) fail('ERR_DTYPE', `${what}: tensor.data`, 'a Float32Array for a float32 tensor', data);
    v.attached(data, `${what}: tensor.data`);
    return view(data, 'float32', rows, vocab, what, options);
  }
  if (tensor.type === 'float16') {
    if (!(data instanceof Uint16Array)) fail('ERR_DTYPE', `${what}: tensor.data`, 'a Uint16Array of float16 words for a float16 tensor', data);
    v.attached(data, `${what}: tensor.data`);
    return view(data, 'float16', rows, vocab, what, options);
  }
  return fail('ERR_DTYPE', `${what}: tensor.type`, "'float32' or 'float16'", tensor.type);
}

/**
 * Views a TensorFlow.js `Tensor` of logits, shape `[..., vocab]`, as {@link Logits}. On the CPU
 * backend (`@tensorflow/tfjs` in Node, or `tfjs-node`) `dataSync()` hands out the backend's own array,
 * so nothing is copied; other backends download the values once. The view is valid until the tensor is
 * disposed; the ops only read it. Only `float32` tensors are accepted (tfjs has no 16-bit floats).
 *
 * @param tensor a tfjs `Tensor` (not disposed)
 * @param options expected `vocab`, and a `rows` range to view
 * @returns the logits view
 * @throws GearError `ERR_DTYPE` (not float32, disposed), `ERR_SHAPE`, `ERR_OPTION`
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 * // any object shaped like a tfjs Tensor, e.g. model.predict(x) as tf.Tensor
 * const values = new Float32Array([0, 1, 2, 2, 1, 0]);
 * const tensor = { dtype: 'float32', shape: [2, 3], dataSync: () => values };
 * const logits = rl.logitsFromTfjs(tensor, { vocab: 3, rows: { start: 1 } });
 * console.log(logits.rows, logits.data[0]); // 1 2
 * ```
 * @category Logits kernels
 */
export function logitsFromTfjs(tensor: TfjsTensorLike, options?: TensorLogitsOptions): Logits {
  const what = 'logitsFromTfjs';
  if (typeof tensor !== 'object' || tensor === null || typeof tensor.dataSync !== 'function') fail('ERR_DTYPE', what, 'a tfjs Tensor', tensor);
  if (tensor.isDisposed === true) fail('ERR_DTYPE', what, 'a tensor that is not disposed', 'a disposed tensor');
  if (tensor.dtype !== 'float32') fail('ERR_DTYPE', `${what}: tensor.dtype`, "'float32'", tensor.dtype);
  const { rows, vocab } = shapeOf(tensor.shape, `${what}: tensor.shape`);
  const data = tensor.dataSync();
  if (!(data instanceof Float32Array)) fail('ERR_DTYPE', `${what}: tensor.dataSync()`, 'a Float32Array', data);
  v.attached(data, `${what}: tensor.dataSync()`);
  return view(data, 'float32', rows, vocab, what, options);
}
