import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';

const code = (c: string) => expect.objectContaining({ name: 'GearError', code: c });
const close = (a: number, b: number) => expect(Math.abs(a - b)).toBeLessThanOrEqual(1e-15 * Math.max(1, Math.abs(b)));

describe('schedules at key steps (hand-computed)', () => {
  it('constant, with and without warmup', () => {
    const c = rl.constantSchedule({ peak: 2e-3 });
    expect([0, 1, 1000].map(c)).toEqual([2e-3, 2e-3, 2e-3]);
    const w = rl.constantSchedule({ peak: 1, warmupSteps: 4 });
    expect([0, 1, 2, 3, 4, 5, 100].map(w)).toEqual([0, 0.25, 0.5, 0.75, 1, 1, 1]);
    const lw = rl.linearWarmupSchedule({ peak: 1e-3, warmupSteps: 10 });
    close(lw(5), 5e-4);
    expect(lw(10)).toBe(1e-3);
  });

  it('cosine with warmup and floor (verl get_cosine_schedule_with_warmup, min_lr_ratio = floor/peak)', () => {
    const s = rl.cosineSchedule({ peak: 1e-3, warmupSteps: 10, totalSteps: 110, floor: 1e-4 });
    expect(s(0)).toBe(0);
    close(s(5), 5e-4);
    close(s(10), 1e-3);               // cos(0) = 1: 0.45 + 0.55 = 1
    close(s(60), 0.55e-3);            // half way: cos(pi/2) = 0 -> intercept (1 + 0.1)/2
    close(s(35), 1e-3 * (0.45 * Math.SQRT1_2 + 0.55)); // quarter: cos(pi/4)
    close(s(110), 1e-4);              // end: cos(pi) = -1 -> floor
    // past the end the formula goes on (as in verl): the half-wave rises again
    expect(s(160)).toBeGreaterThan(1e-4);
    const z = rl.cosineSchedule({ peak: 1, totalSteps: 4 });
    expect(z(0)).toBe(1);
    close(z(2), 0.5);
    close(z(4), 0);
    const cyc = rl.cosineSchedule({ peak: 1, totalSteps: 4, numCycles: 1 });
    close(cyc(2), 0);
    close(cyc(4), 1);
  });

  it('linear decay with warmup (transformers get_linear_schedule_with_warmup)', () => {
    const s = rl.linearSchedule({ peak: 1, warmupSteps: 2, totalSteps: 12 });
    expect([0, 1, 2, 7, 12, 20].map(s)).toEqual([0, 0.5, 1, 0.5, 0, 0]);
    const fl = rl.linearSchedule({ peak: 2, totalSteps: 10, floor: 0.5 });
    expect([0, 5, 9, 10, 50].map(fl)).toEqual([2, 1, 0.5, 0.5, 0.5]);
  });

  it('bad options -> ERR_OPTION', () => {
    expect(() => rl.constantSchedule({ peak: -1 })).toThrow(code('ERR_OPTION'));
    expect(() => rl.constantSchedule({ peak: Infinity })).toThrow(code('ERR_OPTION'));
    expect(() => rl.constantSchedule({ peak: 1, warmupSteps: 1.5 })).toThrow(code('ERR_OPTION'));
    expect(() => rl.linearWarmupSchedule({ peak: 1, warmupSteps: 0 })).toThrow(code('ERR_OPTION'));
    expect(() => rl.cosineSchedule({ peak: 1, warmupSteps: 10, totalSteps: 10 })).toThrow(code('ERR_OPTION'));
    expect(() => rl.cosineSchedule({ peak: 1, totalSteps: 10, floor: 2 })).toThrow(code('ERR_OPTION'));
    expect(() => rl.cosineSchedule({ peak: 1, totalSteps: 10, numCycles: -1 })).toThrow(code('ERR_OPTION'));
    expect(() => rl.cosineSchedule({ peak: 1 } as rl.CosineScheduleOptions)).toThrow(code('ERR_OPTION'));
    expect(() => rl.linearSchedule({ peak: 1, totalSteps: 10, warmup: 3 } as unknown as rl.DecayScheduleOptions)).toThrow(code('ERR_OPTION'));
    const s = rl.constantSchedule({ peak: 1 });
    expect(() => s(-1)).toThrow(code('ERR_OPTION'));
    expect(() => s(0.5)).toThrow(code('ERR_OPTION'));
  });
});

describe('LRScheduler', () => {
  it('sets lr = schedule(0) at construction and schedule(k) after k steps, like LambdaLR', () => {
    const opt = new rl.AdamW([new Float32Array(3)], { lr: 123 });
    const sched = new rl.LRScheduler(opt, rl.linearSchedule({ peak: 1e-3, warmupSteps: 2, totalSteps: 6 }));
    const seen = [opt.lr];
    for (let k = 0; k < 6; k++) {
      opt.step([new Float32Array(3)]);
      sched.step();
      seen.push(opt.lr);
    }
    expect(seen).toEqual([0, 5e-4, 1e-3, 7.5e-4, 5e-4, 2.5e-4, 0]);
    expect(sched.stepCount).toBe(6);
    expect(sched.lastLr).toBe(0);
  });

  it('state / loadState restore the position', () => {
    const opt = new rl.SGD([new Float32Array(1)], { lr: 1 });
    const schedule = rl.cosineSchedule({ peak: 1, warmupSteps: 3, totalSteps: 30, floor: 0.1 });
    const a = new rl.LRScheduler(opt, schedule);
    for (let k = 0; k < 7; k++) a.step();
    const opt2 = new rl.SGD([new Float32Array(1)], { lr: 1 });
    const b = new rl.LRScheduler(opt2, schedule);
    b.loadState(structuredClone(a.state()));
    expect(opt2.lr).toBe(opt.lr);
    expect(opt2.lr).toBe(schedule(7));
    expect(() => b.loadState({ step: -1 })).toThrow(code('ERR_STATE'));
  });

  it('a schedule returning a bad value throws ERR_OPTION and leaves lr unchanged', () => {
    const opt = new rl.AdamW([new Float32Array(1)], { lr: 0.5 });
    const s = new rl.LRScheduler(opt, (k) => (k === 0 ? 0.1 : NaN));
    expect(opt.lr).toBe(0.1);
    expect(() => s.step()).toThrow(code('ERR_OPTION'));
    expect(opt.lr).toBe(0.1);
    expect(s.stepCount).toBe(0);
    expect(() => new rl.LRScheduler(opt, 5 as unknown as rl.Schedule)).toThrow(code('ERR_OPTION'));
    expect(() => new rl.LRScheduler(null as unknown as rl.AdamW, () => 1)).toThrow(code('ERR_OPTION'));
  });
});
