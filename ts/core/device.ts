/**
 * Logits that live on a CUDA device ({@link DeviceLogits}), and where a logits call runs.
 *
 * @module
 */
import { GearError, fail } from './errors.js';
import { cudaUnavailable, native } from './addon.js';
import { asyncOp } from './invoke.js';
import type { AsyncControl, AsyncOp, DTypeCode, NativeTensor, NativeTensorRef } from './addon_types.js';
import type { LogitsDType } from './dtype.js';

// ---- native contract: a device tensor's download and release (the CUDA module only) ----
// What this file calls in the addon; the `declare module` block adds it to NativeAddon (ts/core/addon_types.ts).

/** @internal */
export interface CudaDownloadParams extends AsyncControl, NativeTensorRef {
  out?: Float32Array | Uint16Array | null;
}
/** @internal */
export interface CudaDownloadResult {
  data: Float32Array | Uint16Array;
}
/** @internal */
export interface CudaDisposeParams extends NativeTensorRef {
  /** The garbage collector's path: free now, or when the last running call using it ends. */
  whenFree?: boolean;
}

declare module './addon_types.js' {
  interface NativeAddon {
    cudaDownload?: AsyncOp<CudaDownloadParams, CudaDownloadResult>;
    cudaDispose?: (params: CudaDisposeParams) => void;
  }
}
// Writes `out` (ts/core/invoke.ts); the tensor itself is claimed by the addon.
const cudaDownloadOp = asyncOp('cudaDownload', { writes: ['out'] });

const DTYPES: readonly LogitsDType[] = ['float32', 'bfloat16', 'float16'];

/**
 * The host array type of a dtype: Float32Array for float32, Uint16Array (raw words) for the others.
 *
 * @category CUDA
 */
export type HostArray<D extends LogitsDType> = D extends 'float32' ? Float32Array : Uint16Array;

/**
 * Where a logits op runs: `'cpu'`, or `'cuda'` / `'cuda:N'` (device N, default 0). Host arrays run on
 * the CPU unless a call asks for the device; a call on {@link DeviceLogits} runs on their device.
 *
 * @category CUDA
 */
export type Device = 'cpu' | 'cuda' | `cuda:${number}`;

// Constructing a DeviceLogits is the library's business: the native table made the tensor.
const INTERNAL = Symbol('DeviceLogits');

// A tensor nobody disposed is freed when its DeviceLogits is collected (or, if a running call still
// uses it, when that call ends).
const finalizer = new FinalizationRegistry<number>((id) => {
  try {
    native.cudaDispose?.({ tensor: id, whenFree: true });
  } catch {
    // the environment is going away: the native side frees its tensors itself
  }
});

/**
 * `rows x vocab` logits (or a float32 gradient) in the memory of a CUDA device, made by
 * {@link cuda.upload} or returned by a backward on device logits. Every logits op accepts them in place
 * of host {@link Logits} and returns its per-row results to the host; backwards on them return their
 * gradient as a new `DeviceLogits` (or write the `out` given). The memory comes from the device's
 * stream-ordered pool and goes back at {@link DeviceLogits.dispose} (or `using`), or, as a safety net,
 * when the object is garbage-collected. Under `GEAR_RL_VARIANT=host-device` (a test double without a
 * GPU) the "device" is host memory and the ops run the CPU kernels.
 *
 * Errors (`GearError`): a disposed tensor is `ERR_STATE`; a tensor read by a running async call cannot
 * be written or disposed, nor one being written be used, until it settles (`ERR_BUSY`); tensors of two
 * devices, or a tensor with host logits, in one call are `ERR_DEVICE`.
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * if (rl.cuda.available()) {
 *   const logits = { data: Float32Array.from({ length: 4 * 8 }, () => Math.random()), rows: 4, vocab: 8 };
 *   using dev = await rl.cuda.upload(logits);                 // freed at the end of the block
 *   const stats = rl.tokenStats(dev, Int32Array.of(1, 2, 3, 4)); // per-row results on the host
 *   using grad = rl.tokenStatsBackward(dev, Int32Array.of(1, 2, 3, 4), { logprob: stats.logprob }, { stats });
 *   console.log(stats.logprob, (await grad.download()).length);
 * }
 * ```
 * @category CUDA
 */
export class DeviceLogits<D extends LogitsDType = LogitsDType> {
  /** Rows (token positions). */
  readonly rows: number;
  /** Vocabulary size (row length). */
  readonly vocab: number;
  /** Element type. */
  readonly dtype: D;
  /** Device memory held, in bytes. */
  readonly bytes: number;
  /** CUDA device ordinal. */
  readonly device: number;
  readonly #id: number;
  #disposed = false;

  /** @internal */
  constructor(token: symbol, t: NativeTensor) {
    if (token !== INTERNAL) {
      throw new GearError('ERR_OPTION', 'DeviceLogits: expected one from rl.cuda.upload or a backward on device logits, got a direct construction');
    }
    this.#id = t.tensor;
    this.rows = t.rows;
    this.vocab = t.vocab;
    this.dtype = DTYPES[t.dtype] as D;
    this.bytes = t.bytes;
    this.device = t.device;
    finalizer.register(this, t.tensor, this);
  }

  /** @internal Whether `x` is a DeviceLogits made by the library (not merely one's prototype). */
  static isDeviceLogits(x: unknown): x is DeviceLogits {
    return typeof x === 'object' && x !== null && #id in x;
  }

  /** Whether {@link DeviceLogits.dispose} has run. */
  get disposed(): boolean {
    return this.#disposed;
  }

  /** @internal The native reference (throws ERR_STATE once disposed). */
  ref(what: string): NativeTensorRef {
    if (this.#disposed) fail('ERR_STATE', what, 'a live device tensor', 'one that was disposed');
    return { tensor: this.#id };
  }

  /**
   * Copies the tensor to host memory: a new array (Float32Array for float32, Uint16Array words for
   * bfloat16 / float16) or `out`. Through the pinned staging ring (a page-locked `out` from
   * {@link cuda.allocHost} is written directly). Abortable.
   */
  async download(opts?: { out?: HostArray<D>; signal?: AbortSignal }): Promise<HostArray<D>> {
    const ref = this.ref('download');
    const out = opts?.out ?? null;
    return (await cudaDownloadOp.callAsync({ ...ref, out }, opts?.signal)).data as HostArray<D>;
  }

  /**
   * Synchronous form of {@link DeviceLogits.download}.
   *
   * @example
   * ```ts
   * import * as rl from 'gear-rl';
   *
   * if (rl.cuda.available()) {
   *   using dev = rl.cuda.uploadSync({ data: Float32Array.of(1, 2, 3, 4), rows: 2, vocab: 2 });
   *   console.log(dev.downloadSync()); // Float32Array [1, 2, 3, 4]
   * }
   * ```
   */
  downloadSync(opts?: { out?: HostArray<D> }): HostArray<D> {
    const ref = this.ref('downloadSync');
    const out = opts?.out ?? null;
    return cudaDownloadOp.call({ ...ref, out }).data as HostArray<D>;
  }

  /**
   * Returns the memory to the device's pool now. Idempotent. `ERR_BUSY` while a running async call
   * uses the tensor (it stays valid then).
   *
   * @example
   * ```ts
   * import * as rl from 'gear-rl';
   *
   * if (rl.cuda.available()) {
   *   const dev = await rl.cuda.upload({ data: new Float32Array(8), rows: 2, vocab: 4 });
   *   dev.dispose();
   *   console.log(dev.disposed); // true
   * }
   * ```
   */
  dispose(): void {
    if (this.#disposed) return;
    native.cudaDispose!({ tensor: this.#id });
    this.#disposed = true;
    finalizer.unregister(this);
  }

  /** {@link DeviceLogits.dispose}, for `using`. */
  [Symbol.dispose](): void {
    this.dispose();
  }

  /**
   * `DeviceLogits(cuda:0, 4096 x 151936 float32)`.
   *
   * @example
   * ```ts
   * import * as rl from 'gear-rl';
   *
   * if (rl.cuda.available()) {
   *   using dev = await rl.cuda.upload({ data: new Float32Array(8), rows: 2, vocab: 4 });
   *   console.log(String(dev)); // DeviceLogits(cuda:0, 2 x 4 float32)
   * }
   * ```
   */
  toString(): string {
    return `DeviceLogits(cuda:${this.device}, ${this.rows} x ${this.vocab} ${this.dtype}${this.#disposed ? ', disposed' : ''})`;
  }
}

/** Wraps a tensor the native table just made. @internal */
export function adoptTensor<D extends LogitsDType = LogitsDType>(t: NativeTensor): DeviceLogits<D> {
  return new DeviceLogits<D>(INTERNAL, t);
}

/** The dtype name of a native dtype code. @internal */
export function dtypeName(code: DTypeCode): LogitsDType {
  return DTYPES[code]!;
}

/** Throws ERR_DEVICE when the CUDA module is not in use, saying why. @internal */
export function requireCuda(what: string): void {
  if (native.cudaUpload === undefined) {
    throw new GearError('ERR_DEVICE', `${what}: expected the CUDA module with a device (GEAR_RL_VARIANT=cuda, or auto on a ` +
      `machine with a GPU), got none (${cudaUnavailable})`);
  }
}

/**
 * The native device of a call: -1 for the CPU, else a CUDA ordinal. `asked` is the call's `device`
 * option; `on` is the device of its device tensors (-1 when its logits are host arrays).
 * @internal
 */
export function callDevice(asked: unknown, on: number): number {
  if (asked === undefined) return on;
  if (asked === 'cpu') {
    if (on >= 0) fail('ERR_DEVICE', 'device', `'cuda:${on}' (the logits are on that device) or none`, asked);
    return -1;
  }
  let ordinal = -1;
  if (asked === 'cuda') ordinal = on >= 0 ? on : 0;
  else if (typeof asked === 'string' && /^cuda:\d{1,4}$/.test(asked)) ordinal = Number(asked.slice(5));
  else fail('ERR_OPTION', 'device', `'cpu', 'cuda' or 'cuda:N'`, asked);
  if (on >= 0 && ordinal !== on) fail('ERR_DEVICE', 'device', `'cuda:${on}' (the logits are on that device)`, asked);
  requireCuda('device');
  return ordinal;
}
