import { describe, expect, it } from 'vitest';
import {
  Episode, HINT_POS, I0, L0, LOCKERS, MAX_LEN, MAX_TURNS, VOCAB, demoEpisode, detokenize, makeTask, prompt, tok,
} from '../../examples/env/lockers.js';
import { Rng } from '../../examples/env/rng.js';

const open = (l: number) => [tok('open'), L0 + l, tok(';')];
const answer = (l: number) => [tok('answer'), L0 + l, tok(';')];

describe('locker-search environment', () => {
  it('draws tasks deterministically: four distinct items, the target in the ground-truth locker', () => {
    const seen = new Set<string>();
    for (let s = 0; s < 500; s++) {
      const t = makeTask(s);
      expect(makeTask(s)).toEqual(t);
      expect(new Set(t.contents).size).toBe(LOCKERS);
      expect(t.contents[t.answer]).toBe(t.target);
      expect(t.contents.indexOf(t.target)).toBe(t.answer);
      seen.add(t.contents.join() + '/' + t.target);
    }
    // Plenty of distinct tasks, and every locker is the answer sometimes.
    expect(seen.size).toBeGreaterThan(300);
    const counts = [0, 0, 0, 0];
    for (let s = 0; s < 2000; s++) counts[makeTask(s).answer]!++;
    for (const c of counts) expect(c).toBeGreaterThan(400);
  });

  it('puts the ground truth in the hint slot only for the teacher, at the same position', () => {
    const t = makeTask(7);
    const s = prompt(t, false), g = prompt(t, true);
    expect(s.length).toBe(g.length);
    expect(detokenize(s)).toBe(`<bos> find ${VOCAB[I0 + t.target]} hint ?`);
    expect(g[HINT_POS]).toBe(L0 + t.answer);
    s.forEach((x, i) => { if (i !== HINT_POS) expect(g[i]).toBe(x); });
  });

  it('returns the opened locker\'s item as a two-token observation and rewards only the final answer', () => {
    const t = { seed: 0, contents: [2, 5, 0, 3], target: 0, answer: 2 };
    const ep = new Episode(t);
    expect(ep.anchor()).toBe('t0|');
    let r = ep.step(open(1));
    expect(r).toEqual({ observation: [tok('obs'), tok('F')], reward: 0, done: false, valid: true });
    expect(ep.anchor()).toBe('t1|L2=F');
    r = ep.step(open(2));
    expect(r.observation).toEqual([tok('obs'), tok('A')]);
    expect(ep.anchor()).toBe('t2|L2=F,L3=A');
    r = ep.step(answer(2));
    expect(r).toEqual({ observation: [], reward: 1, done: true, valid: true });
    expect(() => ep.step(open(0))).toThrow(/over/);

    const wrong = new Episode(t);
    expect(wrong.step(answer(0))).toEqual({ observation: [], reward: 0, done: true, valid: true });
  });

  it('answers malformed turns with "obs err" and ends with reward 0 after four turns', () => {
    const t = makeTask(3);
    const ep = new Episode(t);
    expect(ep.step([tok('open'), tok('A'), tok(';')])).toEqual({ observation: [tok('obs'), tok('err')], reward: 0, done: false, valid: false });
    expect(ep.step([tok('answer'), L0, tok('open')]).valid).toBe(false); // a malformed answer does not end the episode
    expect(ep.done).toBe(false);
    ep.step(open(0));
    const last = ep.step(open(1));
    expect(ep.turn).toBe(MAX_TURNS);
    expect(last).toEqual({ observation: [], reward: 0, done: true, valid: true });
    expect(ep.done).toBe(true);
    expect(ep.reward).toBe(0);
  });

  it('reaches the same anchor state through different action orders (GiGPO step groups are non-trivial)', () => {
    const t = { seed: 0, contents: [1, 2, 3, 4], target: 4, answer: 3 };
    const a = new Episode(t), b = new Episode(t);
    a.step(open(0)); a.step(open(1));
    b.step(open(1)); b.step(open(0));
    expect(a.anchor()).toBe(b.anchor());
    expect(a.anchor()).toBe('t2|L1=B,L2=C');
    const c = new Episode(t);
    c.step(open(0)); c.step(open(0));
    expect(c.anchor()).not.toBe(a.anchor());
  });

  it('noise-free demonstrations always succeed (with deduction of the last locker) within the length bound', () => {
    const rng = new Rng(1);
    for (let s = 0; s < 300; s++) {
      const tr = demoEpisode(makeTask(s), rng, 0, false);
      expect(tr.reward).toBe(1);
      expect(tr.tokens.length).toBeLessThanOrEqual(MAX_LEN);
      expect(tr.anchors.length).toBeLessThanOrEqual(MAX_TURNS);
      // Never opens more than three lockers: the fourth is deduced.
      expect(tr.tokens.filter((x) => x === tok('open')).length).toBeLessThanOrEqual(3);
    }
  });

  it('marks agent tokens 1 and prompt/observation tokens 0, and assigns every token to its turn', () => {
    const tr = demoEpisode({ seed: 0, contents: [1, 2, 3, 4], target: 3, answer: 2 }, new Rng(0), 0, false);
    expect(detokenize(tr.tokens)).toBe('<bos> find D hint ? open L1 ; obs B open L2 ; obs C open L3 ; obs D answer L3 ;');
    expect(tr.agentMask.join('')).toBe('00000' + '11100' + '11100' + '11100' + '111');
    expect(tr.turnOf.join(',')).toBe('-1,-1,-1,-1,-1,0,0,0,0,0,1,1,1,1,1,2,2,2,2,2,3,3,3');
    expect(tr.anchors).toEqual(['t0|', 't1|L1=B', 't2|L1=B,L2=C', 't3|L1=B,L2=C,L3=D']);
    expect(tr.reward).toBe(1);
  });

  it('noisy demonstrations fail sometimes; with the ground truth in context every answer names it', () => {
    const rng = new Rng(5);
    let wins = 0, answers = 0;
    for (let s = 0; s < 1000; s++) {
      const task = makeTask(s);
      wins += demoEpisode(task, rng, 0.3, false).reward;
      const g = demoEpisode(task, rng, 0.3, true);
      g.tokens.forEach((x, i) => {
        if (x === tok('answer')) { answers++; expect(g.tokens[i + 1]).toBe(L0 + task.answer); }
      });
    }
    expect(wins).toBeGreaterThan(250);
    expect(wins).toBeLessThan(800);
    expect(answers).toBeGreaterThan(800); // a few episodes run out of turns without answering
  });
});
