import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { GearError } from '../../ts/errors.js';

function code(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(GearError);
    return (e as GearError).code;
  }
  throw new Error('expected a GearError');
}

const trajectories: rl.TrajectoryInput[] = [
  {
    id: 'g0-t0', group: 'g0', groundTruth: 42, steps: [
      { tokens: [5, 6, 7], reward: 0, anchor: 'room A', observation: [900, 901] },
      { tokens: Int32Array.of(2147483647, 0), mask: [1, 0], reward: 1, anchor: { room: 'B', items: ['key'] } },
    ],
  },
  { id: 'g0-t1', group: 'g0', steps: [{ tokens: [8], reward: 0.5, anchor: 'room A', observation: [902] }] },
  { id: 7, group: 3, episodeReward: -1, steps: [{ tokens: [1, 2], mask: [true, false], anchor: [1, 2] }, { tokens: [3], reward: 2 }] },
];
const groups: rl.GroupInput[] = [{ id: 'g0', prompt: [100, 101], groundTruth: 'x' }, { id: 3 }];

describe('buildRolloutBatch — step layout (one row per agent step)', () => {
  const b = rl.buildRolloutBatch({ trajectories, groups });
  it('packs tokens, offsets and masks, keeping token ids exactly', () => {
    expect(b.layout).toBe('step');
    expect(b.rows).toBe(5);
    expect(Array.from(b.offsets)).toEqual([0, 3, 5, 6, 8, 9]);
    expect(Array.from(b.tokenIds)).toEqual([5, 6, 7, 2147483647, 0, 8, 1, 2, 3]);
    expect(Array.from(b.mask)).toEqual([1, 1, 1, 1, 0, 1, 1, 0, 1]);
    expect(Array.from(b.lengths)).toEqual([3, 1, 1, 1, 1]);
    expect(b.tokens).toBe(9);
  });
  it('fills per-row ids, steps, rewards, anchors and ground truth', () => {
    expect(b.groups).toEqual(['g0', 'g0', 'g0', 3, 3]);
    expect(Array.from(b.groupIndex)).toEqual([0, 0, 0, 1, 1]);
    expect(b.trajectories).toEqual(['g0-t0', 'g0-t0', 'g0-t1', 7, 7]);
    expect(Array.from(b.trajectoryIndex)).toEqual([0, 0, 1, 2, 2]);
    expect(Array.from(b.step)).toEqual([0, 1, 0, 0, 1]);
    expect(Array.from(b.stepRewards)).toEqual([0, 1, 0.5, 0, 2]);
    expect(Array.from(b.episodeRewards)).toEqual([1, 1, 0.5, -1, -1]);
    expect(b.anchors).toEqual(['room A', { room: 'B', items: ['key'] }, 'room A', [1, 2], undefined]);
    expect(b.groundTruth).toEqual([42, 42, 'x', undefined, undefined]);
    expect(Array.from(b.promptIds)).toEqual([100, 101]);
    expect(Array.from(b.promptOffsets)).toEqual([0, 2, 2]);
  });
  it('feeds gigpo directly', () => {
    const anchors = b.anchors.map((a) => a ?? 'terminal');
    const r = rl.gigpo({
      episodeRewards: b.episodeRewards, stepRewards: b.stepRewards, trajectories: b.trajectories, groups: b.groups, anchors,
    });
    // Rows 0 and 2 share the anchor 'room A' in group g0.
    expect(Array.from(r.stepGroups)).toEqual([0, 1, 0, 3, 4]);
    const tok = rl.segmentBroadcast(r.advantages, b.offsets, b.mask);
    for (let t = 0; t < tok.length; t++) if (!b.mask[t]) expect(tok[t]).toBe(0);
  });
});

describe('buildRolloutBatch — conversation layout (one row per trajectory)', () => {
  const b = rl.buildRolloutBatch({ trajectories, groups, layout: 'conversation' });
  it('interleaves turns and masked observation tokens in one row', () => {
    expect(b.rows).toBe(3);
    expect(Array.from(b.tokenIds)).toEqual([5, 6, 7, 900, 901, 2147483647, 0, 8, 902, 1, 2, 3]);
    expect(Array.from(b.mask)).toEqual([1, 1, 1, 0, 0, 1, 0, 1, 0, 1, 0, 1]);
    expect(Array.from(b.offsets)).toEqual([0, 7, 9, 12]);
    expect(Array.from(b.lengths)).toEqual([4, 1, 2]);
    expect(Array.from(b.step)).toEqual([0, 0, 0]);
    expect(Array.from(b.stepRewards)).toEqual([1, 0.5, 2]);
    expect(Array.from(b.episodeRewards)).toEqual([1, 0.5, -1]);
  });
  it('per-token advantages are 0 on observation tokens', () => {
    const adv = rl.grpo({ rewards: b.episodeRewards, groups: b.groups });
    const tok = rl.segmentBroadcast(adv, b.offsets, b.mask);
    for (let t = 0; t < tok.length; t++) if (!b.mask[t]) expect(tok[t]).toBe(0);
    expect(tok[0]).toBe(Math.fround(adv[0]!));
  });
  it('REINFORCE++ carries the return across observation gaps (current verl)', () => {
    const tr = rl.lastTokenValues(b.episodeRewards, b.offsets, b.mask);
    // Row 0's last counted token is index 5 (index 6 is masked).
    expect(tr[5]).toBe(1);
    expect(tr[6]).toBe(0);
    const ret = rl.tokenReturns({ tokenRewards: tr, offsets: b.offsets, mask: b.mask, gamma: 0.5 });
    // Masked observation tokens neither discount nor reset the running return.
    expect(Array.from(ret.slice(0, 7))).toEqual([0.125, 0.25, 0.5, 0, 0, 1, 0]);
    // Legacy verl / verl-agent reset it at masked tokens (and keep the raw value there).
    const legacy = rl.tokenReturns({ tokenRewards: tr, offsets: b.offsets, mask: b.mask, gamma: 0.5, semantics: 'legacy' });
    expect(Array.from(legacy.slice(0, 7))).toEqual([0, 0, 0, 0, 0.5, 1, 0]);
  });
});

describe('buildRolloutBatch — validation', () => {
  const one = (step: Partial<rl.StepInput>, extra: Partial<rl.TrajectoryInput> = {}) => ({
    trajectories: [{ group: 'g', steps: [{ tokens: [1, 2], ...step }], ...extra }],
  });
  it('rejects masks longer or shorter than their tokens', () => {
    expect(code(() => rl.buildRolloutBatch(one({ mask: [1, 1, 1] })))).toBe('ERR_SHAPE');
    expect(code(() => rl.buildRolloutBatch(one({ mask: [1] })))).toBe('ERR_SHAPE');
    expect(code(() => rl.buildRolloutBatch(one({ mask: [1, 2] })))).toBe('ERR_OPTION');
  });
  it('rejects unknown group references and duplicate ids', () => {
    expect(code(() => rl.buildRolloutBatch({ ...one({}), groups: [{ id: 'other' }] }))).toBe('ERR_GROUP');
    expect(code(() => rl.buildRolloutBatch({ ...one({}), groups: [{ id: 'g' }, { id: 'g' }] }))).toBe('ERR_GROUP');
    expect(code(() => rl.buildRolloutBatch({
      trajectories: [{ id: 1, group: 'g', steps: [{ tokens: [1] }] }, { id: 1, group: 'g', steps: [{ tokens: [1] }] }],
    }))).toBe('ERR_GROUP');
    expect(code(() => rl.buildRolloutBatch(one({}, { group: null as unknown as string })))).toBe('ERR_GROUP');
  });
  it('rejects empty rows, empty trajectories and empty batches', () => {
    expect(code(() => rl.buildRolloutBatch(one({ tokens: [] })))).toBe('ERR_SHAPE');
    expect(code(() => rl.buildRolloutBatch({ ...one({ tokens: [] }), layout: 'conversation' }))).toBe('ERR_SHAPE');
    expect(code(() => rl.buildRolloutBatch({ trajectories: [{ group: 'g', steps: [] }] }))).toBe('ERR_SHAPE');
    expect(code(() => rl.buildRolloutBatch({ trajectories: [] }))).toBe('ERR_SHAPE');
  });
  it('accepts an empty step inside a conversation that has tokens elsewhere', () => {
    const b = rl.buildRolloutBatch({ layout: 'conversation', trajectories: [{ group: 'g', steps: [{ tokens: [], observation: [9] }, { tokens: [4] }] }] });
    expect(Array.from(b.tokenIds)).toEqual([9, 4]);
    expect(Array.from(b.mask)).toEqual([0, 1]);
  });
  it('rejects bad token ids, rewards and options', () => {
    expect(code(() => rl.buildRolloutBatch(one({ tokens: [1.5] })))).toBe('ERR_DTYPE');
    expect(code(() => rl.buildRolloutBatch(one({ tokens: [-1] })))).toBe('ERR_TARGET_RANGE');
    expect(code(() => rl.buildRolloutBatch(one({ tokens: [2 ** 31] })))).toBe('ERR_TARGET_RANGE');
    expect(code(() => rl.buildRolloutBatch(one({ tokens: 'abc' as unknown as number[] })))).toBe('ERR_DTYPE');
    expect(code(() => rl.buildRolloutBatch(one({ observation: [-3] })))).toBe('ERR_TARGET_RANGE');
    expect(code(() => rl.buildRolloutBatch(one({ reward: NaN })))).toBe('ERR_NON_FINITE');
    expect(code(() => rl.buildRolloutBatch(one({}, { episodeReward: Infinity })))).toBe('ERR_NON_FINITE');
    expect(code(() => rl.buildRolloutBatch({ ...one({}), layout: 'rows' as 'step' }))).toBe('ERR_OPTION');
    expect(code(() => rl.buildRolloutBatch(one({ rewrad: 1 } as Partial<rl.StepInput>)))).toBe('ERR_OPTION');
    expect(code(() => rl.buildRolloutBatch(null as unknown as rl.RolloutBatchInput))).toBe('ERR_OPTION');
  });
});

describe('rowLengths and lastTokenValues', () => {
  it('match a direct count / placement', () => {
    const off = Int32Array.of(0, 3, 3, 7);
    const mask = Uint8Array.of(1, 0, 1, 1, 1, 0, 0);
    expect(Array.from(rl.rowLengths(off, mask))).toEqual([2, 0, 2]);
    expect(Array.from(rl.rowLengths(off))).toEqual([3, 0, 4]);
    expect(Array.from(rl.lastTokenValues([1, 2, 3], off, mask))).toEqual([0, 0, 1, 0, 3, 0, 0]);
    expect(code(() => rl.rowLengths(off, Uint8Array.of(1)))).toBe('ERR_SHAPE');
    expect(code(() => rl.lastTokenValues([1, 2], off))).toBe('ERR_SHAPE');
  });
});
