/**
 * The GPU: logits that stay on a CUDA device ({@link DeviceLogits}), page-locked host memory, the
 * device's memory pool. Available when the CUDA module is in use (`GEAR_RL_VARIANT=cuda`, or `auto` on
 * a machine with an NVIDIA driver and a device; `npm run build:cuda` builds it, or it comes prebuilt);
 * otherwise {@link available} is false and the other functions throw `ERR_DEVICE` saying why.
 *
 * Without a GPU, `GEAR_RL_VARIANT=host-device` gives a test double for code that uses
 * {@link DeviceLogits}: the CPU module with two host devices (`cuda:0`, `cuda:1`) whose memory is host
 * memory and whose kernels are the CPU ones. Everything here works on them as on a GPU (uploads,
 * downloads, device outputs, the tensors' errors, `ERR_OUT_OF_MEMORY` past `GEAR_RL_HOST_DEVICE_MEMORY`
 * bytes per device, default the host's memory), with the CPU's results; `backend().variant` is
 * `'host-device'`. It tests the paths, not the GPU's numerics or speed; `auto` never picks it.
 *
 * When the GPU helps: logits read from host memory can never cross PCIe (about 53 GB/s pinned) faster
 * than the CPU reads them from its own memory (91-123 GB/s on a 16-core host), so host arrays stay on
 * the CPU kernels. Upload logits once and read them several times (student statistics, divergence and
 * both backwards read the same rows), or produce them on the device, and every op then runs at the
 * GPU's memory bandwidth.
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * console.log(rl.cuda.available() ? rl.cuda.devices() : 'no GPU in use');
 * ```
 * @category CUDA
 * @module
 */
import { fail } from '../core/errors.js';
import { cudaUnavailable, native } from '../core/addon.js';
import { asyncOp } from '../core/invoke.js';
import * as v from '../core/validate.js';
import { type Logits, checkLogits } from '../core/logits.js';
import type { LogitsDType } from '../core/logits.js';
import { DeviceLogits, adoptTensor, requireCuda } from '../core/device.js';
import type { AsyncControl, AsyncOp, NativeHostLogits, NativeTensor } from '../core/addon_types.js';

export { DeviceLogits } from '../core/device.js';
export type { Device, HostArray } from '../core/device.js';

// ---- native contract: the CUDA module (absent from the CPU module, hence optional) ----
// What this file calls in the addon; the `declare module` block adds it to NativeAddon (ts/core/addon_types.ts).

// Not exported: `rl.cuda` re-exports this module whole, and these are not public.
/** @internal */
interface CudaDeviceResult {
  index: number;
  name: string;
  arch: string;
  multiprocessors: number;
  totalBytes: number;
}
/** @internal */
interface CudaDevicesResult {
  count: number;
  /** The CUDA error when there is no usable device. */
  error: string;
  runtimeVersion: number;
  driverVersion: number;
  devices: CudaDeviceResult[];
}
/** @internal */
interface CudaDeviceParams {
  device: number;
}
/** @internal */
interface CudaUploadParams extends AsyncControl {
  logits: NativeHostLogits;
  device: number;
}
/** @internal */
interface CudaAllocHostParams {
  bytes: number;
}

declare module '../core/addon_types.js' {
  interface NativeAddon {
    cudaDevices?: () => CudaDevicesResult;
    cudaMemory?: (params: CudaDeviceParams) => CudaMemory;
    cudaTrim?: (params: CudaDeviceParams) => void;
    cudaUpload?: AsyncOp<CudaUploadParams, NativeTensor>;
    cudaAllocHost?: (params: CudaAllocHostParams) => ArrayBuffer;
    // For the benchmarks (bench/cuda.mjs); no wrapper.
    /**
     * Kernel time (ms, CUDA events) of the last call on device logits; -1 when there was none. The first
     * query on a device turns the timing on (calls record no events until then) and returns -1.
     */
    cudaKernelMs?: (params: CudaDeviceParams) => number;
    /** Copy bandwidth per repetition, GB/s: mode 0 device-to-device (read + write), 1 / 2 to the device from pinned / pageable, 3 / 4 back. */
    cudaBandwidth?: (params: CudaDeviceParams & { mode: 0 | 1 | 2 | 3 | 4; bytes: number; reps: number }) => Float64Array;
  }
}
// Reads the host logits (ts/core/invoke.ts): the copy it makes is a device tensor of its own.
const cudaUploadOp = asyncOp('cudaUpload');

/**
 * A CUDA device (or a host device of `GEAR_RL_VARIANT=host-device`).
 *
 * @category CUDA
 */
export interface CudaDevice {
  /** Ordinal (`'cuda:N'`). */
  index: number;
  /** Product name, e.g. `NVIDIA H200`; `gear-rl host device N (test double: host memory, CPU kernels)` for a host device. */
  name: string;
  /** Compute capability, e.g. `sm_90`; `host` for a host device. */
  arch: string;
  /** Streaming multiprocessors; a host device's: the addon's CPU threads. */
  multiprocessors: number;
  /** Device memory, bytes. */
  totalBytes: number;
}

/**
 * Memory of a device, as {@link memory} reports it.
 *
 * @category CUDA
 */
export interface CudaMemory {
  device: number;
  /** Free on the device (every process), bytes. */
  freeBytes: number;
  totalBytes: number;
  /** Held by gear-rl's stream-ordered pool: in use or cached for the next call ({@link trim} returns the cache). */
  poolReservedBytes: number;
  /** Of which in use. */
  poolUsedBytes: number;
  /** Live {@link DeviceLogits} on the device, and their bytes. */
  tensors: number;
  tensorBytes: number;
}

/**
 * Options of {@link upload}.
 *
 * @category CUDA
 */
export interface UploadOptions {
  /**
   * Device ordinal (default 0).
   *
   * @defaultValue `0`
   */
  device?: number;
  /** Aborting rejects with `ERR_ABORTED` and frees what was allocated. */
  signal?: AbortSignal;
}

/**
 * Whether the CUDA module is in use with at least one device (or the host device, under
 * `GEAR_RL_VARIANT=host-device`).
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * console.log(rl.cuda.available()); // false on a machine without an NVIDIA GPU
 * ```
 * @category CUDA
 */
export function available(): boolean {
  return native.cudaUpload !== undefined && (native.cudaDevices?.().count ?? 0) > 0;
}

/**
 * Why the CUDA module is not in use ('' when it is): no module built or shipped for this platform, no
 * driver, no device, or `GEAR_RL_VARIANT=cpu`.
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * if (!rl.cuda.available()) console.log(`CPU only: ${rl.cuda.unavailableReason()}`);
 * ```
 * @category CUDA
 */
export function unavailableReason(): string {
  return available() ? '' : cudaUnavailable || 'no CUDA device';
}

/**
 * The usable CUDA devices (empty without the CUDA module; the two host devices under
 * `GEAR_RL_VARIANT=host-device`).
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * for (const d of rl.cuda.devices()) console.log(`cuda:${d.index} ${d.name} ${d.arch} ${d.totalBytes} bytes`);
 * ```
 * @category CUDA
 */
export function devices(): CudaDevice[] {
  return native.cudaDevices?.().devices ?? [];
}

function deviceOpt(d: unknown): number {
  return v.numOpt(d, 'device', 0, { min: 0, max: 1023, int: true });
}

/**
 * Memory of device `device` (default 0): free and total, gear-rl's pool, the live tensors.
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * if (rl.cuda.available()) {
 *   const m = rl.cuda.memory();
 *   console.log(m.freeBytes, m.poolReservedBytes, m.tensors);
 * }
 * ```
 * @category CUDA
 */
export function memory(device = 0): CudaMemory {
  requireCuda('memory');
  return native.cudaMemory!({ device: deviceOpt(device) });
}

/**
 * Returns the memory gear-rl's pool caches on device `device` (default 0) to the driver, for other
 * processes or libraries. Live tensors keep theirs.
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * if (rl.cuda.available()) rl.cuda.trim();
 * ```
 * @category CUDA
 */
export function trim(device = 0): void {
  requireCuda('trim');
  native.cudaTrim!({ device: deviceOpt(device) });
}

function uploadArgs(logits: Logits, opts: UploadOptions | undefined) {
  requireCuda('upload');
  v.knownKeys(opts, 'options', ['device', 'signal']);
  const l = checkLogits(logits, 'logits');
  if (l.device >= 0) fail('ERR_DEVICE', 'logits', 'host arrays to upload', String(logits));
  return { l, device: deviceOpt(opts?.device) };
}

/**
 * Copies host logits to a device once and keeps them there: every logits op then reads them at the
 * GPU's memory bandwidth. Pageable arrays go through a persistent page-locked staging ring that several
 * host threads fill while the previous slot crosses the bus; an array in page-locked memory
 * ({@link allocHost}) goes straight to the DMA engine. The returned tensor holds device memory until
 * {@link DeviceLogits.dispose} (or `using`).
 *
 * @param logits host logits (float32, or bfloat16 / float16 words)
 * @param opts `device` (default 0), `signal`
 * @returns the device tensor
 * @throws GearError `ERR_DEVICE` (no CUDA module or device), `ERR_OUT_OF_MEMORY`, `ERR_ABORTED`, and the
 *   argument errors of {@link tokenStats}
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * if (rl.cuda.available()) {
 *   const logits = { data: new Float32Array(8 * 32), rows: 8, vocab: 32 };
 *   using dev = await rl.cuda.upload(logits);
 *   console.log(String(dev), rl.tokenStats(dev, new Int32Array(8)).entropy);
 * }
 * ```
 * @category CUDA
 */
export async function upload<D extends LogitsDType = 'float32'>(logits: Logits, opts?: UploadOptions): Promise<DeviceLogits<D>> {
  const a = uploadArgs(logits, opts);
  return adoptTensor<D>(await cudaUploadOp.callAsync({ logits: a.l.native as never, device: a.device }, opts?.signal));
}

/**
 * Synchronous form of {@link upload}.
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * if (rl.cuda.available()) {
 *   using dev = rl.cuda.uploadSync({ data: new Float32Array(4 * 16), rows: 4, vocab: 16 });
 *   console.log(dev.bytes); // 256
 * }
 * ```
 * @category CUDA
 */
export function uploadSync<D extends LogitsDType = 'float32'>(logits: Logits, opts?: Omit<UploadOptions, 'signal'>): DeviceLogits<D> {
  const a = uploadArgs(logits, opts);
  return adoptTensor<D>(cudaUploadOp.call({ logits: a.l.native as never, device: a.device }));
}

/**
 * Page-locked ("pinned") host memory of `bytes` bytes, as an ArrayBuffer: a producer that writes its
 * logits here (`new Float32Array(buffer)`) has them uploaded at the bus's full rate with no staging copy,
 * and downloads into it land directly. Pinned memory is a scarce system resource: allocate it once and
 * reuse it. It is freed when the ArrayBuffer is garbage-collected.
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * if (rl.cuda.available()) {
 *   const rows = 8, vocab = 1024;
 *   const data = new Float32Array(rl.cuda.allocHost(rows * vocab * 4)); // fill it where the logits are made
 *   using dev = await rl.cuda.upload({ data, rows, vocab });            // straight to the DMA engine
 *   console.log(String(dev));
 * }
 * ```
 * @category CUDA
 */
export function allocHost(bytes: number): ArrayBuffer {
  requireCuda('allocHost');
  const n = v.numOpt(bytes, 'bytes', NaN, { min: 0, max: 2 ** 44, int: true });
  if (Number.isNaN(n)) fail('ERR_OPTION', 'bytes', 'an integer >= 0', bytes);
  return native.cudaAllocHost!({ bytes: n });
}
