// Packing of sampled episodes into the library's layouts, as the demo trainer uses them.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { HINT_POS, L0, PROMPT_TOKENS, lockerEnv, makeTask, type Task } from '../../examples/env/lockers.js';
import type { Environment } from '../../examples/env/types.js';
import { Rng } from '../../examples/env/rng.js';
import { Policy } from '../../examples/model/policy.js';
import { policyConfig } from '../../examples/trainer/train.js';
import { collect, pack, sequence } from '../../examples/trainer/rollout.js';
import { advantages } from '../../examples/trainer/methods.js';

const env = lockerEnv as unknown as Environment;
const POLICY = policyConfig(env);

function batch() {
  const policy = new Policy(POLICY, undefined, 5); // untrained: varied, often malformed episodes
  const tasks = [makeTask(11), makeTask(12), makeTask(13)];
  return { policy, b: pack(env, collect(env, policy, tasks, 6, new Rng(2))) };
}

describe('rollout packing', () => {
  it('conversation rows hold every turn and observation, observations masked, aligned with the model rows', () => {
    const { b } = batch();
    const conv = b.conversation;
    expect(conv.layout).toBe('conversation');
    expect(conv.rows).toBe(18);
    b.trajectories.forEach((t, r) => {
      const seq = sequence(env, t);
      const lo = conv.offsets[r]!, hi = conv.offsets[r + 1]!;
      expect(Array.from(conv.tokenIds.subarray(lo, hi))).toEqual(seq.slice(PROMPT_TOKENS));
      const expectMask = t.turns.flatMap((u) => [...u.tokens.map(() => 1), ...u.observation.map(() => 0)]);
      expect(Array.from(conv.mask.subarray(lo, hi))).toEqual(expectMask);
      // Roles follow the tokens: each turn's roles, then 0 on its observation.
      expect(Array.from(b.roles.subarray(lo, hi))).toEqual(t.turns.flatMap((u) => [...u.roles, ...u.observation.map(() => 0)]));
      expect(conv.episodeRewards[r]).toBe(t.reward);
      expect(conv.groupIndex[r]).toBe(t.group);
      // Student and teacher model rows: same tokens except the hint slot, which holds the ground truth.
      expect(b.studentRows.seqs[r]).toEqual(seq);
      expect(b.studentRows.to[r]! - b.studentRows.from[r]!).toBe(hi - lo);
      const teacher = b.teacherRows.seqs[r]!;
      for (let i = 0; i < seq.length; i++) expect(teacher[i]).toBe(i === HINT_POS ? L0 + (t.task as Task).answer : seq[i]);
    });
  });

  it('step rows carry each turn with its anchor and the sparse reward; the conversation batch\'s step offsets partition it', () => {
    const { b } = batch();
    const steps = b.steps;
    const stepOffsets = b.conversation.stepOffsets;
    const turns = b.trajectories.flatMap((t, r) => t.turns.map((u, k) => ({ u, k, r, t })));
    expect(steps.rows).toBe(turns.length);
    expect(stepOffsets.length).toBe(turns.length + 1);
    expect(Array.from(steps.stepOffsets)).toEqual(Array.from(steps.offsets));
    turns.forEach(({ u, k, r, t }, s) => {
      expect(Array.from(steps.tokenIds.subarray(steps.offsets[s]!, steps.offsets[s + 1]!))).toEqual(u.tokens);
      expect(steps.anchors[s]).toBe(u.anchor);
      expect(steps.trajectoryIndex[s]).toBe(r);
      expect(steps.stepRewards[s]).toBe(k === t.turns.length - 1 ? t.reward : 0);
      expect(steps.episodeRewards[s]).toBe(t.reward);
      // The step's span in the conversation layout: its three tokens then its observation.
      const span = Array.from(b.conversation.tokenIds.subarray(stepOffsets[s]!, stepOffsets[s + 1]!));
      expect(span).toEqual([...u.tokens, ...u.observation]);
    });
    expect(stepOffsets[turns.length]).toBe(b.conversation.tokens);
  });

  it('advantages of every method are per conversation token and 0 on observations', () => {
    const { policy, b } = batch();
    const V = POLICY.vocab;
    const s = policy.forward(b.studentRows), t = policy.forward(b.teacherRows);
    for (const m of ['grpo', 'gigpo', 'gear', 'gear-frozen', 'gear-ema', 'drgrpo', 'rloo', 'gear-shuffled', 'gear-strong', 'gear-strong-shuffled'] as const) {
      const a = advantages(m, { batch: b, student: { data: s.logits, rows: s.rows, vocab: V }, teacher: { data: t.logits, rows: t.rows, vocab: V } });
      expect(a.advantages.length).toBe(b.conversation.tokens);
      b.conversation.mask.forEach((mk, i) => { if (!mk) expect(a.advantages[i]).toBe(0); });
    }
    // GiGPO: the first step of every episode of a task acts from the same state, so they share a step group.
    const steps = b.steps;
    const g = rl.gigpo({ episodeRewards: steps.episodeRewards, stepRewards: steps.stepRewards, trajectories: steps.trajectoryIndex, groups: steps.groupIndex, anchors: steps.anchors });
    const firstRows = Array.from(steps.step).flatMap((k, i) => (k === 0 ? [i] : []));
    for (const grp of [0, 1, 2]) {
      const ids = new Set(firstRows.filter((i) => steps.groupIndex[i] === grp).map((i) => g.stepGroups[i]));
      expect(ids.size).toBe(1);
    }
  });
});
