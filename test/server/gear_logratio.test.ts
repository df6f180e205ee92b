// GEAR from server log-probs alone: the student's sampled-token log-probs and top-k from a rollout
// response (every format of the fixtures), the teacher's log-probs of the same tokens from a prompt-log-prob
// response (vLLM prompt_logprobs, SGLang input_token_logprobs, OpenAI-style echo), packed, and one
// gearFromSparse call with anchorSignal 'logratio'. The log-prob modes are recorded and a log-ratio of
// two modes is refused.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { f32, fixture, throwsCode } from './helpers.js';

const BYTE_VOCAB = new Map<string, number>([
  ['Hello', 9906], ['Hi', 13347], ['!', 0], ['Ġthere', 1070], ['Ġ', 220], ['ðŁ', 9468], ['ļĢ', 248], ['âľ', 38798],
]);
const LEGACY_VOCAB = new Map([[' Hello', 22691], [' Hi', 15902], ['!', 0], ['.', 13]]);
const OLD_VOCAB = new Map([[' Par', 3681], [' a', 263], ['is', 275], ['ise', 1338]]);

/** Every rollout format of the fixtures, parsed as a student (the rollout policy's log-probs and top-k). */
const STUDENTS: [string, (mode?: rl.LogprobModeInput) => rl.ServerSequence[]][] = [
  ['openai/chat_logprobs.json', (mode) => rl.parseOpenAIChat(fixture('openai/chat_logprobs.json'), { tokenMap: BYTE_VOCAB, tokenKeys: 'bytes', ...(mode ? { mode } : {}) })],
  ['openai/chat_stream.json', (mode) => rl.parseOpenAIChat(fixture('openai/chat_stream.json'), { tokenMap: BYTE_VOCAB, tokenKeys: 'bytes', ...(mode ? { mode } : {}) })],
  ['openai/completion_legacy.json', (mode) => rl.parseOpenAICompletion(fixture('openai/completion_legacy.json'), { tokenMap: LEGACY_VOCAB, ...(mode ? { mode } : {}) })],
  ['openai/completion_stream.json', (mode) => rl.parseOpenAICompletion(fixture('openai/completion_stream.json'), { tokenMap: LEGACY_VOCAB, ...(mode ? { mode } : {}) })],
  ['vllm/chat_token_ids.json', (mode) => rl.parseVllm(fixture('vllm/chat_token_ids.json'), mode ? { mode } : undefined)],
  ['vllm/request_output.json', (mode) => rl.parseVllmOutputs(fixture('vllm/request_output.json'), mode ? { mode } : undefined)],
  ['sglang/generate.json', (mode) => rl.parseSglang(fixture('sglang/generate.json'), mode ? { mode } : undefined)],
  ['sglang/generate_batch.json', (mode) => rl.parseSglang(fixture('sglang/generate_batch.json'), mode ? { mode } : undefined)],
  ['sglang/generate_stream.json', (mode) => rl.parseSglang(fixture('sglang/generate_stream.json'), mode ? { mode } : undefined)],
  ['sglang/generate_stream_incremental.json', (mode) => rl.parseSglang(fixture('sglang/generate_stream_incremental.json'), mode ? { mode } : undefined)],
  ['sglang/generate_stream_n2.json', (mode) => rl.parseSglang(fixture('sglang/generate_stream_n2.json'), mode ? { mode } : undefined)],
  ['llamacpp/completion.json', (mode) => rl.parseLlamaCpp(fixture('llamacpp/completion.json'), mode ? { mode } : undefined)],
  ['llamacpp/completion_post_sampling.json', (mode) => rl.parseLlamaCpp(fixture('llamacpp/completion_post_sampling.json'), mode ? { mode } : undefined)],
  ['llamacpp/completion_old_probs.json', (mode) => rl.parseLlamaCpp(fixture('llamacpp/completion_old_probs.json'), { tokenMap: OLD_VOCAB, ...(mode ? { mode } : {}) })],
  ['llamacpp/completion_stream.json', (mode) => rl.parseLlamaCpp(fixture('llamacpp/completion_stream.json'), mode ? { mode } : undefined)],
];

/** The teacher's privileged prompt (token ids) before the student's tokens. */
const PROMPT = [1, 500, 501, 502];
/** The teacher's chosen log-prob of token i of a response: it disbelieves the second token. */
const teacherLp = (i: number) => (i === 1 ? -9 : -0.25 - 0.125 * (i % 3));
/** One alternative per scored position: another id, the rest of the mass split in two. */
const alt = (id: number) => (id === 7 ? 8 : 7);
const altLp = (lp: number) => Math.log((1 - Math.exp(lp)) / 2);

/** A vLLM /v1/completions response with prompt_logprobs: 1 scoring `ids` after PROMPT. */
function vllmTeacher(ids: ArrayLike<number>): unknown {
  const all = [...PROMPT, ...Array.from(ids)];
  const row = (id: number, lp: number) => ({ [id]: { logprob: lp, rank: 1 }, [alt(id)]: { logprob: altLp(lp), rank: 2 } });
  return { choices: [{ index: 0, text: '', token_ids: [], prompt_token_ids: all,
    prompt_logprobs: [null, ...PROMPT.slice(1).map((id) => row(id, -1)), ...Array.from(ids, (id, i) => row(id, teacherLp(i)))] }] };
}
/** An SGLang /generate response with return_logprob, logprob_start_len 0, top_logprobs_num 1. */
function sglangTeacher(ids: ArrayLike<number>): unknown {
  const all = [...PROMPT, ...Array.from(ids)];
  const lp = (j: number) => (j < PROMPT.length ? -1 : teacherLp(j - PROMPT.length));
  return { text: 'x', meta_info: {
    input_token_logprobs: all.map((id, j) => [j === 0 ? null : lp(j), id, null]),
    input_top_logprobs: all.map((id, j) => (j === 0 ? null : [[lp(j), id, null], [altLp(lp(j)), alt(id), null]])),
    output_token_logprobs: [[-0.5, 2, null]], finish_reason: { type: 'length', length: 1 },
  } };
}
/** An OpenAI-style legacy completion with echo: true, logprobs: 1, max_tokens: 0 (vLLM's token_id:N strings). */
function echoTeacher(ids: ArrayLike<number>): unknown {
  const all = [...PROMPT, ...Array.from(ids)];
  const lp = (j: number) => (j < PROMPT.length ? -1 : teacherLp(j - PROMPT.length));
  const t = (id: number) => `token_id:${id}`;
  return { choices: [{ index: 0, text: '', finish_reason: 'length', logprobs: {
    tokens: all.map(t), token_logprobs: all.map((_, j) => (j === 0 ? null : lp(j))),
    top_logprobs: all.map((id, j) => (j === 0 ? null : { [t(id)]: lp(j), [t(alt(id))]: altLp(lp(j)) })),
  } }] };
}
const TEACHERS: [string, (ids: Int32Array) => rl.ServerSequence][] = [
  ['vLLM prompt_logprobs', (ids) => rl.parseVllmPromptLogprobs(vllmTeacher(ids), { length: ids.length })],
  ['SGLang input_token_logprobs', (ids) => rl.parseSglangInputLogprobs(sglangTeacher(ids), { length: ids.length })],
  ['OpenAI echo', (ids) => rl.parseOpenAIPromptLogprobs(echoTeacher(ids), { length: ids.length })],
];

const RAW: rl.LogprobModeInput = { kind: 'raw' };
const OPTIONS: rl.GearOptions = { anchorSignal: 'logratio', peakZ: 0.5 };

/** Each response twice in one group, rewards 1 and 0 (advantages ±0.707), the teacher on every turn. */
function batchOf(seqs: rl.ServerSequence[], teacher: (ids: Int32Array) => rl.ServerSequence): rl.ServerRolloutBatch {
  return rl.packServerRollouts({ trajectories: seqs.flatMap((s, i) => [1, 0].map((reward) => ({
    group: i, episodeReward: reward, turns: [{ role: 'assistant' as const, response: s, teacher: teacher(s.tokenIds) }, { role: 'tool' as const, tokens: [3, 4] }],
  }))) });
}

describe('GEAR from server log-probs alone, on every format', () => {
  for (const [name, parse] of STUDENTS) {
    it(`${name}: parse, pack with each teacher format, one gearFromSparse call`, () => {
      const seqs = parse(RAW);
      expect(seqs.length).toBeGreaterThan(0);
      for (const s of seqs) expect(s.mode).toEqual({ kind: 'raw', temperature: 1, topK: 0, topP: 1 });
      let results: Float32Array | undefined;
      for (const [tname, teacher] of TEACHERS) {
        const batch = batchOf(seqs, teacher);
        expect(batch.logprobMode).toEqual(seqs[0]!.mode);
        expect(batch.teacherLogprobMode, tname).toEqual({ kind: 'raw', temperature: 1, topK: 0, topP: 1 });
        const grpo = rl.grpo({ rewards: batch.episodeRewards, groups: batch.groupIndex });
        const g = rl.gearFromSparse({
          student: batch.topK, studentLogprob: batch.logprobs, teacherLogprob: batch.teacherLogprobs!,
          advantages: grpo, offsets: batch.offsets, mask: batch.mask, options: OPTIONS,
          modes: { student: batch.logprobMode, teacher: batch.teacherLogprobMode },
        });
        // the teacher's log-probs are the ones its response scored; the log-ratio is teacher minus student
        const want: number[] = [];
        for (let r = 0; r < batch.offsets.length - 1; r++) {
          const len = seqs[Math.floor(r / 2)]!.tokenIds.length;
          for (let i = 0; i < len; i++) want.push(teacherLp(i));
          want.push(0, 0); // the tool turn
        }
        expect(Array.from(batch.teacherLogprobs!), tname).toEqual(f32(want));
        const lr = Float32Array.from(batch.logprobs, (s, t) => batch.teacherLogprobs![t]! - s);
        expect(Array.from(g.signals.logratio)).toEqual(Array.from(lr));
        expect(g.signals.divergence).toBeUndefined();
        // the same as GEAR on those signals, the entropy bound from the student's own sparse pass
        const entropy = rl.sparseDivergence(batch.topK, batch.topK).entropyLower;
        expect(Array.from(g.signals.entropy)).toEqual(Array.from(entropy));
        const direct = rl.gear({ advantages: grpo, offsets: batch.offsets, mask: batch.mask, entropy, logratio: lr, options: OPTIONS });
        expect(Array.from(g.advantages)).toEqual(Array.from(direct.advantages));
        // responses of two tokens or more: the disbelieved second token anchors a segment in every row
        if (seqs.every((s) => s.tokenIds.length >= 2)) {
          for (let r = 0; r < batch.offsets.length - 1; r++) expect(Array.from(g.anchors)).toContain(batch.offsets[r]! + 1);
        }
        // every teacher format gives the same result
        if (results) expect(Array.from(g.advantages), tname).toEqual(Array.from(results));
        results = g.advantages;
      }
    });
  }

  it('a teacher response of each format without its top-k still gives the log-ratio (prompt_logprobs: 0, top_logprobs_num 0)', () => {
    const [s] = rl.parseSglang(fixture('sglang/generate.json'), { mode: RAW });
    const t = rl.parseVllmPromptLogprobs(vllmTeacher(s!.tokenIds), { length: s!.tokenIds.length, topLogprobs: false });
    const batch = rl.packServerRollouts({ trajectories: [1, 0].map((reward) => ({ group: 0, episodeReward: reward, turns: [{ role: 'assistant' as const, response: s!, teacher: t }] })) });
    const g = rl.gearFromSparse({ student: batch.topK, studentLogprob: batch.logprobs, teacherLogprob: batch.teacherLogprobs!,
      advantages: rl.grpo({ rewards: batch.episodeRewards, groups: batch.groupIndex }), offsets: batch.offsets, options: OPTIONS });
    expect(Array.from(g.anchors)).toEqual([1, 3]);
  });
});

describe('log-prob modes: stated, recorded, never mixed', () => {
  const sglang = (mode?: rl.LogprobModeInput) => rl.parseSglang(fixture('sglang/generate.json'), mode ? { mode } : undefined)[0]!;

  it('parsers record the mode they are told; prompt-log-prob parsers default to raw at T = 1; bad modes are coded', () => {
    expect(sglang().mode).toBeUndefined();
    expect(sglang({ kind: 'processed', temperature: 0.7, topK: -1 }).mode).toEqual({ kind: 'processed', temperature: 0.7, topK: 0, topP: 1 });
    expect(rl.parseSglangInputLogprobs(fixture('sglang/generate.json'), { length: 2 }).mode).toEqual({ kind: 'raw', temperature: 1, topK: 0, topP: 1 });
    expect(rl.parseVllmPromptLogprobs(fixture('vllm/completion_prompt_logprobs.json'), { length: 3, mode: { kind: 'processed', temperature: 0.5 } }).mode!.kind).toBe('processed');
    for (const bad of [{ kind: 'logits' }, { kind: 'raw', temperature: 0 }, { kind: 'raw', topP: 1.5 }, { kind: 'raw', topK: 2.5 }, { kind: 'raw', extra: 1 }, 'raw', null]) {
      throwsCode(() => rl.parseSglang(fixture('sglang/generate.json'), { mode: bad as never }), 'ERR_OPTION', /^parseSglang: options\.mode/);
    }
  });

  it('logprobModesMatch and isSamplerLogprob', () => {
    const m = (kind: 'raw' | 'processed', temperature = 1, topK = 0, topP = 1) => ({ kind, temperature, topK, topP });
    expect(rl.logprobModesMatch(m('raw', 0.7), m('raw', 1))).toBe(true); // raw log-probs are at T = 1 whatever the sampling
    expect(rl.logprobModesMatch(m('raw'), m('processed'))).toBe(false);
    expect(rl.logprobModesMatch(m('processed', 0.7), m('processed', 0.7))).toBe(true);
    expect(rl.logprobModesMatch(m('processed', 0.7), m('processed', 1))).toBe(false);
    expect(rl.logprobModesMatch(m('processed', 1, 0, 0.9), m('processed', 1))).toBe(false);
    expect(rl.isSamplerLogprob(m('raw'))).toBe(true);
    expect(rl.isSamplerLogprob(m('raw', 0.7))).toBe(false);
    expect(rl.isSamplerLogprob(m('processed', 0.7))).toBe(true);
    expect(rl.isSamplerLogprob(m('processed', 0.7, 50))).toBe(false);
    expect(rl.isSamplerLogprob(m('raw', 1, 0, 0.95))).toBe(false);
    expect(rl.isSamplerLogprob({ kind: 'raw' } as never)).toBe(true); // the input form: defaults filled
    throwsCode(() => rl.isSamplerLogprob({ kind: 'logits' } as never), 'ERR_OPTION', /^mode\.kind/);
    throwsCode(() => rl.logprobModesMatch(m('raw'), { kind: 'raw', temperature: -1 } as never), 'ERR_OPTION', /^b\.temperature/);
  });

  it('a batch holds one student mode and one teacher mode; mixing is refused', () => {
    const a = sglang(RAW), b = sglang({ kind: 'processed', temperature: 0.7 }), c = sglang();
    const turn = (s: rl.ServerSequence) => ({ group: 0, turns: [{ role: 'assistant' as const, response: s }] });
    expect(rl.packServerRollouts({ trajectories: [turn(a), turn(a)] }).logprobMode).toEqual(a.mode);
    expect('logprobMode' in rl.packServerRollouts({ trajectories: [turn(c), turn(c)] })).toBe(false);
    throwsCode(() => rl.packServerRollouts({ trajectories: [turn(a), turn(b)] }), 'ERR_OPTION', /^trajectories\[1\]\.turns\[0\]\.response\.mode: expected one log-prob mode/);
    throwsCode(() => rl.packServerRollouts({ trajectories: [turn(a), turn(c)] }), 'ERR_OPTION', /one log-prob mode/);
  });

  it('gearFromSparse refuses a log-ratio of two modes (processed at T = 0.7 against raw prompt log-probs)', () => {
    const s = sglang({ kind: 'processed', temperature: 0.7 });
    const batch = batchOf([s], (ids) => rl.parseSglangInputLogprobs(sglangTeacher(ids), { length: ids.length }));
    const args = { student: batch.topK, studentLogprob: batch.logprobs, teacherLogprob: batch.teacherLogprobs!,
      advantages: rl.grpo({ rewards: batch.episodeRewards, groups: batch.groupIndex }), offsets: batch.offsets, mask: batch.mask, options: OPTIONS };
    throwsCode(() => rl.gearFromSparse({ ...args, modes: { student: batch.logprobMode, teacher: batch.teacherLogprobMode } }), 'ERR_OPTION',
      /^modes: expected the student's and the teacher's log-probs in one mode .*got student processed at T = 0\.7, teacher raw/);
    // stated processed at T = 0.7 on both sides: accepted
    expect(() => rl.gearFromSparse({ ...args, modes: { student: batch.logprobMode, teacher: { kind: 'processed', temperature: 0.7, topK: 0, topP: 1 } } })).not.toThrow();
    throwsCode(() => rl.gearFromSparse({ ...args, modes: { student: { kind: 'x' } as never } }), 'ERR_OPTION', /^modes\.student\.kind/);
  });

  it('gearFromSparse checks the chosen log-probs on valid tokens: a non-finite student log-prob, a NaN or +Infinity teacher log-prob', () => {
    const s = sglang(RAW);
    const n = s.tokenIds.length;
    const base = { student: s.topK!, studentLogprob: s.logprobs, advantages: [1], offsets: Int32Array.of(0, n), options: OPTIONS };
    const tl = (v: number) => Float32Array.from({ length: n }, (_, i) => (i === 1 ? v : -0.5));
    throwsCode(() => rl.gearFromSparse({ ...base, teacherLogprob: tl(NaN) }), 'ERR_NON_FINITE', /^teacherLogprob\[1\]/);
    throwsCode(() => rl.gearFromSparse({ ...base, teacherLogprob: tl(Infinity) }), 'ERR_NON_FINITE', /^teacherLogprob\[1\]/);
    throwsCode(() => rl.gearFromSparse({ ...base, studentLogprob: Float32Array.from(s.logprobs, (x, i) => (i === 0 ? -Infinity : x)), teacherLogprob: tl(-1) }),
      'ERR_NON_FINITE', /^studentLogprob\[0\]/);
    // a teacher log-prob of -Infinity is the largest disbelief: capped at klCap
    const g = rl.gearFromSparse({ ...base, teacherLogprob: tl(-Infinity) });
    expect(g.diagnostics.klQuantiles.max).toBe(20);
    // masked tokens are never read
    const mask = Uint8Array.from({ length: n }, (_, i) => (i === 1 ? 0 : 1));
    expect(() => rl.gearFromSparse({ ...base, mask, teacherLogprob: tl(NaN) })).not.toThrow();
    // without the teacher's top-k, the divergence signal cannot run
    throwsCode(() => rl.gearFromSparse({ ...base, teacherLogprob: tl(-1), options: {} }), 'ERR_OPTION', /^teacher: expected the teacher's top-k/);
    throwsCode(() => rl.gearFromSparse({ student: s.topK!, advantages: [1], offsets: Int32Array.of(0, n), options: OPTIONS }), 'ERR_OPTION', /anchorSignal 'logratio'/);
  });
});

describe('parseOpenAIPromptLogprobs (echo)', () => {
  const MAP = new Map([['Answer', 100], [':', 101], [' 4', 102], ['.', 103], [' Sum', 104], [' 2', 105], ['+', 106], ['2', 107], [' is', 108],
    [' 42', 109], ['\n', 110], [' The', 111], [' plus', 112], ['3', 113], ['=', 114], [' 5', 115]]);

  it('reads the last `length` echoed positions with their top-k, most likely first', () => {
    const t = rl.parseOpenAIPromptLogprobs(fixture('openai/completion_echo.json'), { tokenMap: MAP, length: 3 });
    expect(Array.from(t.tokenIds)).toEqual([107, 108, 102]);
    expect(Array.from(t.logprobs)).toEqual(f32([-0.0625, -0.375, -0.03125]));
    expect(t.topK!.k).toBe(2);
    expect(Array.from(t.topK!.ids)).toEqual([107, 113, 108, 114, 102, 115]);
    expect(t.mode).toEqual({ kind: 'raw', temperature: 1, topK: 0, topP: 1 });
    expect(t.text).toBeUndefined();
    // the scored token outside the top 2 (" 4" at position 2) keeps its log-prob
    const all = rl.parseOpenAIPromptLogprobs(fixture('openai/completion_echo.json'), { tokenMap: MAP });
    expect(all.tokenIds.length).toBe(10);
    expect(all.logprobs[1]).toBe(-6);
  });

  it('errors name the field: position 0, a range past the prompt, no log-probs, a stream', () => {
    throwsCode(() => rl.parseOpenAIPromptLogprobs(fixture('openai/completion_echo.json'), { tokenMap: MAP, start: 0, length: 2 }), 'ERR_SHAPE',
      /^choices\[0\]\.logprobs\.token_logprobs\[0\]: expected a log-prob for this position/);
    throwsCode(() => rl.parseOpenAIPromptLogprobs(fixture('openai/completion_echo.json'), { tokenMap: MAP, start: 5, length: 7 }), 'ERR_SHAPE', /at most the 11/);
    throwsCode(() => rl.parseOpenAIPromptLogprobs(fixture('openai/completion_echo.json'), { length: 2 }), 'ERR_OPTION', /tokenMap/);
    throwsCode(() => rl.parseOpenAIPromptLogprobs([fixture('openai/completion_echo.json')], { tokenMap: MAP }), 'ERR_DTYPE', /^response:/);
    throwsCode(() => rl.parseOpenAIPromptLogprobs(fixture('openai/completion_echo.json'), { tokenMap: MAP, choice: 3 }), 'ERR_SHAPE', /index 3/);
    const r = fixture('openai/completion_echo.json');
    r.choices[0].logprobs = null;
    throwsCode(() => rl.parseOpenAIPromptLogprobs(r, { tokenMap: MAP }), 'ERR_SHAPE', /logprobs: expected per-token log-probs/);
  });

  it("vLLM's echo with max_tokens 1: the generated token (token_ids) is left out; prompt_token_ids give the ids", () => {
    const r = echoTeacher([9, 10]) as { choices: Record<string, unknown>[] };
    const c = r.choices[0]! as { logprobs: { tokens: string[]; token_logprobs: (number | null)[]; top_logprobs: unknown[] } };
    c.logprobs.tokens.push('token_id:77');
    c.logprobs.token_logprobs.push(-0.5);
    c.logprobs.top_logprobs.push({ 'token_id:77': -0.5 });
    r.choices[0]!.token_ids = [77];
    const t = rl.parseOpenAIPromptLogprobs(r, { length: 2 });
    expect(Array.from(t.tokenIds)).toEqual([9, 10]);
    expect(Array.from(t.logprobs)).toEqual(f32([teacherLp(0), teacherLp(1)]));
  });
});
