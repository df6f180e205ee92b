/**
 * The contract between the TypeScript layer and the native addon. Every function the addon exports takes
 * ONE object of named parameters and returns a named result (or a Promise of it when `async` is true).
 * The native side reads each property by name (native/src/addon/args.h) and re-checks everything memory
 * safety needs; the TypeScript wrappers check types, shapes and options first.
 *
 * Each wrapper (`ts/ops/<op>.ts`, `ts/optim/*`, `ts/losses/policy/ppo_native.ts`, `ts/gear/gear.ts`,
 * `ts/cuda/index.ts`, ...) declares the native functions it calls, next to the code that calls them:
 * their `...Params` / `...Result` interfaces, the integer codes its enumerations cross as, and a
 * `declare module '../core/addon_types.js' { interface NativeAddon { ... } }` block. That module
 * augmentation merges its members into {@link NativeAddon} in every program that compiles the wrapper
 * (the package's program compiles every file of `ts/`), so `native.foo` is typed where it is called
 * while a new op touches only its own wrapper on the TypeScript side, and this file imports nothing
 * above it. This file keeps what several op families
 * share (host and device logits, the device and sync/async switches, {@link AsyncOp}) and the module's
 * own functions.
 *
 * @internal
 * @module
 */
import type { GearErrorCode } from './errors.js';

/** Native dtype code of a logits buffer: 0 float32 (Float32Array), 1 bfloat16, 2 float16 (Uint16Array). */
export type DTypeCode = 0 | 1 | 2;

/** A logits buffer of `rows * vocab` elements in host memory. */
export interface NativeHostLogits {
  data: Float32Array | Uint16Array;
  rows: number;
  vocab: number;
  dtype: DTypeCode;
}
/** A device tensor, by its id in the CUDA module's tensor table (shape and dtype live there). */
export interface NativeTensorRef {
  tensor: number;
}
/** Logits in host memory or on a device. */
export type NativeLogits = NativeHostLogits | NativeTensorRef;
/** A device tensor as the CUDA module describes it. */
export interface NativeTensor extends NativeTensorRef {
  device: number;
  rows: number;
  vocab: number;
  dtype: DTypeCode;
  bytes: number;
}

/**
 * Where a logits call runs: -1 (or absent) the CPU, >= 0 that CUDA device (host logits are staged
 * through it). Calls on device tensors run on their device.
 */
export interface DeviceControl {
  device?: number;
}

/**
 * Sync/async switch and abort flag, accepted by every op with an async form. The flag is an Int32Array
 * the caller sets to 1 (Atomics.store) to abort; kernels poll it between blocks of rows.
 */
export interface AsyncControl {
  /** true: run on the libuv pool and return a Promise of the result. */
  async?: boolean;
  abort?: Int32Array | null;
}

/** An op with a sync and an async form: the result, or a Promise of it when `async` is true. */
export interface AsyncOp<P extends AsyncControl, R> {
  (params: P & { async: true }): Promise<R>;
  (params: P & { async?: false }): R;
  (params: P): R | Promise<R>;
}

// ---- the module's own functions: setup and introspection ----

export interface SetErrorClassParams {
  /** Constructed as `new errorClass(code, message)` for every native error. */
  errorClass: new (code: GearErrorCode, message: string) => Error;
}
export interface SetNumThreadsParams {
  threads: number;
}
export interface SetIsaParams {
  isa: string;
}
export interface BackendResult {
  variant: string;
  isa: string;
  detectedIsa: string;
  isas?: string[];
  /** The CUDA module or the host device: its usable device count. */
  devices?: number;
  threads: number;
  version: string;
}

/**
 * Every function the addon exports. Declared here: the module's own functions. Each op's function is
 * added by its wrapper's `declare module` block.
 */
export interface NativeAddon {
  setErrorClass(params: SetErrorClassParams): void;
  /**
   * The CPU module only: installs the host device (a test double of a GPU, `GEAR_RL_VARIANT=host-device`)
   * and adds the device functions to this object. `memoryBytes`: each host device's capacity (0: the
   * host's physical memory).
   */
  installHostDevice?(params: { memoryBytes?: number }): void;
  backend(): BackendResult;
  setNumThreads(params: SetNumThreadsParams): void;
  setIsa(params: SetIsaParams): string;
}
