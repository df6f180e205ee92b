import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import * as diagnostics from '../../ts/diagnostics.js';
import { GearError } from '../../ts/core/errors.js';
import { data, expectClose, loadPeer } from '../helpers/peer.js';

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
    // Step rewards on each row's last counted token (row 1's last token is masked).
    expect(Array.from(b.tokenRewards)).toEqual([0, 0, 0, 1, 0, 0.5, 0, 0, 2]);
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
    // Each turn's reward on that turn's last counted token.
    expect(Array.from(b.tokenRewards)).toEqual([0, 0, 0, 0, 0, 1, 0, 0.5, 0, 0, 0, 2]);
  });
  it('step offsets: each step\'s span (its tokens, then its observation), in the step layout\'s row order', () => {
    const steps = rl.buildRolloutBatch({ trajectories, groups, layout: 'step' });
    expect(Array.from(steps.stepOffsets)).toEqual(Array.from(steps.offsets));
    expect(b.stepOffsets.length).toBe(steps.rows + 1);
    // Every step's span holds exactly its own tokens followed by its observation.
    let s = 0;
    for (const t of trajectories) {
      for (const st of t.steps) {
        const span = Array.from(b.tokenIds.subarray(b.stepOffsets[s]!, b.stepOffsets[s + 1]!));
        expect(span).toEqual([...Array.from(st.tokens), ...Array.from(st.observation ?? [])]);
        s++;
      }
    }
    expect(b.stepOffsets[s]).toBe(b.tokens);
    // Step values over conversation rows: GiGPO's step advantages land on their turns, observations stay 0.
    const adv = rl.segmentBroadcast(Float64Array.from({ length: steps.rows }, (_, i) => i + 1), b.stepOffsets, b.mask);
    for (let i = 0; i < steps.rows; i++) {
      for (let t = b.stepOffsets[i]!; t < b.stepOffsets[i + 1]!; t++) expect(adv[t]).toBe(b.mask[t] ? i + 1 : 0);
    }
  });
  it('a turn without counted tokens passes its reward on', () => {
    const c = rl.buildRolloutBatch({ layout: 'conversation', trajectories: [
      { group: 0, steps: [{ tokens: [1], reward: 1 }, { tokens: [2], mask: [0], reward: 2, observation: [3] }, { tokens: [4], reward: 3 }] },
      { group: 0, steps: [{ tokens: [5], reward: 1 }, { tokens: [6], mask: [0], reward: 2 }] },
    ] });
    expect(Array.from(c.tokenRewards)).toEqual([1, 0, 0, 5, 3, 0]);
  });
  it('reproduces verl REINFORCE++ on multi-turn rows with observation gaps (peer vector)', () => {
    for (const cs of loadPeer('verl_reinforce_pp_advantage.json').cases.filter((x) => x.name.startsWith('multi_turn_obs_gaps'))) {
      const [B, T] = cs.inputs.response_mask.shape as [number, number];
      const m = data(cs.inputs.response_mask) as number[];
      const R = data(cs.inputs.token_level_rewards) as number[];
      // Each maximal run of counted tokens is one turn (reward = the run's reward tokens), each run of
      // masked tokens its observation; trailing padding is not part of a conversation row.
      const trajectories: rl.TrajectoryInput[] = [];
      const positions: number[] = [];
      for (let i = 0; i < B; i++) {
        let last = T - 1;
        while (last >= 0 && !m[i * T + last]) last--;
        const steps: rl.StepInput[] = [];
        for (let t = 0; t <= last; t++) {
          positions.push(i * T + t);
          if (m[i * T + t]) {
            if (steps.length === 0 || steps[steps.length - 1]!.observation) steps.push({ tokens: [], reward: 0 });
            const s = steps[steps.length - 1]!;
            (s.tokens as number[]).push(1000 + t);
            s.reward! += R[i * T + t]!;
          } else {
            const s = steps[steps.length - 1]!;
            s.observation = [...((s.observation as number[]) ?? []), 2000 + t];
            expect(R[i * T + t]).toBe(0);
          }
        }
        trajectories.push({ group: 0, steps });
      }
      const b = rl.buildRolloutBatch({ trajectories, layout: 'conversation' });
      // Rewards sat on each turn's last token in the peer too.
      expect(Array.from(b.tokenRewards)).toEqual(positions.map((p) => R[p]!));
      const adv = rl.reinforcePlusPlus({ tokenRewards: b.tokenRewards, offsets: b.offsets, mask: b.mask, gamma: cs.params['config.gamma'], precision: 'float64' });
      const e = data(cs.outputs!.advantages) as number[];
      expectClose(adv, positions.map((p) => e[p]!), { rtol: 1e-10, atol: 1e-12, what: cs.name });
    }
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
    const ret = diagnostics.tokenReturns({ tokenRewards: tr, offsets: b.offsets, mask: b.mask, gamma: 0.5 });
    // Masked observation tokens neither discount nor reset the running return.
    expect(Array.from(ret.slice(0, 7))).toEqual([0.125, 0.25, 0.5, 0, 0, 1, 0]);
    // Legacy verl / verl-agent reset it at masked tokens (and keep the raw value there).
    const legacy = diagnostics.tokenReturns({ tokenRewards: tr, offsets: b.offsets, mask: b.mask, gamma: 0.5, semantics: 'legacy' });
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
