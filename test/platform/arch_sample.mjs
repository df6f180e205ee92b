// One fixed workload through every native kernel family, on every ISA this CPU runs; prints the outputs
// as JSON ({ arch, isas, results: { [isa]: { [name]: number[] } } }). Run by test/platform/aarch64.test.ts
// on x86-64 and, under qemu-user, on arm64, which compares the two. Loads the compiled package (dist/);
// GEAR_RL_ADDON picks the addon.
import * as rl from '../../dist/index.js';

// mulberry32: the same stream on every platform.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const rows = 5;
const vocab = 4099;  // two full 2048-blocks and a tail of 3: every loop of the row kernels
const rand = rng(7);
const zs = Float32Array.from({ length: rows * vocab }, () => (rand() - 0.5) * 16);
const zt = Float32Array.from({ length: rows * vocab }, (_, i) => zs[i] * 0.7 + (rand() - 0.5) * 4);
for (let r = 0; r < rows; r++) zs[r * vocab + ((r * 977) % vocab)] = -Infinity;  // masked entries (0 log 0)
// bfloat16: the high half of each float32; float16: random halves with magnitudes in [2^-6, 8).
const u32 = new Uint32Array(zs.buffer);
const bf16 = Uint16Array.from(u32, (u) => (u === 0xff800000 ? 0xff80 : u >>> 16));
const f16 = Uint16Array.from({ length: rows * vocab }, () =>
  ((rand() < 0.5 ? 1 : 0) << 15) | ((9 + Math.floor(rand() * 9)) << 10) | Math.floor(rand() * 1024));
const targets = Int32Array.from({ length: rows }, (_, r) => (r * 613 + 5) % vocab);
const g = Float32Array.from({ length: rows }, (_, r) => 0.5 + r * 0.25);

// policy loss / segment inputs: rows of 1, 332, 1, 466 and 200 tokens
const n = 1000, offsets = Int32Array.from([0, 1, 333, 334, 800, n]);
const lp = Float32Array.from({ length: n }, () => -rand() * 3);
const old = Float32Array.from(lp, (x) => x + (rand() - 0.5) * 0.6);
const adv = Float32Array.from({ length: n }, () => (rand() - 0.5) * 2);
const mask = Uint8Array.from({ length: n }, () => (rand() < 0.9 ? 1 : 0));

const arr = (x) => Array.from(x);

// sparse top-k lists: 40 tokens, 6 entries per side (the vector matching) and 40 (the hash table), about
// half the ids shared, a padding entry now and then
function topk(k, seed) {
  const rk = rng(seed);
  const ids = new Int32Array(40 * k), logprobs = new Float32Array(40 * k);
  for (let t = 0; t < 40; t++) {
    for (let j = 0; j < k; j++) {
      const pad = j === k - 1 && t % 5 === 0;
      ids[t * k + j] = pad ? -1 : t * 100 + 2 * j + (seed % 2 && j % 2 ? 1 : 0);
      logprobs[t * k + j] = pad ? -Infinity : Math.log((0.6 / k) * (0.5 + rk()));
    }
  }
  return { ids, logprobs, k };
}
const sparse = [6, 40].map((k) => [topk(k, 2), topk(k, 3)]);
const gs40 = Float32Array.from({ length: 40 }, (_, i) => 0.5 + (i % 3));

function kernels() {
  const out = {};
  const inputs = { f32: { data: zs, rows, vocab }, bf16: { data: bf16, dtype: 'bfloat16', rows, vocab },
    f16: { data: f16, dtype: 'float16', rows, vocab } };
  for (const [name, logits] of Object.entries(inputs)) {
    const s = rl.tokenStats(logits, targets, { temperature: 0.8 });
    out[`tokenStats.${name}.logprob`] = arr(s.logprob);
    out[`tokenStats.${name}.entropy`] = arr(s.entropy);
    out[`tokenStats.${name}.logsumexp`] = arr(s.logsumexp);
    out[`tokenStatsBackward.${name}`] = arr(rl.tokenStatsBackward(logits, targets, { logprob: g, entropy: g }, { temperature: 0.8 }));
  }
  const s = { data: zs, rows, vocab }, t = { data: zt, rows, vocab };
  for (const kind of ['reverse_kl', 'forward_kl', 'jsd']) {
    // forward KL needs the teacher's support to cover the student's: swap the masked side
    const [a, b] = kind === 'forward_kl' ? [t, s] : [s, t];
    const opts = kind === 'jsd' ? { kind, beta: 0.3 } : { kind };
    out[`divergence.${kind}`] = arr(rl.divergence(a, b, opts).value);
    out[`divergenceBackward.${kind}`] = arr(rl.divergenceBackward(a, b, g, opts));
  }
  const pl = rl.policyLoss({ logprob: lp, oldLogprob: old, advantages: adv, offsets, mask });
  out['policyLoss.loss'] = [pl.loss];
  out['policyLoss.grad'] = arr(pl.grad);
  out['segmentReduce.mean'] = arr(rl.segmentReduce(lp, offsets, 'mean', mask));
  out['segmentBroadcast'] = arr(rl.segmentBroadcast([0.1, -2.5, 3, 1e-3, 7], offsets, mask));
  for (const [s, t] of sparse) {
    const d = rl.sparseDivergence(s, t, { kind: 'jsd', beta: 0.3, vocab: 5000 });
    out[`sparseDivergence.k${s.k}.value`] = arr(d.value);
    out[`sparseDivergence.k${s.k}.entropy`] = [...d.entropyLower, ...d.entropyUpper];
    out[`sparseDivergenceBackward.k${s.k}`] = arr(rl.sparseDivergenceBackward(s, t, gs40, { kind: 'reverse_kl' }));
  }
  return out;
}

// Optimizers: three steps each; torch's float32 expressions with explicit FMAs only, so the same bits
// are expected on every ISA and architecture.
const r2 = rng(11);
const p0 = Float32Array.from({ length: 1037 }, () => (r2() - 0.5) * 2);
const grads = [0, 1, 2].map(() => Float32Array.from(p0, () => (r2() - 0.5) * 0.1));

function optimizers() {
  const out = {};
  const runs = {
    adamw: (p) => new rl.AdamW([p], { lr: 1e-3, weightDecay: 0.01 }),
    adam_amsgrad: (p) => new rl.Adam([p], { lr: 1e-3, weightDecay: 0.1, amsgrad: true }),
    sgd_nesterov: (p) => new rl.SGD([p], { lr: 0.1, momentum: 0.9, nesterov: true, weightDecay: 1e-4 }),
  };
  for (const [name, make] of Object.entries(runs)) {
    const p = Float32Array.from(p0);
    const opt = make(p);
    for (const gr of grads) opt.step([Float32Array.from(gr)]);
    out[`optim.${name}`] = arr(p);
  }
  const gs = [Float32Array.from(grads[0]), Float32Array.from(grads[1])];
  out['optim.clipGradNorm'] = [rl.clipGradNorm(gs, 0.5), ...gs[0].slice(0, 16)];
  return out;
}

const b = rl.backend();
const results = {};
for (const isa of b.isas) {
  rl.setIsa(isa);
  results[isa] = { ...kernels(), ...optimizers() };
}
console.log(JSON.stringify({ arch: process.arch, isas: b.isas, results }));
