/**
 * Loads the native addon (a prebuilt binary from `prebuilds/`, or a local build; or the optional CUDA
 * module, see `GEAR_RL_VARIANT`) and registers {@link GearError} with it so that native argument checks
 * throw the same error class.
 *
 * @internal
 * @module
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { GearError } from './errors.js';
import type { NativeAddon } from './addon_types.js';

export type { NativeAddon } from './addon_types.js';

/** Package root: this file sits in `ts/core/` (sources) or `dist/core/` (compiled), two levels below it. */
export const PACKAGE_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

const require = createRequire(import.meta.url);

/**
 * Where the optional CUDA module is looked for: `GEAR_RL_CUDA_ADDON`, a local `npm run build:cuda`, then
 * the package's CUDA prebuild for this platform.
 */
function cudaCandidates(): string[] {
  const env = process.env.GEAR_RL_CUDA_ADDON;
  return [...(env ? [resolve(env)] : []), resolve(PACKAGE_ROOT, 'build-cuda', 'Release', 'gear_rl_cuda.node'),
    resolve(PACKAGE_ROOT, 'prebuilds', `${process.platform}-${process.arch}`, 'gear-rl.cuda.node')];
}

/** Whether an NVIDIA kernel driver is loaded (Linux): without one the shipped CUDA prebuild is not even opened. */
function nvidiaDriver(): boolean {
  return existsSync('/proc/driver/nvidia/version') || existsSync('/dev/nvidiactl');
}

/**
 * Loads the CUDA module if one exists, loads, and reports a device; otherwise returns why not. A
 * GPU-less machine typically reports `cudaErrorInsufficientDriver` or `cudaErrorNoDevice`. Under `auto`
 * the package's own CUDA prebuild is tried only where an NVIDIA driver is loaded (a CPU-only machine
 * never maps it); a module named by GEAR_RL_CUDA_ADDON or built locally is always tried.
 */
function tryCuda(forced: boolean): { addon?: NativeAddon; reason: string } {
  const prebuild = cudaCandidates().at(-1)!;
  const found = cudaCandidates().filter((p) => existsSync(p));
  if (found.length === 0) return { reason: `no CUDA module (looked for ${cudaCandidates().join(', ')})` };
  const path = found[0]!;
  if (path === prebuild && !forced && !nvidiaDriver()) return { reason: 'no NVIDIA driver (the CUDA prebuild is not loaded)' };
  let addon: NativeAddon;
  try {
    addon = require(path) as NativeAddon;
  } catch (e) {
    return { reason: `the CUDA module ${path} does not load (${(e as Error).message})` };
  }
  if (addon.cudaDevices === undefined) return { reason: `the module ${path} has no cudaDevices(): not a CUDA build` };
  const dev = addon.cudaDevices();
  if (!(dev.count > 0)) return { reason: `no CUDA device (${dev.error || 'cudaGetDeviceCount returned 0'})` };
  return { addon, reason: '' };
}

function loadCpu(): NativeAddon {
  const explicit = process.env.GEAR_RL_ADDON;
  try {
    // GEAR_RL_ADDON: a specific CPU build (e.g. build-asan/ or build-cmake/), else prebuild or local build.
    if (explicit) return require(resolve(explicit)) as NativeAddon;
    const gypBuild = require('node-gyp-build') as (dir: string) => NativeAddon;
    return gypBuild(PACKAGE_ROOT);
  } catch (e) {
    throw new GearError(
      'ERR_NATIVE',
      `gear-rl native addon: expected ${explicit ? `a loadable addon at GEAR_RL_ADDON=${explicit}` : `a prebuilt binary for ${process.platform}-${process.arch} or a local build`}, ` +
        `got none that loads (${(e as Error).message}). Build it from source with \`npm rebuild gear-rl\` (needs a C++17 compiler and Python 3).`,
    );
  }
}

/**
 * Each host device's memory capacity under `GEAR_RL_VARIANT=host-device`: `GEAR_RL_HOST_DEVICE_MEMORY`
 * bytes, or 0 (the host's physical memory) when unset.
 */
function hostDeviceMemory(): number {
  const raw = process.env.GEAR_RL_HOST_DEVICE_MEMORY;
  if (raw === undefined || raw === '') return 0;
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(n) || n < 1) {
    throw new GearError('ERR_OPTION', `GEAR_RL_HOST_DEVICE_MEMORY: expected a byte count >= 1, got "${raw}"`);
  }
  return n;
}

/**
 * Picks the variant: `GEAR_RL_VARIANT=cpu` (CPU only), `cuda` (the CUDA module, or an ERR_NATIVE
 * saying why not) or `auto` (default: the CUDA module when it loads and reports a device, else the CPU
 * module). The CUDA module holds the CPU kernels too, and host arrays stay on them unless a call asks
 * for the device (`device: 'cuda'`) or passes device tensors, so `auto` is never slower than the CPU.
 * `host-device`: the CPU module with its host device, a test double of a GPU whose "device memory" is
 * host memory and whose kernels are the CPU ones (two devices, `cuda:0` and `cuda:1`), so that code using
 * `DeviceLogits` runs without a GPU; `GEAR_RL_HOST_DEVICE_MEMORY` sets each one's capacity in bytes.
 */
function load(): { addon: NativeAddon; cudaReason: string } {
  const want = process.env.GEAR_RL_VARIANT ?? 'auto';
  if (want !== 'cpu' && want !== 'cuda' && want !== 'auto' && want !== 'host-device') {
    throw new GearError('ERR_OPTION', `GEAR_RL_VARIANT: expected 'cpu', 'cuda', 'auto' or 'host-device', got "${want}"`);
  }
  let addon: NativeAddon | undefined;
  let cudaReason = 'GEAR_RL_VARIANT=cpu';
  if (want === 'host-device') {
    const memoryBytes = hostDeviceMemory();
    addon = loadCpu();
    if (addon.installHostDevice === undefined) {
      throw new GearError('ERR_NATIVE', 'GEAR_RL_VARIANT=host-device: expected a CPU module with installHostDevice(), got one ' +
        'without it (an older build: rebuild it)');
    }
    addon.setErrorClass({ errorClass: GearError });
    addon.installHostDevice({ memoryBytes });
    return { addon, cudaReason: '' };
  }
  if (want !== 'cpu') {
    const cuda = tryCuda(want === 'cuda');
    if (want === 'cuda' && !cuda.addon) {
      throw new GearError('ERR_NATIVE', `GEAR_RL_VARIANT=cuda: expected a CUDA module that loads and reports a device, got ${cuda.reason}`);
    }
    addon = cuda.addon;
    cudaReason = cuda.reason;
  }
  addon ??= loadCpu();
  addon.setErrorClass({ errorClass: GearError });
  return { addon, cudaReason };
}

const loaded = load();

/** The loaded addon (loaded once, at import). */
export const native: NativeAddon = loaded.addon;

/** Why the CUDA module is not in use ('' when it is): shown by the errors of device calls. */
export const cudaUnavailable: string = loaded.cudaReason;
