// Everything in the demo is seeded: the same settings give bit-identical curves, logs and weights.
import { describe, expect, it } from 'vitest';
import { train, warmStart } from '../../examples/trainer/train.js';

describe('demo determinism', () => {
  it('warm-start and an RL run of every method repeat exactly', () => {
    const w1 = warmStart({ steps: 40, batch: 32, eps: 0.2, lr: 0.06, seed: 3 });
    const w2 = warmStart({ steps: 40, batch: 32, eps: 0.2, lr: 0.06, seed: 3 });
    expect(w1.policy.params).toEqual(w2.policy.params);
    const w3 = warmStart({ steps: 12, batch: 16, eps: 0.2, lr: 0.06, seed: 4 });
    expect(w3.policy.params[0]).not.toEqual(w1.policy.params[0]);
    const init = w1.policy.snapshot();
    const losses: number[][] = [];
    for (const method of ['grpo', 'gigpo', 'gear', 'drgrpo', 'rloo'] as const) {
      const cfg = { method, seed: 2, steps: 3, tasksPerStep: 4, groupSize: 6, updatesPerBatch: 2, lr: 0.01, maxGradNorm: 1, clip: 0.2, evalEvery: 3, evalEpisodes: 20 };
      const strip = (r: ReturnType<typeof train>) => ({ curve: r.curve, log: r.log.map(({ ms: _ms, ...rest }) => rest) });
      const a = train(init, cfg), b = train(init, cfg);
      expect(strip(a)).toEqual(strip(b));
      expect(a.log.every((l) => Number.isFinite(l.loss) && Number.isFinite(l.gradNorm))).toBe(true);
      losses.push(a.log.map((l) => l.loss));
    }
    // The methods really differ (different advantages give different losses), and the batches carried signal.
    for (const l of losses) expect(l.some((x) => x !== 0)).toBe(true);
    for (let i = 0; i < losses.length; i++) for (let j = i + 1; j < losses.length; j++) expect(losses[i]).not.toEqual(losses[j]);
  });

  it('GEAR with alpha = 0 trains exactly like GRPO (the degenerate case, end to end)', () => {
    const w = warmStart({ steps: 40, batch: 32, eps: 0.2, lr: 0.06, seed: 3 });
    const init = w.policy.snapshot();
    const base = { seed: 5, steps: 3, tasksPerStep: 4, groupSize: 6, updatesPerBatch: 2, lr: 0.01, maxGradNorm: 1, clip: 0.2, evalEvery: 3, evalEpisodes: 30 };
    const strip = (r: ReturnType<typeof train>) => ({ curve: r.curve, log: r.log.map(({ ms: _ms, advMetrics: _a, ...rest }) => rest) });
    const grpo = train(init, { ...base, method: 'grpo' });
    const gear0 = train(init, { ...base, method: 'gear', gearOptions: { alpha: 0 } });
    const gear1 = train(init, { ...base, method: 'gear' });
    expect(strip(gear0)).toEqual(strip(grpo));
    expect(strip(gear1)).not.toEqual(strip(grpo));
    expect(grpo.log.some((l) => l.loss !== 0)).toBe(true);
  });
});
