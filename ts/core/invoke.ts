/**
 * The one path from a TypeScript wrapper to a native function: buffer claims (`ERR_BUSY`) and abort
 * support. Async work reads and writes the caller's arrays in place after the call returns; the addon
 * marks their ArrayBuffers untransferable before the work starts (native/src/addon/ownership.h,
 * docs/ownership.md), so a later transfer copies them instead of freeing memory under the work.
 *
 * An op is declared once, next to its native contract, with {@link asyncOp} or {@link syncOp}: its
 * name in the addon and the parameters it writes. The claims of a call are derived from the parameter
 * object it passes: every typed array in it (nested objects and lists included) is read, except those
 * under a declared write path, which are written. No call site lists its buffers, so no op can leave
 * one out.
 *
 * @internal
 * @module
 */
import { GearError } from './errors.js';
import { native } from './addon.js';
import type { AsyncControl, AsyncOp, NativeAddon } from './addon_types.js';

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
 * A parameter an op writes, by its path in the parameter object: `'out'` (the property and every array
 * in it), `'logits.data'`; or `[path, flag]`: written when the boolean parameter `flag` is true (an
 * `ERR_BUSY` message then names it `path (flag)`).
 */
export type WritePath = string | readonly [path: string, flag: string];

/** What {@link asyncOp} and {@link syncOp} declare about an op. */
export interface NativeOpSpec {
  /** The parameters the op writes; every other typed array in its parameter object is read. */
  writes?: readonly WritePath[];
}

/** A parameter written when the boolean parameter `flag` is true. */
class When {
  constructor(readonly flag: string) {}
}
/** The write paths as a tree of property names: `true` (written), or {@link When} it is written. */
type WriteTree = { [key: string]: WriteTree | true | When };

function writeTree(op: string, writes: readonly WritePath[]): WriteTree {
  const root: WriteTree = {};
  for (const w of writes) {
    const [path, flag] = typeof w === 'string' ? [w, undefined] : w;
    const keys = path.split('.');
    let node = root;
    keys.forEach((k, i) => {
      const at = node[k];
      if (k === '' || at === true || at instanceof When || (i === keys.length - 1 && at !== undefined)) {
        throw new GearError('ERR_NATIVE', `${op}: expected distinct write paths, got '${path}'`);
      }
      if (i === keys.length - 1) node[k] = flag === undefined ? true : new When(flag);
      else node = (node[k] ??= {}) as WriteTree;
    });
  }
  return root;
}

/** The typed arrays of one call: each with the name its messages use and whether the call writes it. */
interface Claims {
  views: ArrayBufferView[];
  names: string[];
  written: boolean[];
}

/**
 * Every typed array in `v` (the parameter object, or a value in it), in property order; `node`: the
 * write paths below `name`, `write`: whether `v` is written. Parameter objects are built by the wrappers
 * from checked values (plain objects, lists, typed arrays), so reading them runs no user code.
 */
function collect(root: Record<string, unknown>, v: unknown, name: string, node: WriteTree | undefined, write: boolean,
  c: Claims): void {
  if (typeof v !== 'object' || v === null) return;
  if (ArrayBuffer.isView(v)) {
    c.views.push(v);
    c.names.push(name);
    c.written.push(write);
    return;
  }
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) collect(root, v[i], `${name}[${i}]`, node, write, c);
    return;
  }
  for (const k in v) {
    if (name === '' && (k === 'async' || k === 'abort')) continue;  // the call's own switch and abort flag
    const x = (v as Record<string, unknown>)[k];
    const key = name === '' ? k : `${name}.${k}`;
    const sub = node?.[k];
    if (sub === undefined || sub === true) collect(root, x, key, undefined, write || sub === true, c);
    else if (sub instanceof When) {
      const on = root[sub.flag] === true;
      collect(root, x, on ? `${key} (${sub.flag})` : key, undefined, write || on, c);
    } else collect(root, x, key, sub, write, c);
  }
}

/**
 * Rejects a call that would write a buffer a pending async call reads or writes, or read a buffer a
 * pending async call writes (`ERR_BUSY`). For async calls, marks the buffers until `release` is called.
 */
function claim(op: DeclaredOp, params: object, isAsync: boolean): () => void {
  // Nothing pending: no sync call can collide with anything (the common case, and the cheapest).
  if (!isAsync && pendingWrites.size === 0 && pendingReads.size === 0) return () => {};
  const c: Claims = { views: [], names: [], written: [] };
  collect(params as Record<string, unknown>, params, '', op.tree, false, c);
  const { views, names, written } = c;
  for (let i = 0; i < views.length; i++) {
    const b = views[i]!.buffer;
    if (written[i] && (pendingWrites.has(b) || pendingReads.has(b))) {
      throw new GearError('ERR_BUSY', `${names[i]}: expected a buffer not in use by a pending async call, got one in use`);
    }
  }
  for (let i = 0; i < views.length; i++) {
    if (!written[i] && pendingWrites.has(views[i]!.buffer)) {
      throw new GearError('ERR_BUSY', `${names[i]}: expected a buffer not being written by a pending async call, got one in use`);
    }
  }
  if (!isAsync) return () => {};
  // Async work reads and writes these buffers in place after this call returns: a resizable
  // ArrayBuffer could shrink under it. (A growable SharedArrayBuffer only grows, which is safe.) The
  // addon refuses them too; refusing here names the argument.
  for (let i = 0; i < views.length; i++) {
    const b = views[i]!.buffer as ArrayBuffer & { resizable?: boolean };
    if (b.resizable === true && !(b instanceof SharedArrayBuffer)) {
      throw new GearError('ERR_DTYPE', `${names[i]}: expected a fixed-length ArrayBuffer for an async call (the work reads it in place), got a resizable one`);
    }
  }
  const buffers = views.map((x) => x.buffer);
  buffers.forEach((b, i) => bump(written[i] ? pendingWrites : pendingReads, b, 1));
  let released = false;
  return () => {
    if (released) return;
    released = true;
    buffers.forEach((b, i) => bump(written[i] ? pendingWrites : pendingReads, b, -1));
  };
}

/**
 * Runs an abortable native call: creates the shared abort flag the kernel polls between row blocks and
 * sets it when `signal` fires. Rejects with `ERR_ABORTED` at once if the signal already fired.
 */
async function abortable<T>(signal: AbortSignal | undefined, call: (flag: Int32Array | null) => Promise<T>): Promise<T> {
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

// ---- the ops ----

/** The addon's functions by name (the CUDA module's may be absent). */
type Fn<K extends keyof NativeAddon> = NonNullable<NativeAddon[K]>;
/** The parameter object of native function `K` (an {@link AsyncOp}'s last signature takes it whole). */
export type ParamsOf<K extends keyof NativeAddon> = Fn<K> extends (params: infer P) => unknown ? P : never;
/** The result of native function `K` (an {@link AsyncOp}'s resolved result). */
export type ResultOf<K extends keyof NativeAddon> = Fn<K> extends (params: never) => infer R ? Awaited<R> : never;
/** The addon's functions with an async form. */
export type AsyncOpName = { [K in keyof NativeAddon]-?: Fn<K> extends AsyncOp<never, unknown> ? K : never }[keyof NativeAddon];

/** A native function called through the one path: its sync form. */
export interface NativeOp<P, R> {
  /** Its name in the addon. */
  readonly name: string;
  /** The parameters it writes. */
  readonly writes: readonly WritePath[];
  /** Whether it has an async form. */
  readonly async: boolean;
  /** Refuses (`ERR_BUSY`) a buffer of `params` a pending async call would race with, then calls. */
  call(params: P): R;
}
/** A native function with an async form. */
export interface AsyncNativeOp<P, R> extends NativeOp<P, R> {
  /**
   * The same `ERR_BUSY` rule, then `params` runs with `async: true` and the abort flag `signal` sets
   * (`ERR_ABORTED` at once when it has already fired); its buffers stay claimed until the call
   * settles. The native call marks every ArrayBuffer it reads or writes untransferable (permanently:
   * later transfers copy it).
   */
  callAsync(params: P, signal: AbortSignal | undefined): Promise<R>;
}

interface DeclaredOp {
  name: string;
  writes: readonly WritePath[];
  tree: WriteTree;
  async: boolean;
}

const ops = new Map<string, NativeOp<never, unknown>>();

function declare(name: string, spec: NativeOpSpec, isAsync: boolean): AsyncNativeOp<never, unknown> {
  if (ops.has(name)) throw new GearError('ERR_NATIVE', `${name}: expected one declaration of a native op, got two`);
  const writes = Object.freeze([...(spec.writes ?? [])]);
  const d: DeclaredOp = { name, writes, tree: writeTree(name, writes), async: isAsync };
  const fn = () => (native as unknown as Record<string, (p: unknown) => unknown>)[name]!;
  const op: AsyncNativeOp<object, unknown> = {
    name, writes, async: isAsync,
    call(params) {
      claim(d, params, false);
      return fn()(params);
    },
    async callAsync(params, signal) {
      const release = claim(d, params, true);  // throws inside the async function: the Promise rejects
      try {
        return await abortable(signal, (abort) => {
          const p = params as AsyncControl;
          p.async = true;
          p.abort = abort;
          return fn()(p) as Promise<unknown>;
        });
      } finally {
        release();
      }
    },
  };
  ops.set(name, op as NativeOp<never, unknown>);
  return op as AsyncNativeOp<never, unknown>;
}

/**
 * Declares a native function with a sync and an async form (`AsyncOp` in its contract), once, next to
 * the contract: `writes` names the parameters it writes.
 */
export function asyncOp<K extends AsyncOpName>(name: K, spec: NativeOpSpec = {}): AsyncNativeOp<ParamsOf<K>, ResultOf<K>> {
  return declare(name, spec, true) as AsyncNativeOp<ParamsOf<K>, ResultOf<K>>;
}

/** Declares a native function with a sync form only (see {@link asyncOp}). */
export function syncOp<K extends keyof NativeAddon>(name: K, spec: NativeOpSpec = {}): NativeOp<ParamsOf<K>, ResultOf<K>> {
  return declare(name, spec, false) as NativeOp<ParamsOf<K>, ResultOf<K>>;
}

/** Every op declared so far, by name (the tests walk them). */
export function nativeOps(): ReadonlyMap<string, NativeOp<never, unknown>> {
  return ops;
}
