/**
 * The one path from a TypeScript wrapper to an async native call: buffer claims (`ERR_BUSY`) and
 * abort support.
 *
 * @internal
 * @module
 */
import { GearError } from './errors.js';
import { abortable } from './addon.js';

/** Options shared by the async forms. */
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

