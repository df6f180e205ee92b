/**
 * Rollouts: the policy plays episodes of an {@link Environment} (sampling at temperature 1, tool
 * observations appended to its context), and finished episodes are packed with the library's
 * `buildRolloutBatch` — one row per conversation with observation tokens masked out (what the loss and
 * GEAR see), and one row per agent step (what GiGPO groups by anchor state).
 *
 * @module
 */
import * as rl from 'gear-rl';
import type { Rng } from '../env/rng.js';
import { detokenizeWith, type EnvTask, type Environment, type TokenRole } from '../env/types.js';
import type { Policy, RowSpec } from '../model/policy.js';
import { hasKnownCredit, labelResponse } from './oracle.js';

/** One agent turn of an episode. */
export interface Turn {
  /** The sampled tokens (`env.turnLength` of them). */
  tokens: number[];
  /** What the tool returned (empty after the final turn). */
  observation: number[];
  /** The environment state the turn acted from (GiGPO anchor). */
  anchor: string;
  /** Credit role of each sampled token (see {@link TokenRole}). */
  roles: TokenRole[];
}

/** One sampled episode. */
export interface Trajectory {
  /** The task played. */
  task: EnvTask;
  /** Index of the group (the G episodes of one task share it). */
  group: number;
  /** Turns in order. */
  turns: Turn[];
  /** Outcome reward. */
  reward: number;
  /** How the episode ended (one of `env.outcomes`). */
  outcome: string;
}

/**
 * Plays one episode with the policy, sampling every agent token from `rng`.
 *
 * @param privileged play from the teacher's prompt (used to measure the teacher's own success)
 */
export function playEpisode(env: Environment, policy: Policy, task: EnvTask, group: number, rng: Rng,
  logitsBuf?: Float32Array, privileged = false): Trajectory {
  const V = policy.cfg.vocab;
  const buf = logitsBuf ?? new Float32Array(V);
  const ep = env.episode(task);
  const ctx = policy.context();
  let len = 0;
  const push = (x: number) => { if (++len < env.maxLength) policy.push(ctx, x); };
  for (const x of env.prompt(task, privileged)) push(x);
  const turns: Turn[] = [];
  while (!ep.done) {
    const anchor = ep.anchor();
    const tokens: number[] = [];
    for (let i = 0; i < env.turnLength; i++) {
      policy.next(ctx, buf);
      const x = rng.sampleLogits(buf, V);
      tokens.push(x);
      push(x);
    }
    const r = ep.step(tokens);
    for (const x of r.observation) push(x);
    turns.push({ tokens, observation: r.observation, anchor, roles: r.roles });
  }
  return { task, group, turns, reward: ep.reward, outcome: ep.outcome() };
}

/** Plays `groupSize` episodes of each task (the GRPO group); groups are numbered by task index. */
export function collect(env: Environment, policy: Policy, tasks: EnvTask[], groupSize: number, rng: Rng): Trajectory[] {
  const out: Trajectory[] = [];
  const buf = new Float32Array(policy.cfg.vocab);
  tasks.forEach((task, g) => {
    for (let i = 0; i < groupSize; i++) out.push(playEpisode(env, policy, task, g, rng, buf));
  });
  return out;
}

/** Full token sequence of a trajectory (prompt, then each turn and its observation). */
export function sequence(env: Environment, t: Trajectory, privileged = false): number[] {
  const s = env.prompt(t.task, privileged);
  for (const turn of t.turns) s.push(...turn.tokens, ...turn.observation);
  return s;
}

/** Trajectories packed for training. */
export interface PackedBatch {
  /** The trajectories, in row order. */
  trajectories: Trajectory[];
  /** One row per conversation: the turns' tokens with the observations masked (mask 0). */
  conversation: rl.RolloutBatch;
  /** One row per agent step (the turn's tokens), carrying the anchor state and rewards. */
  steps: rl.RolloutBatch;
  /** Per conversation token: its credit role (0 on observations). */
  roles: Int8Array;
  /**
   * Environments with known credit only: per conversation token its label (see `LABEL` in oracle.ts),
   * and the true departure segment of every failed row (conversation token indices), the oracle's units.
   */
  known?: { labels: Uint8Array; departures: rl.GearSegments; departureOf: Int32Array };
  /** Rows for the student's forward pass (student context), aligned with the conversation tokens. */
  studentRows: RowSpec;
  /** Rows for the teacher's forward pass: the same tokens after the privileged prompt. */
  teacherRows: RowSpec;
}

/** Packs trajectories (see {@link PackedBatch}). */
export function pack(env: Environment, trajectories: Trajectory[]): PackedBatch {
  const input: rl.RolloutBatchInput = {
    trajectories: trajectories.map((t) => ({
      group: t.group,
      episodeReward: t.reward,
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
  const roles = new Int8Array(conversation.tokens);
  let i = 0;
  for (const t of trajectories) {
    for (const turn of t.turns) {
      for (const r of turn.roles) roles[i++] = r;
      i += turn.observation.length;
    }
  }
  const seqs = trajectories.map((t) => sequence(env, t));
  const P = env.promptLength;
  const teacherSeqs = trajectories.map((t, r) => [...env.prompt(t.task, true), ...seqs[r]!.slice(P)]);
  const from = trajectories.map(() => P);
  const to = seqs.map((s) => s.length);
  return {
    trajectories, conversation, steps, roles, ...(hasKnownCredit(env) ? { known: knownCredit(env, trajectories, conversation) } : {}),
    studentRows: { seqs, from, to }, teacherRows: { seqs: teacherSeqs, from, to },
  };
}

/** Labels and departure segments of a batch of a known-credit environment (no observations: a row is its response). */
function knownCredit(env: Environment & Required<Pick<Environment, 'kinds' | 'allowed' | 'unitEnd'>>, trajectories: Trajectory[],
  conv: rl.RolloutBatch): NonNullable<PackedBatch['known']> {
  const labels = new Uint8Array(conv.tokens);
  const start: number[] = [], length: number[] = [];
  const departureOf = new Int32Array(trajectories.length).fill(-1);
  trajectories.forEach((t, r) => {
    const tokens = t.turns.flatMap((u) => [...u.tokens, ...u.observation]);
    if (t.turns.some((u) => u.observation.length > 0)) throw new Error('pack: known credit needs responses without observations');
    const lab = labelResponse(env.kinds, env.allowed(t.task), tokens, (p) => env.unitEnd(p));
    const o = conv.offsets[r]!;
    labels.set(lab.labels, o);
    if (lab.departure >= 0) {
      departureOf[r] = o + lab.departure;
      start.push(o + lab.departure);
      length.push(lab.departureEnd - lab.departure);
    }
  });
  return { labels, departures: { start: Int32Array.from(start), length: Int32Array.from(length) }, departureOf };
}

/** Token texts of the conversation rows (for the visualiser). */
export function tokenTexts(env: Environment, b: PackedBatch): string[] {
  return detokenizeWith(env.vocab, b.conversation.tokenIds).split(' ');
}
