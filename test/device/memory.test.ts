// The host device's memory with a capacity of 1 MiB per device (GEAR_RL_HOST_DEVICE_MEMORY): out of device
// memory is ERR_OUT_OF_MEMORY in the CUDA module's words, for uploads and for a backward's new tensor,
// and leaves nothing allocated; memory() counts exactly the live allocations (nothing is cached, so trim
// has nothing to return); page-locked host memory, kernel times and copy bandwidth as rl.cuda and the
// benchmarks use them.
import { describe, expect, it } from 'vitest';
import { failure as gearFailure, importHostDevice } from '../helpers/host_device.js';

const CAPACITY = 1 << 20;
const rl = await importHostDevice(CAPACITY);
const { native } = await import('../../ts/core/addon.js');

const failure = (f: () => unknown) => gearFailure(rl, f);

describe('host device memory', () => {
  it('memory(): the capacity, exactly the live allocations, nothing cached', () => {
    for (const device of [0, 1]) {
      const m = rl.cuda.memory(device);
      expect(m).toEqual({ device, freeBytes: CAPACITY, totalBytes: CAPACITY, poolReservedBytes: 0, poolUsedBytes: 0, tensors: 0, tensorBytes: 0 });
      expect(rl.cuda.devices()[device]!.totalBytes).toBe(CAPACITY);
    }
    using a = rl.cuda.uploadSync({ data: new Float32Array(1000), rows: 10, vocab: 100 });
    using b = rl.cuda.uploadSync({ data: new Uint16Array(64), rows: 8, vocab: 8, dtype: 'float16' }, { device: 1 });
    expect(rl.cuda.memory(0)).toEqual({ device: 0, freeBytes: CAPACITY - 4000, totalBytes: CAPACITY, poolReservedBytes: 4000,
      poolUsedBytes: 4000, tensors: 1, tensorBytes: 4000 });
    expect(rl.cuda.memory(1)).toMatchObject({ freeBytes: CAPACITY - 128, poolUsedBytes: 128, tensors: 1, tensorBytes: 128 });
    rl.cuda.trim(0);  // nothing cached: the live tensors keep their memory
    expect(rl.cuda.memory(0).poolReservedBytes).toBe(4000);
    expect([a.bytes, b.bytes]).toEqual([4000, 128]);
  });

  it('an upload larger than the free memory is ERR_OUT_OF_MEMORY naming the bytes asked and free, sync and async', async () => {
    const big = { data: new Float32Array(CAPACITY / 2), rows: 512, vocab: 1024 };  // 2 MiB
    for (const f of [() => rl.cuda.uploadSync(big), () => rl.cuda.upload(big), () => rl.cuda.upload(big, { device: 1 })]) {
      const e = await failure(f);
      expect(e.code).toBe('ERR_OUT_OF_MEMORY');
      expect(e.message).toMatch(new RegExp(`^device memory: expected 2097152 bytes on cuda:[01], got ${CAPACITY} bytes free of ${CAPACITY}$`));
    }
    using held = rl.cuda.uploadSync({ data: new Float32Array(200_000), rows: 200, vocab: 1000 });  // 800,000 bytes
    const e = await failure(() => rl.cuda.upload({ data: new Float32Array(100_000), rows: 100, vocab: 1000 }));
    expect(e.message).toBe(`device memory: expected 400000 bytes on cuda:0, got ${CAPACITY - 800_000} bytes free of ${CAPACITY}`);
    expect(rl.cuda.memory(0)).toMatchObject({ tensors: 1, poolUsedBytes: 800_000 });
    // the other device has its own memory
    using there = rl.cuda.uploadSync({ data: new Float32Array(100_000), rows: 100, vocab: 1000 }, { device: 1 });
    expect(there.device).toBe(1);
    expect(held.device).toBe(0);
  });

  it("a backward's new gradient tensor that does not fit is ERR_OUT_OF_MEMORY; nothing is left allocated", async () => {
    const rows = 150, vocab = 1000;  // 600,000 bytes: the gradient would take as much again
    const host = { data: Float32Array.from({ length: rows * vocab }, (_, i) => Math.cos(i)), rows, vocab };
    const y = new Int32Array(rows), g = new Float32Array(rows).fill(1);
    using dev = rl.cuda.uploadSync(host);
    const before = rl.cuda.memory(0);
    for (const f of [() => rl.tokenStatsBackward(dev, y, { logprob: g }), () => rl.tokenStatsBackwardAsync(dev, y, { logprob: g }),
      () => rl.divergenceBackward(dev, dev, g), () => rl.divergenceBackwardAsync(dev, dev, g),
      () => rl.distillLoss({ student: dev, teacher: dev, distillCoef: 1 }),
      () => rl.gearFromLogits({ student: dev, teacher: dev, targets: y, advantages: [1], offsets: Int32Array.of(0, rows), distillCoef: 1 })]) {
      const e = await failure(f);
      expect(e.code).toBe('ERR_OUT_OF_MEMORY');
      expect(e.message).toBe(`device memory: expected 600000 bytes on cuda:0, got ${CAPACITY - 600_000} bytes free of ${CAPACITY}`);
      expect(rl.cuda.memory(0)).toEqual(before);
    }
    // into a host array, or in place, it needs no device memory
    expect(rl.tokenStatsBackward(dev, y, { logprob: g }, { out: new Float32Array(rows * vocab) }))
      .toEqual(rl.tokenStatsBackward(host, y, { logprob: g }));
    expect(rl.tokenStatsBackward(dev, y, { logprob: g }, { inPlace: true })).toBe(dev);
  });

  it('page-locked host memory: zeroed, uploads from it and downloads into it', async () => {
    const buf = rl.cuda.allocHost(4096);
    expect(buf.byteLength).toBe(4096);
    const data = new Float32Array(buf);
    expect(data.every((x) => x === 0)).toBe(true);
    data.forEach((_, i) => (data[i] = Math.sin(i)));
    using dev = await rl.cuda.upload({ data, rows: 16, vocab: 64 });
    const back = new Float32Array(rl.cuda.allocHost(4096));
    expect(await dev.download({ out: back })).toBe(back);
    expect(back).toEqual(data);
    expect(rl.cuda.allocHost(0).byteLength).toBe(0);
    expect((await failure(() => rl.cuda.allocHost(-1))).code).toBe('ERR_OPTION');
  });

  it('kernel times: -1 until asked, then the last call on device logits on that device', () => {
    using dev = rl.cuda.uploadSync({ data: Float32Array.from({ length: 64 * 512 }, (_, i) => Math.sin(i)), rows: 64, vocab: 512 });
    const y = new Int32Array(64);
    expect(native.cudaKernelMs!({ device: 0 })).toBe(-1);  // the first query turns the timing on
    rl.tokenStats(dev, y);
    const ms = native.cudaKernelMs!({ device: 0 });
    expect(ms).toBeGreaterThanOrEqual(0);
    expect(ms).toBeLessThan(60_000);
    expect(native.cudaKernelMs!({ device: 1 })).toBe(-1);
    rl.tokenStats({ data: new Float32Array(64 * 512), rows: 64, vocab: 512 }, y, { device: 'cuda' });  // host logits
    expect(native.cudaKernelMs!({ device: 0 })).toBe(-1);
    expect(() => native.cudaKernelMs!({ device: 2 })).toThrow(expect.objectContaining({ code: 'ERR_DEVICE' }));
  });

  it('copy bandwidth: one positive rate per repetition in every mode; more than the device holds is ERR_OUT_OF_MEMORY', () => {
    for (const mode of [0, 1, 2, 3, 4] as const) {
      const r = native.cudaBandwidth!({ device: 1, mode, bytes: 1 << 18, reps: 3 });
      expect(r).toBeInstanceOf(Float64Array);
      expect(r.length).toBe(3);
      for (const x of r) expect(Number.isFinite(x) && x > 0).toBe(true);
    }
    expect(rl.cuda.memory(1).poolUsedBytes).toBe(0);
    expect(() => native.cudaBandwidth!({ device: 0, mode: 0, bytes: 1 << 20, reps: 1 })).toThrow(expect.objectContaining({ code: 'ERR_OUT_OF_MEMORY' }));
    expect(rl.cuda.memory(0).poolUsedBytes).toBe(0);
  });
});
