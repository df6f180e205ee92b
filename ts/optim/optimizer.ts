/**
 * Behaviour shared by every optimizer: the parameter list, the learning rate, the step counter and the
 * sync / async step protocol.
 *
 * @module
 */
import { GearError, fail } from '../core/errors.js';
import { f32List, knownKeys } from '../core/validate.js';
import type { AsyncNativeOp } from '../core/invoke.js';
import { checkGrads, checkLr, checkParams } from './state.js';
import type { OptimizerState } from './state.js';

/** What every optimizer's native step returns. @internal */
export interface StepResult {
  /** Parameters updated. */
  tensors: number;
}

/** A step's native call, in either form: an optimizer's op with the step's parameter object. @internal */
export interface NativeStep {
  call(): StepResult;
  callAsync(signal: AbortSignal | undefined): Promise<StepResult>;
}

/** @internal The native step `op` runs over `params` (what an optimizer's {@link Optimizer.nativeStep} returns). */
export function stepOf<P>(op: AsyncNativeOp<P, StepResult>, params: P): NativeStep {
  return { call: () => op.call(params), callAsync: (signal) => op.callAsync(params, signal) };
}

/**
 * Options of {@link Optimizer.stepAsync}.
 *
 * @category Optimizers
 */
export interface StepAsyncOptions {
  /**
   * Aborting before the step has started rejects with `ERR_ABORTED` and changes nothing. A step that
   * has started always completes (an optimizer step is never left half applied).
   */
  signal?: AbortSignal;
}

/**
 * Base class of {@link AdamW}, {@link Adam} and {@link SGD}. Parameters are `Float32Array`s updated in
 * place by native, multithreaded code; gradients are passed to each {@link Optimizer.step} call in the
 * same order.
 *
 * Non-finite values are not filtered: a NaN or infinite gradient propagates into the parameters and
 * state exactly as in PyTorch. Use {@link clipGradNorm} first (it throws `ERR_NON_FINITE` and leaves the
 * gradients untouched on a non-finite norm) and skip the step when it throws, as verl does.
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * // every optimizer (AdamW, Adam, SGD) is an Optimizer: step, stepAsync, state
 * const params = [new Float32Array(1024).fill(1)];
 * const grads = [new Float32Array(1024).fill(0.01)];
 * const opt: rl.Optimizer = new rl.AdamW(params, { lr: 1e-3 });
 * opt.step(grads);                                                  // on the calling thread
 * await opt.stepAsync(grads, { signal: AbortSignal.timeout(10_000) }); // off the main thread
 * console.log(opt.stepCount, opt.lr, opt.state().kind);             // 2 0.001 'adamw'
 * const sgd: rl.Optimizer = new rl.SGD([new Float32Array(4)], { lr: 0.1 });
 * console.log(sgd.state().kind);                                    // 'sgd'
 * ```
 * @category Optimizers
 */
export abstract class Optimizer {
  /** The parameters, in the order gradients must be given (the list is copied; the tensors are not). */
  readonly params: readonly Float32Array[];
  #lr: number;
  #step = 0;
  #busy = false;

  /** @param params parameter tensors, updated in place; none may share memory with another */
  protected constructor(params: Float32Array[], lr: number) {
    // TypeScript's `abstract` does not exist at run time: JavaScript can still call `new Optimizer()`
    if (new.target === Optimizer) {
      throw new GearError('ERR_OPTION', 'Optimizer: expected a subclass (AdamW, Adam, SGD), got the abstract base class');
    }
    this.params = Object.freeze(checkParams(params));
    this.#lr = lr;
  }

  /** Learning rate used by the next step (a finite number >= 0; schedules set it between steps). */
  get lr(): number {
    return this.#lr;
  }

  set lr(value: number) {
    this.#lr = checkLr(value, NaN);
  }

  /** Number of steps taken (the bias corrections of Adam use `stepCount + 1` on the next step). */
  get stepCount(): number {
    return this.#step;
  }

  /** Sets the step counter (used by `fromState`). */
  protected setStepCount(step: number): void {
    this.#step = step;
  }

  /**
   * Applies one update to every parameter in place, in native code over all threads, in one pass over
   * parameter, gradient and state. All gradients are checked (count, `Float32Array`, lengths, no
   * shared memory with parameters or state) before anything is written: on `GearError` nothing changed.
   *
   * @param grads one gradient per parameter, same lengths, in the order of {@link Optimizer.params}
   */
  step(grads: Float32Array[]): void {
    this.#checkIdle();
    const g = checkGrads(grads, this.params);
    this.nativeStep(g).call();
    this.#step++;
  }

  /**
   * {@link Optimizer.step} off the main thread. Until the Promise settles the parameters, gradients and
   * state must not be touched, and further steps throw `ERR_BUSY`.
   *
   * @param grads one gradient per parameter
   * @param opts `signal`: aborting before the step starts rejects with `ERR_ABORTED` and changes nothing
   */
  async stepAsync(grads: Float32Array[], opts: StepAsyncOptions = {}): Promise<void> {
    knownKeys(opts, 'options', ['signal']);
    this.#checkIdle();
    const g = checkGrads(grads, this.params);
    this.#busy = true;
    try {
      await this.nativeStep(g).callAsync(opts.signal);
      this.#step++;
    } finally {
      this.#busy = false;
    }
  }

  /** A deep copy of the optimizer's hyper-parameters, step count and buffers, for checkpoints. */
  abstract state(): OptimizerState;

  /**
   * The native step over `grads` (its op declares what the step writes: the parameters and the state;
   * the gradients are read).
   * @internal
   */
  protected abstract nativeStep(grads: Float32Array[]): NativeStep;

  /** Throws ERR_BUSY while an async step is pending. */
  protected checkIdle(): void {
    this.#checkIdle();
  }

  #checkIdle(): void {
    if (this.#busy) {
      throw new GearError('ERR_BUSY', 'optimizer: expected no pending stepAsync, got one still running');
    }
  }
}

/**
 * Sets every gradient to zero (a convenience for accumulation loops).
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const grads = [Float32Array.of(0.5, -1), Float32Array.of(2)];
 * rl.zeroGrad(grads); // before accumulating the next batch's gradients
 * console.log(grads); // [Float32Array [0, 0], Float32Array [0]]
 * ```
 * @category Optimizers
 */
export function zeroGrad(grads: Float32Array[]): void {
  if (!Array.isArray(grads)) fail('ERR_DTYPE', 'grads', 'an array of Float32Array', grads);
  // each element read once and checked before any is written; an empty (or detached) array has nothing to zero
  for (const g of f32List(grads, 'grads')) if (g.length > 0) g.fill(0);
}
