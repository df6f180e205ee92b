/**
 * Learning-rate schedules (the formulas of verl / Hugging Face `transformers`, as `LambdaLR` applies
 * them: `lr = peak * lambda(step)`) and a small scheduler that writes them into an optimizer's `lr`.
 *
 * @module
 */
import { GearError, fail } from '../core/errors.js';
import * as v from '../core/validate.js';

/**
 * A schedule: the learning rate to use for optimizer step number `step` (0-based).
 *
 * @category Optimizers
 */
export type Schedule = (step: number) => number;

/**
 * Options shared by the schedules.
 *
 * @category Optimizers
 */
export interface ScheduleOptions {
  /** The learning rate after warmup (the optimizer's base lr), finite, >= 0. */
  peak: number;
  /**
   * Steps of linear warmup from 0 (`lr = peak * step / warmupSteps`), integer >= 0 (default 0).
   *
   * @defaultValue `0`
   */
  warmupSteps?: number;
}

/**
 * Options of {@link cosineSchedule} and {@link linearSchedule}.
 *
 * @category Optimizers
 */
export interface DecayScheduleOptions extends ScheduleOptions {
  /** Steps of the whole run, warmup included; integer > warmupSteps. */
  totalSteps: number;
  /**
   * The lowest learning rate, in [0, peak] (default 0).
   *
   * @defaultValue `0`
   */
  floor?: number;
}

/**
 * Options of {@link cosineSchedule}.
 *
 * @category Optimizers
 */
export interface CosineScheduleOptions extends DecayScheduleOptions {
  /**
   * Cosine waves over the decay (default 0.5: one half-wave from peak down to floor).
   *
   * @defaultValue `0.5`
   */
  numCycles?: number;
}

/** The options object read once (its known fields, in a fixed order), then unknown keys refused. */
function read(opts: unknown, known: readonly string[]): Record<string, unknown> {
  if (typeof opts !== 'object' || opts === null) fail('ERR_OPTION', 'options', 'an object', opts);
  v.knownKeys(opts, 'options', known);
  const o: Record<string, unknown> = {};
  for (const k of known) o[k] = (opts as Record<string, unknown>)[k];
  return o;
}

function base(o: Record<string, unknown>) {
  const peak = v.numOpt(o.peak, 'peak', NaN, { min: 0 });
  if (!Number.isFinite(peak)) fail('ERR_OPTION', 'peak', 'a finite number >= 0', o.peak);
  const warmup = v.numOpt(o.warmupSteps, 'warmupSteps', 0, { min: 0, int: true });
  return { peak, warmup };
}

function decay(o: Record<string, unknown>) {
  const b = base(o);
  const total = v.numOpt(o.totalSteps, 'totalSteps', NaN, { min: b.warmup, minOpen: true, int: true });
  if (Number.isNaN(total)) fail('ERR_OPTION', 'totalSteps', `an integer > warmupSteps (${b.warmup})`, o.totalSteps);
  const floor = v.numOpt(o.floor, 'floor', 0, { min: 0, max: b.peak });
  // verl's min_lr_ratio; a zero peak leaves only floor 0.
  const minRatio = b.peak > 0 ? floor / b.peak : 0;
  return { ...b, total, minRatio };
}

function checkStep(step: number): void {
  if (typeof step !== 'number' || !Number.isInteger(step) || step < 0) fail('ERR_OPTION', 'step', 'an integer >= 0', step);
}

function warmupRatio(step: number, warmup: number): number {
  return step / Math.max(1, warmup);
}

/**
 * Constant learning rate, after an optional linear warmup (`get_constant_schedule_with_warmup`):
 * `peak * min(1, step / warmupSteps)`. With `warmupSteps` 0 it is `peak` at every step.
 *
 * @param opts `peak`, `warmupSteps`
 * @returns the schedule
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const lr = rl.constantSchedule({ peak: 1e-5, warmupSteps: 4 });
 * console.log([0, 2, 4, 100].map(lr)); // [0, 5e-6, 1e-5, 1e-5]
 * ```
 * @category Optimizers
 */
export function constantSchedule(opts: ScheduleOptions): Schedule {
  const { peak, warmup } = base(read(opts, ['peak', 'warmupSteps']));
  return (step) => {
    checkStep(step);
    return step < warmup ? peak * warmupRatio(step, warmup) : peak;
  };
}

/**
 * Linear warmup from 0 to `peak` over `warmupSteps`, then constant: {@link constantSchedule} with a
 * required warmup.
 *
 * @param opts `peak`, `warmupSteps` (required, >= 1)
 * @returns the schedule
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const lr = rl.linearWarmupSchedule({ peak: 1e-5, warmupSteps: 10 });
 * console.log(lr(5), lr(50)); // 5e-6 1e-5
 * ```
 * @category Optimizers
 */
export function linearWarmupSchedule(opts: Required<ScheduleOptions>): Schedule {
  const o = read(opts, ['peak', 'warmupSteps']);
  if (typeof o.warmupSteps !== 'number' || !(o.warmupSteps >= 1)) fail('ERR_OPTION', 'warmupSteps', 'an integer >= 1', o.warmupSteps);
  const { peak, warmup } = base(o);
  return (step) => {
    checkStep(step);
    return step < warmup ? peak * warmupRatio(step, warmup) : peak;
  };
}

/**
 * Cosine decay with linear warmup and a floor, verl's `get_cosine_schedule_with_warmup`:
 * warmup `peak * step / warmupSteps`, then with `progress = (step - warmupSteps) / (totalSteps - warmupSteps)`
 * and `r = floor / peak`: `peak * max(r, cos(pi * numCycles * 2 * progress) * (1 - r) / 2 + (1 + r) / 2)`.
 * As in verl the formula is not clamped past `totalSteps` (with the default half-wave the lr rises
 * again after the end).
 *
 * @param opts `peak`, `warmupSteps`, `totalSteps`, `floor`, `numCycles`
 * @returns the schedule
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const lr = rl.cosineSchedule({ peak: 1e-5, warmupSteps: 10, totalSteps: 110, floor: 1e-6 });
 * console.log(lr(10), lr(60), lr(110)); // 1e-5, 5.5e-6 (half way), 1e-6
 * ```
 * @category Optimizers
 */
export function cosineSchedule(opts: CosineScheduleOptions): Schedule {
  const o = read(opts, ['peak', 'warmupSteps', 'totalSteps', 'floor', 'numCycles']);
  const { peak, warmup, total, minRatio } = decay(o);
  const cycles = v.numOpt(o.numCycles, 'numCycles', 0.5, { min: 0 });
  if (!Number.isFinite(cycles)) fail('ERR_OPTION', 'numCycles', 'a finite number >= 0', cycles);
  const coef = (1 - minRatio) * 0.5;
  const intercept = (1 + minRatio) * 0.5;
  return (step) => {
    checkStep(step);
    if (step < warmup) return peak * warmupRatio(step, warmup);
    const progress = (step - warmup) / Math.max(1, total - warmup);
    const x = Math.cos(Math.PI * cycles * 2.0 * progress);
    return peak * Math.max(minRatio, x * coef + intercept);
  };
}

/**
 * Linear decay with linear warmup, Hugging Face's `get_linear_schedule_with_warmup`:
 * warmup as above, then `peak * max(r, (totalSteps - step) / (totalSteps - warmupSteps))` with
 * `r = floor / peak` (0 by default: the lr reaches 0 at `totalSteps` and stays there).
 *
 * @param opts `peak`, `warmupSteps`, `totalSteps`, `floor`
 * @returns the schedule
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const lr = rl.linearSchedule({ peak: 1e-5, warmupSteps: 0, totalSteps: 100 });
 * console.log(lr(0), lr(50), lr(100)); // 1e-5 5e-6 0
 * ```
 * @category Optimizers
 */
export function linearSchedule(opts: DecayScheduleOptions): Schedule {
  const { peak, warmup, total, minRatio } = decay(read(opts, ['peak', 'warmupSteps', 'totalSteps', 'floor']));
  return (step) => {
    checkStep(step);
    if (step < warmup) return peak * warmupRatio(step, warmup);
    return peak * Math.max(minRatio, (total - step) / Math.max(1, total - warmup));
  };
}

/**
 * Checkpoint of an {@link LRScheduler}.
 *
 * @category Optimizers
 */
export interface LRSchedulerState {
  /** Scheduler steps taken (the lr in effect is `schedule(step)`). */
  step: number;
}

/**
 * Applies a {@link Schedule} to an optimizer's `lr`, like PyTorch's `LambdaLR`: construction sets
 * `lr = schedule(0)` for the first optimizer step; each {@link LRScheduler.step} call (after an
 * optimizer step) moves to the next value.
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const params = [new Float32Array(4)];
 * const grads = [Float32Array.of(0.1, -0.2, 0.3, 0)];
 * const opt = new rl.AdamW(params, { lr: 1e-6 });
 * const sched = new rl.LRScheduler(opt, rl.cosineSchedule({ peak: 1e-6, warmupSteps: 10, totalSteps: 1000 }));
 * for (let i = 0; i < 3; i++) {
 *   opt.step(grads);
 *   sched.step();
 * }
 * console.log(opt.lr, sched.lastLr); // 3e-7: step 3 of the 10-step warmup
 *
 * const saved = sched.state();                 // { step: 3 }
 * const restored = new rl.LRScheduler(opt, rl.cosineSchedule({ peak: 1e-6, warmupSteps: 10, totalSteps: 1000 }));
 * restored.loadState(saved);
 * console.log(restored.stepCount); // 3
 * ```
 *
 * @category Optimizers
 */
export class LRScheduler {
  readonly #target: { lr: number };
  readonly #schedule: Schedule;
  #step = 0;

  /**
   * @param optimizer anything with a settable `lr` (every gear-rl optimizer)
   * @param schedule the learning rate per step
   */
  constructor(optimizer: { lr: number }, schedule: Schedule) {
    if (typeof optimizer !== 'object' || optimizer === null || !('lr' in optimizer)) {
      fail('ERR_OPTION', 'optimizer', 'an object with an lr property', optimizer);
    }
    if (!settable(optimizer, 'lr')) fail('ERR_OPTION', 'optimizer.lr', 'a writable property (the scheduler sets it)', 'a read-only one');
    if (typeof schedule !== 'function') fail('ERR_OPTION', 'schedule', 'a function (step) => lr', schedule);
    this.#target = optimizer;
    this.#schedule = schedule;
    this.#apply(0);
  }

  /** Scheduler steps taken so far. */
  get stepCount(): number {
    return this.#step;
  }

  /** The learning rate last written to the optimizer. */
  get lastLr(): number {
    return this.#target.lr;
  }

  /** Advances one step and writes the new learning rate into the optimizer. */
  step(): void {
    this.#apply(this.#step + 1);
  }

  /** The scheduler's position, for checkpoints. */
  state(): LRSchedulerState {
    return { step: this.#step };
  }

  /**
   * Restores a position saved by {@link LRScheduler.state} and writes the matching learning rate.
   *
   * @param state a saved state
   */
  loadState(state: LRSchedulerState): void {
    const s = (state as { step?: unknown } | null)?.step;
    if (typeof s !== 'number' || !Number.isInteger(s) || s < 0) {
      throw new GearError('ERR_STATE', `state.step: expected an integer >= 0, got ${String(s)}`);
    }
    this.#apply(s);
  }

  /** Moves to `step` only if the schedule gives a valid lr there (a failed call changes nothing). */
  #apply(step: number): void {
    const lr = this.#schedule(step);
    if (typeof lr !== 'number' || !Number.isFinite(lr) || lr < 0) {
      fail('ERR_OPTION', `schedule(${step})`, 'a finite learning rate >= 0', lr);
    }
    // Reflect.set answers false (where an assignment would throw) when lr became read-only after construction
    if (!Reflect.set(this.#target, 'lr', lr)) {
      fail('ERR_OPTION', 'optimizer.lr', 'a writable property (the scheduler sets it)', 'a read-only one');
    }
    this.#step = step;
  }
}

/** Whether `obj[key] = x` can succeed: a writable data property, or an accessor with a setter, found on the chain. */
function settable(obj: object, key: string): boolean {
  for (let o: object | null = obj; o !== null; o = Object.getPrototypeOf(o)) {
    const d = Object.getOwnPropertyDescriptor(o, key);
    if (d === undefined) continue;
    if ('value' in d) return d.writable === true && (o === obj || Object.isExtensible(obj));
    return d.set !== undefined;
  }
  return Object.isExtensible(obj);
}
