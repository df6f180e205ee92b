/**
 * Error type thrown by every gear-rl function on bad input or a failed native call.
 *
 * @module
 */

/**
 * Stable error codes carried by {@link GearError.code}.
 *
 * @category Errors
 */
export type GearErrorCode =
  | 'ERR_SHAPE'          // lengths / shapes that do not agree
  | 'ERR_DTYPE'          // wrong typed-array kind or dtype tag
  | 'ERR_TARGET_RANGE'   // token id outside [0, vocab)
  | 'ERR_NON_FINITE'     // NaN / +Infinity where a finite value is required
  | 'ERR_OPTION'         // unknown or out-of-range option
  | 'ERR_OFFSETS'        // offsets not starting at 0, decreasing, or exceeding N
  | 'ERR_GROUP'          // inconsistent group / trajectory references
  | 'ERR_ABORTED'        // an async call was aborted through its AbortSignal
  | 'ERR_BUSY'           // a buffer or device tensor in use by a pending async call
  | 'ERR_NATIVE'         // the native addon failed to load or reported an internal error
  | 'ERR_STATE'          // an object in the wrong state: optimizer state that does not match its parameters, a disposed device tensor
  | 'ERR_DEVICE'         // no CUDA module or device, a tensor of another device, host and device inputs mixed
  | 'ERR_OUT_OF_MEMORY'; // device memory exhausted (the message names the bytes asked and free)

/**
 * The error thrown by gear-rl. `code` is stable and machine-readable; `kind` tells whether the input had
 * the wrong type (`'type'`) or a value out of its allowed range (`'range'`). Messages read
 * "what: expected X, got Y".
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * try {
 *   rl.segmentReduce(Float32Array.of(1, 2), Int32Array.of(0, 3), 'sum'); // offsets run past the values
 * } catch (e) {
 *   if (!(e instanceof rl.GearError)) throw e;
 *   console.log(e.code, e.kind, e.message); // 'ERR_OFFSETS' 'range' 'offsets[R]: expected the token count 2, got 3'
 * }
 * ```
 * @category Errors
 */
export class GearError extends Error {
  /** Stable machine-readable code, e.g. `ERR_SHAPE`. */
  readonly code: GearErrorCode;
  /** `'type'` for a wrong kind of value, `'range'` for a value outside what is allowed. */
  readonly kind: 'type' | 'range';

  constructor(code: GearErrorCode, message: string, kind?: 'type' | 'range') {
    super(message);
    this.name = 'GearError';
    this.code = code;
    this.kind = kind ?? (code === 'ERR_DTYPE' ? 'type' : 'range');
    Object.defineProperty(this, BRAND, { value: true });
  }

  /**
   * `x instanceof GearError` holds for every GearError of this realm, whichever copy of the package
   * made it (two installs side by side, or module graphs evaluated more than once in one thread, each
   * register their own class with the one native addon of the thread). Subclasses test as usual.
   *
   * @param x the value tested
   * @returns whether `x` is a GearError
   */
  static override [Symbol.hasInstance](x: unknown): boolean {
    if (this !== GearError) return Function.prototype[Symbol.hasInstance].call(this, x);
    try {
      return typeof x === 'object' && x !== null && Object.prototype.hasOwnProperty.call(x, BRAND);
    } catch {
      return false; // a Proxy whose trap throws is no GearError
    }
  }
}

/** Marks the errors of every copy of the package (a registry-wide symbol). */
const BRAND = Symbol.for('gear-rl.GearError');

/** Throws a {@link GearError} with a message of the form "what: expected X, got Y". */
export function fail(code: GearErrorCode, what: string, expected: string, got: unknown): never {
  throw new GearError(code, `${what}: expected ${expected}, got ${describe(got)}`);
}

/** The common base class of the typed arrays (`Object.getPrototypeOf(Int8Array)`). */
const TYPED_ARRAY = Object.getPrototypeOf(Int8Array) as abstract new () => object;

/** Short human description of a value for error messages. */
export function describe(v: unknown): string {
  if (v === null) return 'null';
  if (v === undefined) return 'undefined';
  if (typeof v === 'number') return Number.isNaN(v) ? 'NaN' : String(v);
  if (typeof v === 'string') return JSON.stringify(v.length > 40 ? v.slice(0, 40) + '…' : v);
  if (ArrayBuffer.isView(v)) {
    const len = (v as unknown as { length?: number }).length;
    return `${v.constructor.name}(${len ?? v.byteLength})`;
  }
  if (Array.isArray(v)) return `Array(${v.length})`;
  if (typeof v === 'object') {
    // Only a string name: a null-prototype object, a Proxy or a `constructor` field that is not a
    // class must not turn the error into a TypeError of its own.
    let name: unknown;
    let wrapped = false;
    try {
      name = (v as { constructor?: { name?: unknown } }).constructor?.name;
      // on a typed-array prototype but not a view: a Proxy around a typed array
      wrapped = v instanceof TYPED_ARRAY;
    } catch {
      name = undefined;
    }
    const shown = typeof name === 'string' && name !== '' ? name : 'object';
    return wrapped ? `Proxy(${shown})` : shown;
  }
  return typeof v;
}
