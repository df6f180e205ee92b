/**
 * GEAR from server log-probs alone: no logits, no teacher top-k. The student's sampled-token log-probs
 * and top-k come with the rollout; the teacher's log-probs of the same tokens come from one prompt-log-prob
 * request on the answer-conditioned prompt (built with `teacherInput`); `gearFromSparse` with
 * `anchorSignal: 'logratio'` does the rest in one call.
 *
 *     node dist-examples/gear-from-server.js [--json]
 *
 * The requests are the JSON bodies a user POSTs to SGLang's `/generate` (the vLLM and OpenAI-style
 * equivalents are printed next to them). So that the example runs offline, `answer` below stands in for
 * the server: a toy model that answers those bodies with the JSON an SGLang server returns (it knows
 * that 2 + 2 is 4 only when the reference is in its prompt). Swap it for `fetch(url, { method: 'POST',
 * body: JSON.stringify(req) }).then((r) => r.json())` against a real server.
 *
 * Which log-probs the server returns decides whether the log-ratio is right (docs/server.md): sample at
 * temperature 1 with top-k and top-p off (then SGLang's output log-probs and its input log-probs are both
 * raw log-probs at T = 1), and state that mode when parsing: `gearFromSparse` refuses to mix modes.
 *
 * @module
 */
import * as rl from 'gear-rl';

// ---- the toy vocabulary and tokenizer ----
const VOCAB = ['<s>', 'User', ':', 'What', 'is', '2', '+', '?', 'Assistant', 'The', 'answer', '3', '4', '5', '.', 'Reference', '</s>'];
const id = (w: string) => VOCAB.indexOf(w);
const encode = (text: string) => text.split(' ').filter(Boolean).map((w) => { const i = id(w); if (i < 0) throw new Error(`unknown word ${w}`); return i; });

// ---- the stand-in for the server: a toy model behind SGLang's /generate JSON ----
/** Next-token log-probs of the toy model after `ctx`: a fixed grammar; the answer digit is 4 with the reference in view. */
function nextLogprobs(ctx: number[]): Float64Array {
  const p = new Float64Array(VOCAB.length).fill(0.002);
  const last = ctx[ctx.length - 1]!;
  const want = (w: string, q: number) => { p[id(w)] = q; };
  if (last === id(':') && ctx[ctx.length - 2] === id('Assistant')) want('The', 0.9);
  else if (last === id('The')) want('answer', 0.9);
  else if (last === id('answer')) want('is', 0.9);
  else if (last === id('is') && ctx.includes(id('Assistant'))) {
    const r = ctx.indexOf(id('Reference'));
    if (r >= 0) { want('4', 0.85); want('3', 0.03); want('5', 0.03); } else { want('3', 0.3); want('4', 0.35); want('5', 0.25); }
  } else if ([id('3'), id('4'), id('5')].includes(last)) want('.', 0.9);
  else if (last === id('.')) want('</s>', 0.9);
  const z = p.reduce((a, b) => a + b, 0);
  return p.map((x) => Math.log(x / z));
}

/** A seeded uniform generator (mulberry32). */
function uniform(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** SGLang's `[logprob, id, text]` top list of a distribution. */
const topList = (lp: Float64Array, k: number) => Array.from(lp.keys()).sort((a, b) => lp[b]! - lp[a]!).slice(0, k).map((i) => [lp[i]!, i, null]);

interface GenerateRequest {
  input_ids: number[];
  sampling_params: { temperature: number; top_p: number; top_k: number; max_new_tokens: number };
  return_logprob: boolean; top_logprobs_num: number; logprob_start_len: number;
}
/** The toy server: samples at temperature 1 (the example's requests ask for nothing else) and reports raw log-probs. */
function answer(req: GenerateRequest, seed: number): unknown {
  const rnd = uniform(seed);
  const ctx = [...req.input_ids];
  const input = req.input_ids.map((t, j) => [j === 0 ? null : nextLogprobs(req.input_ids.slice(0, j))[t]!, t, null]).slice(req.logprob_start_len);
  const inputTop = req.input_ids.map((_, j) => (j === 0 ? null : topList(nextLogprobs(req.input_ids.slice(0, j)), req.top_logprobs_num))).slice(req.logprob_start_len);
  const out: unknown[][] = [], outTop: unknown[][] = [];
  for (let s = 0; s < req.sampling_params.max_new_tokens; s++) {
    const lp = nextLogprobs(ctx);
    let u = rnd(), t = 0;
    for (; t < lp.length - 1; t++) { u -= Math.exp(lp[t]!); if (u < 0) break; }
    out.push([lp[t]!, t, null]);
    outTop.push(topList(lp, req.top_logprobs_num));
    ctx.push(t);
    if (t === id('</s>')) break;
  }
  return { text: '', meta_info: { input_token_logprobs: input, input_top_logprobs: inputTop, output_token_logprobs: out, output_top_logprobs: outTop,
    finish_reason: { type: 'stop' } } };
}

// ---- 1. Rollouts: a group of 6 samples for one task, at temperature 1 with top-k and top-p off ----
const groundTruth = '4';
const prompt = encode('<s> User : What is 2 + 2 ? Assistant :');
const insertAt = prompt.indexOf(id('?')) + 1; // the reference goes at the end of the user's message
const K = 5;
const rollout: GenerateRequest = {
  input_ids: prompt, sampling_params: { temperature: 1, top_p: 1, top_k: -1, max_new_tokens: 8 },
  return_logprob: true, top_logprobs_num: K, logprob_start_len: prompt.length,
};
const STUDENT_MODE: rl.LogprobModeInput = { kind: 'raw', temperature: 1 }; // T = 1, no top-k / top-p: raw is the sampler's
const students = Array.from({ length: 6 }, (_, i) => rl.parseSglang(answer(rollout, 100 + i), { mode: STUDENT_MODE })[0]!);

// ---- 2. The teacher's requests: the answer-conditioned prompt, then the student's tokens, scored ----
const trajectories: rl.ServerTrajectory[] = [];
const requests: { student: GenerateRequest; teacher: GenerateRequest; vllm: unknown; openai: unknown }[] = [];
students.forEach((s, i) => {
  const t = rl.teacherInput({ prompt, insertAt, response: s.tokenIds, reference: { groundTruth, encode, template: ' Reference {ground_truth}' } });
  const teacherReq: GenerateRequest = {
    input_ids: Array.from(t.teacherIds), sampling_params: { temperature: 1, top_p: 1, top_k: -1, max_new_tokens: 1 },
    // log-probs from the first response token on; no alternatives needed for the log-ratio signal
    return_logprob: true, top_logprobs_num: 0, logprob_start_len: t.responseStart.teacher,
  };
  requests.push({
    student: rollout, teacher: teacherReq,
    // the same request to vLLM (/v1/completions) and to an OpenAI-style server that echoes prompts
    vllm: { prompt: Array.from(t.teacherIds), max_tokens: 1, prompt_logprobs: 0, return_token_ids: true },
    openai: { prompt: Array.from(t.teacherIds), max_tokens: 0, echo: true, logprobs: 0 },
  });
  // input log-probs are not temperature-scaled: raw at T = 1, the parser's default mode
  const teacher = rl.parseSglangInputLogprobs(answer(teacherReq, 0), { length: s.tokenIds.length, topLogprobs: false });
  const reward = s.tokenIds.includes(id(groundTruth)) ? 1 : 0;
  trajectories.push({ id: `sample-${i}`, group: 'task-0', episodeReward: reward, turns: [{ role: 'assistant', response: s, teacher, reward }] });
});

// ---- 3. Pack, GRPO, and GEAR in one call from the log-probs alone ----
const batch = rl.packServerRollouts({ trajectories });
const advantages = rl.grpo({ rewards: batch.episodeRewards, groups: batch.groupIndex });
const gear = rl.gearFromSparse({
  student: batch.topK, studentLogprob: batch.logprobs, teacherLogprob: batch.teacherLogprobs!,
  advantages, offsets: batch.offsets, mask: batch.mask, vocab: VOCAB.length,
  modes: { student: batch.logprobMode, teacher: batch.teacherLogprobMode },
  options: { anchorSignal: 'logratio' },
});

if (process.argv.includes('--json')) {
  console.log(JSON.stringify({
    requests, rows: batch.rows, offsets: Array.from(batch.offsets), tokenIds: Array.from(batch.tokenIds), rewards: Array.from(batch.episodeRewards),
    logprobs: Array.from(batch.logprobs), teacherLogprobs: Array.from(batch.teacherLogprobs!), modes: [batch.logprobMode, batch.teacherLogprobMode],
    grpo: Array.from(advantages), advantages: Array.from(gear.advantages), weights: Array.from(gear.weights), anchors: Array.from(gear.anchors),
    logratio: Array.from(gear.signals.logratio), entropy: Array.from(gear.signals.entropy),
  }));
} else {
  console.log('SGLang /generate, the rollout:', JSON.stringify(requests[0]!.student));
  console.log('SGLang /generate, the teacher (sample 0):', JSON.stringify(requests[0]!.teacher));
  console.log('  the same with vLLM /v1/completions:', JSON.stringify(requests[0]!.vllm));
  console.log('  the same with an OpenAI-style echo:', JSON.stringify(requests[0]!.openai));
  console.log(`\nstudent log-probs: ${batch.logprobMode!.kind} at T = ${batch.logprobMode!.temperature}; teacher: ${batch.teacherLogprobMode!.kind} at T = ${batch.teacherLogprobMode!.temperature}`);
  console.log('\nrow  reward  GRPO    token:  s = max(0, student - teacher log-prob)  ->  GEAR advantage  (▲ anchor)');
  const anchors = new Set(gear.anchors);
  for (let r = 0; r < batch.rows; r++) {
    const cells: string[] = [];
    for (let t = batch.offsets[r]!; t < batch.offsets[r + 1]!; t++) {
      cells.push(`${VOCAB[batch.tokenIds[t]!]}:${Math.max(0, -gear.signals.logratio[t]!).toFixed(2)}->${gear.advantages[t]!.toFixed(2)}${anchors.has(t) ? '▲' : ''}`);
    }
    console.log(`${String(r).padStart(3)}  ${batch.episodeRewards[r]}       ${advantages[r]!.toFixed(2).padStart(5)}   ${cells.join('  ')}`);
  }
}
