// Switching the host device on: GEAR_RL_VARIANT=host-device loads the CPU module and installs its host
// device (rl.cuda available, backend().variant 'host-device', two host devices of the host's memory or
// of GEAR_RL_HOST_DEVICE_MEMORY bytes); nothing else switches it on. Child processes on dist/.
import { spawnSync } from 'node:child_process';
import { totalmem } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const DIST = pathToFileURL(join(ROOT, 'dist', 'index.js')).href;

function probe(env: Record<string, string>) {
  const code = `
    try {
      const rl = await import(${JSON.stringify(DIST)});
      const { native } = await import(${JSON.stringify(pathToFileURL(join(ROOT, 'dist', 'core', 'addon.js')).href)});
      console.log(JSON.stringify({ available: rl.cuda.available(), reason: rl.cuda.unavailableReason(), backend: rl.backend(),
        devices: rl.cuda.devices(), memory: rl.cuda.available() ? rl.cuda.memory(1) : null, install: typeof native.installHostDevice }));
    } catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })); }`;
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('GEAR_RL_') && k !== 'NODE_OPTIONS'));
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { cwd: ROOT, env: { ...clean, ...env }, encoding: 'utf8' });
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout.trim().split('\n').pop()!);
}

describe('GEAR_RL_VARIANT=host-device', () => {
  it('installs two host devices of the host memory in the CPU module', () => {
    const out = probe({ GEAR_RL_VARIANT: 'host-device' });
    expect(out).toMatchObject({ available: true, reason: '', install: 'function' });
    expect(out.backend.variant).toBe('host-device');
    expect(out.backend.devices.map((d: { index: number }) => d.index)).toEqual([0, 1]);
    expect(out.devices).toEqual(out.backend.devices);
    for (const d of out.devices) {
      expect(d.name).toBe(`gear-rl host device ${d.index} (test double: host memory, CPU kernels)`);
      expect(d.arch).toBe('host');
      expect(d.multiprocessors).toBe(out.backend.threads);
      expect(d.totalBytes).toBe(totalmem());
    }
    expect(out.memory).toMatchObject({ device: 1, totalBytes: totalmem(), poolReservedBytes: 0, poolUsedBytes: 0, tensors: 0 });
    expect(out.memory.freeBytes).toBeGreaterThan(0);
    expect(out.memory.freeBytes).toBeLessThanOrEqual(totalmem());
  });

  it('GEAR_RL_HOST_DEVICE_MEMORY sets each device\'s capacity; a bad value is ERR_OPTION', () => {
    const out = probe({ GEAR_RL_VARIANT: 'host-device', GEAR_RL_HOST_DEVICE_MEMORY: '65536' });
    expect(out.devices.map((d: { totalBytes: number }) => d.totalBytes)).toEqual([65536, 65536]);
    expect(out.memory).toMatchObject({ totalBytes: 65536, freeBytes: 65536 });
    for (const bad of ['0', '-5', '1e6', 'lots', '9007199254740993']) {
      expect(probe({ GEAR_RL_VARIANT: 'host-device', GEAR_RL_HOST_DEVICE_MEMORY: bad }), bad).toEqual({
        code: 'ERR_OPTION', message: `GEAR_RL_HOST_DEVICE_MEMORY: expected a byte count >= 1, got "${bad}"` });
    }
  });

  it('is off otherwise: cpu and auto (without a GPU) have no device, whatever GEAR_RL_HOST_DEVICE_MEMORY says', () => {
    for (const env of [{ GEAR_RL_VARIANT: 'cpu' }, {}, { GEAR_RL_HOST_DEVICE_MEMORY: '65536' }] as Record<string, string>[]) {
      const out = probe(env);
      expect(out.available, JSON.stringify(env)).toBe(false);
      expect(out.backend.variant).toBe('cpu');
      expect(out.devices).toEqual([]);
      expect(out.install).toBe('function');  // there, never called
    }
  });
});
