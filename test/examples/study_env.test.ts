// The vault task's rules: every phase, every outcome, the budget, the anchors and the teacher prompt.
import { describe, expect, it } from 'vitest';
import { BOXES, BUDGET, CODE_LEN, JUNCTIONS, VOCAB, Vault, makeTask, play, studentPrompt, teacherPrompt, tok, type VaultTask } from '../../examples/study/env.js';
import { Rng } from '../../examples/env/rng.js';

const task: VaultTask = { keyBox: 2, code: [3, 1, 0, 2], turns: [0, 1, 1, 0, 0, 0, 1, 1] };
const box = (i: number) => tok('box0') + i, dig = (d: number) => tok('dig0') + d, ans = (c: number) => tok('ans0') + c;
const words = (ids: number[]) => ids.map((i) => VOCAB[i]);

describe('vault environment', () => {
  it('has the documented sizes and a deterministic task per seed', () => {
    expect([BOXES, CODE_LEN, JUNCTIONS]).toEqual([6, 4, 8]);
    expect(makeTask(5)).toEqual(makeTask(5));
    const t = makeTask(11);
    expect(t.code).toHaveLength(CODE_LEN);
    expect(t.turns).toHaveLength(JUNCTIONS);
    expect(t.keyBox).toBeGreaterThanOrEqual(0);
    expect(t.keyBox).toBeLessThan(BOXES);
  });

  it('key phase: empty boxes, then the key with the code', () => {
    const v = new Vault(task);
    expect(v.act(box(0))).toEqual({ obs: [tok('empty')], kind: 'box', right: false });
    expect(v.anchor()).toBe('k1');
    const r = v.act(box(2));
    expect(words(r.obs)).toEqual(['key', 'd3', 'd1', 'd0', 'd2']);
    expect(r).toMatchObject({ kind: 'box', right: true });
    expect(v.phase).toBe(1);
  });

  it('door phase: a wrong digit starts the entry over; the last right digit opens with the first sign', () => {
    const v = new Vault(task);
    v.act(box(2));
    expect(v.act(dig(3))).toEqual({ obs: [tok('ok')], kind: 'digit', right: true });
    expect(v.anchor()).toBe('d1');
    expect(v.act(dig(2))).toEqual({ obs: [tok('buzz')], kind: 'digit', right: false });
    expect(v.anchor()).toBe('d0');
    for (const d of [3, 1, 0]) v.act(dig(d));
    expect(words(v.act(dig(2)).obs)).toEqual(['open', 'sL']);
    expect(v.phase).toBe(2);
    expect(v.anchor()).toBe('j0');
  });

  it('corridor: with the sign moves on, against it hits a wall and shows the sign again', () => {
    const v = new Vault(task);
    v.act(box(2));
    for (const d of task.code) v.act(dig(d));
    expect(words(v.act(tok('right')).obs)).toEqual(['wall', 'sL']);
    expect(v.act(tok('left'))).toEqual({ obs: [tok('sR')], kind: 'turn', right: true });
    for (let j = 1; j < JUNCTIONS - 1; j++) v.act(tok('left') + task.turns[j]!);
    expect(words(v.act(tok('left') + task.turns[JUNCTIONS - 1]!).obs)).toEqual(['hall']);
    expect(v.phase).toBe(3);
  });

  it('chest: the code\'s first digit wins; anything else loses; the episode ends', () => {
    for (const c of [0, 1, 2, 3]) {
      const v = new Vault(task);
      v.act(box(2));
      for (const d of task.code) v.act(dig(d));
      for (const t of task.turns) v.act(tok('left') + t);
      expect(v.act(ans(c))).toMatchObject({ kind: 'answer', right: c === 3 });
      expect(v.done).toBe(true);
      expect(v.reward).toBe(c === 3 ? 1 : 0);
      expect(() => v.act(ans(c))).toThrow();
    }
  });

  it('actions out of phase waste a turn; the budget ends the episode with reward 0', () => {
    const v = new Vault(task);
    expect(v.act(ans(3))).toEqual({ obs: [tok('buzz')], kind: 'invalid', right: false });
    expect(v.act(tok('empty'))).toMatchObject({ kind: 'invalid' });
    for (let i = 2; i < BUDGET; i++) v.act(tok('left'));
    expect(v.done).toBe(true);
    expect(v.reward).toBe(0);
  });

  it('a perfect episode takes key search + code + corridor + answer decisions, masks observations', () => {
    // Opens the key box first, then plays the demonstrator without noise.
    const ep = play(task, (_t, env) => (env.phase === 0 ? box(task.keyBox) : env.demoAction(new Rng(1), 0)));
    expect(ep.reward).toBe(1);
    expect(ep.decisions.map((d) => d.kind)).toEqual(['box', ...task.code.map(() => 'digit'), ...task.turns.map(() => 'turn'), 'answer']);
    expect(ep.decisions.every((d) => d.right)).toBe(true);
    expect(ep.decisions.length).toBe(1 + CODE_LEN + JUNCTIONS + 1);
    for (const d of ep.decisions) { expect(ep.agentMask[d.pos]).toBe(1); }
    expect(ep.agentMask.reduce((a, m) => a + m, 0)).toBe(ep.decisions.length);
    expect(ep.tokens.length).toBe(ep.agentMask.length);
  });

  it('the teacher prompt is the hidden map followed by the student prompt (token-aligned suffix)', () => {
    const tp = teacherPrompt(task), sp = studentPrompt();
    expect(words(tp.slice(0, 2))).toEqual(['at2', 'sep']);
    expect(tp.slice(tp.length - sp.length)).toEqual(sp);
  });
});
