/**
 * The one path from a TypeScript wrapper to an async native call: buffer claims (`ERR_BUSY`) and
 * abort support. Async work reads and writes the caller's arrays in place after the call returns; the
 * addon marks their ArrayBuffers untransferable before the work starts (native/src/core/ownership.h,
 * docs/ownership.md), so a later transfer copies them instead of freeing memory under the work.
 *
 * @internal
 * @module
 */
import { GearError } from './errors.js';

/**
 * Options shared by the async forms.
 *
 * @category Backend
 */
export interface AsyncOptions {
  /** Aborting rejects the Promise with `ERR_ABORTED`. */
  signal?: AbortSignal;
}

// ---- buffers in use by pending async calls (ERR_BUSY) ----
const pendingWrites = new Map<ArrayBufferLike, number>();
const pendingReads = new Map<ArrayBufferLike, number>();

function bump(m: Map<ArrayBufferLike, number>, b: ArrayBufferLike, d: number): void {
  const n = (m.get(b) ?? 0) + d;
  if (n <= 0) m.delete(b);
  else m.set(b, n);
}

/**
 * Rejects a call that would write a buffer a pending async call reads or writes, or read a buffer a
 * pending async call writes (`ERR_BUSY`). For async calls, marks the buffers until `release` is called.
 * @internal
 */
export function claimBuffers(
  reads: [string, ArrayBufferView | undefined | null][],
  writes: [string, ArrayBufferView | undefined | null][],
  isAsync: boolean,
): () => void {
  for (const [what, w] of writes) {
    if (w && (pendingWrites.has(w.buffer) || pendingReads.has(w.buffer))) {
      throw new GearError('ERR_BUSY', `${what}: expected a buffer not in use by a pending async call, got one in use`);
    }
  }
  for (const [what, r] of reads) {
    if (r && pendingWrites.has(r.buffer)) {
      throw new GearError('ERR_BUSY', `${what}: expected a buffer not being written by a pending async call, got one in use`);
    }
  }
  if (!isAsync) return () => {};
  // Async work reads and writes these buffers in place after this call returns: a resizable
  // ArrayBuffer could shrink under it. (A growable SharedArrayBuffer only grows, which is safe.) The
  // addon refuses them too; refusing here names the argument.
  for (const [what, x] of [...reads, ...writes]) {
    if (x && (x.buffer as ArrayBuffer & { resizable?: boolean }).resizable === true && !(x.buffer instanceof SharedArrayBuffer)) {
      throw new GearError('ERR_DTYPE', `${what}: expected a fixed-length ArrayBuffer for an async call (the work reads it in place), got a resizable one`);
    }
  }
  const rb = reads.flatMap(([, r]) => (r ? [r.buffer] : []));
  const wb = writes.flatMap(([, w]) => (w ? [w.buffer] : []));
  rb.forEach((b) => bump(pendingReads, b, 1));
  wb.forEach((b) => bump(pendingWrites, b, 1));
  let released = false;
  return () => {
    if (released) return;
    released = true;
    rb.forEach((b) => bump(pendingReads, b, -1));
    wb.forEach((b) => bump(pendingWrites, b, -1));
  };
}

/** A buffer a call reads or writes, named for the `ERR_BUSY` message (null / undefined: none). */
export type Claim = [what: string, buffer: ArrayBufferView | undefined | null];

/** The buffers one native call reads and writes. */
export interface BufferUse {
  reads?: Claim[];
  writes?: Claim[];
}

/**
 * The sync path of every native op: refuses (`ERR_BUSY`) a buffer a pending async call would race
 * with, then calls.
 * @internal
 */
export function callSync<R>(use: BufferUse, call: () => R): R {
  claimBuffers(use.reads ?? [], use.writes ?? [], false);
  return call();
}

/**
 * The async path of every native op: the same `ERR_BUSY` rule, then the buffers stay claimed until the
 * call settles (a buffer in use rejects with `ERR_BUSY`); `signal` aborts (`ERR_ABORTED`, at once when
 * it has already fired), the native side polls the flag `call` receives. The native call marks every
 * ArrayBuffer it reads or writes untransferable (permanently: later transfers copy it).
 * @internal
 */
export function callAsync<R>(use: BufferUse, signal: AbortSignal | undefined,
  call: (abort: Int32Array | null) => Promise<R>): Promise<R> {
  let release: () => void;
  try {
    release = claimBuffers(use.reads ?? [], use.writes ?? [], true);
  } catch (e) {
    return Promise.reject(e); // an async op never throws synchronously
  }
  return runAsync(signal, release, call);
}

/**
 * Runs an abortable native call: creates the shared abort flag the kernel polls between row blocks and
 * sets it when `signal` fires. Rejects with `ERR_ABORTED` at once if the signal already fired.
 */
export async function abortable<T>(signal: AbortSignal | undefined, call: (flag: Int32Array | null) => Promise<T>): Promise<T> {
  if (signal === undefined) return call(null);
  if (!(signal instanceof AbortSignal)) {
    throw new GearError('ERR_OPTION', `signal: expected an AbortSignal, got ${typeof signal}`);
  }
  if (signal.aborted) throw new GearError('ERR_ABORTED', 'aborted: the AbortSignal had already fired');
  const flag = new Int32Array(1);
  const onAbort = () => Atomics.store(flag, 0, 1);
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    return await call(flag);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

/** Runs an async native call with buffer claims and abort support. @internal */
export async function runAsync<T>(
  signal: AbortSignal | undefined,
  release: () => void,
  call: (flag: Int32Array | null) => Promise<T>,
): Promise<T> {
  try {
    return await abortable(signal, call);
  } finally {
    release();
  }
}

