// Every public function that takes or gives a DeviceLogits, on the host device (GEAR_RL_VARIANT=host-device):
// the device branch of each runs here, on every machine, with or without a GPU. Each case
// (test/device/cases.ts) must call the function it is named after with a device tensor (or get one from
// it, or call it on one): a recording copy of the package checks that, so a case cannot pass without
// exercising its function.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RL, importHostDevice } from '../helpers/host_device.js';
import { DEVICE_CASES } from './cases.js';

const rl = await importHostDevice();

// ---- the recording copy: which public function touched a device tensor ----
const touched = new Set<string>();
const isDevice = (x: unknown) => x instanceof rl.DeviceLogits;
/** Whether `x` is or holds (in an array or an object's own properties, two levels down) a device tensor. */
function holds(x: unknown, depth = 0): boolean {
  if (isDevice(x)) return true;
  if (depth >= 2 || typeof x !== 'object' || x === null || ArrayBuffer.isView(x)) return false;
  return Object.values(x).some((v) => holds(v, depth + 1));
}
function record(name: string, args: unknown[], result: unknown): unknown {
  if (holds(args)) touched.add(name);
  if (result instanceof Promise) return result.then((r) => (holds(r) && touched.add(name), r));
  if (holds(result)) touched.add(name);
  return result;
}
const isClass = (f: Function) => /^class\b/.test(Function.prototype.toString.call(f));
function recording<T extends object>(ns: T, prefix: string): T {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(ns)) {
    if (typeof v === 'function' && !isClass(v)) out[k] = (...a: unknown[]) => record(prefix + k, a, (v as (...a: unknown[]) => unknown)(...a));
    else if (k === 'cuda') out[k] = recording(v as object, 'cuda.');
    else out[k] = v;
  }
  return out as T;
}
const recorded = recording(rl, '') as RL;

// DeviceLogits' methods, called on a tensor
const proto = rl.DeviceLogits.prototype as unknown as Record<PropertyKey, (...a: unknown[]) => unknown>;
const METHODS: [PropertyKey, string][] = [['download', 'download'], ['downloadSync', 'downloadSync'], ['dispose', 'dispose'],
  [Symbol.dispose, '[Symbol.dispose]'], ['toString', 'toString']];
const originals = new Map(METHODS.map(([key]) => [key, proto[key]!]));
beforeAll(() => {
  for (const [key, label] of METHODS) {
    const f = originals.get(key)!;
    proto[key] = function (this: unknown, ...a: unknown[]) {
      if (isDevice(this)) touched.add(`DeviceLogits.${label}`);
      return f.apply(this, a);
    };
  }
});
afterAll(() => {
  for (const [key] of METHODS) proto[key] = originals.get(key)!;
});

describe('every public function that takes or gives a DeviceLogits, on the host device', () => {
  it('runs on the host device: two devices of host memory, the CPU kernels', () => {
    expect(rl.cuda.available()).toBe(true);
    expect(rl.cuda.unavailableReason()).toBe('');
    const b = rl.backend();
    expect(b.variant).toBe('host-device');
    expect(b.devices.map((d) => [d.index, d.arch])).toEqual([[0, 'host'], [1, 'host']]);
    expect(rl.cuda.devices()[0]!.name).toMatch(/^gear-rl host device 0 \(test double/);
  });

  for (const [name, run] of Object.entries(DEVICE_CASES)) {
    it(name, async () => {
      touched.clear();
      const before = rl.cuda.memory(0).tensors + rl.cuda.memory(1).tensors;
      await run(recorded);
      expect([...touched], `${name} was not called with (or on, or for) a device tensor`).toContain(name);
      // every tensor a case makes is disposed by it (using)
      expect(rl.cuda.memory(0).tensors + rl.cuda.memory(1).tensors, 'live tensors after the case').toBe(before);
    });
  }
});
