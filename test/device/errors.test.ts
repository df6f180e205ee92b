// The errors of device tensors on the host device: disposed tensors (ERR_STATE), tensors a running call
// holds (ERR_BUSY), tensors of two devices or with host arrays in one call (ERR_DEVICE), aborted calls
// (ERR_ABORTED), bad values on the device (the CPU's errors, device outputs NaN-filled). Every public
// function that reads a device tensor is tried; after each refusal nothing is left claimed or allocated.
import { describe, expect, it } from 'vitest';
import { failure as gearFailure, importHostDevice } from '../helpers/host_device.js';

const rl = await importHostDevice();
const { native } = await import('../../ts/core/addon.js');

const rows = 4, vocab = 40;
const z = Float32Array.from({ length: rows * vocab }, (_, i) => Math.sin(i) * 2);
const host = { data: z, rows, vocab };
const y = Int32Array.of(1, 2, 3, 4);
const g = Float32Array.of(1, 1, 1, 1);

const failure = (f: () => unknown) => gearFailure(rl, f);
const codeOf = async (f: () => unknown) => (await failure(f)).code;

/** Tensors and bytes live on both host devices. */
function live() {
  const a = rl.cuda.memory(0), b = rl.cuda.memory(1);
  return { tensors: a.tensors + b.tensors, bytes: a.poolUsedBytes + b.poolUsedBytes };
}

/** Every public function that reads device logits, called with `t` in the place named. */
function everyUse(t: InstanceType<typeof rl.DeviceLogits>, other: InstanceType<typeof rl.DeviceLogits>): [string, () => unknown][] {
  const gear = { targets: y, advantages: [1], offsets: Int32Array.of(0, rows) };
  return [
    ['tokenStats', () => rl.tokenStats(t, y)],
    ['tokenStatsAsync', () => rl.tokenStatsAsync(t, y)],
    ['tokenStatsBackward', () => rl.tokenStatsBackward(t, y, { logprob: g })],
    ['tokenStatsBackwardAsync', () => rl.tokenStatsBackwardAsync(t, y, { logprob: g })],
    ['tokenStatsBackward out', () => rl.tokenStatsBackward(other, y, { logprob: g }, { out: t })],
    ['tokenStatsBackwardAsync out', () => rl.tokenStatsBackwardAsync(other, y, { logprob: g }, { out: t })],
    ['tokenStatsPartial', () => rl.tokenStatsPartial(t, y, { vocabStart: 0 })],
    ['tokenStatsPartialAsync', () => rl.tokenStatsPartialAsync(t, y, { vocabStart: 0 })],
    ['divergence student', () => rl.divergence(t, other)],
    ['divergence teacher', () => rl.divergence(other, t)],
    ['divergenceAsync', () => rl.divergenceAsync(t, other)],
    ['divergenceBackward', () => rl.divergenceBackward(t, other, g)],
    ['divergenceBackwardAsync', () => rl.divergenceBackwardAsync(other, t, g)],
    ['divergenceBackward out', () => rl.divergenceBackward(other, other, g, { out: t })],
    ['gearFromLogits', () => rl.gearFromLogits({ ...gear, student: t, teacher: other })],
    ['gearFromLogits teacher', () => rl.gearFromLogits({ ...gear, student: other, teacher: t, distillCoef: 0.1 })],
    ['distillLoss', () => rl.distillLoss({ student: t, teacher: other, distillCoef: 0.1 })],
    ['download', () => t.download()],
    ['downloadSync', () => t.downloadSync()],
  ];
}

describe('device tensors on the host device: errors', () => {
  it('a disposed tensor is ERR_STATE in every function, in TypeScript and in the native layer', async () => {
    using other = rl.cuda.uploadSync(host);
    const gone = rl.cuda.uploadSync(host);
    const id = gone.ref('test').tensor;
    gone.dispose();
    for (const [what, f] of everyUse(gone, other)) {
      const e = await failure(f);
      expect(e.code, what).toBe('ERR_STATE');
      expect(e.message, what).toMatch(/: expected a live device tensor, got "?one that was disposed"?$/);
    }
    // a stale id given to the addon directly
    expect(() => native.tokenStats({ logits: { tensor: id }, targets: y, temperature: 1 }))
      .toThrow('logits.tensor: expected a live device tensor, got one that was disposed');
    expect(() => native.cudaDownload!({ tensor: id })).toThrow(expect.objectContaining({ code: 'ERR_STATE' }));
    native.cudaDispose!({ tensor: id });  // disposing what is not live: a no-op
  });

  it('a tensor a running call reads cannot be disposed or written (ERR_BUSY); other reads go on', async () => {
    using dev = rl.cuda.uploadSync(host);
    using other = rl.cuda.uploadSync(host);
    const running = rl.divergenceAsync(dev, other, { kind: 'jsd' });  // claims both until it settles
    expect(await codeOf(() => dev.dispose())).toBe('ERR_BUSY');
    expect(dev.disposed).toBe(false);
    expect(await codeOf(() => rl.tokenStatsBackward(other, y, { logprob: g }, { out: dev }))).toBe('ERR_BUSY');
    expect(await codeOf(() => rl.tokenStatsBackward(dev, y, { logprob: g }, { inPlace: true }))).toBe('ERR_BUSY');
    expect(await codeOf(() => rl.divergenceBackward(other, other, g, { out: dev }))).toBe('ERR_BUSY');
    // reads alongside: the same numbers as on host arrays
    expect(rl.tokenStats(dev, y)).toEqual(rl.tokenStats(host, y));
    expect(dev.downloadSync()).toEqual(z);
    const second = rl.tokenStatsAsync(dev, y);
    expect(await codeOf(() => dev.dispose())).toBe('ERR_BUSY');
    expect((await running).value).toEqual(rl.divergence(host, host, { kind: 'jsd' }).value);
    await second;
    dev.dispose();  // free now
    expect(dev.disposed).toBe(true);
  });

  it('a tensor a running call writes can be neither read, written nor disposed until it settles', async () => {
    using src = rl.cuda.uploadSync(host);
    using out = rl.cuda.uploadSync({ data: new Float32Array(rows * vocab), rows, vocab });
    const writing = rl.tokenStatsBackwardAsync(src, y, { logprob: g }, { out });
    for (const [what, f] of [['read', () => rl.tokenStats(out, y)], ['download', () => out.downloadSync()],
      ['write', () => rl.tokenStatsBackward(src, y, { logprob: g }, { out })], ['dispose', () => out.dispose()]] as const) {
      const e = await failure(f);
      expect(e.code, what).toBe('ERR_BUSY');
      expect(e.message, what).toMatch(/being written by one|in use/);
    }
    expect(await writing).toBe(out);
    expect(out.downloadSync()).toEqual(rl.tokenStatsBackward(host, y, { logprob: g }));
  });

  it("the garbage collector's path frees a tensor in use once its call ends", async () => {
    const before = live();
    const dev = rl.cuda.uploadSync(host);
    const running = rl.tokenStatsAsync(dev, y);
    native.cudaDispose!({ tensor: dev.ref('test').tensor, whenFree: true });  // what the FinalizationRegistry calls
    expect(live().tensors).toBe(before.tensors + 1);  // still held by the call
    expect(await codeOf(() => rl.tokenStats(dev, y))).toBe('ERR_STATE');  // but no longer usable
    await running;
    expect(live()).toEqual(before);
  });

  it('tensors of two devices, or a tensor with host arrays, in one call are ERR_DEVICE; nothing stays claimed', async () => {
    using a = rl.cuda.uploadSync(host);
    using b = rl.cuda.uploadSync(host, { device: 1 });
    const gear = { targets: y, advantages: [1], offsets: Int32Array.of(0, rows) };
    const cases: [string, () => unknown, RegExp][] = [
      ['divergence', () => rl.divergence(a, b), /^teacher: expected a tensor on cuda:0, as the student is, got "?a tensor on cuda:1"?$/],
      ['divergence host', () => rl.divergence(a, host), /^teacher: expected a tensor on cuda:0, as the student is, got "?host memory"?$/],
      ['divergenceAsync', () => rl.divergenceAsync(host, b), /got "?a tensor on cuda:1"?$/],
      ['divergenceBackward', () => rl.divergenceBackward(b, a, g), /^teacher: /],
      ['divergenceBackwardAsync', () => rl.divergenceBackwardAsync(a, b, g), /^teacher: /],
      ['tokenStatsBackward out', () => rl.tokenStatsBackward(a, y, { logprob: g }, { out: b }), /^out: expected a tensor on cuda:0, got one on cuda:1$/],
      ['tokenStatsBackward host out', () => rl.tokenStatsBackward(host, y, { logprob: g }, { out: a }), /^out: expected a Float32Array for a call on the CPU/],
      ['divergenceBackward out', () => rl.divergenceBackward(a, a, g, { out: b }), /^out: expected a tensor on cuda:0, got one on cuda:1$/],
      ['tokenStats device', () => rl.tokenStats(b, y, { device: 'cuda:0' }), /^device: expected 'cuda:1' \(the logits are on that device\)/],
      ['tokenStats cpu', () => rl.tokenStats(a, y, { device: 'cpu' }), /^device: /],
      ['tokenStatsPartial device', () => rl.tokenStatsPartial(a, y, { vocabStart: 0, device: 'cuda:1' }), /^device: /],
      ['gearFromLogits', () => rl.gearFromLogits({ ...gear, student: a, teacher: b }), /^teacher: /],
      ['gearFromLogits host', () => rl.gearFromLogits({ ...gear, student: host, teacher: a }), /^teacher: .*got "?a tensor on cuda:0"?$/],
      ['distillLoss', () => rl.distillLoss({ student: b, teacher: a, distillCoef: 1 }), /^teacher: /],
      ['upload of a tensor', () => rl.cuda.uploadSync(a as never), /^logits: expected host arrays to upload/],
      ['a device that is not there', () => rl.cuda.uploadSync(host, { device: 2 }), /^device: expected a host device ordinal in \[0, 2\), got 2$/],
      ['a staged call on it', () => rl.tokenStats(host, y, { device: 'cuda:5' }), /^device: expected a host device ordinal in \[0, 2\), got 5$/],
    ];
    for (const [what, f, message] of cases) {
      const e = await failure(f);
      expect(e.code, what).toBe('ERR_DEVICE');
      expect(e.message, what).toMatch(message);
    }
    // the addon on its own: the tensors' devices differ (both read and claimed, then refused)
    const ids = [a.ref('a').tensor, b.ref('b').tensor];
    expect(() => native.divergence({ student: { tensor: ids[0]! }, teacher: { tensor: ids[1]! }, kind: 0, beta: 0.5, temperature: 1, klCap: Infinity }))
      .toThrow('teacher: expected a tensor on cuda:0, as student is, got a tensor on cuda:1');
    expect(() => native.tokenStats({ logits: { tensor: ids[1]! }, targets: y, temperature: 1, device: 0 }))
      .toThrow('device: expected cuda:1, the device of logits, got cuda:0');
    // every claim of the refused calls is released: both can be written and disposed
    expect(rl.tokenStatsBackward(a, y, { logprob: g }, { inPlace: true })).toBe(a);
    a.dispose();
    b.dispose();
  });

  it('aborted calls are ERR_ABORTED and leave nothing behind: uploads, downloads, ops, backwards', async () => {
    const before = live();
    expect(await codeOf(() => rl.cuda.upload(host, { signal: AbortSignal.abort() }))).toBe('ERR_ABORTED');
    // aborted right after the call: the work sees the flag before or between its pieces
    const big = { data: new Float32Array(16 << 20), rows: 256, vocab: 1 << 16 };  // 64 MiB: 16 pieces
    for (let k = 0; k < 3; k++) {
      const ctl = new AbortController();
      const p = rl.cuda.upload(big, { signal: ctl.signal });
      ctl.abort();
      const e = await failure(() => p);
      expect(e.code).toBe('ERR_ABORTED');
      expect(e.message).toMatch(/^(upload: aborted by the AbortSignal|aborted: the AbortSignal fired)$/);
    }
    expect(live()).toEqual(before);
    using dev = await rl.cuda.upload(big);
    const ctl = new AbortController();
    const out = new Float32Array(big.data.length);
    const down = dev.download({ out, signal: ctl.signal });
    ctl.abort();
    expect(await codeOf(() => down)).toBe('ERR_ABORTED');
    const ops: (() => Promise<unknown>)[] = [
      () => rl.tokenStatsAsync(dev, new Int32Array(256), { signal: ctl.signal }),
      () => rl.tokenStatsBackwardAsync(dev, new Int32Array(256), { logprob: new Float32Array(256) }, { signal: ctl.signal }),
      () => rl.divergenceBackwardAsync(dev, dev, new Float32Array(256), { signal: ctl.signal }),
      () => rl.tokenStatsPartialAsync(dev, new Int32Array(256), { vocabStart: 0, signal: ctl.signal }),
    ];
    for (const op of ops) expect(await codeOf(op)).toBe('ERR_ABORTED');  // already aborted
    for (const op of [ops[1]!, ops[2]!]) {  // aborted mid-call: no new tensor survives
      const c = new AbortController();
      const p = op === ops[1] ? rl.tokenStatsBackwardAsync(dev, new Int32Array(256), { logprob: new Float32Array(256) }, { signal: c.signal })
        : rl.divergenceBackwardAsync(dev, dev, new Float32Array(256), { signal: c.signal });
      c.abort();
      expect(await codeOf(() => p)).toBe('ERR_ABORTED');
    }
    dev.dispose();
    expect(live()).toEqual(before);
  });

  it('bad values on the device: the CPU error, a device out and in-place logits NaN-filled', async () => {
    const bad = Float32Array.from(z);
    bad[2 * vocab + 17] = NaN;
    const badHost = { data: bad, rows, vocab };
    using dev = rl.cuda.uploadSync(badHost);
    using devOut = rl.cuda.uploadSync(host);
    const want = await failure(() => rl.tokenStatsBackward(badHost, y, { logprob: g }));
    expect(want.code).toBe('ERR_NON_FINITE');
    expect(await failure(() => rl.tokenStatsBackward(dev, y, { logprob: g }, { out: devOut }))).toEqual(want);
    expect(devOut.downloadSync().every(Number.isNaN)).toBe(true);
    expect(await failure(() => rl.tokenStatsBackwardAsync(dev, y, { logprob: g }, { inPlace: true }))).toEqual(want);
    expect(dev.downloadSync().every(Number.isNaN)).toBe(true);
    const before = live();
    using clean = rl.cuda.uploadSync(host);
    expect(await failure(() => rl.divergenceBackward(dev, clean, g))).toMatchObject({ code: 'ERR_NON_FINITE' });
    expect(live().tensors).toBe(before.tensors + 1);  // the failed backward's new tensor was freed
  });
});
