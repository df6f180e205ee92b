// The device API where the CUDA module is not in use (the CPU module, as on every machine without a GPU):
// every entry says so with ERR_DEVICE and the reason, host calls are unchanged, device options and
// forged tensors are refused in TypeScript and, called directly, by the native layer.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { native } from '../../ts/core/addon.js';

const logits = { data: Float32Array.from({ length: 6 }, (_, i) => i / 3), rows: 2, vocab: 3 };
const targets = Int32Array.of(0, 2);

function codeOf(f: () => unknown): string | undefined {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(rl.GearError);
    return (e as rl.GearError).code;
  }
  return undefined;
}

describe.skipIf(rl.cuda.available())('rl.cuda without the CUDA module', () => {
  it('reports no device and why', () => {
    expect(rl.cuda.available()).toBe(false);
    expect(rl.cuda.devices()).toEqual([]);
    expect(rl.cuda.unavailableReason()).not.toBe('');
    expect(rl.backend().variant).toBe('cpu');
    expect(rl.backend().devices).toEqual([]);
  });

  it('upload, memory, trim and allocHost throw ERR_DEVICE naming the reason', async () => {
    await expect(rl.cuda.upload(logits)).rejects.toMatchObject({ code: 'ERR_DEVICE' });
    await expect(rl.cuda.upload(logits)).rejects.toThrow(/^upload: expected the CUDA module with a device .*, got none \(no CUDA (module|device)/);
    expect(codeOf(() => rl.cuda.uploadSync(logits))).toBe('ERR_DEVICE');
    expect(codeOf(() => rl.cuda.memory())).toBe('ERR_DEVICE');
    expect(codeOf(() => rl.cuda.trim())).toBe('ERR_DEVICE');
    expect(codeOf(() => rl.cuda.allocHost(1024))).toBe('ERR_DEVICE');
  });

  it("device: 'cuda' on host arrays is ERR_DEVICE; 'cpu' is the default; other values ERR_OPTION", async () => {
    for (const device of ['cuda', 'cuda:0', 'cuda:3'] as const) {
      expect(codeOf(() => rl.tokenStats(logits, targets, { device }))).toBe('ERR_DEVICE');
      expect(codeOf(() => rl.divergence(logits, logits, { device }))).toBe('ERR_DEVICE');
      expect(codeOf(() => rl.tokenStatsBackward(logits, targets, { logprob: Float32Array.of(1, 1) }, { device }))).toBe('ERR_DEVICE');
      await expect(rl.tokenStatsAsync(logits, targets, { device })).rejects.toMatchObject({ code: 'ERR_DEVICE' });
    }
    expect(rl.tokenStats(logits, targets, { device: 'cpu' })).toEqual(rl.tokenStats(logits, targets));
    for (const device of ['gpu', 'cuda:', 'cuda:-1', 'CUDA', 0, null]) {
      expect(codeOf(() => rl.tokenStats(logits, targets, { device: device as never }))).toBe('ERR_OPTION');
    }
  });

  it('a DeviceLogits cannot be constructed, and look-alikes are not logits', () => {
    const Ctor = rl.DeviceLogits as unknown as new (t: symbol, n: object) => unknown;
    expect(codeOf(() => new Ctor(Symbol('DeviceLogits'), { tensor: 1, device: 0, rows: 2, vocab: 3, dtype: 0, bytes: 24 }))).toBe('ERR_OPTION');
    const fake = Object.create(rl.DeviceLogits.prototype) as rl.DeviceLogits;
    expect(codeOf(() => rl.tokenStats(fake, targets))).toBe('ERR_SHAPE'); // not made by the library: read as host logits
    const lookalike = { tensor: 1, rows: 2, vocab: 3, dtype: 'float32', device: 0 };
    expect(codeOf(() => rl.tokenStats(lookalike as never, targets))).toBe('ERR_OPTION'); // unknown key 'tensor'
  });

  it('the native layer refuses device tensors and a device without the CUDA module', () => {
    expect(codeOf(() => native.tokenStats({ logits: { tensor: 1 }, targets, temperature: 1 }))).toBe('ERR_DEVICE');
    expect(() => native.tokenStats({ logits: { tensor: 1 }, targets, temperature: 1 }))
      .toThrow('logits.tensor: expected a host array (device tensors need the CUDA module), got a device tensor');
    const host = { data: logits.data, rows: 2, vocab: 3, dtype: 0 as const };
    expect(() => native.tokenStats({ logits: host, targets, temperature: 1, device: 0 }))
      .toThrow(/^device: expected the CUDA module/);
    expect(codeOf(() => native.divergenceBackward({ student: host, teacher: { tensor: 2 }, kind: 0, beta: 0.5, temperature: 1,
      klCap: Infinity, grad: Float32Array.of(1, 1) }))).toBe('ERR_DEVICE');
    // an out array the call never wrote stays as it was; a device out for a host call is refused
    expect(codeOf(() => native.tokenStatsBackward({ logits: host, targets, grad: { logprob: Float32Array.of(1, 1) },
      temperature: 1, out: { tensor: 3 } }))).toBe('ERR_DEVICE');
    expect(native.cudaUpload).toBeUndefined();
  });
});
