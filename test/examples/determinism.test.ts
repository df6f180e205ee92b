// Everything in the demo is seeded: the same settings give bit-identical curves, logs and weights.
import { describe, expect, it } from 'vitest';
import { lockerEnv } from '../../examples/env/lockers.js';
import { Maze } from '../../examples/env/maze.js';
import type { Environment } from '../../examples/env/types.js';
import { train, warmStart } from '../../examples/trainer/train.js';

const env = lockerEnv as unknown as Environment;

describe('demo determinism', () => {
  it('warm-start and an RL run of every method repeat exactly', () => {
    const w1 = warmStart(env, { steps: 40, batch: 32, eps: 0.2, lr: 0.06, seed: 3 });
    const w2 = warmStart(env, { steps: 40, batch: 32, eps: 0.2, lr: 0.06, seed: 3 });
    expect(w1.policy.params).toEqual(w2.policy.params);
    const w3 = warmStart(env, { steps: 12, batch: 16, eps: 0.2, lr: 0.06, seed: 4 });
    expect(w3.policy.params[0]).not.toEqual(w1.policy.params[0]);
    const init = w1.policy.snapshot();
    const losses: number[][] = [];
    for (const method of ['grpo', 'gigpo', 'gear', 'gear-frozen', 'gear-ema', 'drgrpo', 'rloo'] as const) {
      const cfg = { method, seed: 2, steps: 3, tasksPerStep: 4, groupSize: 6, updatesPerBatch: 2, lr: 0.01, maxGradNorm: 1, clip: 0.2, evalEvery: 3, evalEpisodes: 20 };
      const strip = (r: ReturnType<typeof train>) => ({ curve: r.curve, log: r.log.map(({ ms: _ms, ...rest }) => rest) });
      const a = train(env, init, cfg), b = train(env, init, cfg);
      expect(strip(a)).toEqual(strip(b));
      expect(a.log.every((l) => Number.isFinite(l.loss) && Number.isFinite(l.gradNorm))).toBe(true);
      losses.push(a.log.map((l) => l.loss));
    }
    // The methods really differ (different advantages give different losses), and the batches carried signal.
    for (const l of losses) expect(l.some((x) => x !== 0)).toBe(true);
    for (let i = 0; i < losses.length; i++) for (let j = i + 1; j < losses.length; j++) expect(losses[i]).not.toEqual(losses[j]);
  });

  it('GEAR with alpha = 0 trains exactly like GRPO (the degenerate case, end to end)', () => {
    const w = warmStart(env, { steps: 40, batch: 32, eps: 0.2, lr: 0.06, seed: 3 });
    const init = w.policy.snapshot();
    const base = { seed: 5, steps: 3, tasksPerStep: 4, groupSize: 6, updatesPerBatch: 2, lr: 0.01, maxGradNorm: 1, clip: 0.2, evalEvery: 3, evalEpisodes: 30 };
    // GEAR also logs its teacher's success and spike statistics; everything else must match GRPO bit for bit.
    const strip = (r: ReturnType<typeof train>) => ({
      curve: r.curve.map(({ teacher: _t, ...c }) => c), log: r.log.map(({ ms: _ms, advMetrics: _a, teacherSuccess: _s, ...rest }) => rest),
    });
    const grpo = train(env, init, { ...base, method: 'grpo' });
    const gear0 = train(env, init, { ...base, method: 'gear', gearOptions: { alpha: 0 } });
    const gear1 = train(env, init, { ...base, method: 'gear' });
    expect(strip(gear0)).toEqual(strip(grpo));
    expect(strip(gear1)).not.toEqual(strip(grpo));
    expect(grpo.log.some((l) => l.loss !== 0)).toBe(true);
  });
});

describe('GEAR teachers on the maze', () => {
  it('self, frozen and ema teachers train differently; frozen teacher success is constant; every run repeats exactly', () => {
    const maze = new Maze({ rooms: 2, fillers: 0 }) as unknown as Environment;
    const w = warmStart(maze, { steps: 80, batch: 32, eps: 0.35, lr: 0.03, seed: 3 });
    const init = w.policy.snapshot();
    const base = { seed: 4, steps: 4, tasksPerStep: 4, groupSize: 6, updatesPerBatch: 2, lr: 0.02, maxGradNorm: 1, clip: 0.2, evalEvery: 2, evalEpisodes: 40 };
    const strip = (r: ReturnType<typeof train>) => ({ curve: r.curve, log: r.log.map(({ ms: _ms, ...rest }) => rest) });
    const runs = (['gear', 'gear-frozen', 'gear-ema'] as const).map((method) => {
      const a = train(maze, init, { ...base, method });
      expect(strip(train(maze, init, { ...base, method }))).toEqual(strip(a));
      // Every evaluation point carries the teacher's own success with the privileged prompt.
      for (const c of a.curve) expect(c.teacher).toBeGreaterThanOrEqual(0);
      return a;
    });
    // At step 0 all three teachers are the warm-start checkpoint.
    expect(runs[1]!.curve[0]!.teacher).toBe(runs[0]!.curve[0]!.teacher);
    expect(runs[2]!.curve[0]!.teacher).toBe(runs[0]!.curve[0]!.teacher);
    expect(new Set(runs[1]!.curve.map((c) => c.teacher)).size).toBe(1);
    // Same first batch and advantages (identical teachers at step 0), then different teachers, different updates.
    expect(runs[1]!.log[0]!.loss).toBe(runs[0]!.log[0]!.loss);
    expect(runs[1]!.log.map((l) => l.loss)).not.toEqual(runs[0]!.log.map((l) => l.loss));
    expect(runs[2]!.log.map((l) => l.loss)).not.toEqual(runs[0]!.log.map((l) => l.loss));
    expect(runs[2]!.log.map((l) => l.loss)).not.toEqual(runs[1]!.log.map((l) => l.loss));
    grpoIsNotGear(maze, init, base);
  });
});

function grpoIsNotGear(maze: Environment, init: Float32Array[], base: Omit<Parameters<typeof train>[2], 'method'>): void {
  const g = train(maze, init, { ...base, method: 'grpo' });
  expect(g.curve.every((c) => c.teacher === undefined)).toBe(true);
  expect(g.log.every((l) => l.advMetrics.spikesPerEpisode === undefined)).toBe(true);
}
