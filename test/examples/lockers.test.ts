import { describe, expect, it } from 'vitest';
import {
  CLUE_POS, Episode, HINT_POS, L0, LOCKERS, MAX_LEN, MAX_TURNS, demoEpisode, detokenize, makeTask, prompt, tok,
} from '../../examples/env/lockers.js';
import { Rng } from '../../examples/env/rng.js';

const open = (l: number) => [tok('open'), L0 + l, tok(';')];
const answer = (l: number) => [tok('answer'), L0 + l, tok(';')];

describe('locker-search environment', () => {
  it('draws tasks deterministically; the clue never names the key\'s locker; all layouts occur', () => {
    const seen = new Map<string, number>();
    for (let s = 0; s < 2000; s++) {
      const t = makeTask(s);
      expect(makeTask(s)).toEqual(t);
      expect(t.answer).toBeGreaterThanOrEqual(0);
      expect(t.answer).toBeLessThan(LOCKERS);
      expect(t.clue).toBeGreaterThanOrEqual(0);
      expect(t.clue).toBeLessThan(LOCKERS);
      expect(t.clue).not.toBe(t.answer);
      const k = `${t.answer}/${t.clue}`;
      seen.set(k, (seen.get(k) ?? 0) + 1);
    }
    // 5 key positions x 4 clues, each roughly equally likely (expected 100 each).
    expect(seen.size).toBe(20);
    for (const c of seen.values()) expect(c).toBeGreaterThan(60);
  });

  it('puts the ground truth in the hint slot only for the teacher, at the same position', () => {
    const t = makeTask(7);
    const s = prompt(t, false), g = prompt(t, true);
    expect(s.length).toBe(g.length);
    expect(detokenize(s)).toBe(`<bos> find key not L${t.clue + 1} hint ?`);
    expect(s[CLUE_POS]).toBe(L0 + t.clue);
    expect(g[HINT_POS]).toBe(L0 + t.answer);
    s.forEach((x, i) => { if (i !== HINT_POS) expect(g[i]).toBe(x); });
  });

  it('returns "obs key"/"obs empty" for openings and rewards only the final answer', () => {
    const t = { seed: 0, answer: 2, clue: 4 };
    const ep = new Episode(t);
    expect(ep.anchor()).toBe('t0|not L5|');
    let r = ep.step(open(1));
    expect(r).toEqual({ observation: [tok('obs'), tok('empty')], reward: 0, done: false, valid: true, roles: [0, 0, 0] });
    expect(ep.anchor()).toBe('t1|not L5|L2=empty');
    r = ep.step(open(2));
    expect(r.observation).toEqual([tok('obs'), tok('key')]);
    expect(ep.anchor()).toBe('t2|not L5|L2=empty,L3=key');
    r = ep.step(answer(2));
    expect(r).toEqual({ observation: [], reward: 1, done: true, valid: true, roles: [0, 1, 0] });
    expect(ep.outcome()).toBe('win');
    expect(ep.reward).toBe(1);
    expect(() => ep.step(open(0))).toThrow(/over/);
    expect(() => new Episode(t).step([tok('open')])).toThrow(/expected 3 tokens/);

    const wrong = new Episode(t);
    expect(wrong.step(answer(0))).toEqual({ observation: [], reward: 0, done: true, valid: true, roles: [0, -1, 0] });
    expect(wrong.outcome()).toBe('guess');
    expect(wrong.reward).toBe(0);
  });

  it('answers malformed turns with "obs err" and ends with reward 0 after four turns', () => {
    const t = { seed: 0, answer: 3, clue: 0 };
    const ep = new Episode(t);
    expect(ep.step([tok('open'), tok('key'), tok(';')])).toEqual({ observation: [tok('obs'), tok('err')], reward: 0, done: false, valid: false, roles: [0, -1, 0] });
    expect(ep.step([tok('answer'), L0 + 3, tok('open')]).valid).toBe(false); // a malformed answer does not end the episode
    expect(ep.done).toBe(false);
    expect(ep.anchor()).toBe('t2|not L1|'); // errors use turns but teach nothing
    ep.step(open(1));
    const last = ep.step(open(3)); // finds the key but has no turn left to answer
    expect(ep.turn).toBe(MAX_TURNS);
    expect(last).toEqual({ observation: [], reward: 0, done: true, valid: true, roles: [0, 0, 0] });
    expect(ep.outcome()).toBe('out_of_turns');
    expect(ep.done).toBe(true);
    expect(ep.reward).toBe(0);
  });

  it('reaches the same anchor state through different action orders (GiGPO step groups are non-trivial)', () => {
    const t = { seed: 0, answer: 4, clue: 3 };
    const a = new Episode(t), b = new Episode(t);
    a.step(open(0)); a.step(open(1));
    b.step(open(1)); b.step(open(0));
    expect(a.anchor()).toBe(b.anchor());
    expect(a.anchor()).toBe('t2|not L4|L1=empty,L2=empty');
    const c = new Episode(t);
    c.step(open(0)); c.step(open(0));
    expect(c.anchor()).not.toBe(a.anchor());
  });

  it('noise-free demonstrations always succeed, skip the excluded locker and deduce the last candidate', () => {
    const rng = new Rng(1);
    for (let s = 0; s < 300; s++) {
      const task = makeTask(s);
      const tr = demoEpisode(task, rng, 0, false);
      expect(tr.reward).toBe(1);
      expect(tr.tokens.length).toBeLessThanOrEqual(MAX_LEN);
      expect(tr.anchors.length).toBeLessThanOrEqual(MAX_TURNS);
      const opened = tr.tokens.flatMap((x, i) => (x === tok('open') ? [tr.tokens[i + 1]! - L0] : []));
      expect(opened).not.toContain(task.clue);
      expect(opened.length).toBeLessThanOrEqual(3);
    }
  });

  it('marks agent tokens 1 and prompt/observation tokens 0, and assigns every token to its turn', () => {
    const tr = demoEpisode({ seed: 0, answer: 4, clue: 1 }, new Rng(0), 0, false);
    expect(detokenize(tr.tokens)).toBe(
      '<bos> find key not L2 hint ? open L1 ; obs empty open L3 ; obs empty open L4 ; obs empty answer L5 ;');
    expect(tr.agentMask.join('')).toBe('0000000' + '11100' + '11100' + '11100' + '111');
    expect(tr.turnOf.join(',')).toBe('-1,-1,-1,-1,-1,-1,-1,0,0,0,0,0,1,1,1,1,1,2,2,2,2,2,3,3,3');
    expect(tr.anchors).toEqual(['t0|not L2|', 't1|not L2|L1=empty', 't2|not L2|L1=empty,L3=empty', 't3|not L2|L1=empty,L3=empty,L4=empty']);
    expect(tr.reward).toBe(1);
    expect(tr.tokens.length).toBe(MAX_LEN);
  });

  it('noisy demonstrations fail sometimes; with the ground truth in context every answer names it', () => {
    const rng = new Rng(5);
    let wins = 0, answers = 0;
    for (let s = 0; s < 1000; s++) {
      const task = makeTask(s);
      wins += demoEpisode(task, rng, 0.2, false).reward;
      const g = demoEpisode(task, rng, 0.2, true);
      g.tokens.forEach((x, i) => {
        if (x === tok('answer')) { answers++; expect(g.tokens[i + 1]).toBe(L0 + task.answer); }
      });
    }
    expect(wins).toBeGreaterThan(500);
    expect(wins).toBeLessThan(800);
    expect(answers).toBeGreaterThan(800); // a few episodes run out of turns without answering
  });
});

describe('episode outcomes and credit roles', () => {
  it('classifies wins, wrong answers after seeing the key, guesses and running out of turns', () => {
    const task = { seed: 0, answer: 1, clue: 0 };
    const play = (turns: number[][]) => {
      const ep = new Episode(task);
      const roles = turns.map((t) => ep.step(t).roles);
      return { end: ep.outcome(), roles };
    };
    expect(play([open(1), answer(1)]).end).toBe('win');
    expect(play([open(1), answer(2)]).end).toBe('wrong_answer');
    expect(play([open(2), answer(3)]).end).toBe('guess');
    expect(play([open(2), open(2), open(3), open(4)]).end).toBe('out_of_turns');
    expect(play([[tok('answer'), tok(';'), tok(';')], open(2), open(3), open(4)]).end).toBe('out_of_turns');
    // Roles: the excluded locker and a re-opened one are wasted (wrong); a malformed turn blames its first bad token.
    expect(play([open(0), open(2), open(2), answer(1)]).roles).toEqual([[0, -1, 0], [0, 0, 0], [0, -1, 0], [0, 1, 0]]);
    expect(play([[tok(';'), L0, tok(';')], [tok('open'), L0 + 2, tok('open')]]).roles).toEqual([[-1, 0, 0], [0, 0, -1]]);
  });
});
