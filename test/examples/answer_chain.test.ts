// The answer chain's rules: prompts and their privileged views, the allowed tokens of every position,
// episode outcomes, credit roles and anchors, the labels (departure, doomed, right decision, forced,
// filler), the true departure segments of a packed batch, and the demonstrator.
import { describe, expect, it } from 'vitest';
import { AnswerChain, CHAIN_DEFAULT, type ChainTask } from '../../examples/env/answer_chain.js';
import { Rng } from '../../examples/env/rng.js';
import { demoTranscript, type Environment } from '../../examples/env/types.js';
import { LABEL, hasKnownCredit, labelResponse } from '../../examples/trainer/oracle.js';
import { pack, type Trajectory } from '../../examples/trainer/rollout.js';

const env = new AnswerChain();
const task: ChainTask = { seed: 0, x: [1, 3, 0, 2, 2], answer: [1, 0, 2, 1, 2], reference: [0, 1, 2, 3, 4, 5, 0, 1, 2, 3] };
const w = (i: number) => env.id(`w${i}`);
/** One well-formed item with digit d and filler words f. */
const item = (d: number, f: [number, number] = [0, 1]) => [w(f[0]), w(f[1]), env.id(`a${d}`), env.id(`b${d}`), env.id(`c${d}`)];

describe('answer chain: task and prompts', () => {
  it('the answer is d_k = (x_k + k - 1) mod B; tasks are deterministic in their seed', () => {
    for (let s = 0; s < 50; s++) {
      const t = env.makeTask(s);
      expect(t).toEqual(env.makeTask(s));
      t.x.forEach((x, k) => expect(t.answer[k]).toBe((x + k) % 4));
      expect(t.reference.length).toBe(10);
      for (const r of t.reference) expect(r >= 0 && r < 6).toBe(true);
    }
    expect(env.makeTask(1)).not.toEqual(env.makeTask(2));
  });

  it('every view has the same length; each shows exactly its slots', () => {
    const tok = (v: Parameters<AnswerChain['prompt']>[1]) => env.prompt(task, v).map((i) => env.vocab[i]);
    const student = tok(false);
    expect(student).toEqual(['<bos>', 'q', 'x1', 'x3', 'x0', 'x2', 'x2', 'ans', '?', '?', '?', '?', '?', 'ref', ...Array(10).fill('?')]);
    expect(student.length).toBe(env.promptLength);
    const answerSlots = ['n1', 'n0', 'n2', 'n1', 'n2'], refSlots = ['r0', 'r1', 'r2', 'r3', 'r4', 'r5', 'r0', 'r1', 'r2', 'r3'];
    expect(tok('answer')).toEqual([...student.slice(0, 8), ...answerSlots, 'ref', ...Array(10).fill('?')]);
    expect(tok(true)).toEqual(tok('answer'));
    expect(tok('solution')).toEqual([...student.slice(0, 8), ...answerSlots, 'ref', ...refSlots]);
    expect(tok('irrelevant')).toEqual([...student.slice(0, 14), ...refSlots]);
    expect(() => env.prompt(task, 'map')).toThrow(/unknown view/);
    expect(env.maxLength).toBe(env.promptLength + 25);
    expect(hasKnownCredit(env as unknown as Environment)).toBe(true);
  });

  it('allowed tokens: any filler word at a filler position, the right digit\'s subword elsewhere; units are a decision and its forced subwords', () => {
    const allowed = env.allowed(task);
    expect(allowed.length).toBe(25);
    expect(env.kinds.slice(0, 5)).toEqual(['filler', 'filler', 'decision', 'forced', 'forced']);
    expect(allowed[0]).toEqual([0, 1, 2, 3, 4, 5].map(w));
    expect(allowed[7]).toEqual([env.id('a0')]); // item 2: answer digit 0
    expect(allowed[8]).toEqual([env.id('b0')]);
    expect(allowed[24]).toEqual([env.id('c2')]);
    expect([env.unitEnd(0), env.unitEnd(2), env.unitEnd(3), env.unitEnd(4), env.unitEnd(7)]).toEqual([1, 5, 5, 5, 10]);
  });
});

describe('answer chain: episodes', () => {
  const play = (turns: number[][]) => {
    const ep = env.episode(task);
    const results = turns.map((t) => ep.step(t));
    return { ep, results };
  };

  it('the right answer wins; roles mark right decisions; the anchor is the answer written so far', () => {
    const ep = env.episode(task);
    expect(ep.anchor()).toBe('0|');
    const r0 = ep.step(item(1));
    expect(r0.roles).toEqual([0, 0, 1, 0, 0]);
    expect(r0.observation).toEqual([]);
    expect(ep.anchor()).toBe('1|1');
    for (const d of [0, 2, 1]) ep.step(item(d, [5, 4]));
    expect(ep.anchor()).toBe('4|1021');
    const last = ep.step(item(2));
    expect(last).toEqual({ observation: [], reward: 1, done: true, valid: true, roles: [0, 0, 1, 0, 0] });
    expect(ep.outcome()).toBe('win');
    expect(() => ep.step(item(2))).toThrow(/over/);
  });

  it('a wrong digit departs: role -1 there, no right roles after it, reward 0, wrong_answer', () => {
    const { ep, results } = play([item(1), item(3), item(2), item(1), item(2)]);
    expect(ep.departure).toBe(7);
    expect(results.map((r) => r.roles)).toEqual([[0, 0, 1, 0, 0], [0, 0, -1, 0, 0], [0, 0, 0, 0, 0], [0, 0, 0, 0, 0], [0, 0, 0, 0, 0]]);
    expect([ep.reward, ep.outcome()]).toEqual([0, 'wrong_answer']);
  });

  it('a broken word (wrong forced subword, or no filler word) is malformed; its first bad token departs', () => {
    let { ep } = play([item(1), [w(0), w(1), env.id('a0'), env.id('b3'), env.id('c0')], item(2), item(1), item(2)]);
    expect([ep.departure, ep.reward, ep.outcome()]).toEqual([8, 0, 'malformed']);
    ({ ep } = play([[env.id('q'), w(1), env.id('a1'), env.id('b1'), env.id('c1')], item(0), item(2), item(1), item(2)]));
    expect([ep.departure, ep.outcome()]).toEqual([0, 'malformed']);
    // A wrong digit with its own forced subwords is well formed: a wrong answer, departing at the decision.
    ({ ep } = play([item(2), item(0), item(2), item(1), item(2)]));
    expect([ep.departure, ep.outcome()]).toEqual([2, 'wrong_answer']);
  });
});

describe('answer chain: labels and departure segments', () => {
  it('labels a response: filler / right decision / forced before the departure, then doomed', () => {
    const tokens = [...item(1), ...item(0), ...item(3), ...item(1), ...item(2)];
    const lab = labelResponse(env.kinds, env.allowed(task), tokens, (p) => env.unitEnd(p));
    expect(lab.departure).toBe(12);
    expect(lab.departureEnd).toBe(15);
    const F = LABEL.filler, D = LABEL.decision, C = LABEL.forced, X = LABEL.departure, Z = LABEL.doomed;
    expect(Array.from(lab.labels)).toEqual([F, F, D, C, C, F, F, D, C, C, F, F, X, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z]);
    const win = labelResponse(env.kinds, env.allowed(task), [...item(1), ...item(0), ...item(2), ...item(1), ...item(2)], (p) => env.unitEnd(p));
    expect([win.departure, win.departureEnd]).toEqual([-1, -1]);
    expect(Array.from(win.labels).filter((l) => l === D).length).toBe(5);
    // A departure at a forced subword: its unit runs to the end of the item.
    const forced = labelResponse(env.kinds, env.allowed(task), [...item(1), w(0), w(0), env.id('a0'), env.id('b1'), env.id('c1')], (p) => env.unitEnd(p));
    expect([forced.departure, forced.departureEnd]).toEqual([8, 10]);
    // A departure at a filler position is its own unit.
    const filler = labelResponse(env.kinds, env.allowed(task), [env.id('a1'), w(0)], (p) => env.unitEnd(p));
    expect([filler.departure, filler.departureEnd]).toEqual([0, 1]);
  });

  it('pack: labels per conversation token and one departure segment per failed row, in batch token indices', () => {
    const turnsOf = (tokens: number[][]): Trajectory['turns'] => tokens.map((t) => ({ tokens: t, observation: [], anchor: '', roles: [0, 0, 0, 0, 0] }));
    const good = [item(1), item(0), item(2), item(1), item(2)];
    const bad = [item(1), item(0), item(2), item(3), item(2)];
    const trajectories: Trajectory[] = [
      { task, group: 0, turns: turnsOf(good), reward: 1, outcome: 'win' },
      { task, group: 0, turns: turnsOf(bad), reward: 0, outcome: 'wrong_answer' },
    ];
    const b = pack(env as unknown as Environment, trajectories);
    expect(b.known).toBeDefined();
    expect(Array.from(b.known!.departures.start)).toEqual([25 + 17]);
    expect(Array.from(b.known!.departures.length)).toEqual([3]);
    expect(Array.from(b.known!.departureOf)).toEqual([-1, 42]);
    expect(b.known!.labels[42]).toBe(LABEL.departure);
    expect(b.known!.labels[45]).toBe(LABEL.doomed);
    expect(b.known!.labels[17]).toBe(LABEL.decision);
    // The conversation batch's own step offsets: one step per item, five tokens each.
    expect(Array.from(b.conversation.stepOffsets)).toEqual(Array.from({ length: 11 }, (_, i) => 5 * i));
  });
});

describe('answer chain: demonstrator', () => {
  it('forced subwords always echo the decision; the answer and solution views never err; the solution and irrelevant views copy the reference filler', () => {
    const rng = new Rng(4);
    for (let i = 0; i < 200; i++) {
      const t = env.makeTask(i);
      for (const view of [false, 'answer', 'solution', 'irrelevant'] as const) {
        const d = demoTranscript(env, t, rng, 0.6, view);
        const resp = d.tokens.slice(env.promptLength);
        for (let k = 0; k < 5; k++) {
          const it = resp.slice(5 * k, 5 * k + 5);
          const digit = env.decisionDigit(it[2]!);
          expect(it[3]).toBe(env.subword(1, digit));
          expect(it[4]).toBe(env.subword(2, digit));
          if (view === 'answer' || view === 'solution') expect(digit).toBe(t.answer[k]);
          if (view === 'solution' || view === 'irrelevant') expect([it[0], it[1]]).toEqual([w(t.reference[2 * k]!), w(t.reference[2 * k + 1]!)]);
        }
        if (view === 'answer' || view === 'solution') expect(d.reward).toBe(1);
      }
    }
  });

  it('in the student\'s view it succeeds with probability (1 - eps (B - 1) / B)^K', () => {
    const rng = new Rng(9);
    const n = 4000;
    for (const eps of [0.2, 0.35, 0.5]) {
      let wins = 0;
      for (let i = 0; i < n; i++) wins += demoTranscript(env, env.makeTask(i), rng, eps, false).reward;
      const p = (1 - eps * 0.75) ** CHAIN_DEFAULT.items;
      expect(Math.abs(wins / n - p)).toBeLessThan(4 * Math.sqrt(p * (1 - p) / n));
    }
  });
});
