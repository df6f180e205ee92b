// Determinism of the logits kernels: bit-identical results for 1, 2, 3 and 8 threads and for sync vs
// async calls, on every ISA path; the GEAR_RL_ISA override is honoured in a fresh process.
import { execFileSync } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { BEST, ISAS, restoreBackendAfterAll } from '../helpers/isa.js';
import { encode, randomLogits } from '../helpers/reference.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
restoreBackendAfterAll();

/** Bytes of every typed array in a result, concatenated: equality means bit-identical. */
function bits(x: unknown): string {
  if (ArrayBuffer.isView(x)) return Buffer.from(x.buffer, x.byteOffset, x.byteLength).toString('base64');
  if (x && typeof x === 'object') {
    return Object.keys(x).sort().map((k) => `${k}:${bits((x as Record<string, unknown>)[k])}`).join('|');
  }
  return String(x);
}

const rows = 67;
const vocab = 1531;
const zs = randomLogits(1, rows, vocab);
const zt = randomLogits(2, rows, vocab);
for (let i = 0; i < zs.length; i += 7) { zs[i] = -Infinity; zt[i] = -Infinity; }
const targets = Int32Array.from({ length: rows }, (_, r) => (r * 97 + 1) % vocab);
const gl = Float32Array.from({ length: rows }, (_, r) => Math.sin(r));
const ge = Float32Array.from({ length: rows }, (_, r) => Math.cos(r));
const g = Float32Array.from({ length: rows }, (_, r) => 1 + (r % 3));

function runAll(dtype: 'float32' | 'bfloat16') {
  const s = encode(zs, dtype).data;
  const t = encode(zt, dtype).data;
  const S: rl.Logits = dtype === 'float32' ? { data: s, rows, vocab } : { data: s, rows, vocab, dtype };
  const T: rl.Logits = dtype === 'float32' ? { data: t, rows, vocab } : { data: t, rows, vocab, dtype };
  const stats = rl.tokenStats(S, targets, { temperature: 0.7 });
  const res: Record<string, unknown> = {
    stats,
    bwd: rl.tokenStatsBackward(S, targets, { logprob: gl, entropy: ge }, { temperature: 0.7 }),
    bwdStats: rl.tokenStatsBackward(S, targets, { logprob: gl, entropy: ge }, { temperature: 0.7, stats }),
    partial: rl.tokenStatsPartial(S, targets, { vocabStart: 0, temperature: 0.7 }),
  };
  for (const [kind, beta] of [['reverse_kl', 0.5], ['forward_kl', 0.5], ['jsd', 0.3]] as const) {
    res[`div_${kind}`] = rl.divergence(S, T, { kind, beta, targets });
    res[`divb_${kind}`] = rl.divergenceBackward(S, T, g, { kind, beta });
  }
  if (dtype === 'float32') {
    const inPlace = Float32Array.from(s as Float32Array);
    rl.tokenStatsBackward({ data: inPlace, rows, vocab }, targets, { logprob: gl }, { inPlace: true });
    res.inPlace = inPlace;
  }
  return res;
}

async function runAllAsync(dtype: 'float32' | 'bfloat16') {
  const s = encode(zs, dtype).data;
  const t = encode(zt, dtype).data;
  const S: rl.Logits = dtype === 'float32' ? { data: s, rows, vocab } : { data: s, rows, vocab, dtype };
  const T: rl.Logits = dtype === 'float32' ? { data: t, rows, vocab } : { data: t, rows, vocab, dtype };
  const stats = await rl.tokenStatsAsync(S, targets, { temperature: 0.7 });
  const res: Record<string, unknown> = {
    stats,
    bwd: await rl.tokenStatsBackwardAsync(S, targets, { logprob: gl, entropy: ge }, { temperature: 0.7 }),
    bwdStats: await rl.tokenStatsBackwardAsync(S, targets, { logprob: gl, entropy: ge }, { temperature: 0.7, stats }),
    partial: await rl.tokenStatsPartialAsync(S, targets, { vocabStart: 0, temperature: 0.7 }),
  };
  for (const [kind, beta] of [['reverse_kl', 0.5], ['forward_kl', 0.5], ['jsd', 0.3]] as const) {
    res[`div_${kind}`] = await rl.divergenceAsync(S, T, { kind, beta, targets });
    res[`divb_${kind}`] = await rl.divergenceBackwardAsync(S, T, g, { kind, beta });
  }
  if (dtype === 'float32') {
    const inPlace = Float32Array.from(s as Float32Array);
    await rl.tokenStatsBackwardAsync({ data: inPlace, rows, vocab }, targets, { logprob: gl }, { inPlace: true });
    res.inPlace = inPlace;
  }
  return res;
}

describe('logits kernels are deterministic', () => {
  for (const isa of ISAS) {
    for (const dtype of ['float32', 'bfloat16'] as const) {
      it(`${isa} / ${dtype}: bit-identical for 1, 2, 3 and 8 threads and for sync vs async`, async () => {
        expect(rl.setIsa(isa)).toBe(isa);
        rl.setNumThreads(1);
        const ref = runAll(dtype);
        const refBits = Object.fromEntries(Object.entries(ref).map(([k, x]) => [k, bits(x)]));
        for (const n of [2, 3, 8]) {
          rl.setNumThreads(n);
          const got = runAll(dtype);
          for (const k of Object.keys(ref)) expect(bits(got[k]), `${k} threads=${n}`).toBe(refBits[k]);
          const gotAsync = await runAllAsync(dtype);
          for (const k of Object.keys(ref)) expect(bits(gotAsync[k]), `${k} async threads=${n}`).toBe(refBits[k]);
        }
      });
    }
  }

  it('a row gives the same bits whatever batch it is computed in', () => {
    rl.setNumThreads(2);
    const z = Float32Array.from(zs);
    const all = rl.tokenStats({ data: z, rows, vocab }, targets);
    for (const [a, b] of [[0, 1], [5, 9], [40, 67]]) {
      const part = rl.tokenStats({ data: z.slice(a * vocab, b * vocab), rows: b - a, vocab }, targets.slice(a, b));
      expect(bits(part.entropy)).toBe(bits(all.entropy.slice(a, b)));
      expect(bits(part.logprob)).toBe(bits(all.logprob.slice(a, b)));
    }
  });
});

describe('ISA override', () => {
  // Each ISA of this CPU chosen through the environment at load: backend().isa reports it, and the
  // results are bit-identical to setIsa(isa) in this process (the same kernel). An ISA the CPU lacks
  // falls back to the best one it has.
  const script = `
    const addon = process.env.GEAR_RL_ADDON ? require(process.env.GEAR_RL_ADDON) : require('node-gyp-build')(${JSON.stringify(ROOT)});
    const z = new Float32Array(3 * 100).map((_, i) => Math.sin(i) * 4);
    const o = addon.tokenStats({ logits: { data: z, rows: 3, vocab: 100, dtype: 0 }, targets: new Int32Array([1, 2, 3]), temperature: 1 });
    console.log(JSON.stringify({ isa: addon.backend().isa, lse: Array.from(o.logsumexp), h: Array.from(o.entropy) }));`;
  const child = (isa: string) =>
    JSON.parse(execFileSync(process.execPath, ['-e', script], { env: { ...process.env, GEAR_RL_ISA: isa }, encoding: 'utf8' })) as
      { isa: string; lse: number[]; h: number[] };
  const z = new Float32Array(3 * 100).map((_, i) => Math.sin(i) * 4);

  for (const isa of ISAS) {
    it(`GEAR_RL_ISA=${isa} is honoured at load and computes what setIsa("${isa}") computes`, () => {
      const c = child(isa);
      expect(c.isa).toBe(isa);
      expect(rl.setIsa(isa)).toBe(isa);
      const o = rl.tokenStats({ data: z, rows: 3, vocab: 100 }, new Int32Array([1, 2, 3]));
      expect(c.lse).toEqual(Array.from(o.logsumexp));
      expect(c.h).toEqual(Array.from(o.entropy));
      // every path agrees with the baseline to float32 rounding
      rl.setIsa('baseline');
      const b = rl.tokenStats({ data: z, rows: 3, vocab: 100 }, new Int32Array([1, 2, 3]));
      b.logsumexp.forEach((x, i) => expect(Math.abs(x - o.logsumexp[i]!)).toBeLessThan(1e-5));
    });
  }

  it('an ISA this CPU lacks falls back to the best it has, at load and in setIsa', () => {
    const missing = (process.arch === 'x64' ? ['avx2', 'avx512'] : []).filter((i) => !ISAS.includes(i as rl.Isa));
    for (const isa of missing) {
      expect(child(isa).isa).toBe(BEST);
      expect(rl.setIsa(isa as rl.Isa)).toBe(BEST);
    }
    expect(child('no-such-isa').isa).toBe(BEST);
  });
});
