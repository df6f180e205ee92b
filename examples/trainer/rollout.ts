/**
 * Rollouts: the policy plays episodes of the locker-search environment (sampling at temperature 1,
 * tool observations appended to its context), and finished episodes are packed with the library's
 * `buildRolloutBatch` — one row per conversation with observation tokens masked out (what the loss and
 * GEAR see), and one row per agent step (what GiGPO groups by anchor state).
 *
 * @module
 */
import * as rl from 'gear-rl';
import { Episode, HINT_POS, L0, LOCKERS, MAX_LEN, PROMPT_TOKENS, TURN_TOKENS, detokenize, prompt, tok, type Task } from '../env/lockers.js';
import type { Rng } from '../env/rng.js';
import type { Policy, RowSpec } from '../model/policy.js';

/** One agent turn of an episode. */
export interface Turn {
  /** The three sampled tokens. */
  tokens: number[];
  /** What the tool returned (empty after the final turn). */
  observation: number[];
  /** The environment state the turn acted from (GiGPO anchor). */
  anchor: string;
}

/** One sampled episode. */
export interface Trajectory {
  /** The task played. */
  task: Task;
  /** Index of the group (the G episodes of one task share it). */
  group: number;
  /** Turns in order. */
  turns: Turn[];
  /** Outcome reward. */
  reward: number;
}

/** Plays one episode with the policy, sampling every agent token from `rng`. */
export function playEpisode(policy: Policy, task: Task, group: number, rng: Rng, logitsBuf?: Float32Array): Trajectory {
  const V = policy.cfg.vocab;
  const buf = logitsBuf ?? new Float32Array(V);
  const ep = new Episode(task);
  const ctx = policy.context();
  let len = 0;
  const push = (x: number) => { if (++len < MAX_LEN) policy.push(ctx, x); };
  for (const x of prompt(task, false)) push(x);
  const turns: Turn[] = [];
  while (!ep.done) {
    const anchor = ep.anchor();
    const tokens: number[] = [];
    for (let i = 0; i < TURN_TOKENS; i++) {
      policy.next(ctx, buf);
      const x = rng.sampleLogits(buf, V);
      tokens.push(x);
      push(x);
    }
    const r = ep.step(tokens);
    for (const x of r.observation) push(x);
    turns.push({ tokens, observation: r.observation, anchor });
  }
  return { task, group, turns, reward: ep.reward };
}

/** Plays `groupSize` episodes of each task (the GRPO group); groups are numbered by task index. */
export function collect(policy: Policy, tasks: Task[], groupSize: number, rng: Rng): Trajectory[] {
  const out: Trajectory[] = [];
  const buf = new Float32Array(policy.cfg.vocab);
  tasks.forEach((task, g) => {
    for (let i = 0; i < groupSize; i++) out.push(playEpisode(policy, task, g, rng, buf));
  });
  return out;
}

/**
 * How an episode ended: `win`; `wrong_answer` (answered a wrong locker after the key had been seen);
 * `guess` (answered a wrong locker without having seen the key); `out_of_turns` (never answered:
 * wasted or malformed turns).
 */
export type Outcome = 'win' | 'wrong_answer' | 'guess' | 'out_of_turns';

/** Classifies an episode's ending (see {@link Outcome}). */
export function outcome(t: Trajectory): Outcome {
  if (t.reward > 0) return 'win';
  const last = t.turns[t.turns.length - 1]!.tokens;
  const answered = last[0] === tok('answer') && last[1]! >= L0 && last[1]! < L0 + LOCKERS && last[2] === tok(';');
  if (!answered) return 'out_of_turns';
  return t.turns.some((u) => u.observation[1] === tok('key')) ? 'wrong_answer' : 'guess';
}

/** Full token sequence of a trajectory (prompt, then each turn and its observation). */
export function sequence(t: Trajectory, groundTruth = false): number[] {
  const s = prompt(t.task, groundTruth);
  for (const turn of t.turns) s.push(...turn.tokens, ...turn.observation);
  return s;
}

/** Trajectories packed for training. */
export interface PackedBatch {
  /** The trajectories, in row order. */
  trajectories: Trajectory[];
  /** One row per conversation: the turns' tokens with the observations masked (mask 0). */
  conversation: rl.RolloutBatch;
  /** One row per agent step (the turn's three tokens), carrying the anchor state and rewards. */
  steps: rl.RolloutBatch;
  /** Offsets of the step rows over the conversation tokens (each turn plus its observation), to broadcast per-step values. */
  stepOffsets: Int32Array;
  /** Rows for the student's forward pass (student context), aligned with the conversation tokens. */
  studentRows: RowSpec;
  /** Rows for the teacher's forward pass: the same tokens with the ground truth in the hint slot. */
  teacherRows: RowSpec;
}

/** Packs trajectories (see {@link PackedBatch}). */
export function pack(trajectories: Trajectory[]): PackedBatch {
  const input: rl.RolloutBatchInput = {
    trajectories: trajectories.map((t) => ({
      group: t.group,
      episodeReward: t.reward,
      groundTruth: t.task.answer,
      steps: t.turns.map((turn, k) => ({
        tokens: turn.tokens,
        observation: turn.observation,
        anchor: turn.anchor,
        reward: k === t.turns.length - 1 ? t.reward : 0, // sparse: only the final turn is rewarded
      })),
    })),
  };
  const conversation = rl.buildRolloutBatch({ ...input, layout: 'conversation' });
  const steps = rl.buildRolloutBatch({ ...input, layout: 'step' });
  const stepOff = [0];
  for (const t of trajectories) for (const turn of t.turns) stepOff.push(stepOff[stepOff.length - 1]! + turn.tokens.length + turn.observation.length);
  const seqs = trajectories.map((t) => sequence(t));
  const teacherSeqs = seqs.map((s, r) => {
    const g = s.slice();
    g[HINT_POS] = L0 + trajectories[r]!.task.answer;
    return g;
  });
  const from = trajectories.map(() => PROMPT_TOKENS);
  const to = seqs.map((s) => s.length);
  return {
    trajectories, conversation, steps, stepOffsets: Int32Array.from(stepOff),
    studentRows: { seqs, from, to }, teacherRows: { seqs: teacherSeqs, from, to },
  };
}

/** Token texts of the conversation rows (for the visualiser). */
export function tokenTexts(b: PackedBatch): string[] {
  return detokenize(b.conversation.tokenIds).split(' ');
}
