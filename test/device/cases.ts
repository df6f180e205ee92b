// One case per public function that takes or gives a DeviceLogits (the list test/device/public_functions.ts
// draws from the declarations; test/device/coverage.test.ts holds the two together), run on the host
// device by test/device/api.test.ts. Each case calls its function on device tensors, sync and async
// forms alike, and compares what comes back with the same call on host arrays (the host device runs the
// CPU kernels: the same bits) and, where it is cheap, with the float64 references.
//
// The package is a parameter, never imported here: the file that runs the cases imports it with the
// host device switched on (test/helpers/host_device.ts), and the coverage test reads only the names.
import { expect } from 'vitest';
import type * as Package from '../../ts/index.js';
import type { DType, Kind } from '../helpers/reference.js';
import {
  encode, maxScaledError, randomLogits, refDivergence, refDivergenceGrad, refTokenStats, refTokenStatsGrad,
} from '../helpers/reference.js';

type RL = typeof Package;
type DeviceLogits = Package.DeviceLogits;

const DTYPES: DType[] = ['float32', 'bfloat16', 'float16'];
// a warp-sized row and rows longer than a block of the CPU kernels
const SHAPES: [rows: number, vocab: number][] = [[5, 37], [3, 4099]];
const TOL = 1e-5;

interface Case {
  rows: number;
  vocab: number;
  dtype: DType;
  host: Package.Logits;
  decoded: Float64Array;
  targets: Int32Array;
}

/** Random logits with a few -Infinity masks (never a target). */
function makeCase(seed: number, rows: number, vocab: number, dtype: DType, scale = 3): Case {
  const z = randomLogits(seed, rows, vocab, scale);
  const targets = Int32Array.from({ length: rows }, (_, r) => (r * 7919 + seed) % vocab);
  for (let r = 0; r < rows && vocab > 3; r++) z[r * vocab + ((targets[r]! + 1) % vocab)] = -Infinity;
  const { data, decoded } = encode(z, dtype);
  const host = dtype === 'float32' ? { data, rows, vocab } : { data, rows, vocab, dtype };
  return { rows, vocab, dtype, host, decoded, targets };
}

/** The teacher of a case: other random logits with the student's masks (finite divergences). */
function teacherOf(c: Case, seed: number): Case {
  const z = randomLogits(seed, c.rows, c.vocab, 2).map((x, i) => (c.decoded[i] === -Infinity ? -Infinity : x));
  const { data, decoded } = encode(z, c.dtype);
  return { ...c, host: c.dtype === 'float32' ? { data, rows: c.rows, vocab: c.vocab } : { data, rows: c.rows, vocab: c.vocab, dtype: c.dtype }, decoded };
}

function* everyCase(seed: number): Generator<Case> {
  for (const dtype of DTYPES) for (const [rows, vocab] of SHAPES) yield makeCase(seed + rows * 31 + vocab + DTYPES.indexOf(dtype), rows, vocab, dtype);
}

/** The same bits (NaN equal to NaN). */
function bits(got: ArrayLike<number>, want: ArrayLike<number>, what: string): void {
  expect(got.length, `${what}: length`).toBe(want.length);
  for (let i = 0; i < want.length; i++) {
    if (!Object.is(got[i], want[i])) expect.fail(`${what}: entry ${i} is ${got[i]}, expected ${want[i]}`);
  }
}

function near(got: ArrayLike<number>, want: ArrayLike<number>, tol: number, what: string): void {
  expect(maxScaledError(got, want), what).toBeLessThanOrEqual(tol);
}

/** Largest |a - e| over the largest |e| (at least 1): a gradient's error relative to its scale. */
function nearScale(got: ArrayLike<number>, want: ArrayLike<number>, tol: number, what: string): void {
  let scale = 1;
  for (let i = 0; i < want.length; i++) scale = Math.max(scale, Math.abs(want[i]!));
  let worst = 0;
  for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i]! - want[i]!) / scale);
  expect(worst, what).toBeLessThanOrEqual(tol);
}

/** The code of the GearError `f` throws (undefined when it returns). */
function codeOf(f: () => unknown): string | undefined {
  try {
    f();
  } catch (e) {
    expect((e as Error).name).toBe('GearError');
    return (e as { code: string }).code;
  }
  return undefined;
}

const STATS = ['logprob', 'entropy', 'logsumexp'] as const;
const DIV_KEYS = ['value', 'studentEntropy', 'studentLogsumexp', 'teacherLogsumexp', 'studentLogprob', 'teacherLogprob'] as const;
const KINDS: [Kind, number][] = [['reverse_kl', 0.5], ['forward_kl', 0.5], ['jsd', 0.3]];

async function uploadCase(rl: RL, sync: boolean): Promise<void> {
  for (const c of everyCase(1)) {
    const before = rl.cuda.memory(0);
    const dev = sync ? rl.cuda.uploadSync(c.host) : await rl.cuda.upload(c.host);
    expect(dev).toBeInstanceOf(rl.DeviceLogits);
    expect([dev.rows, dev.vocab, dev.dtype, dev.device, dev.bytes]).toEqual([c.rows, c.vocab, c.dtype, 0, c.host.data.byteLength]);
    bits(dev.downloadSync(), c.host.data, `${c.dtype} ${c.rows}x${c.vocab} round trip`);
    const after = rl.cuda.memory(0);
    expect(after.tensors).toBe(before.tensors + 1);
    expect(after.tensorBytes).toBe(before.tensorBytes + dev.bytes);
    expect(after.poolUsedBytes).toBe(before.poolUsedBytes + dev.bytes);
    dev.dispose();
    expect(rl.cuda.memory(0)).toMatchObject({ tensors: before.tensors, poolUsedBytes: before.poolUsedBytes });
  }
  // the second host device, and an empty tensor
  const host = { data: Float32Array.of(1, 2, 3, 4, 5, 6), rows: 2, vocab: 3 };
  const one = sync ? rl.cuda.uploadSync(host, { device: 1 }) : await rl.cuda.upload(host, { device: 1 });
  expect(one.device).toBe(1);
  expect(rl.cuda.memory(1).tensors).toBeGreaterThanOrEqual(1);
  bits(one.downloadSync(), host.data, 'on cuda:1');
  one.dispose();
  const empty = sync ? rl.cuda.uploadSync({ data: new Float32Array(0), rows: 0, vocab: 9 }) : await rl.cuda.upload({ data: new Float32Array(0), rows: 0, vocab: 9 });
  expect([empty.rows, empty.vocab, empty.bytes]).toEqual([0, 9, 0]);
  expect(empty.downloadSync().length).toBe(0);
  empty.dispose();
}

async function downloadCase(rl: RL, sync: boolean): Promise<void> {
  for (const c of everyCase(2)) {
    using dev = await rl.cuda.upload(c.host);
    const get = (opts?: { out?: Float32Array | Uint16Array }) =>
      (sync ? dev.downloadSync(opts as never) : dev.download(opts as never)) as Float32Array | Uint16Array | Promise<Float32Array | Uint16Array>;
    const fresh = await get();
    expect(fresh).toBeInstanceOf(c.dtype === 'float32' ? Float32Array : Uint16Array);
    bits(fresh, c.host.data, `${c.dtype}: a new array`);
    const out = c.dtype === 'float32' ? new Float32Array(c.rows * c.vocab) : new Uint16Array(c.rows * c.vocab);
    expect(await get({ out })).toBe(out);
    bits(out, c.host.data, `${c.dtype}: into out`);
    const short = c.dtype === 'float32' ? new Float32Array(3) : new Uint16Array(3);
    await expect((async () => get({ out: short }))()).rejects.toMatchObject({ code: 'ERR_SHAPE' });
  }
}

async function tokenStatsCase(rl: RL, sync: boolean): Promise<void> {
  const stats = (l: Package.AnyLogits, y: Int32Array, o?: Package.TokenStatsOptions) =>
    sync ? rl.tokenStats(l, y, o) : rl.tokenStatsAsync(l, y, o);
  for (const c of everyCase(3)) {
    using dev = await rl.cuda.upload(c.host);
    for (const T of [1, 0.7]) {
      const tag = `${c.dtype} ${c.rows}x${c.vocab} T=${T}`;
      const got = await stats(dev, c.targets, { temperature: T });
      const cpu = rl.tokenStats(c.host, c.targets, { temperature: T });
      const ref = refTokenStats(c.decoded, c.rows, c.vocab, c.targets, T);
      for (const k of STATS) {
        bits(got[k], cpu[k], `${tag} ${k} vs host arrays`);
        near(got[k], ref[k], TOL, `${tag} ${k} vs float64`);
      }
      // caller's outputs, host arrays staged on either device
      const out = { logprob: new Float32Array(c.rows), entropy: new Float32Array(c.rows), logsumexp: new Float32Array(c.rows) };
      expect((await stats(dev, c.targets, { temperature: T, out })).entropy).toBe(out.entropy);
      for (const device of ['cuda', 'cuda:1'] as const) {
        const staged = await stats(c.host, c.targets, { temperature: T, device });
        for (const k of STATS) bits(staged[k], cpu[k], `${tag} ${k} staged on ${device}`);
      }
      for (const k of STATS) bits(out[k], cpu[k], `${tag} out.${k}`);
    }
  }
}

async function tokenStatsBackwardCase(rl: RL, sync: boolean): Promise<void> {
  const backward = ((...a: Parameters<RL['tokenStatsBackward']>) =>
    sync ? rl.tokenStatsBackward(...a) : rl.tokenStatsBackwardAsync(...a)) as (...a: unknown[]) => Promise<Float32Array | DeviceLogits> | Float32Array | DeviceLogits;
  for (const c of everyCase(4)) {
    const n = c.rows * c.vocab;
    const gl = Float32Array.from({ length: c.rows }, (_, r) => Math.sin(r + 1));
    const ge = Float32Array.from({ length: c.rows }, (_, r) => Math.cos(r + 1) / 2);
    const grad = { logprob: gl, entropy: ge };
    const T = 0.7, tag = `${c.dtype} ${c.rows}x${c.vocab}`;
    using dev = await rl.cuda.upload(c.host);
    const cpu = rl.tokenStatsBackward(c.host, c.targets, grad, { temperature: T });
    nearScale(cpu, refTokenStatsGrad(c.decoded, c.rows, c.vocab, c.targets, gl, ge, T), TOL, `${tag} host vs float64`);
    // a new device tensor, recomputed statistics and the forward's
    using fresh = await backward(dev, c.targets, grad, { temperature: T }) as DeviceLogits;
    expect(fresh).toBeInstanceOf(rl.DeviceLogits);
    expect([fresh.rows, fresh.vocab, fresh.dtype, fresh.device]).toEqual([c.rows, c.vocab, 'float32', 0]);
    bits(fresh.downloadSync(), cpu, `${tag} new tensor vs host arrays`);
    const stats = rl.tokenStats(dev, c.targets, { temperature: T });
    using withStats = await backward(dev, c.targets, grad, { temperature: T, stats }) as DeviceLogits;
    bits(withStats.downloadSync(), rl.tokenStatsBackward(c.host, c.targets, grad, { temperature: T, stats }), `${tag} with stats`);
    // into a host array, into a device tensor, staged host arrays
    const hostOut = new Float32Array(n);
    expect(await backward(dev, c.targets, grad, { temperature: T, out: hostOut })).toBe(hostOut);
    bits(hostOut, cpu, `${tag} host out`);
    using devOut = await rl.cuda.upload({ data: new Float32Array(n), rows: c.rows, vocab: c.vocab });
    expect(await backward(dev, c.targets, grad, { temperature: T, out: devOut })).toBe(devOut);
    bits(devOut.downloadSync(), cpu, `${tag} device out`);
    bits(await backward(c.host, c.targets, grad, { temperature: T, device: 'cuda:1' }) as Float32Array, cpu, `${tag} staged`);
    // entropy only, no targets
    using entOnly = await backward(dev, undefined, { entropy: ge }, { temperature: T }) as DeviceLogits;
    bits(entOnly.downloadSync(), rl.tokenStatsBackward(c.host, undefined, { entropy: ge }, { temperature: T }), `${tag} entropy only`);
    if (c.dtype === 'float32') {
      using own = await rl.cuda.upload(c.host);
      expect(await backward(own, c.targets, grad, { temperature: T, inPlace: true })).toBe(own);
      bits(own.downloadSync(), cpu, `${tag} in place`);
    } else {
      await expect((async () => backward(dev, c.targets, grad, { inPlace: true }))()).rejects.toMatchObject({ code: 'ERR_DTYPE' });
    }
  }
}

async function partialCase(rl: RL, sync: boolean): Promise<void> {
  for (const c of everyCase(5)) {
    const cut = Math.max(1, Math.floor(c.vocab / 3));
    const parts: Package.PartialStats[] = [];
    for (const [v0, v1] of [[0, cut], [cut, c.vocab]] as const) {
      const w = v1 - v0;
      const data = c.dtype === 'float32' ? new Float32Array(c.rows * w) : new Uint16Array(c.rows * w);
      for (let r = 0; r < c.rows; r++) data.set((c.host.data as Float32Array).subarray(r * c.vocab + v0, r * c.vocab + v1), r * w);
      const shard = c.dtype === 'float32' ? { data, rows: c.rows, vocab: w } : { data, rows: c.rows, vocab: w, dtype: c.dtype };
      using dev = await rl.cuda.upload(shard);
      const opts = { vocabStart: v0, temperature: 0.7 };
      const got = sync ? rl.tokenStatsPartial(dev, c.targets, opts) : await rl.tokenStatsPartialAsync(dev, c.targets, opts);
      const cpu = rl.tokenStatsPartial(shard, c.targets, opts);
      expect([got.vocabStart, got.vocab, got.rows, got.temperature]).toEqual([v0, w, c.rows, 0.7]);
      for (const k of ['max', 'sumExp', 'sumExpX', 'targetLogit'] as const) bits(got[k], cpu[k], `${c.dtype} shard ${v0} ${k}`);
      parts.push(got);
    }
    const merged = rl.mergeTokenStats(parts);
    const whole = rl.tokenStats(c.host, c.targets, { temperature: 0.7 });
    const ref = refTokenStats(c.decoded, c.rows, c.vocab, c.targets, 0.7);
    for (const k of STATS) {
      near(merged[k], whole[k], 2 * TOL, `${c.dtype} merged ${k} vs tokenStats`);
      near(merged[k], ref[k], TOL, `${c.dtype} merged ${k} vs float64`);
    }
  }
}

async function divergenceCase(rl: RL, sync: boolean): Promise<void> {
  for (const c of everyCase(6)) {
    const t = teacherOf(c, 60);
    using s = await rl.cuda.upload(c.host);
    using tt = await rl.cuda.upload(t.host);
    for (const [kind, beta] of KINDS) {
      const tag = `${c.dtype} ${c.rows}x${c.vocab} ${kind}`;
      const opts = { kind, beta, temperature: 0.7, targets: c.targets };
      const got = sync ? rl.divergence(s, tt, opts) : await rl.divergenceAsync(s, tt, opts);
      const cpu = rl.divergence(c.host, t.host, opts);
      const ref = refDivergence(c.decoded, t.decoded, c.rows, c.vocab, kind, beta, 0.7, c.targets);
      for (const k of DIV_KEYS) {
        bits(got[k]!, cpu[k]!, `${tag} ${k} vs host arrays`);
        near(got[k]!, ref[k], TOL, `${tag} ${k} vs float64`);
      }
      const capped = sync ? rl.divergence(s, tt, { ...opts, klCap: 0.05 }) : await rl.divergenceAsync(s, tt, { ...opts, klCap: 0.05 });
      bits(capped.value, rl.divergence(c.host, t.host, { ...opts, klCap: 0.05 }).value, `${tag} capped`);
      const out = { value: new Float32Array(c.rows) };
      expect((sync ? rl.divergence(s, tt, { ...opts, out }) : await rl.divergenceAsync(s, tt, { ...opts, out })).value).toBe(out.value);
      bits(out.value, cpu.value, `${tag} out.value`);
      const staged = sync ? rl.divergence(c.host, t.host, { ...opts, device: 'cuda' }) : await rl.divergenceAsync(c.host, t.host, { ...opts, device: 'cuda' });
      bits(staged.value, cpu.value, `${tag} staged`);
    }
  }
}

async function divergenceBackwardCase(rl: RL, sync: boolean): Promise<void> {
  const backward = ((...a: Parameters<RL['divergenceBackward']>) =>
    sync ? rl.divergenceBackward(...a) : rl.divergenceBackwardAsync(...a)) as (...a: unknown[]) => Promise<Float32Array | DeviceLogits> | Float32Array | DeviceLogits;
  for (const c of everyCase(7)) {
    const t = teacherOf(c, 70);
    const g = Float32Array.from({ length: c.rows }, (_, r) => 1 + (r % 3) / 2);
    using s = await rl.cuda.upload(c.host);
    using tt = await rl.cuda.upload(t.host);
    for (const [kind, beta] of KINDS) {
      const tag = `${c.dtype} ${c.rows}x${c.vocab} ${kind}`;
      const opts = { kind, beta, temperature: 0.7 };
      const cpu = rl.divergenceBackward(c.host, t.host, g, opts);
      nearScale(cpu, refDivergenceGrad(c.decoded, t.decoded, c.rows, c.vocab, kind, beta, 0.7, g), kind === 'jsd' ? 1e-4 : TOL,
        `${tag} host vs float64`);
      using fresh = await backward(s, tt, g, opts) as DeviceLogits;
      expect([fresh.rows, fresh.vocab, fresh.dtype, fresh.device]).toEqual([c.rows, c.vocab, 'float32', 0]);
      bits(fresh.downloadSync(), cpu, `${tag} new tensor vs host arrays`);
      // with the forward's statistics
      const stats = rl.divergence(s, tt, opts);
      using given = await backward(s, tt, g, { ...opts, stats }) as DeviceLogits;
      bits(given.downloadSync(), rl.divergenceBackward(c.host, t.host, g, { ...opts, stats }), `${tag} with stats`);
      // into a host array, into a device tensor, staged
      const hostOut = new Float32Array(c.rows * c.vocab);
      expect(await backward(s, tt, g, { ...opts, out: hostOut })).toBe(hostOut);
      bits(hostOut, cpu, `${tag} host out`);
      using devOut = await rl.cuda.upload({ data: new Float32Array(c.rows * c.vocab), rows: c.rows, vocab: c.vocab });
      expect(await backward(s, tt, g, { ...opts, out: devOut })).toBe(devOut);
      bits(devOut.downloadSync(), cpu, `${tag} device out`);
      bits(await backward(c.host, t.host, g, { ...opts, device: 'cuda' }) as Float32Array, cpu, `${tag} staged`);
    }
  }
}

async function gearCase(rl: RL): Promise<void> {
  for (const dtype of DTYPES) {
    const c = makeCase(77, 12, 301, dtype);
    const t = teacherOf(c, 78);
    const args = { advantages: Float64Array.of(1, -1), offsets: Int32Array.of(0, 5, 12), targets: c.targets, temperature: 0.7,
      mask: Uint8Array.from({ length: 12 }, (_, i) => (i === 3 ? 0 : 1)), distillCoef: 0.25, options: { klCap: 2 } };
    using s = await rl.cuda.upload(c.host);
    using tt = await rl.cuda.upload(t.host);
    const a = rl.gearFromLogits({ ...args, student: s, teacher: tt });
    const b = rl.gearFromLogits({ ...args, student: c.host, teacher: t.host });
    bits(a.advantages, b.advantages, `${dtype} advantages`);
    bits(a.weights, b.weights, `${dtype} weights`);
    for (const k of ['divergence', 'entropy', 'logratio'] as const) bits(a.signals[k], b.signals[k], `${dtype} signals.${k}`);
    for (const k of DIV_KEYS) bits(a.stats[k]!, b.stats[k]!, `${dtype} stats.${k}`);
    const ref = refDivergence(c.decoded, t.decoded, 12, 301, 'reverse_kl', 0.5, 0.7, c.targets);
    near(a.signals.divergence, ref.value.map((x) => Math.min(x, 2)), TOL, `${dtype} divergence vs float64`);
    // the distillation term: its gradient stays on the device
    expect(a.distill!.loss).toBe(b.distill!.loss);
    expect(a.distill!.validTokens).toBe(11);
    expect(a.distill!.grad).toBeInstanceOf(rl.DeviceLogits);
    using g = a.distill!.grad;
    bits(g.downloadSync(), b.distill!.grad, `${dtype} distill grad`);
    // no distillation: the same result without a gradient
    const plain = rl.gearFromLogits({ ...args, distillCoef: 0, student: s, teacher: tt });
    expect(plain.distill).toBeUndefined();
    bits(plain.advantages, a.advantages, `${dtype} advantages without distillation`);
  }
}

async function distillCase(rl: RL): Promise<void> {
  for (const dtype of DTYPES) {
    const c = makeCase(91, 9, 257, dtype);
    const t = teacherOf(c, 92);
    using s = await rl.cuda.upload(c.host);
    using tt = await rl.cuda.upload(t.host);
    const mask = Uint8Array.of(1, 1, 0, 1, 1, 1, 0, 1, 1);
    for (const extra of [{}, { mask }, { mask, klCap: 0.5, temperature: 0.7 }]) {
      const tag = `${dtype} ${JSON.stringify(Object.keys(extra))}`;
      const a = rl.distillLoss({ student: s, teacher: tt, distillCoef: 0.3, ...extra });
      const b = rl.distillLoss({ student: c.host, teacher: t.host, distillCoef: 0.3, ...extra });
      expect(a.loss, tag).toBe(b.loss);
      expect(a.validTokens, tag).toBe(b.validTokens);
      bits(a.divergence, b.divergence, `${tag} divergence`);
      expect(a.grad).toBeInstanceOf(rl.DeviceLogits);
      using g = a.grad;
      bits(g.downloadSync(), b.grad, `${tag} grad`);
    }
    // the forward's statistics given: the same loss and gradient
    const opts = { kind: 'reverse_kl' as const, klCap: 20 };
    const stats = rl.divergence(s, tt, opts);
    const given = rl.distillLoss({ student: s, teacher: tt, distillCoef: 0.3, stats });
    using g = given.grad;
    bits(g.downloadSync(), rl.distillLoss({ student: c.host, teacher: t.host, distillCoef: 0.3 }).grad, `${dtype} with stats`);
    const ref = refDivergence(c.decoded, t.decoded, 9, 257, 'reverse_kl');
    expect(Math.abs(given.loss - (0.3 * ref.value.reduce((x, y) => x + y, 0)) / 9)).toBeLessThanOrEqual(1e-5 * Math.max(1, given.loss));
  }
}

/** Every public function that takes or gives a DeviceLogits, by its public name, and its case. */
export const DEVICE_CASES: Record<string, (rl: RL) => Promise<void>> = {
  'cuda.upload': (rl) => uploadCase(rl, false),
  'cuda.uploadSync': (rl) => uploadCase(rl, true),
  'DeviceLogits.download': (rl) => downloadCase(rl, false),
  'DeviceLogits.downloadSync': (rl) => downloadCase(rl, true),
  'DeviceLogits.dispose': async (rl) => {
    const before = rl.cuda.memory(0);
    const dev = await rl.cuda.upload({ data: new Float32Array(12), rows: 3, vocab: 4 });
    expect(dev.disposed).toBe(false);
    expect(rl.cuda.memory(0).tensors).toBe(before.tensors + 1);
    dev.dispose();
    expect(dev.disposed).toBe(true);
    dev.dispose();  // twice is allowed
    expect(rl.cuda.memory(0)).toMatchObject({ tensors: before.tensors, tensorBytes: before.tensorBytes, poolUsedBytes: before.poolUsedBytes });
    expect(codeOf(() => rl.tokenStats(dev, new Int32Array(3)))).toBe('ERR_STATE');
  },
  'DeviceLogits.[Symbol.dispose]': async (rl) => {
    const before = rl.cuda.memory(0).tensors;
    let seen: DeviceLogits;
    {
      using dev = await rl.cuda.upload({ data: new Float32Array(12), rows: 3, vocab: 4 });
      seen = dev;
      expect(rl.cuda.memory(0).tensors).toBe(before + 1);
    }
    expect(seen.disposed).toBe(true);
    expect(rl.cuda.memory(0).tensors).toBe(before);
    seen[Symbol.dispose]();  // idempotent as dispose()
  },
  'DeviceLogits.toString': async (rl) => {
    const dev = await rl.cuda.upload({ data: new Uint16Array(6), rows: 2, vocab: 3, dtype: 'bfloat16' }, { device: 1 });
    expect(dev.toString()).toBe('DeviceLogits(cuda:1, 2 x 3 bfloat16)');
    dev.dispose();
    expect(String(dev)).toBe('DeviceLogits(cuda:1, 2 x 3 bfloat16, disposed)');
  },
  tokenStats: (rl) => tokenStatsCase(rl, true),
  tokenStatsAsync: (rl) => tokenStatsCase(rl, false),
  tokenStatsBackward: (rl) => tokenStatsBackwardCase(rl, true),
  tokenStatsBackwardAsync: (rl) => tokenStatsBackwardCase(rl, false),
  tokenStatsPartial: (rl) => partialCase(rl, true),
  tokenStatsPartialAsync: (rl) => partialCase(rl, false),
  divergence: (rl) => divergenceCase(rl, true),
  divergenceAsync: (rl) => divergenceCase(rl, false),
  divergenceBackward: (rl) => divergenceBackwardCase(rl, true),
  divergenceBackwardAsync: (rl) => divergenceBackwardCase(rl, false),
  gearFromLogits: gearCase,
  distillLoss: distillCase,
};
