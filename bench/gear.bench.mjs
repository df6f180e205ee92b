// gear (GEAR-proposed reweighting) with divergence and entropy given: target <= 20 ms for 512 x 2048
// tokens on 2 threads, linear in tokens. Compared with the plain GRPO per-token broadcast
// (segmentBroadcast), the cheapest thing gear replaces. Then the full student+teacher path
// (divergence over logits with targets + gear, via gearFromLogits) against divergence alone: the target
// is within 10 % (gear is small next to the vocabulary pass).
export const name = 'gear';

function rng(seed) {
  let s = seed >>> 0 || 1;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

// rows x len tokens; ~8 % masked in tool-output gaps; divergence mostly small with occasional spikes;
// entropy spread over [0, 3) nats; some rows with A = 0 (all-equal groups).
function batch(rows, len, seed = 1) {
  const r = rng(seed);
  const n = rows * len;
  const offsets = Int32Array.from({ length: rows + 1 }, (_, i) => i * len);
  const mask = new Uint8Array(n).fill(1);
  for (let row = 0; row < rows; row++) {
    const gap = Math.floor(r() * (len - 200));
    mask.fill(0, row * len + gap, row * len + gap + 160);
  }
  const divergence = new Float32Array(n);
  const entropy = new Float32Array(n);
  const logratio = new Float32Array(n);
  for (let t = 0; t < n; t++) {
    const u = r();
    divergence[t] = u < 0.01 ? 1 + r() * 8 : r() * r() * 0.4;
    entropy[t] = r() < 0.8 ? r() * 0.6 : 0.6 + r() * 2.4;
    logratio[t] = (r() - 0.5) * 2;
  }
  const advantages = Float64Array.from({ length: rows }, (_, i) => (i % 8 === 7 ? 0 : r() * 2 - 1));
  return { advantages, offsets, mask, divergence, entropy, logratio, n };
}

function logits(rows, vocab, seed) {
  const r = rng(seed);
  const data = new Float32Array(rows * vocab);
  for (let i = 0; i < data.length; i++) data[i] = (r() - 0.5) * 8;
  return { data, rows, vocab };
}

export default async function run({ rl, quick, h }) {
  const reps = quick ? 3 : 9;
  const len = 2048;
  const sizes = quick ? [64, 256, 512] : [128, 256, 512, 1024];
  // Bytes a streaming pass must at least touch per token: read D, H, mask; write advantages, weights, segment ids.
  const BYTES = 4 + 4 + 1 + 4 + 4 + 4;
  for (const rows of sizes) {
    const b = batch(rows, len, rows);
    const { n, ...input } = b;
    const t = await h.time(() => rl.gear(input), { reps });
    const g = await h.time(() => rl.segmentBroadcast(b.advantages, b.offsets, b.mask), { reps });
    const d = rl.gear(input).diagnostics;
    h.row({
      op: 'gear', dtype: 'float32', shape: [rows, len], ms: t.ms, bytes: n * BYTES, peer: 'GRPO segmentBroadcast', peerMs: g.ms,
      note: `${(n / t.ms / 1e3).toFixed(1)} Mtok/s, ${d.segments} segments, mean len ${d.meanSegmentLength.toFixed(1)}`,
    });
  }

  // Option variants at 512 x 2048 (1M tokens).
  const b = batch(512, len, 512);
  const { n, ...input } = b;
  // Caller-owned outputs, reused across steps as a training loop would: no allocation, no first-touch faults.
  const out = { advantages: new Float32Array(n), weights: new Float32Array(n), segmentId: new Int32Array(n) };
  const tOut = await h.time(() => rl.gear({ ...input, out }), { reps });
  h.row({ op: 'gear', dtype: 'float32', shape: [512, len], ms: tOut.ms, bytes: n * BYTES, note: 'defaults, reused out buffers' });
  const variants = [
    ['quantile peaks + entropy_settles', { peakRule: 'quantile', segmentEnd: 'entropy_settles' }],
    ['rlsd sign mode', { signMode: 'rlsd' }],
    ['random_anchors ablation', { ablation: 'random_anchors' }],
    ['fixed_length ablation (auto length)', { ablation: 'fixed_length' }],
  ];
  for (const [label, options] of variants) {
    const t = await h.time(() => rl.gear({ ...input, options }), { reps });
    h.row({ op: 'gear', dtype: 'float32', shape: [512, len], ms: t.ms, bytes: n * BYTES, note: label });
  }

  // Full student + teacher path vs divergence alone, at a moderate shape.
  const [N, V] = quick ? [512, 8192] : [2048, 16384];
  const rowsL = N / 256;
  const student = logits(N, V, 11);
  const teacher = logits(N, V, 12);
  for (let i = 0; i < teacher.data.length; i++) teacher.data[i] = student.data[i] + teacher.data[i] * 0.1;
  const r = rng(5);
  const targets = Int32Array.from({ length: N }, () => Math.floor(r() * V));
  const offsets = Int32Array.from({ length: rowsL + 1 }, (_, i) => i * 256);
  const advantages = Float64Array.from({ length: rowsL }, () => r() * 2 - 1);
  // More repetitions here: the difference being measured is a few percent of one divergence pass.
  const repsL = quick ? 15 : 21;
  const dOnly = await h.time(() => rl.divergence(student, teacher, { targets, klCap: 20 }), { reps: repsL, warmup: 2 });
  h.row({ op: 'divergence (reverse_kl, targets)', dtype: 'float32', shape: [N, V], ms: dOnly.ms, bytes: 2 * N * V * 4 });
  const full = await h.time(() => rl.gearFromLogits({ student, teacher, targets, advantages, offsets }), { reps: repsL, warmup: 2 });
  h.row({
    op: 'gearFromLogits (divergence + gear)', dtype: 'float32', shape: [N, V], ms: full.ms, bytes: 2 * N * V * 4,
    peer: 'divergence alone', peerMs: dOnly.ms, note: `overhead ${(((full.ms - dOnly.ms) / dOnly.ms) * 100).toFixed(1)} % (target <= 10 %)`,
  });
}
