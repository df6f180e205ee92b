/**
 * Stochastic gradient descent with momentum, dampening, Nesterov and L2 weight decay, PyTorch 1.13
 * semantics bit for bit.
 *
 * @module
 */
import { GearError, fail } from '../core/errors.js';
import { asyncOp } from '../core/invoke.js';
import * as v from '../core/validate.js';
import { type NativeStep, Optimizer, stepOf } from './optimizer.js';
import { asStateError, boolOpt, checkLr, nonNeg, requireFields, stateBuffers, stateHeader } from './state.js';
import type { SGDState } from './state.js';
import type { AsyncControl, AsyncOp } from '../core/addon_types.js';
import type { StepResult } from './optimizer.js';

// ---- native contract: the SGD step ----
// What this file calls in the addon; the `declare module` block adds it to NativeAddon (ts/core/addon_types.ts).

/** @internal */
export interface SgdStepParams extends AsyncControl {
  params: readonly Float32Array[];
  grads: readonly Float32Array[];
  /** Required when momentum is not 0. */
  momentumBuffer?: readonly Float32Array[] | null;
  lr: number;
  momentum: number;
  dampening: number;
  weightDecay: number;
  nesterov: boolean;
  maximize: boolean;
  firstStep: boolean;
}

declare module '../core/addon_types.js' {
  interface NativeAddon {
    sgdStep: AsyncOp<SgdStepParams, StepResult>;
  }
}
// A step writes the parameters and the momentum (every other array of its parameter object is read: ts/core/invoke.ts).
const sgdStepOp = asyncOp('sgdStep', { writes: ['params', 'momentumBuffer'] });

/**
 * Options of {@link SGD} (defaults are PyTorch's; as there, `lr` is required).
 *
 * @category Optimizers
 */
export interface SGDOptions {
  /** Learning rate, >= 0 (required). */
  lr: number;
  /**
   * Momentum factor, >= 0 (default 0: plain SGD).
   *
   * @defaultValue `0`
   */
  momentum?: number;
  /**
   * Dampening of the momentum update, in [0, 1] (default 0).
   *
   * @defaultValue `0`
   */
  dampening?: number;
  /**
   * Nesterov momentum; needs momentum > 0 and dampening 0 (default false).
   *
   * @defaultValue `false`
   */
  nesterov?: boolean;
  /**
   * L2 weight decay added to the gradient, >= 0 (default 0).
   *
   * @defaultValue `0`
   */
  weightDecay?: number;
  /**
   * Maximise the objective instead (default false).
   *
   * @defaultValue `false`
   */
  maximize?: boolean;
}

const KEYS = ['lr', 'momentum', 'dampening', 'nesterov', 'weightDecay', 'maximize'] as const;

/**
 * SGD, `torch.optim.SGD` semantics. Per element, in float32 (`fma` where ATen fuses):
 *
 * ```text
 * d = fma(wd, p, g)                                  (only when wd != 0)
 * buf = d on the first step, else fma(1 - dampening, d, buf * momentum)   (only when momentum != 0)
 * d = nesterov ? fma(momentum, buf, d) : buf
 * p = fma(-lr, d, p)
 * ```
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const params = [Float32Array.of(1, 1)];
 * const opt = new rl.SGD(params, { lr: 0.1, momentum: 0.9, nesterov: true });
 * opt.step([Float32Array.of(1, -1)]);
 * console.log(params[0]); // about [0.81, 1.19]
 * const state = opt.state(); // hyper-parameters, step count and momentum buffers
 * const resumed = rl.SGD.fromState(params, state);
 * console.log(resumed.momentum, resumed.stepCount); // 0.9 1
 * ```
 * @category Optimizers
 */
export class SGD extends Optimizer {
  readonly #momentum: number;
  readonly #dampening: number;
  readonly #nesterov: boolean;
  readonly #weightDecay: number;
  readonly #maximize: boolean;
  #buf: Float32Array[] | null;

  /**
   * @param params parameter tensors, updated in place
   * @param opts hyper-parameters
   */
  constructor(params: Float32Array[], opts: SGDOptions) {
    if (typeof opts !== 'object' || opts === null) fail('ERR_OPTION', 'options', 'an object with lr', opts);
    v.knownKeys(opts, 'options', KEYS);
    const o = opts;
    if (o.lr === undefined) fail('ERR_OPTION', 'lr', 'a number (SGD has no default learning rate)', o.lr);
    const lr = checkLr(o.lr, NaN);
    super(params, lr);
    this.#momentum = nonNeg(o.momentum, 'momentum', 0);
    this.#dampening = v.numOpt(o.dampening, 'dampening', 0, { min: 0, max: 1 });
    this.#nesterov = boolOpt(o.nesterov, 'nesterov', false);
    this.#weightDecay = nonNeg(o.weightDecay, 'weightDecay', 0);
    this.#maximize = boolOpt(o.maximize, 'maximize', false);
    if (this.#nesterov && (this.#momentum <= 0 || this.#dampening !== 0)) {
      fail('ERR_OPTION', 'nesterov', 'momentum > 0 and dampening 0',
        `momentum ${this.#momentum} and dampening ${this.#dampening}`);
    }
    this.#buf = this.#momentum !== 0 ? this.params.map((p) => new Float32Array(p.length)) : null;
  }

  /** Momentum factor. */
  get momentum(): number {
    return this.#momentum;
  }

  /** {@inheritDoc Optimizer.state} */
  override state(): SGDState {
    this.checkIdle();
    return {
      kind: 'sgd',
      version: 1,
      step: this.stepCount,
      lr: this.lr,
      momentum: this.#momentum,
      dampening: this.#dampening,
      nesterov: this.#nesterov,
      weightDecay: this.#weightDecay,
      maximize: this.#maximize,
      momentumBuffer: this.#buf ? this.#buf.map((b) => b.slice()) : null,
    };
  }

  /**
   * Rebuilds an optimizer from {@link SGD.state} output for the same parameters (same count and
   * lengths). Buffers are copied. A state of another kind or shape throws `ERR_STATE`.
   *
   * @param params parameter tensors
   * @param state a state written by an SGD
   */
  static fromState(params: Float32Array[], state: SGDState): SGD {
    const s = stateHeader(state, ['sgd']);
    requireFields(s, { lr: 'number', momentum: 'number', dampening: 'number', nesterov: 'boolean', weightDecay: 'number', maximize: 'boolean' });
    const opt = asStateError(() => new SGD(params, {
      lr: s.lr as number, momentum: s.momentum as number, dampening: s.dampening as number,
      nesterov: s.nesterov as boolean, weightDecay: s.weightDecay as number, maximize: s.maximize as boolean,
    }));
    if (opt.#momentum !== 0) opt.#buf = stateBuffers(s.momentumBuffer, opt.params, 'momentumBuffer');
    else if (s.momentumBuffer !== null && s.momentumBuffer !== undefined) {
      throw new GearError('ERR_STATE', 'state.momentumBuffer: expected null when momentum is 0, got buffers');
    }
    opt.setStepCount(s.step as number);
    return opt;
  }

  /** @internal */
  protected override nativeStep(grads: Float32Array[]): NativeStep {
    return stepOf(sgdStepOp, {
      params: this.params, grads, momentumBuffer: this.#buf, lr: this.lr, momentum: this.#momentum,
      dampening: this.#dampening, weightDecay: this.#weightDecay, nesterov: this.#nesterov, maximize: this.#maximize,
      firstStep: this.stepCount === 0, async: false, abort: null,
    });
  }
}
