// The study's runners end to end on tiny configurations (the answer chain and the vault), the vault's
// warm-start credit table, and the paired statistics on hand-computed data.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CHAIN_STUDY_METHODS, chainStudyCli, chainStudyReport, runChainStudy } from '../../examples/study/chain.js';
import { VAULT_CREDIT_BATCHES, mazeCredit, runStudy, studyConfig, studyReport, vaultSignalTable } from '../../examples/study/study.js';
import { paired } from '../../examples/study/stats.js';
import { VAULT_CATEGORIES, vaultCredit, vaultSignals, warmStart } from '../../examples/study/train.js';
import { ROLE_METHODS, roleAnchors, roleCreditTables } from '../../examples/trainer/role_credit.js';

describe('study runner', () => {
  it('runs a tiny paired study and reports every method', async () => {
    const cfg = studyConfig(true);
    const r = await runStudy(cfg);
    for (const m of cfg.methods) {
      expect(r.runs[m]).toHaveLength(cfg.seeds);
      for (const run of r.runs[m]!) {
        expect(run.curve[0]!.step).toBe(0);
        expect(run.curve.at(-1)!.step).toBe(cfg.run.steps);
        for (const c of run.curve) expect(c.success).toBeGreaterThanOrEqual(0), expect(c.success).toBeLessThanOrEqual(1);
        expect(run.decisions).toBeGreaterThan(0);
      }
    }
    // Same seed, same warm start, same evaluation tasks: every method starts from the same success.
    for (let s = 0; s < cfg.seeds; s++) {
      const start = r.runs.grpo![s]!.curve[0]!.success;
      for (const m of cfg.methods) expect(r.runs[m]![s]!.curve[0]!.success).toBe(start);
    }
    const md = studyReport(r, 'npm run study -- --quick', 'test');
    expect(md).toContain('| GiGPO |');
    expect(md).toContain('| GEAR (self) |');
    expect(md).toMatch(/GiGPO — AUC: /);
  }, 60_000);

  it('the vault report carries the warm-start credit table: shares of |A| and of |A|·(1 − p) that sum to 1', async () => {
    const cfg = studyConfig(true);
    const r = await runStudy(cfg);
    const md = studyReport(r, 'npm run study -- --task vault --quick', 'test');
    expect(md).toContain('## Credit at the warm start');
    expect(md).toMatch(/\| decision \| GRPO \\\|A\\\| \| GRPO \\\|A\\\|·\(1−p\) \|/);
    // A warm start that reaches the chest now and then, so the shares are defined.
    const net = warmStart({ steps: 200, batch: 16, eps: 0.05, lr: 1e-2, seed: 1 });
    const c = vaultCredit(net, { ...VAULT_CREDIT_BATCHES, batches: 2 });
    for (const m of ['grpo', 'gigpo', 'gear', 'gear-lr'] as const) {
      const abs = VAULT_CATEGORIES.reduce((a, k) => a + c[m][k].abs, 0), grad = VAULT_CATEGORIES.reduce((a, k) => a + c[m][k].grad, 0);
      expect(abs).toBeCloseTo(1, 9);
      expect(grad).toBeCloseTo(1, 9);
    }
    // GRPO gives every action of a row the same |A|: its |A| shares are the rows' action counts weighted by |A_row|, so
    // every category a sampled episode has gets a share.
    expect(VAULT_CATEGORIES.filter((k) => c.grpo[k].abs > 0).length).toBeGreaterThan(3);
    // both anchor signals: an AUROC of the wrong decisions, anchors on them or not
    const sig = vaultSignals(net, { ...VAULT_CREDIT_BATCHES, batches: 2 });
    for (const k of ['D', 's'] as const) {
      expect(sig.signals[k].auroc).toBeGreaterThanOrEqual(0);
      expect(sig.signals[k].auroc).toBeLessThanOrEqual(1);
    }
    for (const k of ['gear', 'gear-lr'] as const) expect(sig.anchors[k].perEpisode).toBeGreaterThanOrEqual(0);
    const table = vaultSignalTable(sig).join('\n');
    expect(table).toMatch(/\| log-ratio signal s \| \d\.\d{3} \|/);
    expect(table).toMatch(/\| GEAR log-ratio \(self\) \| \d+\.\d{2} \|/);
  }, 120_000);

  it('the maze credit (--task maze --quick): the warm start, then both signals against the roles', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gear-maze-credit-'));
    try {
      const r = mazeCredit(true, join(dir, 'cache'));
      expect(r.measurement.batches).toHaveLength(2);
      for (const b of r.measurement.batches) {
        expect(Object.keys(b.methods).sort()).toEqual(Object.keys(ROLE_METHODS).sort());
        expect(b.counts.wrong + b.counts.right + b.counts.neutral).toBeGreaterThan(0);
        for (const k of ['gear-d', 'gear-s'] as const) expect(b.methods[k].anchors).toBeDefined();
      }
      const md = roleCreditTables(r.measurement).join('\n');
      for (const h of ['| divergence D |', '| log-ratio signal s |', '| GEAR, s shuffled in rows |', 'Threshold sensitivity']) expect(md).toContain(h);
      // the cache is written: a second call reads it
      let cached = false;
      mazeCredit(true, join(dir, 'cache'), (c) => { cached = c; });
      expect(cached).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it('roleAnchors by hand: precision on wrong decisive tokens, recall of them, masked tokens left out', () => {
    // tokens 0..7; roles: wrong at 2 and 6 (6 masked out), right at 4
    const roles = [0, 0, -1, 0, 1, 0, -1, 0], mask = [1, 1, 1, 1, 1, 1, 0, 1];
    const a = roleAnchors([2, 4, 5], 3, 6, roles, mask, 2);
    expect(a).toEqual({ perEpisode: 1.5, precision: 1 / 3, recall: 1, segmentLength: 2 });
    const none = roleAnchors([], 0, 0, roles, mask, 2);
    expect(none.precision).toBeNaN();
    expect(none.recall).toBe(0);
    expect(none.segmentLength).toBeNaN();
  });

  it('runs a tiny answer-chain study through the demo\'s pipeline and reports every section', async () => {
    const out = mkdtempSync(join(tmpdir(), 'gear-chain-study-'));
    try {
      const o = await runChainStudy(chainStudyCli({ quick: true, out, cacheDir: join(out, 'cache'), workers: 1 }));
      expect(o.methods).toEqual(CHAIN_STUDY_METHODS);
      expect(o.credit.map((l) => l.eps)).toEqual([0.5, 0.35, 0.2]);
      const md = chainStudyReport(o, 'npm run study -- --quick', 'test');
      for (const h of ['## Decision rule', '## Credit without training', '## Learning', '### Decision', 'Threshold sensitivity']) expect(md).toContain(h);
      expect(md).toMatch(/^\* H1: GEAR \(frozen\) − GRPO AUC/m);
      expect(md).toMatch(/^\* H2 \(stronger family/m);
      expect(md).toMatch(/^\* H3, frozen answer teacher: GEAR log-ratio \(frozen\) − GRPO AUC .*; GEAR log-ratio \(frozen\) − GEAR log-ratio \(frozen, shuffled\) AUC .*; GEAR log-ratio \(frozen\) − GEAR \(frozen\) AUC/m);
      expect(md).toMatch(/^\* H3 outcome \(self teacher\): /m);
      expect(md).toContain('| GEAR (self) |');
      expect(md).toContain('| GEAR log-ratio (frozen) |');
      expect(md).toContain('| GEAR log-ratio, answer teacher |');
      expect(md).toContain('The same with the log-ratio anchor signal s:');
      expect(md).toMatch(/\| answer: s, decisions \|/);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  }, 180_000);

  it('paired statistics by hand', () => {
    // d = [0.1, 0.3, -0.1, 0.1]: mean 0.1, sd = sqrt((0 + 0.04 + 0.04 + 0) / 3), se = sd / 2.
    const p = paired([0.6, 0.8, 0.4, 0.6], [0.5, 0.5, 0.5, 0.5]);
    const sd = Math.sqrt(0.08 / 3);
    expect(p.mean).toBeCloseTo(0.1, 12);
    expect(p.se).toBeCloseTo(sd / 2, 12);
    expect(p.t).toBeCloseTo(0.1 / (sd / 2), 9);
    expect([p.wins, p.losses, p.draws]).toEqual([3, 1, 0]);
    expect(p.tie).toBe(true); // 0.1 ≤ 2 · 0.0816
    const q = paired([0.9, 0.91, 0.92, 0.9], [0.5, 0.5, 0.5, 0.5]);
    expect(q.tie).toBe(false);
    expect(() => paired([1, 2], [1])).toThrow();
  });
});
