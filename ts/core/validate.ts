/**
 * Argument checks shared by every module. Each throws a {@link GearError} with a stable code and a
 * message "what: expected X, got Y". Internal: not part of the public API.
 *
 * @internal
 * @module
 */
import { GearError, fail } from './errors.js';

/** Numeric array-like input accepted where the API says `ArrayLike<number>`. */
export type NumArray = ArrayLike<number>;

export function isTypedArray(v: unknown): v is ArrayBufferView & ArrayLike<number> {
  // BigInt64Array / BigUint64Array hold bigints, which no numeric check or kernel takes
  return ArrayBuffer.isView(v) && !(v instanceof DataView) && !(v instanceof BigInt64Array) && !(v instanceof BigUint64Array);
}

// The intrinsic accessors of every typed array: a typed array's own `length` property cannot stand in.
const TYPED_PROTO = Object.getPrototypeOf(Int8Array.prototype) as object;
const typedLength = Object.getOwnPropertyDescriptor(TYPED_PROTO, 'length')!.get! as (this: ArrayBufferView) => number;
const typedBuffer = Object.getOwnPropertyDescriptor(TYPED_PROTO, 'buffer')!.get! as (this: ArrayBufferView) => ArrayBufferLike;
const typedValues = (TYPED_PROTO as { values: (this: ArrayBufferView) => unknown }).values;

/**
 * True when a typed array can no longer be read: its ArrayBuffer was detached (transferred to a worker,
 * `transfer()`ed) or the resizable buffer under it shrank below its start. Such an array reads as
 * empty, but iterating, copying or slicing it throws a TypeError. Only an empty-reading array is looked
 * at further, so the check costs nothing on real data.
 */
export function isDetached(x: ArrayBufferView): boolean {
  let n: number;
  try {
    n = typedLength.call(x);
  } catch {
    return false; // not a typed array (a DataView, a Proxy): the type checks answer for it
  }
  if (n !== 0) return false;
  try {
    typedValues.call(x); // validates the array as every iteration does
    return false;
  } catch {
    return true;
  }
}

/**
 * Refuses a typed array that can no longer be read (see {@link isDetached}) with `ERR_SHAPE`, as the
 * addon does: else a detached array would pass wherever an empty one is accepted. Returns `x`.
 */
export function attached<T extends ArrayBufferView>(x: T, what: string): T {
  if (!isDetached(x)) return x;
  let detached = true;
  try {
    void new Uint8Array(typedBuffer.call(x), 0, 0); // throws only for a detached buffer
    detached = false;
  } catch { /* detached */ }
  throw new GearError('ERR_SHAPE', detached
    ? `${what}: expected an attached buffer, got a detached one`
    : `${what}: expected an array within its buffer, got one its resizable buffer shrank below`);
}

/** Requires a `Float32Array`. */
export function f32(v: unknown, what: string, len?: number): Float32Array {
  if (!isTyped(v, Float32Array)) fail('ERR_DTYPE', what, 'Float32Array', v);
  if (len !== undefined && v.length !== len) fail('ERR_SHAPE', `${what}.length`, String(len), v.length);
  return attached(v, what);
}

/** Requires a `Float64Array`. */
export function f64(v: unknown, what: string, len?: number): Float64Array {
  if (!isTyped(v, Float64Array)) fail('ERR_DTYPE', what, 'Float64Array', v);
  if (len !== undefined && v.length !== len) fail('ERR_SHAPE', `${what}.length`, String(len), v.length);
  return attached(v, what);
}

/** Requires an `Int32Array`. */
export function i32(v: unknown, what: string, len?: number): Int32Array {
  if (!isTyped(v, Int32Array)) fail('ERR_DTYPE', what, 'Int32Array', v);
  if (len !== undefined && v.length !== len) fail('ERR_SHAPE', `${what}.length`, String(len), v.length);
  return attached(v, what);
}

/** Requires a `Uint8Array` of 0/1 values. */
export function mask01(v: unknown, what: string, len: number): Uint8Array {
  if (!isTyped(v, Uint8Array)) fail('ERR_DTYPE', what, 'Uint8Array', v);
  if (v.length !== len) fail('ERR_SHAPE', `${what}.length`, String(len), v.length);
  if (len === 0) return attached(v, what); // nothing to scan
  // Branch-free scan (fast on 10^7 tokens); the offending index is searched only on failure.
  let bits = 0;
  const words = v.byteOffset % 4 === 0 ? new Uint32Array(v.buffer, v.byteOffset, v.length >>> 2) : null;
  if (words) for (let i = 0; i < words.length; i++) bits |= words[i]!;
  for (let i = words ? words.length * 4 : 0; i < v.length; i++) bits |= v[i]!;
  if ((bits & 0xfefefefe) !== 0) {
    for (let i = 0; i < v.length; i++) {
      if (v[i]! > 1) fail('ERR_OPTION', `${what}[${i}]`, '0 or 1', v[i]);
    }
  }
  return v;
}

/** Optional mask: `undefined` passes through. */
export function optMask(v: unknown, what: string, len: number): Uint8Array | undefined {
  return v === undefined ? undefined : mask01(v, what, len);
}

/**
 * Requires a numeric array (plain array or typed array) of the given length. A typed array is returned as
 * is; a plain array is copied into a new Float64Array with each element read once, so a getter cannot
 * pass the check and then hand out another value, and a hole (read as undefined) is refused.
 */
export function numArray(v: unknown, what: string, len?: number): NumArray {
  if (!(Array.isArray(v) || isTypedArray(v))) fail('ERR_DTYPE', what, 'an array of numbers', v);
  const a = v as ArrayLike<unknown>;
  const n = a.length;
  if (len !== undefined && n !== len) fail('ERR_SHAPE', `${what}.length`, String(len), n);
  if (!Array.isArray(v)) return attached(v as ArrayBufferView, what) as unknown as NumArray;
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const x = a[i];
    if (typeof x !== 'number') fail('ERR_DTYPE', `${what}[${i}]`, 'a number', x);
    out[i] = x;
  }
  return out;
}

/** Requires every element to be finite (no NaN, no ±Infinity). */
export function allFinite(v: NumArray, what: string): void {
  for (let i = 0; i < v.length; i++) {
    if (!Number.isFinite(v[i])) fail('ERR_NON_FINITE', `${what}[${i}]`, 'a finite number', v[i]);
  }
}

/**
 * Validates packed-row offsets: Int32Array of length R+1, offsets[0] = 0, non-decreasing. When `n` is
 * given, offsets[R] must equal it. Returns R.
 */
export function offsets(v: unknown, what = 'offsets', n?: number): number {
  const o = i32(v, what);
  if (o.length < 1) fail('ERR_SHAPE', `${what}.length`, 'at least 1 (R+1 entries)', o.length);
  if (o[0] !== 0) fail('ERR_OFFSETS', `${what}[0]`, '0', o[0]);
  for (let r = 1; r < o.length; r++) {
    if (o[r]! < o[r - 1]!) fail('ERR_OFFSETS', `${what}[${r}]`, `>= ${what}[${r - 1}] = ${o[r - 1]}`, o[r]);
  }
  if (n !== undefined && o[o.length - 1] !== n) {
    fail('ERR_OFFSETS', `${what}[R]`, `the token count ${n}`, o[o.length - 1]);
  }
  return o.length - 1;
}

/**
 * A plain array's elements, each read once, into a new array; anything else (a typed array, a value the
 * checks will refuse) as it is. Called on every list argument before any argument is checked, so that
 * the caller's getters and Proxy traps have all run before a check: none can then detach, shrink or
 * change an array that already passed. `length` is read once; a hole reads as undefined.
 */
export function readList(x: unknown): unknown {
  if (!Array.isArray(x)) return x;
  const n = x.length;
  const out = new Array<unknown>(n);
  for (let i = 0; i < n; i++) out[i] = x[i];
  return out;
}

/** The most elements a list argument (tensors, partial statistics) may have; the addon has the same bound. */
export const MAX_LIST_LENGTH = 2 ** 20;

/**
 * An array of at most {@link MAX_LIST_LENGTH} elements (a sparse array of length 2^30 is refused at
 * once instead of being walked).
 */
export function list(v: unknown, what: string, expected: string): unknown[] {
  return list_(v, what, expected);
}

function list_(v: unknown, what: string, expected: string): unknown[] {
  if (!Array.isArray(v)) fail('ERR_DTYPE', what, expected, v);
  const n = v.length;
  if (n > MAX_LIST_LENGTH) fail('ERR_SHAPE', `${what}.length`, `at most ${MAX_LIST_LENGTH}`, n);
  // a sparse array: its holes would be skipped by map / forEach and read as undefined elsewhere
  for (let i = 0; i < n; i++) if (!(i in v)) fail('ERR_DTYPE', `${what}[${i}]`, 'an element (not a hole of a sparse array)', undefined);
  return v;
}

/** The bounds of a number option (inclusive unless `minOpen` / `maxOpen`); `finite` also rejects ±Infinity. */
export interface NumRange { min?: number; max?: number; minOpen?: boolean; maxOpen?: boolean; int?: boolean; finite?: boolean }

/** A number option (never NaN) within the given bounds (see {@link NumRange}). */
export function numOpt(v: unknown, what: string, dflt: number, range: NumRange = {}): number {
  if (v === undefined) return dflt;
  if (typeof v !== 'number' || Number.isNaN(v)) fail('ERR_OPTION', what, 'a number', v);
  const { min, max, minOpen, maxOpen, int, finite } = range;
  const bad =
    (min !== undefined && (minOpen ? !(v > min) : !(v >= min))) ||
    (max !== undefined && (maxOpen ? !(v < max) : !(v <= max))) ||
    (finite === true && !Number.isFinite(v)) ||
    (int === true && !Number.isInteger(v));
  if (bad) fail('ERR_OPTION', what, numRule(range), v);
  return v;
}

/** What a number option with these bounds accepts, as the messages say it: "an integer >= 1 and <= 8". */
export function numRule({ min, max, minOpen, maxOpen, int, finite }: NumRange): string {
  const lo = min === undefined ? '' : `${minOpen ? '>' : '>='} ${min}`;
  const hi = max === undefined ? '' : `${maxOpen ? '<' : '<='} ${max}`;
  const kind = int ? 'an integer' : finite ? 'a finite number' : 'a number';
  return [kind, [lo, hi].filter(Boolean).join(' and ')].filter(Boolean).join(' ');
}

/** One of a fixed set of string options. */
export function enumOpt<T extends string>(v: unknown, what: string, allowed: readonly T[], dflt: T): T {
  if (v === undefined) return dflt;
  if (typeof v !== 'string' || !(allowed as readonly string[]).includes(v)) {
    fail('ERR_OPTION', what, `one of ${allowed.map((a) => `'${a}'`).join(', ')}`, v);
  }
  return v as T;
}

/** Rejects keys that are not in `known` (catches typos such as `clip_low` for `clipLow`). */
export function knownKeys(obj: object | undefined, what: string, known: readonly string[]): void {
  if (obj === undefined) return;
  if (typeof obj !== 'object' || obj === null) fail('ERR_OPTION', what, 'an object', obj);
  for (const k of Object.keys(obj)) {
    if (!known.includes(k)) {
      throw new GearError('ERR_OPTION', `${what}: unknown option '${k}' (known: ${known.join(', ')})`);
    }
  }
}

/**
 * Optional mask whose values (0/1) the native kernel checks in its own pass over the tokens: here only
 * the type and length. `undefined` passes through.
 */
export function optMaskShape(v: unknown, what: string, len: number): Uint8Array | undefined {
  if (v === undefined) return undefined;
  if (!isTyped(v, Uint8Array)) fail('ERR_DTYPE', what, 'Uint8Array', v);
  if (v.length !== len) fail('ERR_SHAPE', `${what}.length`, String(len), v.length);
  return attached(v, what);
}

/**
 * True when `x` is a typed array of class `C`. A Proxy around a typed array passes `instanceof` but
 * every read of its `length` throws a TypeError; `ArrayBuffer.isView` is false for a Proxy, so one is
 * refused here like any other non-typed-array.
 */
export function isTyped<T extends ArrayBufferView>(x: unknown, C: abstract new (...args: never[]) => T): x is T {
  return ArrayBuffer.isView(x) && x instanceof C;
}

/**
 * Requires the single arguments object of a function taking one (`fn({ ... })`): not missing, null, an
 * array or a primitive (whose fields would throw a TypeError on the first read). Returns it as is.
 */
export function argsObject<T extends object>(a: T | unknown, what: string): T {
  if (typeof a !== 'object' || a === null || Array.isArray(a)) fail('ERR_OPTION', what, 'an arguments object', a);
  return a as T;
}

/** A `what` (name used in error messages) argument: a string, or `dflt` when undefined. */
export function nameArg(w: unknown, dflt: string): string {
  if (w === undefined) return dflt;
  if (typeof w !== 'string') fail('ERR_OPTION', 'what', 'a string (a name for error messages)', w);
  return w;
}

/**
 * The `signal` of an async call's options object (`undefined`, or an object whose `signal` is read
 * once); `null` or a primitive is `ERR_OPTION`. The signal itself is checked where it is used.
 */
export function signalOpt(opts: unknown, what: string): AbortSignal | undefined {
  if (opts === undefined) return undefined;
  if (opts === null || typeof opts !== 'object') fail('ERR_OPTION', what, 'an options object ({ signal? })', opts);
  return (opts as { signal?: AbortSignal }).signal;
}

/**
 * A numeric array (plain array or typed array) as a Float64Array: a Float64Array as is, anything else
 * copied (see {@link numArray}). `len` requires that length.
 */
export function numbers(v: unknown, what: string, len?: number): Float64Array {
  const a = numArray(v, what, len);
  return isTyped(a, Float64Array) ? a : Float64Array.from(a);
}

/**
 * A list of Float32Array (gradients, parameters): each element read once into a new dense array (a
 * hole reads as undefined and is refused), every one a Float32Array. The copy is what the caller uses.
 */
export function f32List(x: unknown, what: string): Float32Array[] {
  const list = list_(x, what, 'an array of Float32Array');
  const out: Float32Array[] = [];
  for (let i = 0; i < list.length; i++) out.push(f32(list[i], `${what}[${i}]`));
  return out;
}
