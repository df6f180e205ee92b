/**
 * Adam and AdamW with PyTorch 1.13 semantics, bit for bit.
 *
 * @module
 */
import { GearError, describe } from '../core/errors.js';
import { asyncOp } from '../core/invoke.js';
import * as v from '../core/validate.js';
import { type NativeStep, Optimizer, stepOf } from './optimizer.js';
import { asStateError, boolOpt, checkLr, nonNeg, requireFields, stateBuffers, stateHeader } from './state.js';
import type { AdamState } from './state.js';
import type { AsyncControl, AsyncOp } from '../core/addon_types.js';
import type { StepResult } from './optimizer.js';

// ---- native contract: the Adam step ----
// What this file calls in the addon; the `declare module` block adds it to NativeAddon (ts/core/addon_types.ts).

/** @internal */
export interface AdamStepParams extends AsyncControl {
  params: readonly Float32Array[];
  grads: readonly Float32Array[];
  expAvg: readonly Float32Array[];
  expAvgSq: readonly Float32Array[];
  /** Required with amsgrad. */
  maxExpAvgSq?: readonly Float32Array[] | null;
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
  /** The step being taken (>= 1). */
  step: number;
  decoupled: boolean;
  amsgrad: boolean;
  maximize: boolean;
}

declare module '../core/addon_types.js' {
  interface NativeAddon {
    adamStep: AsyncOp<AdamStepParams, StepResult>;
  }
}
// A step writes the parameters and the state (every other array of its parameter object is read: ts/core/invoke.ts).
const adamStepOp = asyncOp('adamStep', { writes: ['params', 'expAvg', 'expAvgSq', 'maxExpAvgSq'] });

/**
 * Options of {@link AdamW} and {@link Adam} (defaults are PyTorch's).
 *
 * @category Optimizers
 */
export interface AdamOptions {
  /**
   * Learning rate, >= 0 (default 1e-3).
   *
   * @defaultValue `1e-3`
   */
  lr?: number;
  /**
   * Moment decay rates, each in [0, 1) (default `[0.9, 0.999]`).
   *
   * @defaultValue `[0.9, 0.999]`
   */
  betas?: [number, number];
  /**
   * Added to the denominator, >= 0 (default 1e-8).
   *
   * @defaultValue `1e-8`
   */
  eps?: number;
  /**
   * Weight decay, >= 0: decoupled for AdamW (default 0.01), L2 added to the gradient for Adam (default 0).
   *
   * @defaultValue `0.01` (AdamW; Adam: `0`)
   */
  weightDecay?: number;
  /**
   * Use the AMSGrad maximum of the second moment (default false).
   *
   * @defaultValue `false`
   */
  amsgrad?: boolean;
  /**
   * Maximise the objective instead (gradients negated; default false).
   *
   * @defaultValue `false`
   */
  maximize?: boolean;
}

const KEYS = ['lr', 'betas', 'eps', 'weightDecay', 'amsgrad', 'maximize'] as const;

interface Hyper {
  lr: number;
  betas: [number, number];
  eps: number;
  weightDecay: number;
  amsgrad: boolean;
  maximize: boolean;
}

function hyper(opts: AdamOptions | undefined, defaultWd: number): Hyper {
  v.knownKeys(opts, 'options', KEYS);
  const o = opts ?? {};
  let betas: [number, number] = [0.9, 0.999];
  if (o.betas !== undefined) {
    const b = v.numArray(o.betas, 'betas', 2);
    betas = [v.numOpt(b[0], 'betas[0]', 0.9, { min: 0, max: 1, maxOpen: true }),
      v.numOpt(b[1], 'betas[1]', 0.999, { min: 0, max: 1, maxOpen: true })];
  }
  return {
    lr: checkLr(o.lr, 1e-3),
    betas,
    eps: nonNeg(o.eps, 'eps', 1e-8),
    weightDecay: nonNeg(o.weightDecay, 'weightDecay', defaultWd),
    amsgrad: boolOpt(o.amsgrad, 'amsgrad', false),
    maximize: boolOpt(o.maximize, 'maximize', false),
  };
}

/**
 * Shared implementation of {@link AdamW} and {@link Adam}. Per element, in float32 exactly as PyTorch
 * 1.13's single-tensor (`foreach=False`) CPU path computes it (bias corrections in double, as Python
 * does; `fma` where ATen's kernels fuse):
 *
 * ```text
 * AdamW: p = p * (1 - lr*wd)          Adam: g = fma(wd, p, g)   (only when wd != 0)
 * m = fma(1 - b1, g, m * b1)
 * v = fma((1 - b2) * g, g, v * b2)     (amsgrad: vmax = max(vmax, v), used below instead of v)
 * p = p + (-lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 * ```
 */
abstract class AdamBase extends Optimizer {
  readonly #h: Hyper;
  readonly #decoupled: boolean;
  #m: Float32Array[];
  #v: Float32Array[];
  #vmax: Float32Array[] | null;

  protected constructor(params: Float32Array[], h: Hyper, decoupled: boolean) {
    super(params, h.lr);
    this.#h = h;
    this.#decoupled = decoupled;
    this.#m = this.params.map((p) => new Float32Array(p.length));
    this.#v = this.params.map((p) => new Float32Array(p.length));
    this.#vmax = h.amsgrad ? this.params.map((p) => new Float32Array(p.length)) : null;
  }

  /** Moment decay rates `[beta1, beta2]`. */
  get betas(): [number, number] {
    return [this.#h.betas[0], this.#h.betas[1]];
  }

  /** Denominator epsilon. */
  get eps(): number {
    return this.#h.eps;
  }

  /** Weight decay. */
  get weightDecay(): number {
    return this.#h.weightDecay;
  }

  /** {@inheritDoc Optimizer.state} */
  override state(): AdamState {
    this.checkIdle();
    return {
      kind: this.#decoupled ? 'adamw' : 'adam',
      version: 1,
      step: this.stepCount,
      lr: this.lr,
      betas: this.betas,
      eps: this.#h.eps,
      weightDecay: this.#h.weightDecay,
      amsgrad: this.#h.amsgrad,
      maximize: this.#h.maximize,
      expAvg: this.#m.map((b) => b.slice()),
      expAvgSq: this.#v.map((b) => b.slice()),
      maxExpAvgSq: this.#vmax ? this.#vmax.map((b) => b.slice()) : null,
    };
  }

  /** Loads buffers and step count from a checked state. */
  protected load(s: Record<string, unknown>): void {
    this.#m = stateBuffers(s.expAvg, this.params, 'expAvg');
    this.#v = stateBuffers(s.expAvgSq, this.params, 'expAvgSq', true);
    if (this.#h.amsgrad) this.#vmax = stateBuffers(s.maxExpAvgSq, this.params, 'maxExpAvgSq', true);
    else if (s.maxExpAvgSq !== null && s.maxExpAvgSq !== undefined) {
      throw new GearError('ERR_STATE', 'state.maxExpAvgSq: expected null when amsgrad is false, got buffers');
    }
    this.setStepCount(s.step as number);
  }

  /** @internal */
  protected override nativeStep(grads: Float32Array[]): NativeStep {
    const h = this.#h;
    return stepOf(adamStepOp, {
      params: this.params, grads, expAvg: this.#m, expAvgSq: this.#v, maxExpAvgSq: this.#vmax, lr: this.lr,
      beta1: h.betas[0], beta2: h.betas[1], eps: h.eps, weightDecay: h.weightDecay, step: this.stepCount + 1,
      decoupled: this.#decoupled, amsgrad: h.amsgrad, maximize: h.maximize, async: false, abort: null,
    });
  }
}

function hyperFromState(s: Record<string, unknown>): AdamOptions {
  requireFields(s, { lr: 'number', eps: 'number', weightDecay: 'number', amsgrad: 'boolean', maximize: 'boolean' });
  if (!Array.isArray(s.betas) || s.betas.length !== 2) {
    throw new GearError('ERR_STATE', `state.betas: expected an array of 2 numbers, got ${describe(s.betas)}`);
  }
  return {
    lr: s.lr as number, betas: [s.betas[0], s.betas[1]], eps: s.eps as number, weightDecay: s.weightDecay as number,
    amsgrad: s.amsgrad as boolean, maximize: s.maximize as boolean,
  };
}

/**
 * AdamW (Loshchilov & Hutter): Adam with decoupled weight decay, `torch.optim.AdamW` semantics.
 * Defaults: lr 1e-3, betas [0.9, 0.999], eps 1e-8, weightDecay 0.01.
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 * import { deserialize, serialize } from 'node:v8';
 *
 * const params = [new Float32Array(8).fill(0.5), Float32Array.of(1, -1)];
 * const grads = [new Float32Array(8).fill(0.1), Float32Array.of(3, 4)];
 * const opt = new rl.AdamW(params, { lr: 1e-3, weightDecay: 0.01 });
 * rl.clipGradNorm(grads, 1.0);
 * opt.step(grads); // params updated in place
 *
 * // checkpoint (the state holds typed arrays: v8.serialize keeps them) and resume
 * const checkpoint = serialize({ params, optimizer: opt.state() });
 * const saved = deserialize(checkpoint) as { params: Float32Array[]; optimizer: rl.AdamState };
 * const resumed = rl.AdamW.fromState(saved.params, saved.optimizer);
 * console.log(resumed.stepCount); // 1
 * ```
 *
 * @category Optimizers
 */
export class AdamW extends AdamBase {
  /**
   * @param params parameter tensors, updated in place
   * @param opts hyper-parameters (PyTorch's defaults)
   */
  constructor(params: Float32Array[], opts?: AdamOptions) {
    super(params, hyper(opts, 0.01), true);
  }

  /**
   * Rebuilds an optimizer from {@link AdamW.state} output for the same parameters (same count and
   * lengths). Buffers are copied. A state of another kind or shape throws `ERR_STATE`.
   *
   * @param params parameter tensors (the restored values live in them; the state holds none)
   * @param state a state written by an AdamW
   */
  static fromState(params: Float32Array[], state: AdamState): AdamW {
    const s = stateHeader(state, ['adamw']);
    const opt = asStateError(() => new AdamW(params, hyperFromState(s)));
    opt.load(s);
    return opt;
  }
}

/**
 * Adam with L2 weight decay added to the gradient, `torch.optim.Adam` semantics.
 * Defaults: lr 1e-3, betas [0.9, 0.999], eps 1e-8, weightDecay 0.
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const params = [Float32Array.of(1, 2, 3)];
 * const opt = new rl.Adam(params, { lr: 0.01, betas: [0.9, 0.99], amsgrad: true });
 * opt.step([Float32Array.of(0.5, -0.5, 0)]);
 * const copy = rl.Adam.fromState(params.map((p) => p.slice()), opt.state()); // a separate replica
 * console.log(params[0], copy.stepCount);
 * ```
 * @category Optimizers
 */
export class Adam extends AdamBase {
  /**
   * @param params parameter tensors, updated in place
   * @param opts hyper-parameters (PyTorch's defaults)
   */
  constructor(params: Float32Array[], opts?: AdamOptions) {
    super(params, hyper(opts, 0), false);
  }

  /**
   * Rebuilds an optimizer from {@link Adam.state} output (see {@link AdamW.fromState}).
   *
   * @param params parameter tensors
   * @param state a state written by an Adam
   */
  static fromState(params: Float32Array[], state: AdamState): Adam {
    const s = stateHeader(state, ['adam']);
    const opt = asStateError(() => new Adam(params, hyperFromState(s)));
    opt.load(s);
    return opt;
  }
}
