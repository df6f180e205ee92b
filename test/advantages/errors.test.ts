import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import * as diagnostics from '../../ts/diagnostics.js';
import * as similarity from '../../ts/similarity.js';
import { GearError } from '../../ts/core/errors.js';
import { data, expectClose, loadPeer } from '../helpers/peer.js';

function code(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(GearError);
    expect((e as Error).message).toMatch(/: expected .+, got |: unknown option '/);
    return (e as GearError).code;
  }
  throw new Error('expected a GearError');
}

const R = [1, 0, 1, 0];
const G = ['a', 'a', 'b', 'b'];

describe('row-level estimators reject bad input', () => {
  const fns: [string, (a: any) => unknown][] = [
    ['grpo', rl.grpo], ['rloo', rl.rloo], ['gpg', rl.gpg], ['grpoPassK', rl.grpoPassK],
    ['opo', (a) => rl.opo(a === null ? a : { lengths: [1, 1, 1, 1], ...a })],
    ['reinforcePlusPlusBaseline', rl.reinforcePlusPlusBaseline],
  ];
  for (const [name, f] of fns) {
    it(name, () => {
      expect(code(() => f({ rewards: [1, NaN, 0, 1], groups: G }))).toBe('ERR_NON_FINITE');
      expect(code(() => f({ rewards: [1, Infinity, 0, 1], groups: G }))).toBe('ERR_NON_FINITE');
      expect(code(() => f({ rewards: R, groups: ['a', 'a', 'b'] }))).toBe('ERR_SHAPE');
      expect(code(() => f({ rewards: R, groups: ['a', {}, 'b', 'b'] }))).toBe('ERR_DTYPE');
      expect(code(() => f({ rewards: R, groups: [0, NaN, 1, 1] }))).toBe('ERR_GROUP');
      expect(code(() => f({ rewards: 'abc', groups: G }))).toBe('ERR_DTYPE');
      expect(code(() => f({ rewards: [1, '2', 0, 1], groups: G }))).toBe('ERR_DTYPE');
      expect(code(() => f({ rewards: R, groups: G, singleton: 'keep' }))).toBe('ERR_OPTION');
      expect(code(() => f({ rewards: R, groups: G, sclae: 'group' }))).toBe('ERR_OPTION');
      expect(code(() => f(null))).toBe('ERR_OPTION');
    });
  }
  it('grpo options', () => {
    expect(code(() => rl.grpo({ rewards: R, groups: G, scale: 'token' as 'group' }))).toBe('ERR_OPTION');
    expect(code(() => rl.grpo({ rewards: R, groups: G, epsilon: -1 }))).toBe('ERR_OPTION');
    expect(code(() => rl.grpo({ rewards: R, groups: G, precision: 'float16' as 'float32' }))).toBe('ERR_OPTION');
    expect(code(() => rl.grpo({ rewards: R, groups: G, precision: 'float32', scale: 'batch' }))).toBe('ERR_OPTION');
  });
  it('grpoPassK rejects groups of one and bad k', () => {
    expect(code(() => rl.grpoPassK({ rewards: [1, 0, 1], groups: ['a', 'a', 'b'] }))).toBe('ERR_GROUP');
    expect(code(() => rl.grpoPassK({ rewards: R, groups: G, k: 0 }))).toBe('ERR_OPTION');
  });
  it('opo needs lengths; lengths must be non-negative integers', () => {
    expect(code(() => rl.opo({ rewards: R, groups: G } as any))).toBe('ERR_OPTION');
    expect(code(() => rl.opo({ rewards: R, groups: G, lengths: [1, -1, 1, 1] }))).toBe('ERR_OPTION');
    expect(code(() => rl.opo({ rewards: R, groups: G, lengths: [1, 1.5, 1, 1] }))).toBe('ERR_OPTION');
    expect(code(() => rl.opo({ rewards: R, groups: G, lengths: [1, 1] }))).toBe('ERR_SHAPE');
  });
  it('whitening needs two counted tokens (verl raises)', () => {
    expect(code(() => rl.reinforcePlusPlusBaseline({ rewards: [1], groups: [0] }))).toBe('ERR_SHAPE');
    expect(code(() => rl.reinforcePlusPlusBaseline({ rewards: [1, 2], groups: [0, 1], lengths: [1, 0] }))).toBe('ERR_SHAPE');
    expect(code(() => rl.gdpo({ rewards: [[1, 2]], groups: [0, 0], lengths: [0, 0] }))).toBe('ERR_SHAPE');
  });
  it('gdpo and trlAdvantages check their reward components', () => {
    expect(code(() => rl.gdpo({ rewards: [], groups: [] }))).toBe('ERR_OPTION');
    expect(code(() => rl.gdpo({ rewards: [[1, 2], [1]], groups: [0, 0] }))).toBe('ERR_SHAPE');
    expect(code(() => rl.gdpo({ rewards: [[1, 2]], weights: [1, 2], groups: [0, 0] }))).toBe('ERR_SHAPE');
    expect(code(() => rl.trlAdvantages({ rewards: [[1, 2, 3]], numGenerations: 2 }))).toBe('ERR_SHAPE');
    expect(code(() => rl.trlAdvantages({ rewards: [[1, 2]], numGenerations: 2, groups: [0, 0] }))).toBe('ERR_OPTION');
    expect(code(() => rl.trlAdvantages({ rewards: [[1, 2]] }))).toBe('ERR_OPTION');
    expect(code(() => rl.trlAdvantages({ rewards: [[1, Infinity]], numGenerations: 2 }))).toBe('ERR_NON_FINITE');
    expect(code(() => rl.trlAdvantages({ rewards: [[1, 2]], numGenerations: 2, scaleRewards: 'token' as 'group' }))).toBe('ERR_OPTION');
    expect(code(() => rl.trlAdvantages({ rewards: [[1, 2]], numGenerations: 2, aggregation: 'mean' as 'normalize_then_sum' }))).toBe('ERR_OPTION');
  });
});

describe('token-level estimators reject bad input', () => {
  const off = Int32Array.of(0, 2, 4);
  const tr = Float64Array.of(0, 1, 0, 1);
  for (const [name, f] of [
    ['reinforcePlusPlus', (a: any) => rl.reinforcePlusPlus(a)], ['tokenReturns', (a: any) => diagnostics.tokenReturns(a)],
    ['remax', (a: any) => rl.remax({ baselines: [0, 0], ...a })],
  ] as const) {
    it(name, () => {
      expect(code(() => f({ tokenRewards: [0, 1, 0, 1], offsets: off }))).toBe('ERR_DTYPE');
      expect(code(() => f({ tokenRewards: tr, offsets: Int32Array.of(0, 2, 5) }))).toBe('ERR_OFFSETS');
      expect(code(() => f({ tokenRewards: tr, offsets: Int32Array.of(0, 3, 2, 4) }))).toBe('ERR_OFFSETS');
      expect(code(() => f({ tokenRewards: tr, offsets: [0, 2, 4] }))).toBe('ERR_DTYPE');
      expect(code(() => f({ tokenRewards: tr, offsets: off, mask: Uint8Array.of(1, 1, 1) }))).toBe('ERR_SHAPE');
      expect(code(() => f({ tokenRewards: tr, offsets: off, mask: Uint8Array.of(1, 2, 1, 1) }))).toBe('ERR_OPTION');
      expect(code(() => f({ tokenRewards: Float64Array.of(0, NaN, 0, 1), offsets: off }))).toBe('ERR_NON_FINITE');
      expect(code(() => f({ tokenRewards: tr, offsets: off, precision: 'int8' }))).toBe('ERR_OPTION');
    });
  }
  it('gamma and semantics are checked', () => {
    expect(code(() => rl.reinforcePlusPlus({ tokenRewards: tr, offsets: off, gamma: 1.5 }))).toBe('ERR_OPTION');
    expect(code(() => rl.reinforcePlusPlus({ tokenRewards: tr, offsets: off, semantics: 'old' as 'legacy' }))).toBe('ERR_OPTION');
    expect(code(() => rl.reinforcePlusPlus({ tokenRewards: Float64Array.of(1), offsets: Int32Array.of(0, 1) }))).toBe('ERR_SHAPE');
    expect(code(() => rl.remax({ tokenRewards: tr, offsets: off, baselines: [0] }))).toBe('ERR_SHAPE');
  });
});

describe('gigpo rejects bad input', () => {
  const base = { episodeRewards: [1, 0], stepRewards: [1, 0], trajectories: ['t0', 't1'], groups: ['g', 'g'], anchors: ['s', 's'] };
  it('options and shapes', () => {
    expect(code(() => rl.gigpo({ ...base, mode: 'leave_one_out' as 'mean_norm' }))).toBe('ERR_OPTION');
    expect(code(() => rl.gigpo({ ...base, similarity: { threshold: 1 } }))).toBe('ERR_OPTION');
    expect(code(() => rl.gigpo({ ...base, similarity: { threshold: 0 } }))).toBe('ERR_OPTION');
    expect(code(() => rl.gigpo({ ...base, similarity: { thresh: 0.9 } as any }))).toBe('ERR_OPTION');
    expect(code(() => rl.gigpo({ ...base, anchors: ['s'] }))).toBe('ERR_SHAPE');
    expect(code(() => rl.gigpo({ ...base, gamma: 2 }))).toBe('ERR_OPTION');
    expect(code(() => rl.gigpo({ ...base, stepWeight: Infinity }))).toBe('ERR_OPTION');
    expect(code(() => rl.gigpo({ ...base, crossStepStats: 1 as unknown as boolean }))).toBe('ERR_OPTION');
    expect(code(() => rl.gigpo({ ...base, stepRewards: undefined }))).toBe('ERR_OPTION');
    expect(code(() => rl.gigpo({ ...base, stepReturns: [1, 0] }))).toBe('ERR_OPTION');
    expect(code(() => rl.gigpo({ ...base, episodeRewards: [NaN, 0] }))).toBe('ERR_NON_FINITE');
  });
  it('a trajectory spanning two groups is an inconsistent reference', () => {
    expect(code(() => rl.gigpo({ ...base, trajectories: ['t0', 't0'], groups: ['g', 'h'] }))).toBe('ERR_GROUP');
  });
  it('anchors must be JSON-like (and text in similarity mode)', () => {
    expect(code(() => rl.gigpo({ ...base, anchors: ['s', () => 1] }))).toBe('ERR_DTYPE');
    expect(code(() => rl.gigpo({ ...base, anchors: ['s', undefined] }))).toBe('ERR_DTYPE');
    expect(code(() => rl.gigpo({ ...base, anchors: ['s', new Map()] }))).toBe('ERR_DTYPE');
    expect(code(() => rl.gigpo({ ...base, anchors: ['s', Symbol('x')] }))).toBe('ERR_DTYPE');
    const circular: any = { a: 1 };
    circular.self = circular;
    expect(code(() => rl.gigpo({ ...base, anchors: ['s', circular] }))).toBe('ERR_DTYPE');
    expect(code(() => rl.gigpo({ ...base, anchors: ['s', 3], similarity: { threshold: 0.9 } }))).toBe('ERR_DTYPE');
  });
});

describe('anchor keys (exact grouping)', () => {
  it('group JSON-like states by value with sorted object keys', () => {
    const ids = similarity.anchorIds([
      { b: 1, a: [1, 2] }, { a: [1, 2], b: 1 }, [1, 2], Float64Array.of(1, 2), 'x', 1, 1.0, true, 0, -0, false, null,
      '1', { a: [1, 2], b: 2 }, [[1, 2]], { a: { c: 'x', b: [] } }, { a: { b: [], c: 'x' } },
    ]);
    const same = (i: number, j: number) => ids[i] === ids[j];
    expect(same(0, 1)).toBe(true); // key order does not matter
    expect(same(2, 3)).toBe(true); // typed arrays equal plain arrays
    expect(same(5, 6) && same(5, 7)).toBe(true); // 1 == 1.0 == true (Python)
    expect(same(8, 9) && same(8, 10)).toBe(true); // 0 == -0 == false
    expect(same(5, 12)).toBe(false); // number 1 vs string '1'
    expect(same(0, 13)).toBe(false);
    expect(same(2, 14)).toBe(false);
    expect(same(15, 16)).toBe(true); // nested sorted keys
    expect(same(4, 11)).toBe(false);
    expect(new Set(ids).size).toBe(10);
  });
  it('a structured key never equals a string key', () => {
    const ids = similarity.anchorIds(['[1,2]', [1, 2], '{"a":1}', { a: 1 }]);
    expect(new Set(ids).size).toBe(4);
  });
  it('diagnostics count step-group sizes and singleton rows', () => {
    const r = rl.gigpo({
      episodeRewards: [1, 0, 1, 0, 1], stepReturns: [1, 0, 1, 0, 1], trajectories: [0, 0, 1, 1, 2],
      groups: [0, 0, 0, 0, 0], anchors: ['s', 'u', 's', 'v', 's'],
    });
    expect(Array.from(r.stepGroups)).toEqual([0, 1, 0, 3, 0]);
    expect(r.diagnostics.groupSizeHistogram).toEqual({ 3: 1, 1: 2 });
    expect(r.diagnostics.singletonShare).toBe(2 / 5);
    // Singleton step groups get a step advantage of exactly 0.
    expect(r.step[1]).toBe(0);
    expect(r.step[3]).toBe(0);
  });
});

describe('masked helpers vs verl torch_functional', () => {
  for (const file of ['verl_torch_functional.json', 'verl_legacy_torch_functional.json']) {
    for (const c of loadPeer(file).cases.filter((c) => c.function.startsWith('masked_') && c.function !== 'masked_sum')) {
      it(`${file} ${c.name}`, () => {
        const x = data(c.inputs.values) as number[];
        const m = Uint8Array.from(data(c.inputs.mask) as number[]);
        const [B, T] = c.inputs.values.shape as [number, number];
        const run = () => {
          switch (c.function) {
            case 'masked_mean': return null;
            case 'masked_var': return [diagnostics.maskedVar(x, m, c.params.unbiased)];
            default: return diagnostics.maskedWhiten(x, m, { shiftMean: c.params.shift_mean });
          }
        };
        if (c.error) {
          expect(code(run)).toBe('ERR_SHAPE');
          return;
        }
        if (c.function === 'masked_mean') {
          expectClose([diagnostics.maskedMean(x, m)], data(c.outputs!.all), { rtol: 1e-12, what: 'all' });
          const off = Int32Array.from({ length: B + 1 }, (_, i) => i * T);
          expectClose(diagnostics.maskedRowMean(x, off, m), data(c.outputs!['axis_-1']), { rtol: 1e-12, what: 'rows' });
          return;
        }
        const out = run()!;
        const e = data(Object.values(c.outputs!)[0]) as number[];
        expectClose(out, e, { rtol: 1e-12, atol: 1e-14, what: c.function });
      });
    }
  }
});
