/**
 * The built-in multi-turn tool-use environment of the demo: **locker search**.
 *
 * A key is hidden in one of five lockers. The prompt gives a clue — one locker the key is *not* in —
 * so four candidates remain. Each agent turn is three tokens, a verb, a locker and `;`, and calls a tool:
 * `open Lk ;` returns the observation `obs key` or `obs empty` (two tokens the policy did not generate,
 * masked out of the loss); `answer Lk ;` ends the episode with reward 1 if the key is in locker k, else 0.
 * Malformed turns get `obs err`. After {@link MAX_TURNS} turns without an answer the episode ends with
 * reward 0. Four turns leave room for at most three openings and the answer, so an agent that wastes a
 * turn (opening the excluded locker, or one it already opened) runs out of turns unless it is lucky, and
 * after three empty candidates it has to deduce the fourth.
 *
 * The ground truth of a task is the key's locker. The teacher's context carries it in the prompt's hint
 * slot (`hint Lk`); the student sees `hint ?` there. Token positions are identical in both contexts, so
 * student and teacher logits align 1:1.
 *
 * @module
 */
import { Rng, deriveSeed } from './rng.js';
import type { EnvTask, Environment, StepResult, TokenRole } from './types.js';

/** The token vocabulary, in id order. */
export const VOCAB = [
  '<pad>', '<bos>', 'find', 'key', 'not', 'hint', '?', 'open', 'answer', ';', 'obs', 'empty', 'err',
  'L1', 'L2', 'L3', 'L4', 'L5',
] as const;
/** A token string of {@link VOCAB}. */
export type TokenName = (typeof VOCAB)[number];

/** Token id of a vocabulary entry. */
export function tok(name: TokenName): number {
  return VOCAB.indexOf(name);
}

/** Number of lockers. */
export const LOCKERS = 5;
/** Turns per episode (tool calls plus the answer). */
export const MAX_TURNS = 4;
/** Tokens per agent turn: verb, locker, `;`. */
export const TURN_TOKENS = 3;
/** Tokens per tool observation: `obs`, then `key`, `empty` or `err`. */
export const OBS_TOKENS = 2;
/** Prompt tokens: `<bos> find key not <Lc> hint <?|Lk>`. */
export const PROMPT_TOKENS = 7;
/** Index of the clue (the excluded locker) inside the prompt. */
export const CLUE_POS = 4;
/** Index of the hint slot inside the prompt. */
export const HINT_POS = 6;
/** Longest possible episode in tokens (prompt, four turns, three observations). */
export const MAX_LEN = PROMPT_TOKENS + MAX_TURNS * TURN_TOKENS + (MAX_TURNS - 1) * OBS_TOKENS;

/** Token id of the first locker (`L1`); lockers are consecutive. */
export const L0 = tok('L1');

/** One task: where the key is and the clue. */
export interface Task extends EnvTask {
  /** Ground truth: index (0..LOCKERS-1) of the locker holding the key. */
  answer: number;
  /** Index of the locker the prompt excludes (never the answer). */
  clue: number;
}

/** Draws the task of an environment seed (deterministic). */
export function makeTask(seed: number): Task {
  const rng = new Rng(deriveSeed(seed, 0x10c4e5));
  const answer = rng.int(LOCKERS);
  const clue = (answer + 1 + rng.int(LOCKERS - 1)) % LOCKERS;
  return { seed, answer, clue };
}

/** The prompt tokens; with `groundTruth` the hint slot holds the key's locker (the teacher's context). */
export function prompt(task: Task, groundTruth = false): number[] {
  return [tok('<bos>'), tok('find'), tok('key'), tok('not'), L0 + task.clue, tok('hint'),
    groundTruth ? L0 + task.answer : tok('?')];
}

/** What one agent turn did (see {@link StepResult}). */
export type TurnResult = StepResult;

/**
 * One episode's state machine. The state an agent acts from is what it has learned (which lockers it
 * opened and what they held) and how many turns it has used; {@link Episode.anchor} renders it as the
 * GiGPO anchor string. Different action orders reach the same state, so states recur across a group.
 */
export class Episode {
  /** Turns taken so far. */
  turn = 0;
  /** Per locker: 1 = opened and holds the key, 0 = opened and empty, -1 = not opened. */
  readonly known: number[] = Array(LOCKERS).fill(-1);
  /** True once answered or out of turns. */
  done = false;
  /** Outcome reward (1 correct answer, else 0); valid once done. */
  reward = 0;
  private end = '';

  /** @param task the task being solved */
  constructor(readonly task: Task) {}

  /** The current state as a canonical string: turn count, clue, opened lockers and what they held. */
  anchor(): string {
    const seen = this.known.map((k, l) => (k < 0 ? '' : `L${l + 1}=${k ? 'key' : 'empty'}`)).filter((s) => s);
    return `t${this.turn}|not L${this.task.clue + 1}|${seen.join(',')}`;
  }

  /**
   * How the episode ended: `win`; `wrong_answer` (named a wrong locker after the key had been seen);
   * `guess` (named a wrong locker without having seen it); `out_of_turns` (never answered). Valid once done.
   */
  outcome(): string {
    return this.end;
  }

  /**
   * Applies one agent turn (three token ids) and returns the tool's observation, the reward and each
   * token's credit role: the answer's locker is decisive (right or wrong); opening the excluded or an
   * already opened locker, and the first token that breaks a malformed turn, are wrong; the rest is neutral.
   */
  step(turn: ArrayLike<number>): TurnResult {
    if (this.done) throw new Error('Episode.step: the episode is over');
    if (turn.length !== TURN_TOKENS) throw new Error(`Episode.step: expected ${TURN_TOKENS} tokens, got ${turn.length}`);
    this.turn++;
    const [verb, arg, end] = [turn[0]!, turn[1]!, turn[2]!];
    const locker = arg - L0;
    const roles: TokenRole[] = [0, 0, 0];
    const bad = verb !== tok('open') && verb !== tok('answer') ? 0 : !(locker >= 0 && locker < LOCKERS) ? 1 : end !== tok(';') ? 2 : -1;
    const valid = bad < 0;
    if (valid && verb === tok('answer')) {
      const right = locker === this.task.answer;
      roles[1] = right ? 1 : -1;
      return this.finish(right ? 1 : 0, right ? 'win' : this.known.includes(1) ? 'wrong_answer' : 'guess', roles, true);
    }
    let observation: number[];
    if (valid) {
      if (locker === this.task.clue || this.known[locker]! >= 0) roles[1] = -1;
      const hit = locker === this.task.answer;
      this.known[locker] = hit ? 1 : 0;
      observation = [tok('obs'), tok(hit ? 'key' : 'empty')];
    } else {
      roles[bad] = -1;
      observation = [tok('obs'), tok('err')];
    }
    if (this.turn >= MAX_TURNS) return this.finish(0, 'out_of_turns', roles, valid);
    return { observation, reward: 0, done: false, valid, roles };
  }

  private finish(reward: number, end: string, roles: TokenRole[], valid: boolean): TurnResult {
    this.done = true;
    this.reward = reward;
    this.end = end;
    return { observation: [], reward, done: true, valid, roles };
  }
}

/**
 * The demonstrator used for the supervised warm-start: a correct search (open the lowest candidate
 * locker not yet opened — skipping the excluded one; answer as soon as the key is seen, or deduce the
 * last candidate) corrupted by noise: with probability `eps` the verb, and independently the locker,
 * is replaced by a uniformly random one. With `groundTruth` (demonstrations in the teacher's context)
 * an answer always names the ground truth: the search is as noisy as the student's, but the reference
 * answer is used when answering.
 */
export function demoTurn(ep: Episode, rng: Rng, eps: number, groundTruth: boolean): number[] {
  const found = ep.known.indexOf(1);
  const left = [...Array(LOCKERS).keys()].filter((l) => l !== ep.task.clue && ep.known[l]! < 0);
  let verb: number;
  let locker: number;
  if (found >= 0) [verb, locker] = [tok('answer'), found];
  else if (left.length === 1) [verb, locker] = [tok('answer'), left[0]!];
  else [verb, locker] = [tok('open'), left[0]!];
  if (rng.next() < eps) verb = rng.next() < 0.5 ? tok('open') : tok('answer');
  if (rng.next() < eps) locker = rng.int(LOCKERS);
  if (groundTruth && verb === tok('answer')) locker = ep.task.answer;
  return [verb, L0 + locker, tok(';')];
}

/** A finished episode as token ids with its per-token bookkeeping. */
export interface Transcript {
  /** The task. */
  task: Task;
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
}

/** Plays one demonstration episode with {@link demoTurn}. */
export function demoEpisode(task: Task, rng: Rng, eps: number, groundTruth: boolean): Transcript {
  const ep = new Episode(task);
  const t: Transcript = { task, tokens: prompt(task, groundTruth), agentMask: [], turnOf: [], anchors: [], reward: 0 };
  t.agentMask = t.tokens.map(() => 0);
  t.turnOf = t.tokens.map(() => -1);
  while (!ep.done) {
    const k = ep.turn;
    t.anchors.push(ep.anchor());
    const turn = demoTurn(ep, rng, eps, groundTruth);
    const r = ep.step(turn);
    for (const x of turn) { t.tokens.push(x); t.agentMask.push(1); t.turnOf.push(k); }
    for (const x of r.observation) { t.tokens.push(x); t.agentMask.push(0); t.turnOf.push(k); }
  }
  t.reward = ep.reward;
  return t;
}

/** Renders token ids as text (for reports and debugging). */
export function detokenize(ids: ArrayLike<number>): string {
  return Array.from(ids, (i) => VOCAB[i] ?? `<${i}>`).join(' ');
}

/** Locker search as an {@link Environment} (`--env locker`); the privileged prompt carries the answer. */
export const lockerEnv: Environment<Task, Episode> = {
  name: 'locker',
  title: `locker search (${LOCKERS} lockers, ${MAX_TURNS} turns, vocab ${VOCAB.length})`,
  vocab: VOCAB,
  turnLength: TURN_TOKENS,
  maxTurns: MAX_TURNS,
  promptLength: PROMPT_TOKENS,
  maxLength: MAX_LEN,
  settings: { lockers: LOCKERS, maxTurns: MAX_TURNS },
  outcomes: ['win', 'wrong_answer', 'guess', 'out_of_turns'],
  makeTask,
  prompt: (task, view) => prompt(task, view !== false),
  episode: (task) => new Episode(task),
  demoTurn: (ep, rng, eps, view) => demoTurn(ep, rng, eps, view !== false),
  describe: (task) => `key in L${task.answer + 1} · not L${task.clue + 1}`,
};
