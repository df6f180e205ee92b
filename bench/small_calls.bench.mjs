// The cost of one small call, where the work is tiny and argument reading, checking and the trip into
// the addon dominate: tokenStats on 8 x 32,768 logits, its backward, a reverse-KL divergence, and a
// 10^4-token policyLoss (ppo). Each repetition times a loop of calls; the row is the median per call.
import { packedRows } from './lib/packed.mjs';
export const name = 'smallCalls';

export default async function run({ rl, quick, h }) {
  const reps = quick ? 3 : 9;
  const calls = quick ? 200 : 2000;
  const perCall = async (fn) => {
    const t = await h.time(() => {
      for (let i = 0; i < calls; i++) fn();
    }, { reps });
    return t.ms / calls;
  };
  const rows = 8, vocab = 32768;
  const z = Float32Array.from({ length: rows * vocab }, (_, i) => Math.sin(i * 0.61) * 4);
  const zt = Float32Array.from({ length: rows * vocab }, (_, i) => Math.cos(i * 0.37) * 3);
  const logits = { data: z, rows, vocab }, teacher = { data: zt, rows, vocab };
  const targets = Int32Array.from({ length: rows }, (_, r) => r * 97);
  const shape = [rows, vocab];
  const stats = rl.tokenStats(logits, targets);
  const grad = { logprob: new Float32Array(rows).fill(1) };
  const out = new Float32Array(rows * vocab);
  let ms = await perCall(() => rl.tokenStats(logits, targets));
  h.row({ op: 'tokenStats per call', dtype: 'float32', shape, ms, bytes: rows * vocab * 4, note: `${calls} calls per repetition` });
  ms = await perCall(() => rl.tokenStatsBackward(logits, targets, grad, { stats, out }));
  h.row({ op: 'tokenStatsBackward per call (stats, out)', dtype: 'float32', shape, ms, bytes: rows * vocab * 8 });
  ms = await perCall(() => rl.divergence(logits, teacher, { targets }));
  h.row({ op: 'divergence reverse KL per call', dtype: 'float32', shape, ms, bytes: rows * vocab * 8 });

  const { offsets, rows: R, n, rnd } = packedRows(10_000, 3);
  const logprob = new Float32Array(n), oldLogprob = new Float32Array(n), advantages = new Float32Array(n);
  const mask = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    oldLogprob[i] = -0.05 - rnd() * 3;
    logprob[i] = oldLogprob[i] + (rnd() * 2 - 1) * 0.4;
    advantages[i] = rnd() * 4 - 2;
    mask[i] = rnd() < 0.8 ? 1 : 0;
  }
  const args = { logprob, oldLogprob, advantages, offsets, mask, kind: 'ppo', clipLow: 0.2, clipHigh: 0.28, agg: 'token-mean' };
  ms = await perCall(() => rl.policyLoss(args));
  h.row({ op: 'policyLoss(ppo) per call', dtype: 'float32', shape: [n], ms, bytes: n * 17, note: `${R} rows` });
}
