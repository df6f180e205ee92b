// divergence (reverse / forward KL and JSD with student entropy and both logsumexps, one pass over both
// arrays) and divergenceBackward (reverse KL, with the forward's stats) against this run's memory floor
// and the torch / plain-JS peers at a smaller N (scaled linearly).
import { makeLogits, peerNsPerLogit, toHalf } from './token_stats.bench.mjs';

export const name = 'divergence';

export default async function run({ rl, quick, h }) {
  const shapes = quick ? [[64, 32000], [8, 151936]] : [[4096, 151936], [16384, 32000]];
  const reps = quick ? 3 : 5;
  for (const [N, V] of shapes) {
    const elems = N * V;
    // float32 first; the 16-bit copies are made from them afterwards and the float32 arrays dropped
    // before the 16-bit runs allocate their outputs (peak ~3 x 4NV bytes at the Qwen shape).
    let s32 = makeLogits(N, V, 1).data;
    let t32 = makeLogits(N, V, 2).data;
    const peerN = quick ? Math.min(N, 16) : Math.max(64, Math.round(2 ** 25 / V));
    const peer = {};
    for (const tool of ['torch', 'naive']) {
      peer[tool] = { rkl: peerNsPerLogit(h, tool, 'rkl', peerN, V), bwd: tool === 'torch' ? peerNsPerLogit(h, tool, 'rkl_backward', peerN, V) : undefined };
    }
    const best = (k) => {
      const c = ['torch', 'naive'].filter((t) => peer[t][k] !== undefined);
      return c.length ? c.reduce((a, b) => (peer[a][k] <= peer[b][k] ? a : b)) : undefined;
    };
    const note = `peers at N=${peerN}, scaled linearly`;
    for (const dtype of ['float32', 'bfloat16']) {
      const es = dtype === 'float32' ? 4 : 2;
      const S = dtype === 'float32' ? { data: s32, rows: N, vocab: V } : { data: toHalf(s32, dtype), rows: N, vocab: V, dtype };
      const T = dtype === 'float32' ? { data: t32, rows: N, vocab: V } : { data: toHalf(t32, dtype), rows: N, vocab: V, dtype };
      if (dtype !== 'float32') {
        s32 = null;
        t32 = null;
        if (globalThis.gc) globalThis.gc();
      }
      for (const kind of ['reverse_kl', 'forward_kl', 'jsd']) {
        if (kind !== 'reverse_kl' && !quick && dtype !== 'float32') continue;
        const t = await h.time(() => rl.divergence(S, T, { kind }), { reps, localFloor: true });
        const p = kind === 'reverse_kl' && dtype === 'float32' ? best('rkl') : undefined;
        h.row({ op: `divergence(${kind})`, dtype, shape: [N, V], ms: t.ms, time: t, bytes: 2 * es * elems,
          peer: p && `${p} rkl`, peerMs: p && (peer[p].rkl * elems) / 1e6, note: p ? note : kind === 'jsd' ? 'two passes per row' : undefined });
      }
      const stats = rl.divergence(S, T, { kind: 'reverse_kl' });
      const g = new Float32Array(N).fill(1);
      const out = new Float32Array(elems);
      const t = await h.time(() => rl.divergenceBackward(S, T, g, { stats, out }), { reps, localFloor: true });
      const p = dtype === 'float32' ? best('bwd') : undefined;
      h.row({ op: 'divergenceBackward(reverse_kl, stats)', dtype, shape: [N, V], ms: t.ms, time: t, bytes: (2 * es + 4) * elems,
        peer: p && `${p} rkl_backward`, peerMs: p && (peer[p].bwd * elems) / 1e6, note: p ? note : undefined });
    }
  }
}
