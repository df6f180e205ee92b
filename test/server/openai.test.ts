// OpenAI-compatible chat and legacy completions: every documented logprobs field, n > 1, empty choices,
// streamed chunks, token maps keyed by text / bytes / function, UTF-8 split across tokens, and errors
// that name the exact field. Expected values are written out by hand from the fixtures.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { f32, fixture, throwsCode } from './helpers.js';

// Byte-level (GPT-2 style) vocabulary keys, written out by hand: a space is 'Ġ'; the emoji bytes
// F0 9F are 'ðŁ', 9A 80 are 'ļĢ', E2 9C are 'âľ'.
const BYTE_VOCAB = new Map<string, number>([
  ['Hello', 9906], ['Hi', 13347], ['!', 0], ['Ġthere', 1070], ['Ġ', 220], ['ðŁ', 9468], ['ļĢ', 248], ['âľ', 38798],
]);
const TEXT_VOCAB = new Map<string, number>([['Hello', 9906], ['Hi', 13347], ['!', 0], [' there', 1070], [' ', 220]]);
const PAD = -Infinity;

describe('parseOpenAIChat', () => {
  it('reads both choices (n = 2) with ids from a byte-keyed vocabulary, including a split emoji', () => {
    const seqs = rl.parseOpenAIChat(fixture('openai/chat_logprobs.json'), { tokenMap: BYTE_VOCAB, tokenKeys: 'bytes' });
    expect(seqs.map((s) => s.index)).toEqual([0, 1]);
    const [a, b] = seqs as [rl.ServerSequence, rl.ServerSequence];
    expect(Array.from(a.tokenIds)).toEqual([9906, 0]);
    expect(Array.from(a.logprobs)).toEqual(f32([-0.31725305, -0.02380986]));
    expect(a.topK!.k).toBe(2);
    expect(Array.from(a.topK!.ids)).toEqual([9906, 13347, 0, 1070]);
    expect(Array.from(a.topK!.logprobs)).toEqual(f32([-0.31725305, -1.3190403, -0.02380986, -3.787621]));
    expect(a.text).toBe('Hello!');
    expect(a.finishReason).toBe('stop');
    // "Hi 🚀": the rocket's 4 bytes come as two tokens that are not valid UTF-8 on their own
    expect(Array.from(b.tokenIds)).toEqual([13347, 220, 9468, 248]);
    expect(Array.from(b.logprobs)).toEqual(f32([-1.3190403, -0.5, -0.25, -0.0625]));
    expect(Array.from(b.topK!.ids)).toEqual([9906, 13347, 220, -1, 9468, 38798, 248, -1]);
    expect(Array.from(b.topK!.logprobs)).toEqual(f32([-0.31725305, -1.3190403, -0.5, PAD, -0.25, -2, -0.0625, PAD]));
    expect(b.finishReason).toBe('length');
  });

  it('byteLevelKey spells bytes as a GPT-2 vocabulary does', () => {
    expect(rl.byteLevelKey([32, 116, 104, 101, 114, 101])).toBe('Ġthere');
    expect(rl.byteLevelKey([240, 159])).toBe('ðŁ');
    expect(rl.byteLevelKey([10])).toBe('Ċ');
  });

  it('a text-keyed map works for whole characters and refuses a token that splits one', () => {
    const r = fixture('openai/chat_logprobs.json');
    const a = rl.parseOpenAIChat({ ...r, choices: [r.choices[0]] }, { tokenMap: TEXT_VOCAB })[0]!;
    expect(Array.from(a.tokenIds)).toEqual([9906, 0]);
    throwsCode(() => rl.parseOpenAIChat(r, { tokenMap: TEXT_VOCAB }), 'ERR_OPTION',
      /^choices\[1\]\.logprobs\.content\[2\]\.bytes: expected bytes that form whole UTF-8 characters.*got "\[240, 159\]"/);
  });

  it('a text-keyed map looks a lone byte up as a SentencePiece byte token <0xNN>', () => {
    const r = { choices: [{ index: 0, logprobs: { content: [
      { token: 'bytes:\\xc3', logprob: -1, bytes: [0xc3], top_logprobs: [] },
      { token: 'bytes:\\xa9', logprob: -0.5, bytes: null, top_logprobs: [] }, // bytes only in the escaped token
    ] } }] };
    const m = new Map([['<0xC3>', 200], ['<0xA9>', 201]]);
    const [s] = rl.parseOpenAIChat(r, { tokenMap: m });
    expect(Array.from(s!.tokenIds)).toEqual([200, 201]);
    expect(s!.topK!.k).toBe(0);
  });

  it('a function map gets the token and its bytes', () => {
    const seen: string[] = [];
    const fn = (tok: string, bytes: Uint8Array | null) => {
      seen.push(`${tok}|${bytes ? Array.from(bytes).join(',') : 'null'}`);
      return BYTE_VOCAB.get(rl.byteLevelKey(bytes!));
    };
    const [, b] = rl.parseOpenAIChat(fixture('openai/chat_logprobs.json'), { tokenMap: fn });
    expect(Array.from(b!.tokenIds)).toEqual([13347, 220, 9468, 248]);
    expect(seen).toContain('bytes:\\xf0\\x9f|240,159');
    expect(seen).toContain('bytes:\\x9a\\x80|154,128');
  });

  it('without ids or a token map: a coded error that says what to do', () => {
    throwsCode(() => rl.parseOpenAIChat(fixture('openai/chat_logprobs.json')), 'ERR_OPTION',
      /^choices\[0\]\.logprobs\.content\[0\]\.token: expected a token id in the response .*tokenMap/);
  });

  it('topLogprobs: false skips the alternatives (and their lookups)', () => {
    const m = new Map([['Hello', 1], ['!', 2]]);
    const r = fixture('openai/chat_logprobs.json');
    const [a] = rl.parseOpenAIChat({ choices: [r.choices[0]] }, { tokenMap: m, topLogprobs: false });
    expect(Array.from(a!.tokenIds)).toEqual([1, 2]);
    expect(a!.topK).toBeNull();
  });

  it('empty choices give no sequences', () => {
    expect(rl.parseOpenAIChat({ id: 'x', object: 'chat.completion', choices: [] })).toEqual([]);
  });

  it('streamed chunks merge into the same sequence as the whole response', () => {
    const [s] = rl.parseOpenAIChat(fixture('openai/chat_stream.json'), { tokenMap: BYTE_VOCAB, tokenKeys: 'bytes' });
    expect(Array.from(s!.tokenIds)).toEqual([9906, 0]);
    expect(Array.from(s!.logprobs)).toEqual(f32([-0.31725305, -0.02380986]));
    expect(Array.from(s!.topK!.ids)).toEqual([9906, 13347, 0, -1]);
    expect(Array.from(s!.topK!.logprobs)).toEqual(f32([-0.31725305, -1.3190403, -0.02380986, PAD]));
    expect(s!.text).toBe('Hello!');
    expect(s!.finishReason).toBe('stop');
  });

  it('streamed chunks of n = 2 interleave by index', () => {
    const e = (token: string, logprob: number) => ({ token, logprob, bytes: null, top_logprobs: [] });
    const chunks = [
      { choices: [{ index: 1, delta: { content: 'Hi' }, logprobs: { content: [e('Hi', -1)] } }] },
      { choices: [{ index: 0, delta: { content: 'Hello' }, logprobs: { content: [e('Hello', -0.5)] } }] },
      { choices: [{ index: 1, delta: { content: '!' }, logprobs: { content: [e('!', -0.25)] } }] },
    ];
    const seqs = rl.parseOpenAIChat(chunks, { tokenMap: TEXT_VOCAB });
    expect(seqs.map((s) => [s.index, Array.from(s.tokenIds), s.text])).toEqual([[0, [9906], 'Hello'], [1, [13347, 0], 'Hi!']]);
    expect(Array.from(seqs[1]!.logprobs)).toEqual([-1, -0.25]);
  });

  it('reads logprobs.refusal when content is null', () => {
    const r = { choices: [{ index: 0, message: { refusal: 'No' }, logprobs: { content: null, refusal: [
      { token: 'No', logprob: -0.5, bytes: [78, 111], top_logprobs: [] }] } }] };
    const [s] = rl.parseOpenAIChat(r, { tokenMap: new Map([['No', 2822]]) });
    expect(Array.from(s!.tokenIds)).toEqual([2822]);
  });

  it('errors name the exact field, and nothing partial comes back', () => {
    const bad = (mut: (r: any) => void) => {
      const r = fixture('openai/chat_logprobs.json');
      mut(r);
      return () => rl.parseOpenAIChat(r, { tokenMap: BYTE_VOCAB, tokenKeys: 'bytes' });
    };
    throwsCode(bad((r) => { r.choices[1].logprobs.content[2].top_logprobs[1].logprob = 0.5; }), 'ERR_OPTION',
      'choices[1].logprobs.content[2].top_logprobs[1].logprob: expected a finite number ≤ 0, got 0.5');
    throwsCode(bad((r) => { r.choices[0].logprobs.content[1].logprob = null; }), 'ERR_DTYPE',
      'choices[0].logprobs.content[1].logprob: expected a finite number ≤ 0, got null');
    throwsCode(bad((r) => { r.choices[0].logprobs.content[1].logprob = NaN; }), 'ERR_NON_FINITE', /content\[1\]\.logprob/);
    throwsCode(bad((r) => { delete r.choices[0].logprobs.content[0].top_logprobs[1].logprob; }), 'ERR_DTYPE',
      /^choices\[0\]\.logprobs\.content\[0\]\.top_logprobs\[1\]\.logprob: expected a finite number ≤ 0, got undefined/);
    throwsCode(bad((r) => { r.choices[1].logprobs.content[3] = 'x'; }), 'ERR_DTYPE', /^choices\[1\]\.logprobs\.content\[3\]:/);
    throwsCode(bad((r) => { r.choices[0].logprobs = null; }), 'ERR_SHAPE', /^choices\[0\]\.logprobs: expected per-token log-probs/);
    throwsCode(bad((r) => { r.choices[0].logprobs.content[0].token = 'Hola'; r.choices[0].logprobs.content[0].bytes = [72, 111, 108, 97]; }),
      'ERR_TARGET_RANGE', /^choices\[0\]\.logprobs\.content\[0\]\.token: expected a token in the token map, got "Hola"/);
    throwsCode(bad((r) => { r.choices[0].logprobs.content[0].bytes = [72, 300]; }), 'ERR_DTYPE', /content\[0\]\.bytes\[1\]/);
    throwsCode(bad((r) => { r.choices = null; }), 'ERR_DTYPE', /^choices: expected an array/);
    throwsCode(() => rl.parseOpenAIChat({ error: { message: 'overloaded' } }), 'ERR_OPTION', /^error: expected a response without an error/);
    throwsCode(() => rl.parseOpenAIChat(null), 'ERR_DTYPE', /^response: expected an object/);
    throwsCode(() => rl.parseOpenAIChat({ choices: [] }, { tokenMap: {} as never }), 'ERR_OPTION', /tokenMap/);
    throwsCode(() => rl.parseOpenAIChat({ choices: [] }, { bogus: 1 } as never), 'ERR_OPTION', /options\.bogus/);
  });

  it('a streamed error names the chunk', () => {
    const chunks = fixture('openai/chat_stream.json');
    chunks[2].choices[0].logprobs.content[0].top_logprobs[0].logprob = 'x';
    throwsCode(() => rl.parseOpenAIChat(chunks, { tokenMap: BYTE_VOCAB, tokenKeys: 'bytes' }), 'ERR_DTYPE',
      /^chunks\[2\]\.choices\[0\]\.logprobs\.content\[0\]\.top_logprobs\[0\]\.logprob: expected a finite number ≤ 0/);
  });
});

describe('parseOpenAICompletion (legacy logprobs)', () => {
  const VOCAB = new Map([[' Hello', 22691], [' Hi', 15902], ['!', 0], ['.', 13]]);

  it('reads tokens / token_logprobs / top_logprobs maps', () => {
    const [s] = rl.parseOpenAICompletion(fixture('openai/completion_legacy.json'), { tokenMap: VOCAB });
    expect(Array.from(s!.tokenIds)).toEqual([22691, 0]);
    expect(Array.from(s!.logprobs)).toEqual([-0.75, -0.125]);
    expect(s!.topK!.k).toBe(2);
    expect(Array.from(s!.topK!.ids)).toEqual([22691, 15902, 0, 13]);
    expect(Array.from(s!.topK!.logprobs)).toEqual([-0.75, -1.5, -0.125, -2.25]);
    expect(s!.text).toBe(' Hello!');
  });

  it('streamed chunks give the same sequence', () => {
    const [s] = rl.parseOpenAICompletion(fixture('openai/completion_stream.json'), { tokenMap: VOCAB });
    expect(Array.from(s!.tokenIds)).toEqual([22691, 0]);
    expect(Array.from(s!.topK!.ids)).toEqual([22691, 15902, 0, 13]);
    expect(s!.finishReason).toBe('stop');
  });

  it('vLLM echo: token_ids hold the completion, logprobs cover prompt + completion', () => {
    const r = { choices: [{ index: 0, text: 'Hi there', token_ids: [7, 8], logprobs: {
      tokens: ['token_id:5', 'token_id:6', 'token_id:7', 'token_id:8'], token_logprobs: [null, -3, -0.5, -0.25],
      top_logprobs: [null, { 'token_id:6': -3 }, { 'token_id:7': -0.5, 'token_id:9': -1 }, { 'token_id:8': -0.25 }], text_offset: [0, 1, 2, 5] } }] };
    const [s] = rl.parseOpenAICompletion(r);
    expect(Array.from(s!.tokenIds)).toEqual([7, 8]);
    expect(Array.from(s!.logprobs)).toEqual([-0.5, -0.25]);
    expect(Array.from(s!.topK!.ids)).toEqual([7, 9, 8, -1]);
  });

  it('truncated or malformed arrays are reported at their position', () => {
    const r = fixture('openai/completion_legacy.json');
    r.choices[0].logprobs.token_logprobs.pop();
    throwsCode(() => rl.parseOpenAICompletion(r, { tokenMap: VOCAB }), 'ERR_SHAPE',
      'choices[0].logprobs.token_logprobs.length: expected 2 (one per token), got 1');
    const r2 = fixture('openai/completion_legacy.json');
    r2.choices[0].logprobs.top_logprobs[1]['.'] = 1;
    throwsCode(() => rl.parseOpenAICompletion(r2, { tokenMap: VOCAB }), 'ERR_OPTION',
      'choices[0].logprobs.top_logprobs[1]["."]: expected a finite number ≤ 0, got 1');
    const r3 = fixture('openai/completion_legacy.json');
    r3.choices[0].logprobs.token_logprobs[0] = null;
    throwsCode(() => rl.parseOpenAICompletion(r3, { tokenMap: VOCAB }), 'ERR_DTYPE', /^choices\[0\]\.logprobs\.token_logprobs\[0\]:/);
  });
});
