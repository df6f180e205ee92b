// packServerRollouts: the packed layout equals buildRolloutBatch's for the same turns, and the per-token
// log-probs / top-k (student and teacher) land on the right tokens. Expectations written out by hand.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { fixture, throwsCode } from './helpers.js';

const PAD = -Infinity;

function seq(ids: number[], lps: number[], top?: { k: number; ids: number[]; lps: number[] }): rl.ServerSequence {
  return { index: 0, tokenIds: Int32Array.from(ids), logprobs: Float32Array.from(lps),
    topK: top ? { k: top.k, ids: Int32Array.from(top.ids), logprobs: Float32Array.from(top.lps) } : null };
}

// Two trajectories of group 'g': a two-turn conversation with a tool answer in between, and a one-turn one.
const A1 = seq([11, 12], [-0.5, -0.25], { k: 2, ids: [11, 7, 12, -1], lps: [-0.5, -1, -0.25, PAD] });
const A2 = seq([13], [-0.125], { k: 1, ids: [13], lps: [-0.125] });
const B1 = seq([21, 22, 23], [-1, -2, -3]);
const TRAJS: rl.ServerTrajectory[] = [
  { group: 'g', turns: [
    { role: 'assistant', response: A1, reward: 0.5, anchor: 's0' },
    { role: 'tool', tokens: [90, 91] },
    { role: 'assistant', response: A2, reward: 1, anchor: 's1' },
    { role: 'observation', tokens: [92] },
  ] },
  { group: 'g', turns: [{ role: 'user', tokens: [80] }, { role: 'assistant', response: B1, reward: 0 }] },
];

describe('packServerRollouts', () => {
  it('conversation layout: hand-built expectation', () => {
    const b = rl.packServerRollouts({ trajectories: TRAJS });
    expect(b.layout).toBe('conversation');
    expect(Array.from(b.offsets)).toEqual([0, 6, 10]);
    expect(Array.from(b.tokenIds)).toEqual([11, 12, 90, 91, 13, 92, 80, 21, 22, 23]);
    expect(Array.from(b.mask)).toEqual([1, 1, 0, 0, 1, 0, 0, 1, 1, 1]);
    expect(Array.from(b.logprobs)).toEqual([-0.5, -0.25, 0, 0, -0.125, 0, 0, -1, -2, -3]);
    expect(b.topK.k).toBe(2);
    expect(Array.from(b.topK.ids)).toEqual([11, 7, 12, -1, -1, -1, -1, -1, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1]);
    expect(Array.from(b.topK.logprobs)).toEqual([-0.5, -1, -0.25, PAD, PAD, PAD, PAD, PAD, -0.125, PAD, PAD, PAD, PAD, PAD, PAD, PAD, PAD, PAD, PAD, PAD]);
    expect(Array.from(b.tokenRewards)).toEqual([0, 0.5, 0, 0, 1, 0, 0, 0, 0, 0]);
    expect(Array.from(b.episodeRewards)).toEqual([1.5, 0]);
    expect(b.teacherLogprobs).toBeUndefined();
  });

  it('step layout: one row per assistant turn, context turns left out', () => {
    const b = rl.packServerRollouts({ trajectories: TRAJS, layout: 'step', k: 1 });
    expect(Array.from(b.offsets)).toEqual([0, 2, 3, 6]);
    expect(Array.from(b.tokenIds)).toEqual([11, 12, 13, 21, 22, 23]);
    expect(Array.from(b.mask)).toEqual([1, 1, 1, 1, 1, 1]);
    expect(Array.from(b.logprobs)).toEqual([-0.5, -0.25, -0.125, -1, -2, -3]);
    expect(Array.from(b.topK.ids)).toEqual([11, 12, 13, -1, -1, -1]); // k = 1 keeps the most likely
    expect(b.anchors).toEqual(['s0', 's1', undefined]);
    expect(Array.from(b.step)).toEqual([0, 1, 0]);
  });

  it('offsets, mask, ids and rewards are exactly buildRolloutBatch\'s for the same turns', () => {
    for (const layout of ['step', 'conversation'] as const) {
      const b = rl.packServerRollouts({ trajectories: TRAJS, layout });
      const ref = rl.buildRolloutBatch({ layout, trajectories: [
        { group: 'g', steps: [
          { tokens: [11, 12], reward: 0.5, anchor: 's0', observation: [90, 91] },
          { tokens: [13], reward: 1, anchor: 's1', observation: [92] }] },
        { group: 'g', steps: layout === 'conversation'
          ? [{ tokens: [80], mask: [0] }, { tokens: [21, 22, 23], reward: 0 }]
          : [{ tokens: [21, 22, 23], reward: 0 }] },
      ] });
      for (const key of ['offsets', 'tokenIds', 'mask', 'lengths', 'tokenRewards', 'stepRewards', 'episodeRewards', 'groupIndex', 'trajectoryIndex'] as const) {
        expect(Array.from(b[key] as ArrayLike<number>), `${layout} ${key}`).toEqual(Array.from(ref[key] as ArrayLike<number>));
      }
    }
  });

  it('teacher log-probs and top-k from parsed responses, aligned by token', () => {
    const [student] = rl.parseSglang({ meta_info: { output_token_logprobs: [[-0.5, 40, null], [-0.25, 2948, null], [-0.75, 19423, null]],
      output_top_logprobs: [[[-0.5, 40, null]], [[-0.25, 2948, null]], [[-0.75, 19423, null]]] } });
    const teacher = rl.parseVllmPromptLogprobs(fixture('vllm/completion_prompt_logprobs.json'), { length: 3 });
    const b = rl.packServerRollouts({ trajectories: [{ group: 0, turns: [
      { role: 'assistant', response: student!, teacher }, { role: 'tool', tokens: [5] }] }] });
    expect(Array.from(b.teacherLogprobs!)).toEqual([-0.5, -0.25, -3, 0]);
    expect(b.teacherTopK!.k).toBe(3);
    expect(Array.from(b.teacherTopK!.ids)).toEqual([40, 1654, -1, 2948, 1075, -1, 12590, 279, 19423, -1, -1, -1]);
    expect(Array.from(b.logprobs)).toEqual([-0.5, -0.25, -0.75, 0]);
  });

  it('errors: teacher mismatch, partial teachers, no assistant turn, bad role, bad context tokens; nothing partial', () => {
    const t = seq([11, 99], [-1, -1]);
    throwsCode(() => rl.packServerRollouts({ trajectories: [{ group: 0, turns: [{ role: 'assistant', response: A1, teacher: t }] }] }),
      'ERR_TARGET_RANGE', 'trajectories[0].turns[0].teacher.tokenIds[1]: expected 12 (the response\'s token), got 99');
    throwsCode(() => rl.packServerRollouts({ trajectories: [{ group: 0, turns: [
      { role: 'assistant', response: A1, teacher: seq([11, 12], [-1, -1]) }, { role: 'assistant', response: A2 }] }] }),
    'ERR_OPTION', /^trajectories\[0\]\.turns\[1\]\.teacher: expected a teacher on every assistant turn/);
    throwsCode(() => rl.packServerRollouts({ trajectories: [{ group: 0, turns: [{ role: 'tool', tokens: [1] }] }] }),
      'ERR_SHAPE', /^trajectories\[0\]\.turns: expected at least one assistant turn/);
    throwsCode(() => rl.packServerRollouts({ trajectories: [{ group: 0, turns: [{ role: 'bot', tokens: [1] } as never] }] }),
      'ERR_OPTION', /^trajectories\[0\]\.turns\[0\]\.role/);
    throwsCode(() => rl.packServerRollouts({ trajectories: [{ group: 0, turns: [{ role: 'assistant', response: A1 }, { role: 'tool', tokens: [1, -2] }] }], layout: 'step' }),
      'ERR_TARGET_RANGE', /^trajectories\[0\]\.turns\[1\]\.tokens\[1\]/);
    throwsCode(() => rl.packServerRollouts({ trajectories: [{ group: 0, turns: [{ role: 'assistant', response: seq([1], [0.5]) }] }] }),
      'ERR_OPTION', /^trajectories\[0\]\.turns\[0\]\.response\.logprobs\[0\]: expected a finite number ≤ 0/);
    const badTop = seq([1], [-1], { k: 2, ids: [3, 4], lps: [-1, PAD] });
    throwsCode(() => rl.packServerRollouts({ trajectories: [{ group: 0, turns: [{ role: 'assistant', response: badTop }] }] }),
      'ERR_OPTION', /^trajectories\[0\]\.turns\[0\]\.response\.topK\[0\]\[1\]/);
    // an empty response in the step layout is an empty row
    throwsCode(() => rl.packServerRollouts({ trajectories: [{ group: 0, turns: [{ role: 'assistant', response: seq([], []) }] }], layout: 'step' }), 'ERR_SHAPE');
    throwsCode(() => rl.packServerRollouts({ trajectories: [] }), 'ERR_SHAPE');
    throwsCode(() => rl.packServerRollouts({ trajectories: TRAJS, k: -1 }), 'ERR_OPTION');
  });
});
