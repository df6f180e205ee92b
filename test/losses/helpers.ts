// Shared helpers for the loss tests: padded peer tensors -> packed rows, seeded random batches,
// central finite differences in float64.
import { expect } from 'vitest';
import * as rl from '../../ts/index.js';
import { mulberry32 } from '../../ts/core/prng.js';
import { data, type Tensor } from '../helpers/peer.js';

/** A (B, T) peer tensor as packed rows of equal length T. */
export function padded(t: Tensor): { off: Int32Array; B: number; T: number } {
  const [B, T] = t.shape as [number, number];
  const off = new Int32Array(B + 1);
  for (let i = 0; i <= B; i++) off[i] = i * T;
  return { off, B, T };
}

export const f64 = (t: unknown) => Float64Array.from(data(t) as number[]);
export const u8 = (t: unknown) => Uint8Array.from((data(t) as number[]).map((x) => (x !== 0 ? 1 : 0)));
export const scalar = (t: unknown) => (data(t) as number[])[0]!;

/** Seeded uniform [0, 1) generator for test data (the library's mulberry32). */
export const rng: (seed: number) => () => number = mulberry32;

/** A random packed batch: rows of length 0..maxLen, mask density ~0.8, per-row advantages broadcast. */
export function randomBatch(seed: number, rows: number, maxLen = 9, spread = 0.3) {
  const r = rng(seed);
  const off = new Int32Array(rows + 1);
  for (let i = 0; i < rows; i++) off[i + 1] = off[i]! + Math.floor(r() * (maxLen + 1));
  const n = off[rows]!;
  const lp = new Float64Array(n);
  const old = new Float64Array(n);
  const adv = new Float64Array(n);
  const mask = new Uint8Array(n);
  const rowAdv = new Float64Array(rows);
  for (let i = 0; i < rows; i++) {
    rowAdv[i] = r() * 4 - 2;
    for (let t = off[i]!; t < off[i + 1]!; t++) {
      old[t] = -0.1 - r() * 2.5;
      lp[t] = old[t]! + (r() * 2 - 1) * spread;
      adv[t] = rowAdv[i]!;
      mask[t] = r() < 0.8 ? 1 : 0;
    }
  }
  return { off, n, lp, old, adv, mask, rowAdv };
}

/** Central finite difference of f at x (float64), step h. */
export function fdGrad(f: (x: Float64Array) => number, x: Float64Array, h = 1e-6): Float64Array {
  const g = new Float64Array(x.length);
  for (let i = 0; i < x.length; i++) {
    const xp = Float64Array.from(x); xp[i] = xp[i]! + h;
    const xm = Float64Array.from(x); xm[i] = xm[i]! - h;
    g[i] = (f(xp) - f(xm)) / (2 * h);
  }
  return g;
}

/** Expects a thrown GearError with the given code. */
export function expectGearError(f: () => unknown, code: string): void {
  try {
    f();
  } catch (e) {
    expect(e, String(e)).toBeInstanceOf(rl.GearError);
    expect((e as rl.GearError).code, (e as Error).message).toBe(code);
    expect((e as Error).message).toMatch(/expected|unknown option/);
    return;
  }
  expect.fail(`did not throw (expected ${code})`);
}
