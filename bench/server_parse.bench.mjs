// Parsing inference-server responses (JSON already parsed) into the packed rollout layout: per-token
// log-probs, ids and top-20 alternatives, then packServerRollouts. 10^6 tokens in 1000 responses of 1000
// tokens, top-20 at every position, in three formats: SGLang tuples, llama.cpp objects with ids, and
// OpenAI-compatible chat entries with vLLM's token_id:N strings. Target: parse + pack <= 200 ms for
// 10^6 tokens (the time that rollouts of this size spend in JS, not on the server).
// The library's seeded PRNG (mulberry32), from the build the harness loads.
import { mulberry32 as prng } from '../dist/core/prng.js';

export const name = 'server_parse';

/** Per position: sampled id, its log-prob, and K alternatives (ids, log-probs sorted descending). */
function positions(n, K, rnd) {
  const out = new Array(n);
  for (let i = 0; i < n; i++) {
    const ids = new Array(K);
    const lps = new Array(K);
    let lp = -rnd() * 0.5;
    for (let j = 0; j < K; j++) {
      ids[j] = Math.floor(rnd() * 150000);
      lps[j] = lp;
      lp -= rnd() * 0.7;
    }
    out[i] = { id: ids[0], lp: lps[0], ids, lps };
  }
  return out;
}

function sglang(pos) {
  return {
    text: '',
    meta_info: {
      output_token_logprobs: pos.map((p) => [p.lp, p.id, null]),
      output_top_logprobs: pos.map((p) => p.ids.map((id, j) => [p.lps[j], id, null])),
    },
  };
}

function llamacpp(pos) {
  return {
    content: '', stop: true,
    completion_probabilities: pos.map((p) => ({
      id: p.id, token: 'x', logprob: p.lp, bytes: [120],
      top_logprobs: p.ids.map((id, j) => ({ id, token: 'x', logprob: p.lps[j], bytes: [120] })),
    })),
  };
}

function vllmChat(pos) {
  return {
    object: 'chat.completion',
    choices: [{
      index: 0, message: { role: 'assistant', content: '' }, token_ids: pos.map((p) => p.id),
      logprobs: { content: pos.map((p) => ({
        token: `token_id:${p.id}`, logprob: p.lp, bytes: [120],
        top_logprobs: p.ids.map((id, j) => ({ token: `token_id:${id}`, logprob: p.lps[j], bytes: [120] })),
      })) },
    }],
  };
}

export default async function run({ rl, quick, h }) {
  const N = quick ? 100_000 : 1_000_000;
  const L = 1000; // tokens per response
  const K = 20;
  const R = N / L;
  const reps = quick ? 3 : 5;
  const formats = [
    ['sglang', sglang, (r) => rl.parseSglang(r)[0]],
    ['llama.cpp', llamacpp, (r) => rl.parseLlamaCpp(r)[0]],
    ['openai+vllm ids', vllmChat, (r) => rl.parseVllm(r)[0]],
  ];
  for (const [fmt, make, parse] of formats) {
    const rnd = prng(7);
    let responses = [];
    // through JSON text, so that strings and numbers are laid out as JSON.parse leaves them
    for (let r = 0; r < R; r++) responses.push(JSON.parse(JSON.stringify(make(positions(L, K, rnd)))));
    const pack = (seqs) => rl.packServerRollouts({
      trajectories: seqs.map((s, i) => ({ group: i >> 3, turns: [{ role: 'assistant', response: s, reward: i & 1 }] })),
    });
    let t = await h.time(() => responses.map(parse), { reps });
    h.row({ op: `parse(${fmt})`, dtype: 'json', shape: [N, K], ms: t.ms, elems: N, note: `${R} responses x ${L} tokens, top-${K}` });
    const seqs = responses.map(parse);
    t = await h.time(() => pack(seqs), { reps });
    h.row({ op: 'packServerRollouts', dtype: 'float32', shape: [N, K], ms: t.ms, elems: N, note: `${R} rows, conversation layout` });
    t = await h.time(() => pack(responses.map(parse)), { reps });
    h.row({ op: `parse+pack(${fmt})`, dtype: 'json', shape: [N, K], ms: t.ms, elems: N, note: 'target <= 200 ms for 10^6 tokens' });
    responses = null;
  }
}
