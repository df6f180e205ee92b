// sparseDivergence (server top-k log-probs, both sides' own lists, tail bucket) and its backward against
// this run's memory floor: the op reads ids (int32) and log-probs (float32) of both sides once and writes
// eight per-token outputs (value, two tails, two shared masses, the shared count, two entropy bounds).
export const name = 'sparse_divergence';

/**
 * n tokens of top-k lists as a server returns them: ids drawn from a 151936-id vocabulary, sorted
 * log-probs of a random distribution (tail mass ~ 5-30%); the teacher shares about half of the student's ids.
 */
export function makeTopk(n, k, seed) {
  let s = seed >>> 0;
  const r = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
  const ids = new Int32Array(n * k), logprobs = new Float32Array(n * k);
  const w = new Float64Array(k);
  for (let t = 0; t < n; t++) {
    let sum = 0;
    for (let j = 0; j < k; j++) sum += (w[j] = Math.exp(-j * (0.2 + r())));
    const mass = 0.7 + 0.25 * r();
    // the base id depends on the token only, so both sides list ids around the same place
    const base = (Math.imul(t + 1, 2654435761) >>> 0) % 150000;
    for (let j = 0; j < k; j++) {
      // ids base + j*3 (+1 on an odd seed's odd entries): the even seed's student and the odd seed's
      // teacher share the even entries, half of each list
      ids[t * k + j] = base + 3 * j + (seed % 2 === 1 && j % 2 === 1 ? 1 : 0);
      logprobs[t * k + j] = Math.log((mass * w[j]) / sum);
    }
  }
  return { ids, logprobs, k };
}

export default async function run({ rl, quick, h }) {
  const shapes = quick ? [[50_000, 20]] : [[1_000_000, 20], [1_000_000, 5]];
  const reps = quick ? 3 : 5;
  for (const [N, K] of shapes) {
    const S = makeTopk(N, K, 2), T = makeTopk(N, K, 3);
    const read = 2 * N * K * 8;  // ids + log-probs, both sides
    for (const kind of ['reverse_kl', 'jsd']) {
      const t = await h.time(() => rl.sparseDivergence(S, T, { kind, vocab: 151936 }), { reps, localFloor: true });
      h.row({ op: `sparseDivergence(${kind}, tail)`, dtype: 'float32', shape: [N, K], ms: t.ms, time: t, bytes: read + N * 8 * 4, elems: N });
    }
    const g = new Float32Array(N).fill(1);
    const t = await h.time(() => rl.sparseDivergenceBackward(S, T, g, { kind: 'reverse_kl' }), { reps, localFloor: true });
    h.row({ op: 'sparseDivergenceBackward(reverse_kl, tail)', dtype: 'float32', shape: [N, K], ms: t.ms, time: t, bytes: read + N * 4 + N * K * 4, elems: N });
  }
}
