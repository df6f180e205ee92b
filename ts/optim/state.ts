/**
 * Checkpoint formats of the optimizers and the checks shared by their constructors and `fromState`.
 *
 * @module
 */
import { GearError, describe, fail } from '../core/errors.js';
import * as v from '../core/validate.js';

/**
 * Snapshot of an {@link AdamW} or {@link Adam} optimizer: hyper-parameters, the number of steps taken and
 * copies of the moment buffers (one per parameter, same order and lengths). Restoring it with
 * `AdamW.fromState` / `Adam.fromState` and stepping on gives bit-identical results to never stopping.
 *
 * @category Optimizers
 */
export interface AdamState {
  /** Which optimizer wrote the state. */
  kind: 'adamw' | 'adam';
  /** Format version (currently 1). */
  version: 1;
  /** Steps taken so far (0 before the first). */
  step: number;
  /** Learning rate in effect. */
  lr: number;
  /** Moment decay rates `[beta1, beta2]`. */
  betas: [number, number];
  /** Denominator epsilon. */
  eps: number;
  /** Weight decay (decoupled for AdamW, L2 for Adam). */
  weightDecay: number;
  /** Whether the AMSGrad maximum of the second moment is used. */
  amsgrad: boolean;
  /** Whether the objective is maximised (gradients negated). */
  maximize: boolean;
  /** First moments (torch `exp_avg`), one per parameter. */
  expAvg: Float32Array[];
  /** Second moments (torch `exp_avg_sq`), one per parameter. */
  expAvgSq: Float32Array[];
  /** AMSGrad running maxima (torch `max_exp_avg_sq`) when `amsgrad`, else `null`. */
  maxExpAvgSq: Float32Array[] | null;
}

/**
 * Snapshot of an {@link SGD} optimizer (see {@link AdamState} for the guarantees).
 *
 * @category Optimizers
 */
export interface SGDState {
  /** Which optimizer wrote the state. */
  kind: 'sgd';
  /** Format version (currently 1). */
  version: 1;
  /** Steps taken so far (0 before the first; the momentum buffer starts as the first gradient). */
  step: number;
  /** Learning rate in effect. */
  lr: number;
  /** Momentum factor (0 = none). */
  momentum: number;
  /** Dampening of the momentum update. */
  dampening: number;
  /** Nesterov momentum. */
  nesterov: boolean;
  /** L2 weight decay added to the gradient. */
  weightDecay: number;
  /** Whether the objective is maximised (gradients negated). */
  maximize: boolean;
  /** Momentum buffers (torch `momentum_buffer`), one per parameter, or `null` without momentum. */
  momentumBuffer: Float32Array[] | null;
}

/**
 * The state of any gear-rl optimizer.
 *
 * @category Optimizers
 */
export type OptimizerState = AdamState | SGDState;

/**
 * Checks a parameter list: a non-empty-or-empty array of Float32Array, no two sharing memory (a tensor
 * listed twice would be updated twice). Returns a copy of the list.
 */
export function checkParams(params: unknown): Float32Array[] {
  const out = v.f32List(params, 'params');
  checkDisjoint(out, 'params');
  return out;
}

/** Throws ERR_SHAPE when two non-empty arrays of the list overlap in memory. */
export function checkDisjoint(list: readonly Float32Array[], what: string): void {
  const spans = list
    .map((a, i) => ({ buf: a.buffer, lo: a.byteOffset, hi: a.byteOffset + a.byteLength, i }))
    .filter((s) => s.hi > s.lo);
  // Group by buffer, then look for an overlap between neighbours in address order.
  const byBuf = new Map<ArrayBufferLike, typeof spans>();
  for (const s of spans) {
    const g = byBuf.get(s.buf);
    if (g) g.push(s);
    else byBuf.set(s.buf, [s]);
  }
  for (const g of byBuf.values()) {
    g.sort((a, b) => a.lo - b.lo);
    for (let k = 1; k < g.length; k++) {
      if (g[k]!.lo < g[k - 1]!.hi) {
        throw new GearError('ERR_SHAPE',
          `${what}: expected tensors that do not share memory, got ${what}[${g[k - 1]!.i}] overlapping ${what}[${g[k]!.i}]`);
      }
    }
  }
}

/** Checks a gradient list against the parameters: same count, Float32Array, same lengths. */
export function checkGrads(grads: unknown, params: readonly Float32Array[], what = 'grads'): Float32Array[] {
  const list = v.list(grads, what, 'an array of Float32Array');
  if (list.length !== params.length) {
    fail('ERR_SHAPE', `${what}.length`, `${params.length} (one per parameter)`, list.length);
  }
  const out = list.map((g, i) => v.f32(g, `${what}[${i}]`));  // list: already a checked dense copy
  for (let i = 0; i < params.length; i++) {
    if (out[i]!.length !== params[i]!.length) fail('ERR_SHAPE', `${what}[${i}].length`, String(params[i]!.length), out[i]!.length);
  }
  return out;
}

/** A learning rate: finite, >= 0. */
export function checkLr(lr: unknown, dflt: number): number {
  const x = v.numOpt(lr, 'lr', dflt, { min: 0 });
  if (!Number.isFinite(x)) fail('ERR_OPTION', 'lr', 'a finite number >= 0', x);
  return x;
}

/** A finite number >= 0 option. */
export function nonNeg(x: unknown, what: string, dflt: number): number {
  const r = v.numOpt(x, what, dflt, { min: 0 });
  if (!Number.isFinite(r)) fail('ERR_OPTION', what, 'a finite number >= 0', r);
  return r;
}

/** An optional boolean option. */
export function boolOpt(x: unknown, what: string, dflt: boolean): boolean {
  if (x === undefined) return dflt;
  if (typeof x !== 'boolean') fail('ERR_OPTION', what, 'a boolean', x);
  return x;
}

/**
 * Copies a state buffer list after checking it matches the parameters and holds values of its domain:
 * finite everywhere, and >= 0 for second moments (`nonNegative`). A corrupted checkpoint is refused with
 * ERR_STATE instead of turning the parameters into NaN at the next step. The copies are checked, so
 * nothing the caller changes afterwards reaches the optimizer.
 */
export function stateBuffers(list: unknown, params: readonly Float32Array[], what: string, nonNegative = false): Float32Array[] {
  if (!Array.isArray(list)) throw new GearError('ERR_STATE', `state.${what}: expected an array of ${params.length} Float32Array, got ${describe(list)}`);
  if (list.length !== params.length) {
    throw new GearError('ERR_STATE', `state.${what}.length: expected ${params.length} (one per parameter), got ${list.length}`);
  }
  const out: Float32Array[] = [];
  for (let i = 0; i < params.length; i++) {
    const b: unknown = list[i]; // read once; a hole reads as undefined and is refused
    if (!v.isTyped(b, Float32Array)) {
      throw new GearError('ERR_STATE', `state.${what}[${i}]: expected a Float32Array, got ${describe(b)}`);
    }
    if (b.length !== params[i]!.length) {
      throw new GearError('ERR_STATE', `state.${what}[${i}].length: expected ${params[i]!.length}, got ${b.length}`);
    }
    if (v.isDetached(b)) throw new GearError('ERR_STATE', `state.${what}[${i}]: expected an attached buffer, got a detached one`);
    const copy = b.slice();
    for (let j = 0; j < copy.length; j++) {
      const x = copy[j]!;
      if (!Number.isFinite(x) || (nonNegative && x < 0)) {
        throw new GearError('ERR_STATE', `state.${what}[${i}][${j}]: expected a finite number${nonNegative ? ' >= 0' : ''}, got ${describe(x)}`);
      }
    }
    out.push(copy);
  }
  return out;
}

/** Checks the common header of a state object. */
export function stateHeader(state: unknown, kinds: readonly string[]): Record<string, unknown> {
  if (typeof state !== 'object' || state === null) {
    throw new GearError('ERR_STATE', `state: expected an optimizer state object, got ${describe(state)}`);
  }
  // every field read once, first: the checks and the restore see one snapshot
  const s = { ...state } as Record<string, unknown>;
  if (!kinds.includes(s.kind as string)) {
    throw new GearError('ERR_STATE', `state.kind: expected ${kinds.map((k) => `'${k}'`).join(' or ')}, got ${describe(s.kind)}`);
  }
  if (s.version !== 1) throw new GearError('ERR_STATE', `state.version: expected 1, got ${describe(s.version)}`);
  const step = s.step;
  if (typeof step !== 'number' || !Number.isInteger(step) || step < 0 || step >= 2 ** 53) {
    throw new GearError('ERR_STATE', `state.step: expected an integer >= 0, got ${describe(step)}`);
  }
  return s;
}

/**
 * Runs `make` (an optimizer constructor fed from a state) and reports bad options as `ERR_STATE`: a
 * state that fails the constructor's checks is a corrupt checkpoint, not a caller's option.
 */
export function asStateError<T>(make: () => T): T {
  try {
    return make();
  } catch (e) {
    if (e instanceof GearError && e.code === 'ERR_OPTION') {
      throw new GearError('ERR_STATE', `state.${e.message}`);
    }
    throw e;
  }
}

/** Requires each named field of a state to have the given `typeof` (a missing field is an error). */
export function requireFields(s: Record<string, unknown>, fields: Record<string, 'number' | 'boolean'>): void {
  for (const [k, t] of Object.entries(fields)) {
    if (typeof s[k] !== t) throw new GearError('ERR_STATE', `state.${k}: expected a ${t}, got ${describe(s[k])}`);
  }
}
