// The study's runner end to end on a tiny configuration, and its paired statistics on hand-computed data.
import { describe, expect, it } from 'vitest';
import { runStudy, studyConfig, studyReport } from '../../examples/study/study.js';
import { paired } from '../../examples/study/stats.js';

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
