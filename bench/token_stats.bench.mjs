// tokenStats (log-prob + entropy + logsumexp in one pass), tokenStatsBackward (with the forward's stats,
// out of place and in place) for float32 / bfloat16 / float16 logits, against this run's memory floor
// and the torch / plain-JS peers of bench/peers (run at a smaller N; both scale linearly
// in N, so their time is scaled to the full shape and reported as ns/logit ratios).
export const name = 'tokenStats';

const BF16 = { float32: 4, bfloat16: 2, float16: 2 };

/** rows x vocab logits: one random row repeated (the data never fits in cache, so that costs nothing). */
export function makeLogits(rows, vocab, seed = 1) {
  let s = seed >>> 0;
  const rnd = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
  const row = new Float32Array(vocab);
  for (let v = 0; v < vocab; v++) row[v] = (rnd() + rnd() + rnd() - 1.5) * 6;
  const data = new Float32Array(rows * vocab);
  data.set(row, 0);
  for (let filled = vocab; filled < data.length; filled *= 2) data.copyWithin(filled, 0, Math.min(filled, data.length - filled));
  const targets = new Int32Array(rows);
  for (let r = 0; r < rows; r++) targets[r] = Math.floor(rnd() * vocab);
  return { data, targets };
}

/** float32 -> bfloat16 (truncation) or float16 (via a small lookup-free conversion) words. */
export function toHalf(f32, dtype) {
  const out = new Uint16Array(f32.length);
  const u = new Uint32Array(f32.buffer, f32.byteOffset, f32.length);
  if (dtype === 'bfloat16') {
    for (let i = 0; i < u.length; i++) out[i] = u[i] >>> 16;
    return out;
  }
  for (let i = 0; i < u.length; i++) {
    const x = u[i];
    const sign = (x >>> 16) & 0x8000;
    const e = ((x >>> 23) & 0xff) - 112;
    const m = (x >>> 13) & 0x3ff;
    out[i] = e <= 0 ? sign : e >= 31 ? sign | 0x7c00 : sign | (e << 10) | m;
  }
  return out;
}

export function peerNsPerLogit(h, tool, op, n, v) {
  // torch: every op in one run; verl's per-row Python loops are skipped (never the fastest formulation)
  const r = tool === 'torch'
    ? h.peer('torch', { op: 'all', n, v, reps: 3, extra: ['--no-verl-loop'] })
    : h.peer('naive', { op, n, v, reps: 3 });
  if (r.error) return undefined;
  if (tool === 'torch') return r.best?.[op]?.ns_per_elem;
  return r.ns_per_elem?.[op];
}

export default async function run({ rl, quick, h }) {
  const shapes = quick ? [[64, 32000], [8, 151936]] : [[4096, 151936], [16384, 32000]];
  const reps = quick ? 3 : 5;
  for (const [N, V] of shapes) {
    const elems = N * V;
    const { data: f32, targets } = makeLogits(N, V);
    const peerN = quick ? Math.min(N, 16) : Math.max(64, Math.round(2 ** 25 / V)); // ~32M logits
    // peers: ns per logit of the same ops (log-prob + entropy ~ tokenStats; logprob backward)
    const peers = {};
    for (const tool of ['torch', 'naive']) {
      const lp = peerNsPerLogit(h, tool, 'logprob', peerN, V);
      const en = peerNsPerLogit(h, tool, 'entropy', peerN, V);
      peers[tool] = { fwd: lp !== undefined && en !== undefined ? lp + en : undefined, bwd: peerNsPerLogit(h, tool, 'logprob_backward', peerN, V) };
    }
    const peerNote = `peers at N=${peerN}, scaled linearly`;
    const best = (k) => {
      const c = ['torch', 'naive'].filter((t) => peers[t][k] !== undefined);
      return c.length ? c.reduce((a, b) => (peers[a][k] <= peers[b][k] ? a : b)) : undefined;
    };
    for (const dtype of ['float32', 'bfloat16', 'float16']) {
      const data = dtype === 'float32' ? f32 : toHalf(f32, dtype);
      const L = { data, rows: N, vocab: V, ...(dtype === 'float32' ? {} : { dtype }) };
      const es = BF16[dtype];
      let t = await h.time(() => rl.tokenStats(L, targets), { reps, localFloor: true });
      let p = dtype === 'float32' ? best('fwd') : undefined;
      h.row({ op: 'tokenStats', dtype, shape: [N, V], ms: t.ms, time: t, bytes: es * elems, peer: p && `${p} logprob+entropy`,
        peerMs: p && (peers[p].fwd * elems) / 1e6, note: p ? peerNote : undefined });
      const stats = rl.tokenStats(L, targets);
      const g = new Float32Array(N).fill(1);
      if (dtype === 'float32') {
        const tAsync = await h.time(() => rl.tokenStatsAsync(L, targets), { reps, localFloor: true });
        h.row({ op: 'tokenStatsAsync', dtype, shape: [N, V], ms: tAsync.ms, time: tAsync, bytes: es * elems });
      }
      let out = new Float32Array(elems);
      t = await h.time(() => rl.tokenStatsBackward(L, targets, { logprob: g, entropy: g }, { stats, out }), { reps, localFloor: true });
      p = dtype === 'float32' ? best('bwd') : undefined;
      h.row({ op: 'tokenStatsBackward(stats)', dtype, shape: [N, V], ms: t.ms, time: t, bytes: (es + 4) * elems,
        peer: p && `${p} logprob_backward`, peerMs: p && (peers[p].bwd * elems) / 1e6, note: p ? peerNote : undefined });
      out = null;
      if (dtype === 'float32') {
        // in place: each rep overwrites the logits with a gradient, which is then the next rep's input
        // (finite, so the work is the same)
        const buf = Float32Array.from(f32);
        t = await h.time(() => rl.tokenStatsBackward({ data: buf, rows: N, vocab: V }, targets, { logprob: g }, { inPlace: true }), { reps, localFloor: true });
        h.row({ op: 'tokenStatsBackward(inPlace)', dtype, shape: [N, V], ms: t.ms, time: t, bytes: 8 * elems, note: 'no stats: forward + backward per row' });
      }
    }
  }
}
