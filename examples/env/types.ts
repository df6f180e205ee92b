/**
 * The environment interface of the demo. Any multi-turn token task that implements {@link Environment}
 * can be trained and measured by the demo's loop (`--env <name>` once it is listed in `env/index.ts`):
 * rollouts, GRPO / GiGPO / GEAR advantages, the privileged teacher, the warm-start demonstrator and the
 * credit-fidelity measurement all go through these few members.
 *
 * Conventions:
 *
 * * A conversation is `prompt(task, false)`, then for each agent turn exactly {@link Environment.turnLength}
 *   sampled tokens and the tool's observation tokens (which the policy did not generate: loss mask 0).
 * * `prompt(task, true)` is the teacher's (privileged) prompt: the same length, identical tokens except
 *   the slots that carry the privileged information, so student and teacher logits align 1:1.
 * * Every sampled token gets a {@link TokenRole} from the environment when its turn is applied: whether
 *   the token was a decisive choice and whether it was right. The demo measures where each method puts
 *   its advantage mass with these roles.
 *
 * @module
 */
import type { Rng } from './rng.js';

/**
 * The credit role of one sampled token: `0` neutral (fillers, separators, verbs, exploratory choices),
 * `1` a right decisive choice, `-1` a wrong decisive choice.
 */
export type TokenRole = -1 | 0 | 1;

/** One task; environments add their hidden layout. */
export interface EnvTask {
  /** The environment seed the task was drawn from. */
  seed: number;
}

/** What one agent turn did. */
export interface StepResult {
  /** Observation tokens returned by the tool (empty when the episode ended). */
  observation: number[];
  /** Step reward (the outcome on the final turn, else 0). */
  reward: number;
  /** True when the episode is over. */
  done: boolean;
  /** False when the turn was malformed. */
  valid: boolean;
  /** One {@link TokenRole} per token of the turn. */
  roles: TokenRole[];
}

/** One episode's state machine. */
export interface EnvEpisode {
  /** True once the episode is over. */
  readonly done: boolean;
  /** Outcome reward; valid once done. */
  readonly reward: number;
  /** Turns taken so far. */
  readonly turn: number;
  /** The current state as a canonical string (the GiGPO anchor of the next turn). */
  anchor(): string;
  /** Applies one agent turn ({@link Environment.turnLength} token ids). */
  step(turn: ArrayLike<number>): StepResult;
  /** How the episode ended, one of {@link Environment.outcomes}; valid once done. */
  outcome(): string;
}

/** A multi-turn token environment the demo can train on. */
export interface Environment<T extends EnvTask = EnvTask, E extends EnvEpisode = EnvEpisode> {
  /** Short name (`--env <name>`). */
  readonly name: string;
  /** One-line description for logs and plots. */
  readonly title: string;
  /** Token vocabulary, in id order. */
  readonly vocab: readonly string[];
  /** Tokens the agent samples per turn. */
  readonly turnLength: number;
  /** Most turns an episode can take. */
  readonly maxTurns: number;
  /** Prompt length in tokens (student and teacher alike). */
  readonly promptLength: number;
  /** Longest possible conversation in tokens (prompt, turns, observations). */
  readonly maxLength: number;
  /** Every settings value that changes the task (part of the warm-start cache key). */
  readonly settings: Readonly<Record<string, string | number | boolean>>;
  /** How an episode can end (first: the success), for the outcome table. */
  readonly outcomes: readonly string[];
  /** Draws the task of an environment seed (deterministic). */
  makeTask(seed: number): T;
  /** The prompt; `privileged` gives the teacher's view (same length, aligned token for token). */
  prompt(task: T, privileged: boolean): number[];
  /** A fresh episode of `task`. */
  episode(task: T): E;
  /** The warm-start demonstrator's next turn from `ep` (noise `eps`; `privileged`: the teacher's view). */
  demoTurn(ep: E, rng: Rng, eps: number, privileged: boolean): number[];
  /** Short text of the hidden layout (row labels of reports). */
  describe(task: T): string;
}

/** A finished episode as token ids with its per-token bookkeeping. */
export interface Transcript {
  /** All tokens: prompt, then turns and observations in order. */
  tokens: number[];
  /** Per token: 1 if the agent generated it, 0 for prompt and observation tokens. */
  agentMask: number[];
  /** Per token: index of the agent turn it belongs to (observations belong to the turn that called the tool), -1 in the prompt. */
  turnOf: number[];
  /** Anchor state each turn acted from. */
  anchors: string[];
  /** Outcome reward. */
  reward: number;
  /** How the episode ended. */
  outcome: string;
}

/** Plays one demonstration episode of `env` with its demonstrator. */
export function demoTranscript<T extends EnvTask, E extends EnvEpisode>(
  env: Environment<T, E>, task: T, rng: Rng, eps: number, privileged: boolean,
): Transcript {
  const ep = env.episode(task);
  const tokens = env.prompt(task, privileged);
  const t: Transcript = { tokens, agentMask: tokens.map(() => 0), turnOf: tokens.map(() => -1), anchors: [], reward: 0, outcome: '' };
  while (!ep.done) {
    const k = ep.turn;
    t.anchors.push(ep.anchor());
    const turn = env.demoTurn(ep, rng, eps, privileged);
    const r = ep.step(turn);
    for (const x of turn) { t.tokens.push(x); t.agentMask.push(1); t.turnOf.push(k); }
    for (const x of r.observation) { t.tokens.push(x); t.agentMask.push(0); t.turnOf.push(k); }
  }
  t.reward = ep.reward;
  t.outcome = ep.outcome();
  return t;
}

/** Renders token ids as text with `vocab`. */
export function detokenizeWith(vocab: readonly string[], ids: ArrayLike<number>): string {
  return Array.from(ids, (i) => vocab[i] ?? `<${i}>`).join(' ');
}
