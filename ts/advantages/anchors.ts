/**
 * Anchor-state keys for GiGPO's exact step grouping (verl-agent `to_hashable`): strings and numbers as
 * they are, arrays and typed arrays element-wise, plain objects as their sorted key/value pairs.
 *
 * Equality follows Python where JavaScript allows it: `1` and `1.0` are one state, `true` equals `1`
 * and `false` equals `0` (Python's `True == 1`), `-0` equals `0`. Deliberate differences, documented:
 * an object never equals an array of key/value pairs (Python's tuples would collide), and `NaN` equals
 * `NaN` (Python dictionaries only merge NaN states that are the same object).
 *
 * @module
 */
import { GearError, fail } from '../core/errors.js';
import * as v from '../core/validate.js';

/**
 * A JSON-like anchor state: a string, number, boolean, null, array, typed array or plain object.
 *
 * @category Advantages
 */
export type AnchorState = string | number | boolean | null | readonly AnchorState[] | ArrayLike<number> | { [key: string]: AnchorState };

const MAX_DEPTH = 64;

function ser(x: unknown, what: string, depth: number, out: string[]): void {
  if (depth > MAX_DEPTH) {
    throw new GearError('ERR_DTYPE', `${what}: expected a JSON-like value nested at most ${MAX_DEPTH} deep, got deeper (or circular) data`);
  }
  switch (typeof x) {
    case 'string':
      out.push(JSON.stringify(x));
      return;
    case 'number':
      out.push(x === 0 ? '0' : String(x));
      return;
    case 'boolean':
      out.push(x ? '1' : '0');
      return;
    case 'object': {
      if (x === null) {
        out.push('null');
        return;
      }
      if (Array.isArray(x) || (ArrayBuffer.isView(x) && !(x instanceof DataView))) {
        const a = x as ArrayLike<unknown>;
        out.push('[');
        for (let i = 0; i < a.length; i++) {
          if (i) out.push(',');
          ser(a[i], `${what}[${i}]`, depth + 1, out);
        }
        out.push(']');
        return;
      }
      const proto = Object.getPrototypeOf(x);
      if (proto !== Object.prototype && proto !== null) break;
      const keys = Object.keys(x).sort();
      out.push('{');
      keys.forEach((k, i) => {
        if (i) out.push(',');
        out.push(JSON.stringify(k), ':');
        ser((x as Record<string, unknown>)[k], `${what}.${k}`, depth + 1, out);
      });
      out.push('}');
      return;
    }
    default:
      break;
  }
  fail('ERR_DTYPE', what, 'a string, number, boolean, null, array or plain object', x);
}

/**
 * Canonical key of a JSON-like anchor state (see the module notes for the equality rules). Strings
 * and numbers are their own keys; every other value becomes a canonical serialisation tagged so that
 * it can never equal a string key.
 *
 * @param x the state
 * @param what name used in error messages
 * @returns a Map key
 * @example
 * ```ts
 * import { anchorKey } from 'gear-rl/similarity';
 *
 * const a = anchorKey({ room: 'hall', items: [1, 2] });
 * const b = anchorKey({ items: [1, 2], room: 'hall' });
 * console.log(JSON.stringify(a) === JSON.stringify(b)); // true: key order does not matter
 * ```
 * @category Advantages
 */
export function anchorKey(x: unknown, what?: string): string | number | { s: string } {
  if (typeof x === 'string') return x;
  if (typeof x === 'number') return x === 0 ? 0 : x;
  if (typeof x === 'boolean') return x ? 1 : 0;
  const out: string[] = [];
  ser(x, v.nameArg(what, 'anchor'), 0, out);
  return { s: out.join('') };
}

/**
 * Dense anchor ids: rows with equal anchor states (see the module notes) get the same id.
 *
 * @param anchors one state per row
 * @param what name used in error messages
 * @returns the id of each row's state, numbered in order of first appearance
 * @example
 * ```ts
 * import { anchorIds } from 'gear-rl/similarity';
 *
 * console.log(anchorIds(['s0', { x: 1 }, 's0', { x: 1 }, [1, 2]])); // Int32Array [0, 1, 0, 1, 2]
 * ```
 * @category Advantages
 */
export function anchorIds(anchors: ArrayLike<unknown>, what?: string): Int32Array {
  const w = v.nameArg(what, 'anchors');
  if (!v.isTypedArray(anchors)) v.list(anchors, w, 'an array of anchor states');
  else v.attached(anchors, w);
  // each state read once: the hashing below compares states with earlier ones again
  const states = v.readList(anchors) as ArrayLike<unknown>;
  return sampledIds(states, w) ?? mapIds(states, w);
}

// Sampled string hashing: at most SAMPLE characters spread over the string plus its last SAMPLE.
const SAMPLE = 32;

/**
 * A hash of a string's length and at most 2·SAMPLE of its characters. Text states are typically
 * hundreds of characters long and arrive as fresh strings, whose full hash (what a `Map` computes)
 * costs more than everything else in exact grouping; equal strings still get equal hashes, and
 * every hash match is confirmed by comparing the strings themselves.
 */
function sampleHash(s: string): number {
  const n = s.length;
  let h = Math.imul(n, 0x9e3779b1);
  if (n <= 2 * SAMPLE) {
    for (let j = 0; j < n; j++) h = Math.imul(h ^ s.charCodeAt(j), 0x85ebca6b) ^ (h >>> 13);
    return h;
  }
  const tail = n - SAMPLE;
  const step = tail / SAMPLE;
  for (let k = 0; k < SAMPLE; k++) h = Math.imul(h ^ s.charCodeAt((k * step) | 0), 0x85ebca6b) ^ (h >>> 13);
  for (let j = tail; j < n; j++) h = Math.imul(h ^ s.charCodeAt(j), 0x85ebca6b) ^ (h >>> 13);
  return h;
}

/**
 * {@link anchorIds} with string states in an open-addressing table keyed by {@link sampleHash}
 * (other states go through the maps of {@link mapIds}). Distinct strings that agree on every sampled
 * character collide; when that happens too often (e.g. fixed-size text grids that differ in a cell
 * or two) this gives up and returns null, so the cost stays bounded and the caller hashes fully.
 */
function sampledIds(anchors: ArrayLike<unknown>, what: string): Int32Array | null {
  const n = anchors.length;
  let cap = 16;
  while (cap < 2 * n) cap *= 2;
  const mask = cap - 1;
  const hashes = new Int32Array(cap);
  const rowOf = new Int32Array(cap).fill(-1);
  const idOf = new Int32Array(cap);
  const ids = new Int32Array(n);
  let prim: Map<string | number, number> | undefined;
  let structured: Map<string, number> | undefined;
  let next = 0;
  let collisions = 0;
  for (let i = 0; i < n; i++) {
    const x = anchors[i];
    if (typeof x !== 'string') {
      const k = anchorKey(x, `${what}[${i}]`);
      let id: number | undefined;
      if (typeof k === 'object') {
        structured ??= new Map();
        id = structured.get(k.s);
        if (id === undefined) structured.set(k.s, (id = next++));
      } else {
        prim ??= new Map();
        id = prim.get(k);
        if (id === undefined) prim.set(k, (id = next++));
      }
      ids[i] = id;
      continue;
    }
    const h = sampleHash(x);
    let slot = (h ^ (h >>> 16)) & mask;
    for (;;) {
      const r = rowOf[slot]!;
      if (r < 0) {
        rowOf[slot] = i;
        hashes[slot] = h;
        idOf[slot] = next;
        ids[i] = next++;
        break;
      }
      if (hashes[slot] === h) {
        if (anchors[r] === x) {
          ids[i] = idOf[slot]!;
          break;
        }
        if (++collisions > 64 + (i >> 3)) return null;
      }
      slot = (slot + 1) & mask;
    }
  }
  return ids;
}

/** {@link anchorIds} with every state in a `Map` (full string hashing). */
function mapIds(anchors: ArrayLike<unknown>, what: string): Int32Array {
  const prim = new Map<string | number, number>();
  const structured = new Map<string, number>();
  const ids = new Int32Array(anchors.length);
  let next = 0;
  for (let i = 0; i < anchors.length; i++) {
    const x = anchors[i];
    if (typeof x === 'string') {
      // Hot path: text states.
      let id = prim.get(x);
      if (id === undefined) {
        id = next++;
        prim.set(x, id);
      }
      ids[i] = id;
      continue;
    }
    const k = anchorKey(x, `${what}[${i}]`);
    const map = typeof k === 'object' ? structured : prim;
    const key = typeof k === 'object' ? k.s : k;
    let id = (map as Map<string | number, number>).get(key);
    if (id === undefined) {
      id = next++;
      (map as Map<string | number, number>).set(key, id);
    }
    ids[i] = id;
  }
  return ids;
}
