/**
 * The logits argument shared by every logits op: its type, the one reader of a logits argument, and the
 * checks of its targets, temperature and divergence cap (the native layer re-checks what memory safety
 * needs, and the values).
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
  /**
   * The checked value to hand down to the ops a function calls: the device tensor, or a frozen
   * `{ data, rows, vocab, dtype }` of the fields read, which {@link checkLogits} recognises and does
   * not read again.
   */
  logits: AnyLogits;
}

/**
 * Host logits as {@link checkLogits} read them: the value it hands down, frozen, and branded by its
 * class (a private field: telling one apart runs no getter or Proxy trap of the caller's).
 */
class CheckedHostLogits implements Logits {
  readonly data: Float32Array | Uint16Array;
  readonly rows: number;
  readonly vocab: number;
  readonly dtype: LogitsDType;
  readonly #checked: CheckedLogits;

  constructor(c: CheckedLogits) {
    this.data = c.data!;
    this.rows = c.rows;
    this.vocab = c.vocab;
    this.dtype = c.dtype;
    this.#checked = c;
    Object.freeze(this);
  }

  /** The checked form of `x` when it is one of these, else undefined. */
  static checked(x: unknown): CheckedLogits | undefined {
    return typeof x === 'object' && x !== null && #checked in x ? (x as CheckedHostLogits).#checked : undefined;
  }
}

/**
 * The one reader of a logits argument: validates a {@link Logits} argument (shape, dtype tag, length),
 * each field read once, or a live {@link DeviceLogits}. Public functions call it once per argument and
 * hand `logits` of the result down to the ops they call: given that value again, it reads nothing of
 * the caller's and re-checks only what may have changed since (the buffer still attached and long
 * enough), with the same errors.
 *
 * @internal
 */
export function checkLogits(l: unknown, what: string): CheckedLogits {
  if (DeviceLogits.isDeviceLogits(l)) {
    const t = l;
    const ref = t.ref(what);
    return { data: null, rows: t.rows, vocab: t.vocab, dtype: t.dtype, code: DTYPE_CODE[t.dtype], device: t.device,
      native: ref, tensor: t, logits: t };
  }
  const seen = CheckedHostLogits.checked(l);
  if (seen !== undefined) {
    hostLength(seen.data!, seen.rows, seen.vocab, what);
    return seen;
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
  hostLength(data, rows, vocab, what);
  const code = DTYPE_CODE[dt];
  const c = { data, rows, vocab, dtype: dt, code, device: -1,
    native: { data, rows, vocab, dtype: code as DTypeCode }, tensor: null } as Omit<CheckedLogits, 'logits'> as CheckedLogits;
  c.logits = new CheckedHostLogits(c);
  return c;
}

/** Host logits data: attached, and `rows * vocab` long. */
function hostLength(data: Float32Array | Uint16Array, rows: number, vocab: number, what: string): void {
  v.attached(data, `${what}.data`);
  if (rows * vocab !== data.length) {
    fail('ERR_SHAPE', `${what}.data.length`, `rows * vocab = ${rows} * ${vocab} = ${rows * vocab}`, data.length);
  }
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


/** The cap on a divergence that GEAR, `distillLoss` and their callers apply when given none, in nats. @internal */
export const KL_CAP_DEFAULT = 20;

/**
 * The one rule of a divergence cap (`klCap`): a number > 0 (`Infinity`: no cap). GEAR's option adds
 * the bound its float32 scan needs (the largest float32) to the same rule. @internal
 */
export const KL_CAP_RULE = Object.freeze({ min: 0, minOpen: true });

/** Reads a `klCap` option by {@link KL_CAP_RULE}; `dflt` when absent. @internal */
export function checkKlCap(x: unknown, what: string, dflt: number): number {
  return v.numOpt(x, what, dflt, KL_CAP_RULE);
}
