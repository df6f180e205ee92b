import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import * as diagnostics from '../../ts/diagnostics.js';

// Batches of rows with group ids drawn from a few labels (mixed numbers and strings), rewards either
// from a small discrete set (ties, binary rewards) or continuous.
const reward = fc.oneof(
  fc.constantFrom(0, 1, 0.5, -1),
  fc.double({ min: -100, max: 100, noNaN: true, noDefaultInfinity: true }),
);
const batch = fc.array(fc.record({ r: reward, g: fc.constantFrom<number | string>(0, 1, 2, 'a', 'b') }), { minLength: 1, maxLength: 40 });

function groupsOf(b: { g: number | string }[]): Map<number | string, number[]> {
  const m = new Map<number | string, number[]>();
  b.forEach((x, i) => m.set(x.g, [...(m.get(x.g) ?? []), i]));
  return m;
}

function close(a: number, e: number, rel = 1e-9, abs = 1e-9): void {
  if (!(Math.abs(a - e) <= abs + rel * Math.abs(e))) expect.fail(`expected ${e}, got ${a}`);
}

// Independent float64 reference of GRPO (verl semantics).
function refGrpo(r: number[], g: (number | string)[], eps: number, scale: 'group' | 'none'): number[] {
  return r.map((x, i) => {
    const xs = r.filter((_, j) => g[j] === g[i]);
    if (xs.length === 1) return scale === 'group' ? x / Math.fround(1 + Math.fround(eps)) : x;
    const mu = xs.reduce((a, b) => a + b, 0) / xs.length;
    const sd = Math.sqrt(xs.reduce((a, b) => a + (b - mu) ** 2, 0) / (xs.length - 1));
    if (xs.every((y) => y === xs[0])) return 0;
    return scale === 'group' ? (x - mu) / (sd + eps) : x - mu;
  });
}

describe('estimators against independent float64 references', () => {
  it('grpo (group and none)', () => {
    fc.assert(fc.property(batch, (b) => {
      const r = b.map((x) => x.r);
      const g = b.map((x) => x.g);
      for (const scale of ['group', 'none'] as const) {
        const ours = rl.grpo({ rewards: r, groups: g, scale });
        refGrpo(r, g, 1e-6, scale).forEach((e, i) => close(ours[i]!, e, 1e-9, 1e-9));
      }
    }));
  });
  it('rloo, opo, gpg', () => {
    fc.assert(fc.property(batch, fc.array(fc.integer({ min: 1, max: 50 }), { minLength: 40, maxLength: 40 }), (b, lens) => {
      const r = b.map((x) => x.r);
      const g = b.map((x) => x.g);
      const lengths = lens.slice(0, r.length);
      const loo = rl.rloo({ rewards: r, groups: g });
      const op = rl.opo({ rewards: r, groups: g, lengths });
      const gp = rl.gpg({ rewards: r, groups: g });
      const alpha = r.length / Math.max(r.filter((x) => x !== 0).length, 1);
      r.forEach((x, i) => {
        const idx = r.map((_, j) => j).filter((j) => g[j] === g[i]);
        if (idx.length === 1) {
          close(loo[i]!, x);
          close(op[i]!, x);
          close(gp[i]!, alpha * x);
          return;
        }
        const others = idx.filter((j) => j !== i).map((j) => r[j]!);
        close(loo[i]!, x - others.reduce((a, c) => a + c, 0) / others.length, 1e-9, 1e-9);
        const bl = idx.reduce((a, j) => a + lengths[j]! * r[j]!, 0) / idx.reduce((a, j) => a + lengths[j]!, 0);
        close(op[i]!, x - bl, 1e-9, 1e-9);
        const mu = idx.reduce((a, j) => a + r[j]!, 0) / idx.length;
        close(gp[i]!, alpha * (x - mu), 1e-9, 1e-9);
      });
    }));
  });
});

describe('properties', () => {
  it('mean-centred estimators sum to ~0 within every group of size > 1', () => {
    fc.assert(fc.property(batch, (b) => {
      const r = b.map((x) => x.r);
      const g = b.map((x) => x.g);
      const outs = [
        rl.grpo({ rewards: r, groups: g }), rl.grpo({ rewards: r, groups: g, scale: 'none' }),
        rl.grpo({ rewards: r, groups: g, scale: 'batch' }), rl.rloo({ rewards: r, groups: g }), rl.gpg({ rewards: r, groups: g }),
        rl.trlAdvantages({ rewards: [r], groups: g }).advantages,
      ];
      for (const [, idx] of groupsOf(b)) {
        if (idx.length < 2) continue;
        const scale = Math.max(1, ...idx.map((i) => Math.abs(r[i]!)));
        for (const o of outs) {
          const s = idx.reduce((a, i) => a + o[i]!, 0);
          // Relative to the advantages' size: std-scaled outputs are O(1) per row, centred ones O(reward).
          expect(Math.abs(s)).toBeLessThanOrEqual(1e-9 * idx.length * scale * Math.max(1, ...idx.map((i) => Math.abs(o[i]!))));
        }
      }
    }));
  });

  it('typed-array group ids (dense fast path) give the same groups as plain arrays', () => {
    fc.assert(fc.property(fc.array(fc.integer({ min: -5, max: 40 }), { minLength: 1, maxLength: 60 }), (ids) => {
      const a = diagnostics.groupIndex(ids);
      const b = diagnostics.groupIndex(Int32Array.from(ids));
      expect(Array.from(b.ids)).toEqual(Array.from(a.ids));
      expect(Array.from(b.sizes)).toEqual(Array.from(a.sizes));
      expect(Array.from(b.firstRow)).toEqual(Array.from(a.firstRow));
      expect(b.labels).toEqual(a.labels);
      expect(b.count).toBe(a.count);
    }));
    // A sparse id range falls back to the map.
    expect(Array.from(diagnostics.groupIndex(Int32Array.of(2 ** 30, 0, 2 ** 30)).ids)).toEqual([0, 1, 0]);
  });

  it('exact-tie groups give exactly 0 (epsilon 0 included)', () => {
    fc.assert(fc.property(fc.double({ min: -1e6, max: 1e6, noNaN: true }), fc.integer({ min: 2, max: 9 }), (x, n) => {
      const r = new Array(n).fill(x);
      const g = new Array(n).fill('p');
      for (const o of [
        rl.grpo({ rewards: r, groups: g, epsilon: 0 }), rl.grpo({ rewards: r, groups: g, scale: 'none' }),
        rl.rloo({ rewards: r, groups: g }), rl.gpg({ rewards: r, groups: g }),
        rl.opo({ rewards: r, groups: g, lengths: r.map((_, i) => i + 1) }),
        rl.grpo({ rewards: r, groups: g, precision: 'float32' }),
      ]) {
        for (const a of o) expect(a === 0).toBe(true);
      }
    }));
  });

  it('permuting rows permutes outputs', () => {
    fc.assert(fc.property(batch.chain((b) => fc.tuple(fc.constant(b), fc.shuffledSubarray(b.map((_, i) => i), { minLength: b.length, maxLength: b.length }))), ([b, perm]) => {
      const r = b.map((x) => x.r);
      const g = b.map((x) => x.g);
      const pr = perm.map((i) => r[i]!);
      const pg = perm.map((i) => g[i]!);
      const lengths = r.map((_, i) => (i % 5) + 1);
      const pl = perm.map((i) => lengths[i]!);
      const pairs: [Float64Array, Float64Array][] = [
        [rl.grpo({ rewards: r, groups: g }), rl.grpo({ rewards: pr, groups: pg })],
        [rl.grpo({ rewards: r, groups: g, scale: 'batch' }), rl.grpo({ rewards: pr, groups: pg, scale: 'batch' })],
        [rl.rloo({ rewards: r, groups: g }), rl.rloo({ rewards: pr, groups: pg })],
        [rl.gpg({ rewards: r, groups: g }), rl.gpg({ rewards: pr, groups: pg })],
        [rl.opo({ rewards: r, groups: g, lengths }), rl.opo({ rewards: pr, groups: pg, lengths: pl })],
      ];
      if (r.length > 1) {
        pairs.push([rl.reinforcePlusPlusBaseline({ rewards: r, groups: g, lengths }), rl.reinforcePlusPlusBaseline({ rewards: pr, groups: pg, lengths: pl })]);
      }
      for (const [a, p] of pairs) perm.forEach((i, k) => close(p[k]!, a[i]!, 1e-9, 1e-9));
    }));
  });

  it('gigpo (exact anchors) is permutation-equivariant across trajectories', () => {
    const step = fc.record({ anchor: fc.constantFrom('s0', 's1', 's2', 7, [1, 2]), ret: fc.constantFrom(0, 1, 0.5, 2) });
    const traj = fc.record({ g: fc.constantFrom('a', 'b'), ep: fc.constantFrom(0, 1, 3), steps: fc.array(step, { minLength: 1, maxLength: 4 }) });
    fc.assert(fc.property(fc.array(traj, { minLength: 1, maxLength: 8 }), fc.boolean(), (ts, std) => {
      const flat = ts.flatMap((t, ti) => t.steps.map((s) => ({ ...s, g: t.g, ep: t.ep, t: ti })));
      const run = (rows: typeof flat) => rl.gigpo({
        episodeRewards: rows.map((x) => x.ep), stepReturns: rows.map((x) => x.ret), trajectories: rows.map((x) => x.t),
        groups: rows.map((x) => x.g), anchors: rows.map((x) => x.anchor), mode: std ? 'mean_std_norm' : 'mean_norm',
      }).advantages;
      const a = run(flat);
      // Reverse the order of trajectories (time order inside each one is kept).
      const order = flat.map((_, i) => i).sort((i, j) => flat[j]!.t - flat[i]!.t || i - j);
      const b = run(order.map((i) => flat[i]!));
      order.forEach((i, k) => close(b[k]!, a[i]!, 1e-9, 1e-9));
    }));
  });

  it("scaling rewards by c > 0 leaves scale: 'group' advantages unchanged (epsilon 0)", () => {
    // Rewards on a 1/8 grid: a non-tie group's std stays far above STD_FLOOR after scaling (the floor is
    // the one documented place where invariance stops).
    const gridBatch = fc.array(fc.record({ r: fc.integer({ min: -800, max: 800 }).map((x) => x / 8), g: fc.constantFrom<number | string>(0, 1, 2, 'a') }), { minLength: 1, maxLength: 40 });
    fc.assert(fc.property(gridBatch, fc.double({ min: 1e-3, max: 1e3, noNaN: true }), (b, c) => {
      const r = b.map((x) => x.r);
      const g = b.map((x) => x.g);
      const a = rl.grpo({ rewards: r, groups: g, epsilon: 0, singleton: 'zero' });
      const s = rl.grpo({ rewards: r.map((x) => c * x), groups: g, epsilon: 0, singleton: 'zero' });
      a.forEach((x, i) => close(s[i]!, x, 1e-9, 1e-9));
      const t1 = rl.trlAdvantages({ rewards: [r], groups: g, epsilon: 0 }).advantages;
      const t2 = rl.trlAdvantages({ rewards: [r.map((x) => c * x)], groups: g, epsilon: 0 }).advantages;
      t1.forEach((x, i) => close(t2[i]!, x, 1e-9, 1e-9));
    }));
  });

  it('masked tokens always get exactly 0', () => {
    const rowsArb = fc.array(fc.record({ len: fc.integer({ min: 1, max: 6 }), r: reward, g: fc.constantFrom(0, 1) }), { minLength: 2, maxLength: 12 });
    fc.assert(fc.property(rowsArb, fc.integer({ min: 0, max: 2 ** 30 }), (rows, seed) => {
      const off = new Int32Array(rows.length + 1);
      rows.forEach((x, i) => (off[i + 1] = off[i]! + x.len));
      const N = off[rows.length]!;
      let s = seed;
      const mask = Uint8Array.from({ length: N }, () => ((s = (s * 1103515245 + 12345) & 0x7fffffff) % 3 === 0 ? 0 : 1));
      mask[0] = 1;
      mask[N - 1] = 1;
      const r = rows.map((x) => x.r);
      const g = rows.map((x) => x.g);
      const tr = rl.lastTokenValues(r, off, mask);
      const outs: ArrayLike<number>[] = [
        rl.segmentBroadcast(rl.grpo({ rewards: r, groups: g }), off, mask),
        rl.segmentBroadcast(rl.rloo({ rewards: r, groups: g }), off, mask),
        rl.segmentBroadcast(rl.reinforcePlusPlusBaseline({ rewards: r, groups: g, lengths: rl.rowLengths(off, mask) }), off, mask),
        rl.reinforcePlusPlus({ tokenRewards: tr, offsets: off, mask, gamma: 0.9 }),
        rl.reinforcePlusPlus({ tokenRewards: tr, offsets: off, mask, gamma: 0.9, semantics: 'legacy', precision: 'float64' }),
        rl.remax({ tokenRewards: tr, offsets: off, mask, baselines: r }),
      ];
      for (const o of outs) for (let t = 0; t < N; t++) if (!mask[t]) expect(Object.is(o[t], 0)).toBe(true);
    }));
  });
});
