// The compute ceiling of the logits, policy-loss and sparse kernels: each one's single-thread cost per element on
// data that stays in L2 (so memory never limits it), and the time that cost implies at the full bench
// shape on this run's thread count. A row's "% of floor" then reads as: below 100 % the op is bound by
// arithmetic on this machine (no memory tuning can bring it nearer the floor than that figure), above
// 100 % by memory. The full-shape rows of the other benches are measured against the same floor, so
// the two compare directly: a measured row can approach min(its ceiling, 100 %), never pass it.
//
// ms = (in-cache ns per element, the op's own per-call cost taken out) x full-shape elements / threads.
import { makeTopk } from './sparse_divergence.bench.mjs';
import { makeLogits, toHalf } from './token_stats.bench.mjs';

export const name = 'computeCeiling';

export default async function run({ rl, quick, h }) {
  const threads = h.threads;
  const isa = rl.backend().isa;
  rl.setNumThreads(1);
  try {
    const reps = quick ? 3 : 7;
    const inner = quick ? 20 : 200;
    // ns per element of fn on `elems` elements, one thread, less the per-call cost (argument checks,
    // N-API, outputs) that `tiny`, the same op on a one-row input, measures
    const perElem = async (fn, tiny, elems) => {
      const loop = (f, n) => () => { for (let i = 0; i < n; i++) f(); };
      // the fastest repetition of each: a lower bound of the cost, as a ceiling should be
      const ovh = (await h.time(loop(tiny, inner * 4), { reps })).min / (inner * 4);
      const t = (await h.time(loop(fn, inner), { reps })).min / inner;
      return (Math.max(0, t - ovh) * 1e6) / elems;
    };
    // projected to the full shape of the op's own bench: `elems` elements (logits or tokens) of `bytesPerElem`
    const logits = { shape: [4096, 151936], elems: 4096 * 151936, unit: 'logit' };
    const row = (op, dtype, ns, bytesPerElem, { shape, elems, unit } = logits) => {
      h.row({
        op: `ceiling: ${op}`, dtype, shape, ms: (ns * elems) / threads / 1e6, bytes: bytesPerElem * elems, elems,
        note: `${isa}: ${ns.toFixed(3)} ns per ${unit} on one thread in L2, x ${threads} threads`,
        nsOneThread: +ns.toFixed(4),
      });
    };
    // rows that stay in a 1 MiB L2 (and far beyond L1, as the kernels' blocks see memory): 512 KiB of
    // float32 for tokenStats, 2 x 320 KiB for divergence
    const tiny = (dtype) => ({ data: dtype === 'float32' ? new Float32Array(16).fill(0.5) : new Uint16Array(16).fill(0x3f00),
      rows: 1, vocab: 16, ...(dtype === 'float32' ? {} : { dtype }) });
    const one = Int32Array.of(3);
    const lg = (R, V, seed, dtype) => {
      const f = makeLogits(R, V, seed).data;
      return { data: dtype === 'float32' ? f : toHalf(f, dtype), rows: R, vocab: V, ...(dtype === 'float32' ? {} : { dtype }) };
    };
    for (const dtype of ['float32', 'bfloat16', 'float16']) {
      const es = dtype === 'float32' ? 4 : 2;
      const L = lg(2, 65536, 1, dtype), tg = Int32Array.of(5, 7);
      const ts = tiny(dtype), tt = tiny(dtype);
      row('tokenStats', dtype, await perElem(() => rl.tokenStats(L, tg), () => rl.tokenStats(ts, one), 2 * 65536), es);
      if (dtype === 'float16') continue;
      const S = lg(2, 40960, 1, dtype), T = lg(2, 40960, 2, dtype);
      row('divergence(reverse_kl)', dtype, await perElem(() => rl.divergence(S, T, { kind: 'reverse_kl' }),
        () => rl.divergence(ts, tt, { kind: 'reverse_kl' }), 2 * 40960), 2 * es);
    }
    // policyLoss (ppo, token-mean) over 32,768 tokens (17 bytes each: 544 KiB), into a reused gradient
    {
      const n = 32768;
      let seed = 5;
      const rnd = () => ((seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 2 ** 32);
      const logprob = new Float32Array(n), oldLogprob = new Float32Array(n), advantages = new Float32Array(n), mask = new Uint8Array(n);
      for (let i = 0; i < n; i++) {
        oldLogprob[i] = -0.05 - rnd() * 3;
        logprob[i] = oldLogprob[i] + (rnd() * 2 - 1) * 0.4;
        advantages[i] = Math.floor(i / 1000) % 2 ? 1.5 : -0.7;
        mask[i] = rnd() < 0.8 ? 1 : 0;
      }
      const offsets = Int32Array.from({ length: 33 }, (_, r) => Math.min(n, r * 1024));
      const args = { logprob, oldLogprob, advantages, offsets, mask, clipHigh: 0.28, agg: 'token-mean', out: new Float32Array(n) };
      const one = { logprob: logprob.subarray(0, 1), oldLogprob: oldLogprob.subarray(0, 1), advantages: advantages.subarray(0, 1),
        offsets: Int32Array.of(0, 1), mask: mask.subarray(0, 1), clipHigh: 0.28, agg: 'token-mean', out: new Float32Array(1) };
      const ns = await perElem(() => rl.policyLoss(args), () => rl.policyLoss(one), n);
      row('policyLoss(ppo, token-mean, out)', 'float32', ns, 17, { shape: [10_000_000], elems: 10_000_000, unit: 'token' });
    }
    // sparse top-20 lists as bench/sparse_divergence makes them: 2,048 tokens (640 KiB of ids and
    // log-probs on both sides) per call
    const N = 2048, K = 20;
    const st = makeTopk(N, K, 2), te = makeTopk(N, K, 3);
    const s1 = makeTopk(1, K, 2), t1 = makeTopk(1, K, 3);
    const ns = await perElem(() => rl.sparseDivergence(st, te, { kind: 'reverse_kl', vocab: 151936 }),
      () => rl.sparseDivergence(s1, t1, { kind: 'reverse_kl', vocab: 151936 }), N);
    row('sparseDivergence(reverse_kl, tail)', 'float32', ns, 2 * K * 8 + 8 * 4, { shape: [1_000_000, K], elems: 1_000_000, unit: 'token' });
  } finally {
    rl.setNumThreads(threads);
  }
}
