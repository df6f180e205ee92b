/**
 * The **answer chain**: the task of the main job, built so that the credit of every token is known.
 *
 * The prompt shows K digits `x_1 .. x_K` (base B); the answer is K digits, `d_k = (x_k + k - 1) mod B`,
 * and the response spells it out, one item per turn. An item is F **filler** words (any of W words, free:
 * they never change the outcome), then the answer digit as a **multi-token word**: its first subword
 * `a<d>` is the **decision**, and the grammar forces the next subwords `b<d>`, `c<d>` (the same digit).
 * The reward is the outcome only: 1 when every digit is right and every word well formed, else 0; it
 * comes at the end, and nothing is observed in between (no tool calls).
 *
 * So every sampled token has a known kind (filler, decision, forced) and a known set of tokens that keep
 * success possible. The first token outside that set is the **departure**: after it the episode is
 * doomed, whatever comes next. With a noisy demonstrator (each digit redrawn with probability eps) the
 * warm-started policy makes mistakes the prompt could have avoided, which is the regime the GEAR paper
 * describes: errors of the student, not ignorance of hidden state.
 *
 * Privileged views (the teacher reads the same weights with another prompt; same length, aligned 1:1):
 *
 * * `answer` — the answer slots hold the answer digits (GEAR's teacher: the ground-truth answer);
 * * `solution` — the answer and the reference solution's filler words: one complete correct response
 *   (OPSD's teacher: the full reference solution);
 * * `irrelevant` — only the reference solution's filler words: privileged, but irrelevant to the reward.
 *
 * The warm-start demonstrator copies whatever its view shows: the answer (never wrong then) and the
 * reference filler words; in the student's view it writes random filler and a noisy answer.
 *
 * @module
 */
import { Rng, deriveSeed } from './rng.js';
import type { EnvEpisode, EnvTask, Environment, PromptView, StepResult, TokenKind, TokenRole } from './types.js';

/** The privileged views, in order (`true` means the first). */
export const CHAIN_VIEWS = ['answer', 'solution', 'irrelevant'] as const;
/** A privileged view of the answer chain. */
export type ChainView = (typeof CHAIN_VIEWS)[number];

/** Settings of an answer chain. */
export interface AnswerChainConfig {
  /** Answer digits K (items, one per turn; 1..12). */
  items: number;
  /** Filler words before each digit (0..6). */
  fillers: number;
  /** Subwords the grammar forces after each decision (0..2). */
  forced: number;
  /** Base B of the digits (2..8). */
  digits: number;
  /** Filler vocabulary size W (2..8). */
  words: number;
}

/** The main job's answer chain: 5 digits of base 4, 2 filler words of 6 and 2 forced subwords per item. */
export const CHAIN_DEFAULT: AnswerChainConfig = { items: 5, fillers: 2, forced: 2, digits: 4, words: 6 };

/** One answer-chain task. */
export interface ChainTask extends EnvTask {
  /** The prompt's digits x_k. */
  x: number[];
  /** The answer digits d_k = (x_k + k - 1) mod B. */
  answer: number[];
  /** The reference solution's filler words (K·F word indices). */
  reference: number[];
}

/** An answer-chain episode. */
export class ChainEpisode implements EnvEpisode {
  /** Turns (items) taken so far. */
  turn = 0;
  /** True once every item is written. */
  done = false;
  /** Outcome reward (valid once done). */
  reward = 0;
  /** Response position of the departure (the first token outside its allowed set), -1 while on track. */
  departure = -1;
  /** Digits written so far (-1 for a decision position that got another token). */
  written: number[] = [];
  private malformed = false;

  /**
   * @param env the environment
   * @param task the task being played
   */
  constructor(readonly env: AnswerChain, readonly task: ChainTask) {}

  /** `<item>|<digits written so far>`: the agent's own answer so far (filler words do not change the state). */
  anchor(): string {
    return `${this.turn}|${this.written.map((d) => (d < 0 ? 'x' : String(d))).join('')}`;
  }

  /** `win`, `wrong_answer` (well formed, a wrong digit) or `malformed`; valid once done. */
  outcome(): string {
    return !this.done ? '' : this.reward === 1 ? 'win' : this.malformed ? 'malformed' : 'wrong_answer';
  }

  /** Applies one item: F filler words, the decision subword and the forced subwords. */
  step(turn: ArrayLike<number>): StepResult {
    const env = this.env, { fillers: F, forced: Fc } = env.cfg;
    if (this.done) throw new Error('ChainEpisode.step: the episode is over');
    if (turn.length !== env.turnLength) throw new Error(`ChainEpisode.step: expected ${env.turnLength} tokens, got ${turn.length}`);
    const k = this.turn;
    const base = k * env.turnLength;
    const allowed = env.allowed(this.task);
    const roles: TokenRole[] = Array(turn.length).fill(0);
    let valid = true;
    for (let i = 0; i < turn.length; i++) {
      const x = turn[i]!;
      const pos = base + i;
      const ok = allowed[pos]!.includes(x);
      if (!ok && this.departure < 0) { this.departure = pos; roles[i] = -1; }
      if (ok && this.departure < 0 && env.kinds[pos] === 'decision') roles[i] = 1;
    }
    // Grammar: filler words, an `a` subword, then the forced subwords of the digit actually chosen.
    for (let i = 0; i < F; i++) if (!env.isFiller(turn[i]!)) valid = false;
    const d = env.decisionDigit(turn[F]!);
    if (d < 0) valid = false;
    for (let j = 1; j <= Fc; j++) if (d < 0 || turn[F + j] !== env.subword(j, d)) valid = false;
    this.written.push(d);
    if (!valid) this.malformed = true;
    this.turn++;
    if (this.turn === env.cfg.items) {
      this.done = true;
      this.reward = this.departure < 0 ? 1 : 0;
      return { observation: [], reward: this.reward, done: true, valid, roles };
    }
    return { observation: [], reward: 0, done: false, valid, roles };
  }
}

/** The answer-chain environment (see the module comment). */
export class AnswerChain implements Environment<ChainTask, ChainEpisode> {
  readonly name: string;
  readonly title: string;
  readonly vocab: readonly string[];
  readonly turnLength: number;
  readonly maxTurns: number;
  readonly promptLength: number;
  readonly maxLength: number;
  readonly settings: Readonly<Record<string, number>>;
  readonly outcomes = ['win', 'wrong_answer', 'malformed'] as const;
  readonly views = CHAIN_VIEWS;
  /** Kind of each response position (agent tokens in order; every response token is an agent token). */
  readonly kinds: readonly TokenKind[];
  private readonly ids = new Map<string, number>();

  /**
   * @param cfg the task's size (default {@link CHAIN_DEFAULT})
   * @param name the `--env` name
   */
  constructor(readonly cfg: AnswerChainConfig = CHAIN_DEFAULT, name = 'answer-chain') {
    const { items: K, fillers: F, forced: Fc, digits: B, words: W } = cfg;
    const int = (x: number, lo: number, hi: number, what: string) => {
      if (!(Number.isInteger(x) && x >= lo && x <= hi)) throw new Error(`AnswerChain: ${what} must be an integer in [${lo}, ${hi}], got ${x}`);
    };
    int(K, 1, 12, 'items'); int(F, 0, 6, 'fillers'); int(Fc, 0, 2, 'forced'); int(B, 2, 8, 'digits'); int(W, 2, 8, 'words');
    const seq = (p: string, n: number) => Array.from({ length: n }, (_, i) => `${p}${i}`);
    // The privileged slots have tokens of their own (`n<d>` an answer digit, `r<w>` a reference filler word):
    // the student never writes them, so its RL updates leave the teacher's reading of them alone.
    this.vocab = ['<pad>', '<bos>', 'q', 'ans', 'ref', '?', ...seq('x', B), ...seq('n', B), ...seq('r', W),
      ...seq('a', B), ...seq('b', B), ...seq('c', B), ...seq('w', W)];
    this.vocab.forEach((w, i) => this.ids.set(w, i));
    this.name = name;
    this.turnLength = F + 1 + Fc;
    this.maxTurns = K;
    this.promptLength = 4 + 2 * K + K * F;
    this.maxLength = this.promptLength + K * this.turnLength;
    this.settings = { items: K, fillers: F, forced: Fc, digits: B, words: W };
    this.kinds = Array.from({ length: K * this.turnLength }, (_, p) => {
      const i = p % this.turnLength;
      return i < F ? 'filler' : i === F ? 'decision' : 'forced';
    });
    this.title = `answer chain (${K} digits of base ${B}, ${F} filler words of ${W} and ${Fc} forced subwords per digit, vocab ${this.vocab.length})`;
  }

  /** Token id of a vocabulary entry (throws on an unknown one). */
  id(word: string): number {
    const i = this.ids.get(word);
    if (i === undefined) throw new Error(`AnswerChain: no token ${word}`);
    return i;
  }

  /** Token of subword `j` (0 = the decision `a`, 1 = `b`, 2 = `c`) of digit `d`. */
  subword(j: number, d: number): number {
    return this.id(`${'abc'[j]}${d}`);
  }

  /** The digit of a decision subword `a<d>`, or -1 for any other token. */
  decisionDigit(x: number): number {
    const a0 = this.id('a0');
    return x >= a0 && x < a0 + this.cfg.digits ? x - a0 : -1;
  }

  /** True for the filler words. */
  isFiller(x: number): boolean {
    const w0 = this.id('w0');
    return x >= w0 && x < w0 + this.cfg.words;
  }

  /** Draws the task of an environment seed. */
  makeTask(seed: number): ChainTask {
    const { items: K, fillers: F, digits: B, words: W } = this.cfg;
    const rng = new Rng(deriveSeed(seed, 0xc4a1));
    const x = Array.from({ length: K }, () => rng.int(B));
    const reference = Array.from({ length: K * F }, () => rng.int(W));
    return { seed, x, answer: x.map((v, k) => (v + k) % B), reference };
  }

  /** Resolves a prompt view to a named privileged view, or `undefined` for the student's. */
  viewOf(view: PromptView): ChainView | undefined {
    if (view === false) return undefined;
    if (view === true) return CHAIN_VIEWS[0];
    if (!(CHAIN_VIEWS as readonly string[]).includes(view)) throw new Error(`AnswerChain: unknown view ${view} (expected one of ${CHAIN_VIEWS.join(', ')})`);
    return view as ChainView;
  }

  /** `<bos> q x_1..x_K ans s_1..s_K ref r_1..r_KF`: the answer slots `s` and reference slots `r` are `?` unless the view shows them. */
  prompt(task: ChainTask, view: PromptView): number[] {
    const v = this.viewOf(view);
    const showAnswer = v === 'answer' || v === 'solution', showRef = v === 'solution' || v === 'irrelevant';
    const q = this.id('?');
    return [this.id('<bos>'), this.id('q'), ...task.x.map((d) => this.id(`x${d}`)),
      this.id('ans'), ...task.answer.map((d) => (showAnswer ? this.id(`n${d}`) : q)),
      this.id('ref'), ...task.reference.map((w) => (showRef ? this.id(`r${w}`) : q))];
  }

  /** A fresh episode. */
  episode(task: ChainTask): ChainEpisode {
    return new ChainEpisode(this, task);
  }

  /**
   * Per response position, the tokens that keep success possible: any filler word at a filler position,
   * the right digit's subword at a decision or forced position.
   */
  allowed(task: ChainTask): number[][] {
    const { fillers: F, words: W } = this.cfg;
    const fill = Array.from({ length: W }, (_, w) => this.id(`w${w}`));
    return this.kinds.map((kind, p) => {
      const k = Math.floor(p / this.turnLength), i = p % this.turnLength;
      return kind === 'filler' ? fill : [this.subword(i - F, task.answer[k]!)];
    });
  }

  /** End (exclusive) of the decisive unit a response position belongs to: a decision and its forced subwords; a filler word alone. */
  unitEnd(pos: number): number {
    if (this.kinds[pos] === 'filler') return pos + 1;
    return (Math.floor(pos / this.turnLength) + 1) * this.turnLength;
  }

  /**
   * The demonstrator: filler words at random (the reference's, when the view shows them); the digit right,
   * except with probability `eps` a uniformly random one when the view does not show the answer; the
   * forced subwords of the digit chosen.
   */
  demoTurn(ep: ChainEpisode, rng: Rng, eps: number, view: PromptView): number[] {
    const v = this.viewOf(view);
    const { fillers: F, forced: Fc, digits: B, words: W } = this.cfg;
    const k = ep.turn, turn: number[] = [];
    for (let i = 0; i < F; i++) {
      const w = rng.int(W);
      turn.push(this.id(`w${v === 'solution' || v === 'irrelevant' ? ep.task.reference[k * F + i]! : w}`));
    }
    let d = ep.task.answer[k]!;
    const noise = rng.next() < eps, pick = rng.int(B);
    if (noise && v !== 'answer' && v !== 'solution') d = pick;
    for (let j = 0; j <= Fc; j++) turn.push(this.subword(j, d));
    return turn;
  }

  /** `x 1302 · answer 1033`. */
  describe(task: ChainTask): string {
    return `x ${task.x.join('')} · answer ${task.answer.join('')}`;
  }
}
