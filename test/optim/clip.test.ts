import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { BEST, ISAS, restoreBackendAfterAll } from '../helpers/isa.js';
import { bits, clone, randomTensors } from './reference.js';

const f = Math.fround;
const code = (c: string) => expect.objectContaining({ name: 'GearError', code: c });

restoreBackendAfterAll();

/** float64 reference norm: plain left-to-right sum of squares. */
function norm64(grads: Float32Array[]): number {
  let s = 0;
  for (const g of grads) for (const x of g) s += x * x;
  return Math.sqrt(s);
}

/** torch.nn.utils.clip_grad_norm_'s float32 tensor arithmetic applied to a given norm. */
function torchScale(grads: Float32Array[], norm: number, maxNorm: number): Float32Array[] {
  let coef = f(f(1 / f(f(norm) + f(1e-6))) * f(maxNorm));
  if (coef > 1) coef = 1;
  return grads.map((g) => g.map((x) => f(x * coef)));
}

describe('clipGradNorm', () => {
  const lengths = [0, 1, 7, 15, 33, 47, 65_536, 65_537, 65_551, 200_001, 3];
  it('returns the float64 norm and scales like torch when the norm exceeds maxNorm', () => {
    const g = randomTensors(1, lengths);
    const want = norm64(g);
    const scaled = torchScale(g, want, 10);
    const got = rl.clipGradNorm(g, 10);
    expect(Math.abs(got - want) / want).toBeLessThan(1e-12);
    expect(bits(g)).toEqual(bits(scaled));
    // the clipped gradients now have norm ~10 (just below: torch's 1e-6 in the denominator)
    const after = norm64(g);
    expect(after).toBeLessThanOrEqual(10 * (1 + 1e-6));
    expect(after).toBeGreaterThan(10 * (1 - 1e-5));
  });

  it('leaves gradients bit-identical when the norm is below maxNorm', () => {
    const g = randomTensors(2, [5, 6]);
    const before = bits(g);
    const n = rl.clipGradNorm(g, 1e6);
    expect(n).toBeCloseTo(norm64(g), 12);
    expect(bits(g)).toEqual(before);
    expect(rl.clipGradNorm(g, Infinity)).toBe(n);
    expect(bits(g)).toEqual(before);
  });

  it('maxNorm 0 zeroes the gradients; an empty list has norm 0', () => {
    const g = randomTensors(3, [4]);
    expect(rl.clipGradNorm(g, 0)).toBeGreaterThan(0);
    expect(g[0]!.every((x) => x === 0)).toBe(true);
    expect(rl.clipGradNorm([], 1)).toBe(0);
    expect(rl.clipGradNorm([new Float32Array(0)], 1)).toBe(0);
  });

  it('norm and clipped gradients are bit-identical for 1, 2, 3, 8 threads and every ISA', () => {
    const base = randomTensors(4, [1_000_003, 17, 131_072, 5]);
    const results: string[] = [];
    const configs: [number, rl.Isa][] = [[1, BEST], [2, BEST], [3, BEST], [8, BEST], ...ISAS.map((isa, i): [number, rl.Isa] => [2 + (i % 2), isa])];
    for (const [t, isa] of configs) {
      rl.setNumThreads(t);
      rl.setIsa(isa);
      const g = clone(base);
      const n = rl.clipGradNorm(g, 5);
      results.push(JSON.stringify([n, rl.gradNorm(base), bits(g).map((b) => b.reduce((h, x) => (h * 31 + x) >>> 0, 7))]));
    }
    expect(new Set(results).size).toBe(1);
    expect(Math.abs(JSON.parse(results[0]!)[0] - norm64(base)) / norm64(base)).toBeLessThan(1e-12);
  });

  it('large values do not overflow the float64 accumulator; tiny values do not underflow', () => {
    expect(rl.gradNorm([Float32Array.of(3e38, 3e38)])).toBeCloseTo(Math.sqrt(2) * f(3e38), -30);
    expect(rl.gradNorm([Float32Array.of(1e-30, 1e-30)])).toBeCloseTo(Math.sqrt(2) * f(1e-30), 40);
  });

  it('non-finite norm: ERR_NON_FINITE and gradients untouched by default', () => {
    for (const bad of [NaN, Infinity, -Infinity]) {
      const g = [Float32Array.of(1, 2), Float32Array.of(bad, 3)];
      const before = bits(g);
      expect(() => rl.clipGradNorm(g, 1)).toThrow(code('ERR_NON_FINITE'));
      expect(() => rl.clipGradNorm(g, 1, { errorIfNonfinite: true })).toThrow(code('ERR_NON_FINITE'));
      expect(bits(g)).toEqual(before);
    }
  });

  it('errorIfNonfinite false: PyTorch behaviour (inf norm zeroes finite entries, NaN norm poisons all)', () => {
    const gi = [Float32Array.of(1, -2), Float32Array.of(Infinity, 3)];
    expect(rl.clipGradNorm(gi, 1, { errorIfNonfinite: false })).toBe(Infinity);
    expect(Object.is(gi[0]![0], 0) && Object.is(gi[0]![1], -0) && gi[1]![1] === 0).toBe(true);
    expect(Number.isNaN(gi[1]![0]!)).toBe(true); // inf * 0
    const gn = [Float32Array.of(1, NaN)];
    expect(Number.isNaN(rl.clipGradNorm(gn, 1, { errorIfNonfinite: false }))).toBe(true);
    expect(Number.isNaN(gn[0]![0]!)).toBe(true);
  });

  it('bad input -> GearError, gradients untouched', () => {
    const g = randomTensors(5, [3, 2]);
    const before = bits(g);
    expect(() => rl.clipGradNorm(g, -1)).toThrow(code('ERR_OPTION'));
    expect(() => rl.clipGradNorm(g, NaN)).toThrow(code('ERR_OPTION'));
    expect(() => rl.clipGradNorm(g, '1' as unknown as number)).toThrow(code('ERR_OPTION'));
    expect(() => rl.clipGradNorm([g[0]!, new Float64Array(2) as unknown as Float32Array], 1)).toThrow(code('ERR_DTYPE'));
    expect(() => rl.clipGradNorm(g[0] as unknown as Float32Array[], 1)).toThrow(code('ERR_DTYPE'));
    expect(() => rl.clipGradNorm([g[0]!, g[0]!], 1)).toThrow(code('ERR_SHAPE'));
    expect(() => rl.clipGradNorm(g, 1, { errorIfNonFinite: false } as unknown as rl.ClipGradNormOptions)).toThrow(code('ERR_OPTION'));
    expect(() => rl.clipGradNorm(g, 1, { errorIfNonfinite: 0 as unknown as boolean })).toThrow(code('ERR_OPTION'));
    expect(bits(g)).toEqual(before);
  });

  it('async form equals the sync form; an aborted signal changes nothing', async () => {
    const a = randomTensors(6, [100_000, 9]);
    const b = clone(a);
    const n1 = rl.clipGradNorm(a, 3);
    const n2 = await rl.clipGradNormAsync(b, 3);
    expect(n2).toBe(n1);
    expect(bits(b)).toEqual(bits(a));
    const c = randomTensors(7, [10]);
    const before = bits(c);
    const ac = new AbortController();
    ac.abort();
    await expect(rl.clipGradNormAsync(c, 0.1, { signal: ac.signal })).rejects.toMatchObject({ code: 'ERR_ABORTED' });
    expect(bits(c)).toEqual(before);
    const d = [Float32Array.of(NaN)];
    await expect(rl.clipGradNormAsync(d, 1)).rejects.toMatchObject({ code: 'ERR_NON_FINITE' });
  });
});
