// GEAR from server log-probs alone: the student's rollout responses (sampled-token log-prob and top-20
// per position) and the teacher's prompt-log-prob responses on the same tokens (the chosen token's
// log-prob only: what the log-ratio signal needs), parsed, packed and fed to one gearFromSparse call with
// anchorSignal 'logratio'. 10^6 tokens in 1000 responses of 1000 tokens, in two formats: SGLang
// (/generate output tuples; the teacher's input_token_logprobs) and vLLM (OpenAI chat with token_id:N
// strings; the teacher's prompt_logprobs maps with prompt_token_ids).
//
// The floor, as in server_parse.bench.mjs, is the walk over the parsed JSON of both sides, measured in
// the same run: every field a parser must read, once, with no checks and no writes. Steady state only
// (a parse arena and the previous step's batch reused): what a training loop pays per step.
import { mulberry32 as prng } from '../dist/core/prng.js';

export const name = 'server_gear';

/** Per position: sampled id, its log-prob, K alternatives (ids, log-probs sorted descending), the teacher's log-prob of the sampled id. */
function positions(n, K, rnd) {
  const out = new Array(n);
  for (let i = 0; i < n; i++) {
    // a real distribution: the top-K take 90-100 % of the mass, geometrically decreasing
    const ids = new Array(K);
    const lps = new Array(K);
    const a = 0.2 + rnd(), mass = 0.9 + 0.1 * rnd();
    let z = 0;
    for (let j = 0; j < K; j++) z += Math.exp(-a * j);
    // K distinct ids: a random start and stride (coprime with the vocabulary size)
    const start = Math.floor(rnd() * 150000), stride = 1 + 2 * Math.floor(rnd() * 1000);
    for (let j = 0; j < K; j++) {
      ids[j] = (start + j * stride) % 150001;
      lps[j] = Math.log(mass / z) - a * j;
    }
    // the teacher mostly agrees; one token in 50 it disbelieves
    const t = rnd() < 0.02 ? lps[0] - 2 - 6 * rnd() : lps[0] - 0.2 * (rnd() - 0.5);
    out[i] = { id: ids[0], lp: lps[0], ids, lps, t: Math.min(t, 0) };
  }
  return out;
}

const PROMPT = [151644, 872, 198];

const formats = {
  sglang: {
    student: (pos) => ({ text: '', meta_info: {
      output_token_logprobs: pos.map((p) => [p.lp, p.id, null]),
      output_top_logprobs: pos.map((p) => p.ids.map((id, j) => [p.lps[j], id, null])),
    } }),
    // logprob_start_len at the first response token: one tuple per scored position
    teacher: (pos) => ({ text: '', meta_info: { input_token_logprobs: pos.map((p) => [p.t, p.id, null]), output_token_logprobs: [[-0.1, 13, null]] } }),
    parseStudent: (rl, r, o) => rl.parseSglang(r, o)[0],
    parseTeacher: (rl, r, o, len) => rl.parseSglangInputLogprobs(r, { ...o, length: len }),
    walk(students, teachers) {
      let s = 0;
      for (const r of students) {
        const m = r.meta_info, a = m.output_token_logprobs, b = m.output_top_logprobs;
        for (let i = 0; i < a.length; i++) {
          s += a[i][0] + a[i][1];
          const row = b[i];
          for (let j = 0; j < row.length; j++) s += row[j][0] + row[j][1];
        }
      }
      for (const r of teachers) {
        const a = r.meta_info.input_token_logprobs;
        for (let i = 0; i < a.length; i++) s += a[i][0] + a[i][1];
      }
      return s;
    },
  },
  vllm: {
    student: (pos) => ({ object: 'chat.completion', choices: [{
      index: 0, message: { role: 'assistant', content: '' }, token_ids: pos.map((p) => p.id),
      logprobs: { content: pos.map((p) => ({
        token: `token_id:${p.id}`, logprob: p.lp, bytes: [120],
        top_logprobs: p.ids.map((id, j) => ({ token: `token_id:${id}`, logprob: p.lps[j], bytes: [120] })),
      })) },
    }] }),
    // /v1/completions with prompt_logprobs: 0 (the prompt token's entry only), prompt_token_ids
    teacher: (pos) => ({ choices: [{ index: 0, text: '', token_ids: [13],
      prompt_token_ids: [...PROMPT, ...pos.map((p) => p.id)],
      prompt_logprobs: [null, ...PROMPT.slice(1).map((id) => ({ [id]: { logprob: -1, rank: 1 } })),
        ...pos.map((p) => ({ [p.id]: { logprob: p.t, rank: 1, decoded_token: 'x' } }))] }] }),
    parseStudent: (rl, r, o) => rl.parseVllm(r, o)[0],
    parseTeacher: (rl, r, o, len) => rl.parseVllmPromptLogprobs(r, { ...o, length: len }),
    walk(students, teachers) {
      let s = 0;
      for (const r of students) {
        const c = r.choices[0], ids = c.token_ids, a = c.logprobs.content;
        for (let i = 0; i < a.length; i++) {
          const e = a[i];
          s += ids[i] + e.logprob + e.token.length;
          const row = e.top_logprobs;
          for (let j = 0; j < row.length; j++) s += row[j].logprob + row[j].token.length;
        }
      }
      for (const r of teachers) {
        const c = r.choices[0], ids = c.prompt_token_ids, rows = c.prompt_logprobs;
        for (let i = 1; i < rows.length; i++) for (const key in rows[i]) s += key.length + rows[i][key].logprob + ids[i];
      }
      return s;
    },
  },
};

export default async function run({ rl, quick, h }) {
  const N = quick ? 100_000 : 1_000_000;
  const L = 1000; // tokens per response
  const K = 20;
  const R = N / L;
  const reps = quick ? 3 : 5;
  const mode = { kind: 'raw' };
  for (const [fmt, f] of Object.entries(formats)) {
    const rnd = prng(11);
    let students = [], teachers = [];
    // through JSON text, so that strings and numbers are laid out as JSON.parse leaves them
    for (let r = 0; r < R; r++) {
      const pos = positions(L, K, rnd);
      students.push(JSON.parse(JSON.stringify(f.student(pos))));
      teachers.push(JSON.parse(JSON.stringify(f.teacher(pos))));
    }
    const note = `${R} responses x ${L} tokens, student top-${K}, teacher chosen log-prob`;
    let t = await h.time(() => f.walk(students, teachers), { reps, gc: false });
    const floorMs = t.ms;
    h.row({ op: `heap walk(${fmt}, student + teacher)`, dtype: 'json', shape: [N, K], ms: t.ms, elems: N, note: 'same-run floor: every field read once, no checks, no writes' });
    const vsWalk = (ms) => `${(ms / floorMs).toFixed(2)}x the heap walk`;

    const arena = rl.createParseArena();
    let out;
    const packStep = () => {
      arena.reset();
      const trajectories = students.map((r, i) => {
        const s = f.parseStudent(rl, r, { arena, mode });
        return { group: i >> 3, episodeReward: i & 1, turns: [{ role: 'assistant', response: s, teacher: f.parseTeacher(rl, teachers[i], { arena, topLogprobs: false }, L) }] };
      });
      return (out = rl.packServerRollouts({ trajectories, out }));
    };
    // the previous step's result passed back as `out`: its arrays are written again, nothing large allocated
    let prev;
    const gearStep = (b) => (prev = rl.gearFromSparse({
      student: b.topK, studentLogprob: b.logprobs, teacherLogprob: b.teacherLogprobs, offsets: b.offsets, mask: b.mask,
      advantages: rl.grpo({ rewards: b.episodeRewards, groups: b.groupIndex }),
      modes: { student: b.logprobMode, teacher: b.teacherLogprobMode }, options: { anchorSignal: 'logratio' }, out: prev,
    }));
    t = await h.time(() => packStep(), { reps, gc: false });
    h.row({ op: `parse+pack(${fmt}, student + teacher, arena, out)`, dtype: 'json', shape: [N, K], ms: t.ms, elems: N, note: `steady state, ${note}; ${vsWalk(t.ms)}` });
    const batch = packStep();
    t = await h.time(() => gearStep(batch), { reps, gc: false });
    const g = gearStep(batch);
    h.row({ op: "gearFromSparse(anchorSignal 'logratio')", dtype: 'float32', shape: [N, K], ms: t.ms, elems: N,
      note: `no teacher top-k: the student's sparse pass (entropy bound) + the scan, the previous result as out; ${g.diagnostics.peaks} anchors; ${vsWalk(t.ms)}` });
    t = await h.time(() => gearStep(packStep()), { reps, gc: false });
    h.row({ op: `parse+pack+GEAR(${fmt})`, dtype: 'json', shape: [N, K], ms: t.ms, elems: N, note: `steady state (arena, out, previous result); ${vsWalk(t.ms)}` });
    arena.release();
    out = prev = null;
    students = teachers = null;
    globalThis.gc?.();
  }
}
