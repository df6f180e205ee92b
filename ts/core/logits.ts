/**
 * The logits argument shared by every logits op: its type, and the checks of its shape, dtype tag,
 * targets and temperature (the native layer re-checks what memory safety needs, and the values).
 *
 * @internal
 * @module
 */
import { fail } from './errors.js';
import * as v from './validate.js';
import { DeviceLogits } from './device.js';
import type { DTypeCode, NativeLogits } from './addon_types.js';
import type { LogitsDType } from './dtype.js';

export type { LogitsDType } from './dtype.js';

/**
 * Row-major `rows x vocab` logits (one row per token position). A `Float32Array` is float32; a
 * `Uint16Array` holds raw bfloat16 or float16 words and needs `dtype`. `rows * vocab` may exceed 2^31.
 *
 * @category Logits kernels
 */
export interface Logits {
  /** The logits, `rows * vocab` elements. */
  data: Float32Array | Uint16Array;
  /** Number of rows (token positions). */
  rows: number;
  /** Vocabulary size (row length). */
  vocab: number;
  /**
   * `'float32'` (default for a Float32Array), or `'bfloat16'` / `'float16'` for a Uint16Array.
   *
   * @defaultValue `'float32'` (a Uint16Array needs `'bfloat16'` or `'float16'`)
   */
  dtype?: LogitsDType;
}

const DTYPE_CODE: Record<LogitsDType, number> = { float32: 0, bfloat16: 1, float16: 2 };

/**
 * Logits a logits op reads: host arrays ({@link Logits}) or a device tensor ({@link DeviceLogits}).
 *
 * @category Logits kernels
 */
export type AnyLogits = Logits | DeviceLogits;

/** Validated logits: the shape, dtype and native form; `data` is null and `device` >= 0 on a device. @internal */
export interface CheckedLogits {
  data: Float32Array | Uint16Array | null;
  rows: number;
  vocab: number;
  dtype: LogitsDType;
  code: number;
  /** -1: host memory. */
  device: number;
  /** The object the native call reads. */
  native: NativeLogits;
  /** The device tensor, when on a device. */
  tensor: DeviceLogits | null;
}

/** Validates a {@link Logits} argument (shape, dtype tag, length) or a live {@link DeviceLogits}. @internal */
export function checkLogits(l: unknown, what: string): CheckedLogits {
  if (DeviceLogits.isDeviceLogits(l)) {
    const t = l;
    const ref = t.ref(what);
    return { data: null, rows: t.rows, vocab: t.vocab, dtype: t.dtype, code: DTYPE_CODE[t.dtype], device: t.device,
      native: ref, tensor: t };
  }
  if (typeof l !== 'object' || l === null) fail('ERR_DTYPE', what, 'a Logits object { data, rows, vocab, dtype? }', l);
  v.knownKeys(l, what, ['data', 'rows', 'vocab', 'dtype']);
  const { data, rows, vocab, dtype } = l as Logits;
  if (!Number.isSafeInteger(rows) || rows < 0) fail('ERR_SHAPE', `${what}.rows`, 'an integer >= 0', rows);
  if (!Number.isSafeInteger(vocab) || vocab < 1) fail('ERR_SHAPE', `${what}.vocab`, 'an integer >= 1', vocab);
  let dt: LogitsDType;
  if (v.isTyped(data, Float32Array)) {
    if (dtype !== undefined && dtype !== 'float32') {
      fail('ERR_DTYPE', `${what}.dtype`, `'float32' for a Float32Array`, dtype);
    }
    dt = 'float32';
  } else if (v.isTyped(data, Uint16Array)) {
    if (dtype !== 'bfloat16' && dtype !== 'float16') {
      fail('ERR_DTYPE', `${what}.dtype`, `'bfloat16' or 'float16' for a Uint16Array`, dtype);
    }
    dt = dtype;
  } else {
    fail('ERR_DTYPE', `${what}.data`, 'a Float32Array, or a Uint16Array with dtype bfloat16/float16', data);
  }
  v.attached(data, `${what}.data`);
  if (rows * vocab !== data.length) {
    fail('ERR_SHAPE', `${what}.data.length`, `rows * vocab = ${rows} * ${vocab} = ${rows * vocab}`, data.length);
  }
  const code = DTYPE_CODE[dt];
  return { data, rows, vocab, dtype: dt, code, device: -1, native: { data, rows, vocab, dtype: code as DTypeCode }, tensor: null };
}

/** Validates token ids: an Int32Array of `rows` ids in [0, vocab). @internal */
export function checkTargets(t: unknown, what: string, rows: number, vocab: number): Int32Array {
  const a = v.i32(t, what, rows);
  for (let r = 0; r < a.length; r++) {
    const y = a[r]!;
    if (y < 0 || y >= vocab) fail('ERR_TARGET_RANGE', `${what}[${r}]`, `a token id in [0, ${vocab})`, y);
  }
  return a;
}

/** Validates a temperature option (finite, >= 1e-30 so that 1/T is a finite float32 scale; default 1). @internal */
export function checkTemperature(t: unknown): number {
  return v.numOpt(t, 'temperature', 1, { min: 1e-30, max: Infinity, maxOpen: true });
}

