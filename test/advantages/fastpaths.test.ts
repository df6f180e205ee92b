import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import * as diagnostics from '../../ts/diagnostics.js';

// Group sizes (singletons included) and rewards with frequent ties (small integers) or spread values.
const layout = fc.array(fc.integer({ min: 1, max: 9 }), { minLength: 1, maxLength: 30 });
const reward = fc.oneof(fc.integer({ min: 0, max: 2 }), fc.double({ min: -1e3, max: 1e3, noNaN: true }));

/** Rows of each group interleaved round-robin, each group's rows kept in their order: returns the row order. */
function interleave(sizes: readonly number[]): number[] {
  const starts = sizes.map((_, g) => sizes.slice(0, g).reduce((a, b) => a + b, 0));
  const order: number[] = [];
  for (let k = 0; k < Math.max(...sizes); k++) sizes.forEach((n, g) => { if (k < n) order.push(starts[g]! + k); });
  return order;
}

describe('run paths for contiguous groups', () => {
  it('groupIndex of sorted integer ids equals the map path', () => {
    fc.assert(fc.property(fc.array(fc.integer({ min: -5, max: 40 }), { minLength: 1, maxLength: 60 }), (raw) => {
      const ids = raw.slice().sort((a, b) => a - b);
      const a = diagnostics.groupIndex(ids);
      const b = diagnostics.groupIndex(Int32Array.from(ids));
      expect(Array.from(b.ids)).toEqual(Array.from(a.ids));
      expect(Array.from(b.sizes)).toEqual(Array.from(a.sizes));
      expect(Array.from(b.firstRow)).toEqual(Array.from(a.firstRow));
      expect(b.labels).toEqual(a.labels);
      expect(b.count).toBe(a.count);
    }));
  });

  it('grpo on contiguous groups (typed or plain ids) is bit for bit the row loop over interleaved groups', () => {
    fc.assert(fc.property(layout.chain((sizes) => fc.tuple(
      fc.constant(sizes),
      fc.array(reward, { minLength: sizes.reduce((a, b) => a + b, 0), maxLength: sizes.reduce((a, b) => a + b, 0) }),
      fc.constantFrom(0, 1e-6, 1e-4), fc.constantFrom('raw' as const, 'zero' as const),
    )), ([sizes, rewards, epsilon, singleton]) => {
      const groups = sizes.flatMap((n, g) => Array.from({ length: n }, () => 10 + 3 * g));
      const order = interleave(sizes);
      const reference = rl.grpo({ rewards: order.map((i) => rewards[i]!), groups: order.map((i) => groups[i]!), epsilon, singleton });
      const expected = new Float64Array(rewards.length);
      order.forEach((row, k) => (expected[row] = reference[k]!));
      for (const ids of [Int32Array.from(groups), groups, groups.map((g) => `p${g}`)]) {
        const got = rl.grpo({ rewards, groups: ids, epsilon, singleton });
        got.forEach((x, i) => expect(Object.is(x, expected[i]), `row ${i}: ${x} vs ${expected[i]}`).toBe(true));
      }
    }));
  });

  it('groupStats on contiguous groups is bit for bit the scattered loop over interleaved groups', () => {
    fc.assert(fc.property(layout.chain((sizes) => fc.tuple(
      fc.constant(sizes),
      fc.array(reward, { minLength: sizes.reduce((a, b) => a + b, 0), maxLength: sizes.reduce((a, b) => a + b, 0) }),
    )), ([sizes, values]) => {
      const groups = sizes.flatMap((n, g) => Array.from({ length: n }, () => g));
      const order = interleave(sizes);
      const a = diagnostics.groupStats(values, diagnostics.groupIndex(groups));
      const b = diagnostics.groupStats(order.map((i) => values[i]!), diagnostics.groupIndex(order.map((i) => groups[i]!)));
      // Both number groups by first appearance, which interleaving keeps.
      for (const k of ['mean', 'std', 'count', 'tie'] as const) {
        Array.from(a[k]).forEach((x, g) => expect(Object.is(x, b[k][g]), `${k}[${g}]`).toBe(true));
      }
    }));
  });
});
