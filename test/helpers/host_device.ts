// The package with its host device switched on (GEAR_RL_VARIANT=host-device: the CPU module with a test
// double of a GPU, two devices of host memory running the CPU kernels), for the device-tensor suites of
// test/device/. A test file imports the package only through this, dynamically and before anything
// else loads it: a static import of ts/ (or of a module that imports it) would load the CPU module
// first. The variables are restored at once; vitest runs each test file in its own process (pool
// 'forks'), so the switch reaches no other file.
import type * as Package from '../../ts/index.js';

export type RL = typeof Package;

/** Imports ts/index.ts on the host device; `memoryBytes`: each host device's capacity (default: the host's memory). */
export async function importHostDevice(memoryBytes?: number): Promise<RL> {
  const saved = { variant: process.env.GEAR_RL_VARIANT, memory: process.env.GEAR_RL_HOST_DEVICE_MEMORY };
  process.env.GEAR_RL_VARIANT = 'host-device';
  if (memoryBytes === undefined) delete process.env.GEAR_RL_HOST_DEVICE_MEMORY;
  else process.env.GEAR_RL_HOST_DEVICE_MEMORY = String(memoryBytes);
  let rl: RL;
  try {
    rl = await import('../../ts/index.js');
  } finally {
    for (const [k, v] of [['GEAR_RL_VARIANT', saved.variant], ['GEAR_RL_HOST_DEVICE_MEMORY', saved.memory]] as const) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
  if (rl.backend().variant !== 'host-device') {
    throw new Error(`expected the host device, got variant '${rl.backend().variant}': the package was loaded before importHostDevice`);
  }
  return rl;
}

/** The code and message of the GearError `f` throws or rejects with ({} when it succeeds); another error fails. */
export async function failure(rl: RL, f: () => unknown): Promise<{ code?: string; message?: string }> {
  try {
    await f();
  } catch (e) {
    if (!(e instanceof rl.GearError)) throw e;
    return { code: e.code, message: e.message };
  }
  return {};
}
