// vLLM: token_ids / token_id:N (OpenAI-compatible), prompt_logprobs keyed by id (teacher scoring), and the
// offline RequestOutput form. Expected values are written out by hand from the fixtures.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { f32, fixture, throwsCode } from './helpers.js';

const PAD = -Infinity;

describe('parseVllm (OpenAI-compatible with token ids)', () => {
  it('takes ids from token_ids and token_id:N strings, no token map needed; split emoji bytes do not matter', () => {
    const [s] = rl.parseVllm(fixture('vllm/chat_token_ids.json'));
    expect(Array.from(s!.tokenIds)).toEqual([40, 2948, 19423, 11162, 238, 109, 151645]);
    expect(Array.from(s!.logprobs)).toEqual(f32([-0.1, -0.2, -0.3, -0.4, -0.05, -0.01, -0.001]));
    expect(s!.topK!.k).toBe(2);
    expect(Array.from(s!.topK!.ids)).toEqual([40, 9707, 2948, 1075, 19423, -1, 11162, 13, 238, -1, 109, -1, 151645, -1]);
    expect(Array.from(s!.topK!.logprobs)).toEqual(f32([-0.1, -2.5, -0.2, -1.75, -0.3, PAD, -0.4, -1.25, -0.05, PAD, -0.01, PAD, -0.001, PAD]));
    expect(s!.text).toBe('I love cats 🐱');
  });

  it('token_ids that disagree with a token_id:N string are an error at that position', () => {
    const r = fixture('vllm/chat_token_ids.json');
    r.choices[0].token_ids[3] = 99;
    throwsCode(() => rl.parseVllm(r), 'ERR_TARGET_RANGE', 'choices[0].logprobs.content[3].token: expected token_id:99 (as in token_ids), got "token_id:11162"');
  });

  it('token_ids of another length than the log-probs (a truncated response) are an error', () => {
    const r = fixture('vllm/chat_token_ids.json');
    r.choices[0].logprobs.content.pop();
    throwsCode(() => rl.parseVllm(r), 'ERR_SHAPE', 'choices[0].token_ids.length: expected 6 (one id per log-prob entry), got 7');
  });

  it('streamed chunks with per-chunk token_ids', () => {
    const full = fixture('vllm/chat_token_ids.json');
    const content = full.choices[0].logprobs.content;
    const ids = full.choices[0].token_ids;
    const chunks = [
      { object: 'chat.completion.chunk', prompt_token_ids: full.prompt_token_ids, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null }] },
      { object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: 'I love' }, token_ids: ids.slice(0, 2), logprobs: { content: content.slice(0, 2) } }] },
      { object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: ' cats 🐱' }, token_ids: ids.slice(2), logprobs: { content: content.slice(2) } }] },
      { object: 'chat.completion.chunk', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] },
    ];
    const [s] = rl.parseVllm(chunks);
    expect(Array.from(s!.tokenIds)).toEqual([40, 2948, 19423, 11162, 238, 109, 151645]);
    expect(Array.from(s!.topK!.ids).slice(0, 4)).toEqual([40, 9707, 2948, 1075]);
    expect(s!.text).toBe('I love cats 🐱');
    expect(s!.finishReason).toBe('stop');
  });

  it('completions with token_ids (string tokens resolved through the chosen id)', () => {
    const r = { object: 'text_completion', choices: [{ index: 0, text: ' Paris', token_ids: [12095], logprobs: {
      tokens: [' Paris'], token_logprobs: [-0.5], top_logprobs: [{ ' Paris': -0.5 }], text_offset: [0] } }] };
    const [s] = rl.parseVllm(r);
    expect(Array.from(s!.tokenIds)).toEqual([12095]);
    expect(Array.from(s!.topK!.ids)).toEqual([12095]);
    // an alternative that is a different string has no id without a map or token_id:N
    r.choices[0]!.logprobs.top_logprobs[0] = { ' Paris': -0.5, ' Rome': -2 };
    throwsCode(() => rl.parseVllm(r), 'ERR_OPTION', /^choices\[0\]\.logprobs\.top_logprobs\[0\]\[" Rome"\]\.token: expected a token id in the response/);
  });
});

describe('parseVllmPromptLogprobs (teacher scoring)', () => {
  it('reads the last `length` prompt positions, alternatives most likely first (prompt token added past top-k)', () => {
    const t = rl.parseVllmPromptLogprobs(fixture('vllm/completion_prompt_logprobs.json'), { length: 3 });
    expect(Array.from(t.tokenIds)).toEqual([40, 2948, 19423]);
    expect(Array.from(t.logprobs)).toEqual([-0.5, -0.25, -3]);
    expect(t.topK!.k).toBe(3);
    expect(Array.from(t.topK!.ids)).toEqual([40, 1654, -1, 2948, 1075, -1, 12590, 279, 19423]);
    expect(Array.from(t.topK!.logprobs)).toEqual([-0.5, -1.25, PAD, -0.25, -2, PAD, -0.75, -1, -3]);
  });

  it('start/length select any range; the default starts at position 1', () => {
    const r = fixture('vllm/completion_prompt_logprobs.json');
    const all = rl.parseVllmPromptLogprobs(r);
    expect(Array.from(all.tokenIds)).toEqual([3555, 40, 2948, 19423]);
    expect(all.logprobs[0]).toBe(-7.5);
    expect(Array.from(all.topK!.ids.slice(0, 3))).toEqual([13, 11, 3555]);
    const mid = rl.parseVllmPromptLogprobs(r, { start: 2, length: 1, topLogprobs: false });
    expect(Array.from(mid.tokenIds)).toEqual([40]);
    expect(mid.topK).toBeNull();
  });

  it('chat responses keep prompt_logprobs at the top level; promptTokenIds can stand in for prompt_token_ids', () => {
    const r = { object: 'chat.completion', choices: [{ index: 0, message: { content: '' } }],
      prompt_logprobs: [null, { '5': { logprob: -0.5, rank: 1 } }] };
    throwsCode(() => rl.parseVllmPromptLogprobs(r), 'ERR_SHAPE', /^prompt_token_ids: expected the prompt token ids/);
    const t = rl.parseVllmPromptLogprobs(r, { promptTokenIds: [1, 5] });
    expect(Array.from(t.tokenIds)).toEqual([5]);
  });

  it('errors: missing field, position 0, a missing prompt token, a bad value, a bad range', () => {
    throwsCode(() => rl.parseVllmPromptLogprobs({ choices: [{ index: 0 }] }), 'ERR_SHAPE', /^prompt_logprobs: expected prompt log-probs \(request prompt_logprobs: k\)/);
    const r = fixture('vllm/completion_prompt_logprobs.json');
    throwsCode(() => rl.parseVllmPromptLogprobs(r, { start: 0 }), 'ERR_SHAPE', /^choices\[0\]\.prompt_logprobs\[0\]: expected log-probs for this position/);
    const r2 = fixture('vllm/completion_prompt_logprobs.json');
    delete r2.choices[0].prompt_logprobs[3]['2948'];
    throwsCode(() => rl.parseVllmPromptLogprobs(r2, { length: 3 }), 'ERR_SHAPE', 'choices[0].prompt_logprobs[3]: expected an entry for the sampled token id 2948, got "ids [1075]"');
    const r3 = fixture('vllm/completion_prompt_logprobs.json');
    r3.choices[0].prompt_logprobs[4]['279'].logprob = 'x';
    throwsCode(() => rl.parseVllmPromptLogprobs(r3, { length: 3 }), 'ERR_DTYPE', 'choices[0].prompt_logprobs[4]["279"].logprob: expected a finite number ≤ 0, got "x"');
    throwsCode(() => rl.parseVllmPromptLogprobs(r, { length: 9 }), 'ERR_OPTION', /options\.length: expected an integer in \[0, 5\]/);
    const r4 = fixture('vllm/completion_prompt_logprobs.json');
    r4.choices[0].prompt_token_ids.pop();
    throwsCode(() => rl.parseVllmPromptLogprobs(r4), 'ERR_SHAPE', 'choices[0].prompt_logprobs.length: expected 4 (one entry per prompt token), got 5');
  });
});

describe('parseVllmOutputs (offline RequestOutput)', () => {
  it('reads every sample (n = 2) with id-keyed logprobs', () => {
    const seqs = rl.parseVllmOutputs(fixture('vllm/request_output.json'));
    expect(seqs.map((s) => Array.from(s.tokenIds))).toEqual([[12095, 13], [264]]);
    expect(Array.from(seqs[0]!.logprobs)).toEqual([-0.5, -0.125]);
    expect(Array.from(seqs[0]!.topK!.ids)).toEqual([12095, 264, 13, 11]);
    expect(Array.from(seqs[0]!.topK!.logprobs)).toEqual([-0.5, -2.5, -0.125, -3]);
    expect(Array.from(seqs[1]!.logprobs)).toEqual([-2.5]);
    expect(Array.from(seqs[1]!.topK!.ids)).toEqual([12095, 264]);
    expect(seqs[1]!.finishReason).toBe('length');
    // parseVllm dispatches on `outputs`
    expect(Array.from(rl.parseVllm(fixture('vllm/request_output.json'))[1]!.tokenIds)).toEqual([264]);
  });

  it('errors: no logprobs, mismatched lengths, bad key', () => {
    const r = fixture('vllm/request_output.json');
    r.outputs[1].logprobs = null;
    throwsCode(() => rl.parseVllmOutputs(r), 'ERR_SHAPE', /^outputs\[1\]\.logprobs: expected per-token log-probs/);
    const r2 = fixture('vllm/request_output.json');
    r2.outputs[0].logprobs.pop();
    throwsCode(() => rl.parseVllmOutputs(r2), 'ERR_SHAPE', 'outputs[0].logprobs.length: expected 2 (one per token id), got 1');
    const r3 = fixture('vllm/request_output.json');
    r3.outputs[0].logprobs[1]['-4'] = { logprob: -1 };
    throwsCode(() => rl.parseVllmOutputs(r3), 'ERR_TARGET_RANGE', /^outputs\[0\]\.logprobs\[1\]\["-4"\]/);
  });
});
