// divergence on masked logits (top-k / top-p filtered, or a padded vocabulary: -Infinity in every block
// of 2048), which takes the kernels' masked pass instead of the mask-free one, against this run's
// memory floor.
import { makeLogits } from './token_stats.bench.mjs';

export const name = 'divergence-masked';

export default async function run({ rl, quick, h }) {
  const [N, V] = quick ? [64, 32000] : [1024, 151936];
  const reps = quick ? 3 : 5;
  const s = makeLogits(N, V, 1).data, t = makeLogits(N, V, 2).data;
  for (let i = 5; i < s.length; i += 16) s[i] = t[i] = -Infinity; // the same entries on both sides: finite KLs
  const S = { data: s, rows: N, vocab: V }, T = { data: t, rows: N, vocab: V };
  for (const kind of ['reverse_kl', 'forward_kl']) {
    const r = await h.time(() => rl.divergence(S, T, { kind }), { reps, localFloor: true });
    h.row({ op: `divergence(${kind}), every 16th entry -Infinity`, dtype: 'float32', shape: [N, V], ms: r.ms, time: r, bytes: 8 * N * V });
  }
}
