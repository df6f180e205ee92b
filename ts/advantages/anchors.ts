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
import { GearError } from '../errors.js';

/** A JSON-like anchor state: a string, number, boolean, null, array, typed array or plain object. */
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
  const kind = x === undefined ? 'undefined' : typeof x === 'object' ? (x as object).constructor?.name ?? 'object' : typeof x;
  throw new GearError('ERR_DTYPE', `${what}: expected a string, number, boolean, null, array or plain object, got ${kind}`);
}

/**
 * Canonical key of a JSON-like anchor state (see the module notes for the equality rules). Strings
 * and numbers are their own keys; every other value becomes a canonical serialisation tagged so that
 * it can never equal a string key.
 *
 * @param x the state
 * @param what name used in error messages
 * @returns a Map key
 */
export function anchorKey(x: unknown, what = 'anchor'): string | number | { s: string } {
  if (typeof x === 'string') return x;
  if (typeof x === 'number') return x === 0 ? 0 : x;
  if (typeof x === 'boolean') return x ? 1 : 0;
  const out: string[] = [];
  ser(x, what, 0, out);
  return { s: out.join('') };
}

/**
 * Dense anchor ids: rows with equal anchor states (see the module notes) get the same id.
 *
 * @param anchors one state per row
 * @param what name used in error messages
 * @returns the id of each row's state, numbered in order of first appearance
 */
export function anchorIds(anchors: ArrayLike<unknown>, what = 'anchors'): Int32Array {
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
