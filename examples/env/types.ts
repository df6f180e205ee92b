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
 *   the slots that carry the privileged information, so student and teacher logits align 1:1. An
 *   environment with several privileged views names them in {@link Environment.views}; `true` is the
 *   first of them.
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

/**
 * Which prompt to build: `false` the student's, `true` the teacher's privileged view, or the name of one
 * of {@link Environment.views} (environments with a single privileged view treat any name as `true`).
 */
export type PromptView = boolean | string;

/**
 * What a response position is for, in an environment whose credit is known token by token: free
 * filler, a decision, or a token the grammar forces after a decision.
 */
export type TokenKind = 'filler' | 'decision' | 'forced';

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
  /**
   * Named privileged views, when there are several (the first is what `true` means); the warm-start's
   * privileged demonstrations cycle through them. Undefined: one privileged view.
   */
  readonly views?: readonly string[];
  /** Draws the task of an environment seed (deterministic). */
  makeTask(seed: number): T;
  /**
   * Known credit (optional; environments without observations and with a fixed response layout, such
   * as the answer chain): the kind of each response position. With it, {@link Environment.allowed} and
   * {@link Environment.unitEnd} let the demo label every token and compute its true advantage.
   */
  readonly kinds?: readonly TokenKind[];
  /** Known credit: per response position, the tokens that keep success possible. */
  allowed?(task: T): number[][];
  /** Known credit: end (exclusive) of the decisive unit of a response position (a decision and its forced tokens). */
  unitEnd?(pos: number): number;
  /** The prompt; a privileged `view` gives a teacher's view (same length, aligned token for token). */
  prompt(task: T, view: PromptView): number[];
  /** A fresh episode of `task`. */
  episode(task: T): E;
  /** The warm-start demonstrator's next turn from `ep` (noise `eps`; a privileged `view`: what that teacher sees). */
  demoTurn(ep: E, rng: Rng, eps: number, view: PromptView): number[];
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

/** Plays one demonstration episode of `env` with its demonstrator, in the student's or a privileged view. */
export function demoTranscript<T extends EnvTask, E extends EnvEpisode>(
  env: Environment<T, E>, task: T, rng: Rng, eps: number, view: PromptView,
): Transcript {
  const ep = env.episode(task);
  const tokens = env.prompt(task, view);
  const t: Transcript = { tokens, agentMask: tokens.map(() => 0), turnOf: tokens.map(() => -1), anchors: [], reward: 0, outcome: '' };
  while (!ep.done) {
    const k = ep.turn;
    t.anchors.push(ep.anchor());
    const turn = env.demoTurn(ep, rng, eps, view);
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
