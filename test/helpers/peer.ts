// Reads the golden vectors in test/fixtures/peer-vectors/ (their README names the peer, commit, function
// and seed behind each file) and compares arrays with the tolerances given there.
import { readFileSync, existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';

const here = dirname(fileURLToPath(import.meta.url));
/** The golden vectors, relative to this file. */
export const PEER_DIR = resolve(here, '../fixtures/peer-vectors');

export type Tensor = { dtype: string; shape: number[]; data: (number | string)[] };
export type PeerCase = {
  name: string;
  function: string;
  params: Record<string, any>;
  inputs: Record<string, any>;
  outputs?: Record<string, any>;
  error?: string;
};
export type PeerFile = { description: string; functions: string[]; cases: PeerCase[] };

function decodeNum(x: unknown): unknown {
  if (x === 'NaN') return NaN;
  if (x === 'Infinity') return Infinity;
  if (x === '-Infinity') return -Infinity;
  return x;
}

/** True for `{dtype, shape, data}` tensor objects. */
export function isTensor(v: unknown): v is Tensor {
  return typeof v === 'object' && v !== null && 'dtype' in v && 'shape' in v && 'data' in v;
}

/** Decodes a tensor's data to numbers (non-finite strings mapped), or returns strings for object dtype. */
export function data(t: Tensor | unknown): any[] {
  if (!isTensor(t)) throw new Error(`not a tensor: ${JSON.stringify(t)?.slice(0, 80)}`);
  if (t.dtype === 'object') return t.data;
  return t.data.map(decodeNum) as number[];
}

/** Loads one peer-vector file; fails loudly when it is missing (the vectors are required, never optional). */
export function loadPeer(file: string): PeerFile {
  const p = resolve(PEER_DIR, file);
  if (!existsSync(p)) throw new Error(`peer vectors not found at ${p}`);
  return JSON.parse(readFileSync(p, 'utf8')) as PeerFile;
}

/**
 * Element-wise comparison with |a - e| <= atol + rtol * |e|; NaN matches NaN, infinities must match
 * exactly. Reports the first mismatching index.
 */
export function expectClose(
  actual: ArrayLike<number>, expected: ArrayLike<number>,
  { rtol = 1e-12, atol = 0, what = '' }: { rtol?: number; atol?: number; what?: string } = {},
): void {
  expect(actual.length, `${what} length`).toBe(expected.length);
  for (let i = 0; i < expected.length; i++) {
    const a = actual[i]!;
    const e = expected[i]!;
    if (Number.isNaN(e)) {
      if (!Number.isNaN(a)) expect.fail(`${what}[${i}]: expected NaN, got ${a}`);
      continue;
    }
    if (!Number.isFinite(e)) {
      if (a !== e) expect.fail(`${what}[${i}]: expected ${e}, got ${a}`);
      continue;
    }
    const tol = atol + rtol * Math.abs(e);
    if (!(Math.abs(a - e) <= tol)) {
      expect.fail(`${what}[${i}]: expected ${e}, got ${a} (|diff| ${Math.abs(a - e)} > tol ${tol})`);
    }
  }
}

/** Scalar form of {@link expectClose}. */
export function expectCloseScalar(a: number, e: number, opts: { rtol?: number; atol?: number; what?: string } = {}): void {
  expectClose([a], [e], opts);
}

/** A peer case's (B, T) rollout-correction inputs as packed rows of T tokens (padding kept, masked). */
export function paddedRollout(c: PeerCase) {
  const [B, T] = c.inputs.old_log_prob.shape as [number, number];
  const old = Float64Array.from(data(c.inputs.old_log_prob));
  const roll = Float64Array.from(data(c.inputs.rollout_log_prob));
  const mask = Uint8Array.from(data(c.inputs.response_mask), (x: number) => (x ? 1 : 0));
  const offsets = Int32Array.from({ length: B + 1 }, (_, i) => i * T);
  return { B, T, old, roll, mask, offsets };
}

/** The same batch without its masked tokens: rows keep their order (an all-masked row becomes empty). */
export function packedRollout(p: ReturnType<typeof paddedRollout>) {
  const idx: number[] = [];
  const offsets = [0];
  for (let i = 0; i < p.B; i++) {
    for (let t = i * p.T; t < (i + 1) * p.T; t++) if (p.mask[t]) idx.push(t);
    offsets.push(idx.length);
  }
  return { idx, old: Float64Array.from(idx, (t) => p.old[t]!), roll: Float64Array.from(idx, (t) => p.roll[t]!), offsets: Int32Array.from(offsets) };
}
