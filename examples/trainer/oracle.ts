/**
 * Ground-truth credit for environments whose success condition is known token by token (the answer
 * chain): the label of every sampled token, the true departure segment of every failed episode, and the
 * true per-token advantage `A*_t = Q(s_t, y_t) - V(s_t)` of a policy, estimated by Monte Carlo rollouts
 * from each prefix.
 *
 * Labels: before the first token outside its allowed set, a token is `filler`, a right `decision` or a
 * `forced` token (by its position's kind); that first token is the `departure`; every later token is
 * `doomed` (success is impossible whatever follows).
 *
 * @module
 */
import type { Rng } from '../env/rng.js';
import type { EnvTask, Environment, TokenKind } from '../env/types.js';

/** Label codes per conversation token (0 on tokens the agent did not generate). */
export const LABEL = { observation: 0, filler: 1, decision: 2, forced: 3, departure: 4, doomed: 5 } as const;
/** Label names by code. */
export const LABEL_NAMES = ['observation', 'filler', 'decision', 'forced', 'departure', 'doomed'] as const;
/** A label name. */
export type LabelName = (typeof LABEL_NAMES)[number];

/** An environment with known credit (`kinds`, `allowed` and `unitEnd` present). */
export type KnownCreditEnv = Environment & Required<Pick<Environment, 'kinds' | 'allowed' | 'unitEnd'>>;

/** True when `env` knows the credit of every token. */
export function hasKnownCredit(env: Environment): env is KnownCreditEnv {
  return env.kinds !== undefined && typeof env.allowed === 'function' && typeof env.unitEnd === 'function';
}

/** The labels of one response and where it departs. */
export interface ResponseLabels {
  /** Per response token: a {@link LABEL} code. */
  labels: Uint8Array;
  /** Index of the departure token, -1 when the response stays on track (a success). */
  departure: number;
  /** End (exclusive) of the departure's decisive unit (the departure and the tokens its decision forces), -1 without one. */
  departureEnd: number;
}

/**
 * Labels the tokens of one response (its agent tokens in order): filler / right decision / forced
 * before the departure (the first token outside its allowed set), then `doomed`.
 */
export function labelResponse(kinds: readonly TokenKind[], allowed: readonly (readonly number[])[], tokens: ArrayLike<number>,
  unitEnd: (pos: number) => number): ResponseLabels {
  if (tokens.length > kinds.length) throw new Error(`labelResponse: ${tokens.length} tokens for ${kinds.length} positions`);
  const labels = new Uint8Array(tokens.length);
  let departure = -1;
  for (let t = 0; t < tokens.length; t++) {
    if (departure >= 0) { labels[t] = LABEL.doomed; continue; }
    if (!allowed[t]!.includes(tokens[t]!)) { departure = t; labels[t] = LABEL.departure; continue; }
    labels[t] = LABEL[kinds[t]!];
  }
  return { labels, departure, departureEnd: departure < 0 ? -1 : Math.min(unitEnd(departure), tokens.length) };
}

/** What the value estimator needs of a policy: an incremental context that can be forked. */
export interface SequenceModel<C> {
  /** Vocabulary size. */
  readonly vocab: number;
  /** An empty context. */
  context(): C;
  /** A copy of a context. */
  fork(ctx: C): C;
  /** Appends a token. */
  push(ctx: C, x: number): void;
  /** Logits of the next token into `out` (length vocab). */
  next(ctx: C, out: Float32Array): void;
}

/** Softmax of `logits` (float64, max-shifted) into `p`. */
function softmax(logits: Float32Array, p: Float64Array): void {
  let max = -Infinity;
  for (let j = 0; j < p.length; j++) max = Math.max(max, logits[j]!);
  let s = 0;
  for (let j = 0; j < p.length; j++) { p[j] = Math.exp(logits[j]! - max); s += p[j]!; }
  for (let j = 0; j < p.length; j++) p[j]! /= s;
}

/**
 * One conditional Monte Carlo rollout from `ctx` over response positions `from .. end-1`: at each
 * position the weight is multiplied by the policy's probability of the allowed set, and the token is
 * sampled from the policy restricted to that set. The expected weight is exactly the probability that
 * the policy, left to itself, keeps every remaining token allowed (the success probability V of the
 * prefix): sampling only the free choices removes the variance of the forced ones.
 */
function rolloutWeight<C>(model: SequenceModel<C>, ctx: C, allowed: readonly (readonly number[])[], from: number,
  rng: Rng, logits: Float32Array, p: Float64Array): number {
  let w = 1;
  for (let t = from; t < allowed.length; t++) {
    model.next(ctx, logits);
    softmax(logits, p);
    const set = allowed[t]!;
    let mass = 0;
    for (const a of set) mass += p[a]!;
    w *= mass;
    if (!(w > 0)) return 0;
    let x = set[0]!;
    if (set.length > 1) {
      let u = rng.next() * mass;
      for (const a of set) { u -= p[a]!; x = a; if (u < 0) break; }
    }
    if (t < allowed.length - 1) model.push(ctx, x);
  }
  return w;
}

/**
 * Monte Carlo values of every prefix of one response: `V[t]` (t = 0..T) estimates the probability of
 * success after the prompt and the first t response tokens, with `rollouts` conditional rollouts each
 * (see {@link rolloutWeight}). A prefix that holds a token outside its allowed set is doomed: V = 0
 * exactly. `V[T]` is the outcome (1 on track, 0 otherwise).
 */
export function prefixValues<C>(model: SequenceModel<C>, prompt: readonly number[], allowed: readonly (readonly number[])[],
  tokens: ArrayLike<number>, rollouts: number, rng: Rng): Float64Array {
  const T = tokens.length;
  if (T !== allowed.length) throw new Error(`prefixValues: ${T} tokens for ${allowed.length} positions`);
  const V = new Float64Array(T + 1);
  const ctx = model.context();
  for (const x of prompt) model.push(ctx, x);
  const logits = new Float32Array(model.vocab), p = new Float64Array(model.vocab);
  let onTrack = true;
  for (let t = 0; t <= T; t++) {
    if (!onTrack) { V[t] = 0; continue; }
    if (t === T) { V[t] = 1; break; }
    let s = 0;
    for (let k = 0; k < rollouts; k++) s += rolloutWeight(model, model.fork(ctx), allowed, t, rng, logits, p);
    V[t] = s / rollouts;
    if (!allowed[t]!.includes(tokens[t]!)) onTrack = false;
    if (t < T - 1) model.push(ctx, tokens[t]!);
  }
  return V;
}

/** True per-token advantages of a response from its prefix values: `A*_t = V[t+1] - V[t]`. */
export function advantagesFromValues(V: Float64Array): Float64Array {
  const out = new Float64Array(V.length - 1);
  for (let t = 0; t < out.length; t++) out[t] = V[t + 1]! - V[t]!;
  return out;
}

/** A sampled episode of a known-credit environment, as the estimator needs it. */
export interface KnownEpisode {
  /** The task. */
  task: EnvTask;
  /** Its response tokens (every agent token, in order). */
  tokens: number[];
}

/**
 * True advantages of a batch of responses (concatenated in order), and their prefix values: one
 * {@link prefixValues} per response, under the student's prompt.
 */
export function trueAdvantages<C>(env: KnownCreditEnv, model: SequenceModel<C>, episodes: KnownEpisode[], rollouts: number,
  rng: Rng): { advantages: Float64Array; values: Float64Array[] } {
  const total = episodes.reduce((a, e) => a + e.tokens.length, 0);
  const advantages = new Float64Array(total);
  const values: Float64Array[] = [];
  let i = 0;
  for (const e of episodes) {
    const V = prefixValues(model, env.prompt(e.task, false), env.allowed(e.task), e.tokens, rollouts, rng);
    values.push(V);
    advantages.set(advantagesFromValues(V), i);
    i += e.tokens.length;
  }
  return { advantages, values };
}
