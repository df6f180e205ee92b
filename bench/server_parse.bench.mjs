// Parsing inference-server responses (JSON already parsed) into the packed rollout layout: per-token
// log-probs, ids and top-20 alternatives, then packServerRollouts. 10^6 tokens in 1000 responses of 1000
// tokens, top-20 at every position, in three formats: SGLang tuples, llama.cpp objects with ids, and
// OpenAI-compatible chat entries with vLLM's token_id:N strings. Target: parse + pack <= 200 ms for
// 10^6 tokens (the time that rollouts of this size spend in JS, not on the server).
//
// The floor of this bench is not memory bandwidth but the walk over the parsed JSON itself: 2.1e7
// small JS arrays or objects (about 1.8 GB of V8 heap for SGLang tuples), measured in the same run by
// reading every field a parser must read, once, without checks or writes ("heap walk"). Two regimes:
// one-shot (fresh buffers, what a single call costs) and steady state (a parse arena and `out`
// reused from the previous step, what a training loop pays per step). The walk and the steady-state
// rows run back to back without the harness's forced collection between repetitions: right after a
// full GC of this heap, the next walk over it takes about twice as long (a one-off script: 334 against 172 ms),
// a cost that a loop with an arena, which triggers no collection, does not pay.
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

/** Reads every field a parser reads, once: the same-run floor of each format. */
const walks = {
  sglang(responses) {
    let s = 0;
    for (const r of responses) {
      const m = r.meta_info, a = m.output_token_logprobs, b = m.output_top_logprobs;
      for (let i = 0; i < a.length; i++) {
        s += a[i][0] + a[i][1];
        const row = b[i];
        for (let j = 0; j < row.length; j++) s += row[j][0] + row[j][1];
      }
    }
    return s;
  },
  'llama.cpp'(responses) {
    let s = 0;
    for (const r of responses) {
      const a = r.completion_probabilities;
      for (let i = 0; i < a.length; i++) {
        const e = a[i];
        s += e.id + e.logprob;
        const row = e.top_logprobs;
        for (let j = 0; j < row.length; j++) s += row[j].id + row[j].logprob;
      }
    }
    return s;
  },
  'openai+vllm ids'(responses) {
    let s = 0;
    for (const r of responses) {
      const c = r.choices[0], ids = c.token_ids, a = c.logprobs.content;
      for (let i = 0; i < a.length; i++) {
        const e = a[i];
        s += ids[i] + e.logprob + e.token.length;
        const row = e.top_logprobs;
        for (let j = 0; j < row.length; j++) s += row[j].logprob + row[j].token.length;
      }
    }
    return s;
  },
};

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
    ['sglang', sglang, (r, o) => rl.parseSglang(r, o)[0]],
    ['llama.cpp', llamacpp, (r, o) => rl.parseLlamaCpp(r, o)[0]],
    ['openai+vllm ids', vllmChat, (r, o) => rl.parseVllm(r, o)[0]],
  ];
  for (const [fmt, make, parse] of formats) {
    const rnd = prng(7);
    let responses = [];
    // through JSON text, so that strings and numbers are laid out as JSON.parse leaves them
    for (let r = 0; r < R; r++) responses.push(JSON.parse(JSON.stringify(make(positions(L, K, rnd)))));
    const note = `${R} responses x ${L} tokens, top-${K}`;
    const trajectories = (seqs) => seqs.map((s, i) => ({ group: i >> 3, turns: [{ role: 'assistant', response: s, reward: i & 1 }] }));
    let t = await h.time(() => walks[fmt](responses), { reps, gc: false });
    const floorMs = t.ms;
    h.row({ op: `heap walk(${fmt})`, dtype: 'json', shape: [N, K], ms: t.ms, elems: N, note: 'same-run floor: every field read once, no checks, no writes' });
    const vsWalk = (ms) => `${(ms / floorMs).toFixed(2)}x the heap walk`;

    // one-shot: fresh buffers for every sequence and for the batch
    t = await h.time(() => responses.map((r) => parse(r)), { reps });
    h.row({ op: `parse(${fmt})`, dtype: 'json', shape: [N, K], ms: t.ms, elems: N, note: `one-shot, ${note}; ${vsWalk(t.ms)}` });
    let seqs = responses.map((r) => parse(r));
    t = await h.time(() => rl.packServerRollouts({ trajectories: trajectories(seqs) }), { reps });
    h.row({ op: 'packServerRollouts', dtype: 'float32', shape: [N, K], ms: t.ms, elems: N, note: `one-shot, ${R} rows, conversation layout` });
    seqs = null;
    t = await h.time(() => rl.packServerRollouts({ trajectories: trajectories(responses.map((r) => parse(r))) }), { reps });
    h.row({ op: `parse+pack(${fmt})`, dtype: 'json', shape: [N, K], ms: t.ms, elems: N, note: `one-shot; ${vsWalk(t.ms)}; target <= 200 ms` });

    // steady state: the arena and the batch of the previous step are reused (h.time's warm-up call
    // is that previous step)
    const arena = rl.createParseArena();
    let out;
    const parseStep = () => {
      arena.reset();
      return responses.map((r) => parse(r, { arena }));
    };
    t = await h.time(() => parseStep(), { reps, gc: false });
    h.row({ op: `parse(${fmt}, arena)`, dtype: 'json', shape: [N, K], ms: t.ms, elems: N, note: `steady state; ${vsWalk(t.ms)}` });
    seqs = parseStep();
    t = await h.time(() => (out = rl.packServerRollouts({ trajectories: trajectories(seqs), out })), { reps, gc: false });
    h.row({ op: 'packServerRollouts(out)', dtype: 'float32', shape: [N, K], ms: t.ms, elems: N, note: 'steady state' });
    seqs = null;
    t = await h.time(() => (out = rl.packServerRollouts({ trajectories: trajectories(parseStep()), out })), { reps, gc: false });
    h.row({ op: `parse+pack(${fmt}, arena, out)`, dtype: 'json', shape: [N, K], ms: t.ms, elems: N, note: `steady state; ${vsWalk(t.ms)}; target <= 200 ms` });
    arena.release();
    out = null;
    responses = null;
    globalThis.gc?.();
  }
}
