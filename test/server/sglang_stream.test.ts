// SGLang /generate with stream: true: cumulative (default server) and incremental
// (--incremental-streaming-output) log-prob lists, n > 1 interleaved by index, the [DONE] terminator, and
// coded errors for cut, inconsistent or contradictory chunks. Expected values written out from the fixtures.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { f32, fixture, throwsCode } from './helpers.js';

const IDS = [12095, 13, 151645];
const LPS = f32([-0.5, -0.125, -0.0625]);
const TOP_IDS = [12095, 264, 13, 11, 151645, 198];
const TOP_LPS = f32([-0.5, -2.5, -0.125, -3, -0.0625, -3.5]);

function expectParis(s: rl.ServerSequence | undefined): void {
  expect(s!.index).toBe(0);
  expect(Array.from(s!.tokenIds)).toEqual(IDS);
  expect(Array.from(s!.logprobs)).toEqual(LPS);
  expect(s!.topK!.k).toBe(2);
  expect(Array.from(s!.topK!.ids)).toEqual(TOP_IDS);
  expect(Array.from(s!.topK!.logprobs)).toEqual(TOP_LPS);
  expect(s!.text).toBe(' Paris.');
  expect(s!.finishReason).toBe('stop');
}

describe('parseSglang: streamed chunks', () => {
  it('cumulative lists (the default server): the last chunk holds every token', () => {
    const seqs = rl.parseSglang(fixture('sglang/generate_stream.json'));
    expect(seqs).toHaveLength(1);
    expectParis(seqs[0]);
    expectParis(rl.parseSglang(fixture('sglang/generate_stream.json'), { incremental: false })[0]);
  });

  it('incremental lists (--incremental-streaming-output) are concatenated, text too', () => {
    const seqs = rl.parseSglang(fixture('sglang/generate_stream_incremental.json'));
    expect(seqs).toHaveLength(1);
    expectParis(seqs[0]);
    expectParis(rl.parseSglang(fixture('sglang/generate_stream_incremental.json'), { incremental: true })[0]);
    // with '[DONE]' appended, and without alternatives
    const [s] = rl.parseSglang([...fixture('sglang/generate_stream_incremental.json'), '[DONE]'], { topLogprobs: false });
    expect(Array.from(s!.tokenIds)).toEqual(IDS);
    expect(s!.topK).toBeNull();
  });

  it('an arena holds the streamed sequences like fresh memory', () => {
    const arena = rl.createParseArena();
    for (const f of ['sglang/generate_stream.json', 'sglang/generate_stream_incremental.json', 'sglang/generate_stream_n2.json']) {
      expect(rl.parseSglang(fixture(f), { arena })).toEqual(rl.parseSglang(fixture(f)));
    }
    expect(arena.used).toBeGreaterThan(0);
  });

  it('n = 2 streamed interleaved: grouped by index, in index order; [DONE] ends the stream', () => {
    const seqs = rl.parseSglang(fixture('sglang/generate_stream_n2.json'));
    expect(seqs.map((s) => [s.index, Array.from(s.tokenIds), s.text, s.finishReason])).toEqual([
      [0, [12095], ' Paris', 'length'], [1, [264, 3283], ' a city', 'length'],
    ]);
    expect(Array.from(seqs[1]!.logprobs)).toEqual([-2.5, -1]);
    expect(Array.from(seqs[1]!.topK!.ids)).toEqual([12095, 264, 3283, -1]);
    expect(Array.from(seqs[1]!.topK!.logprobs)).toEqual([-0.5, -2.5, -1, -Infinity]);
    // the same chunks in another order give the same sequences
    const c = fixture('sglang/generate_stream_n2.json');
    expect(rl.parseSglang([c[1], c[0], c[2], c[3]])).toEqual(seqs);
  });

  it('stream detection: finish_reason null or [DONE]; stream: false reads a batch; finished batches stay batches', () => {
    const n2 = fixture('sglang/generate_stream_n2.json').slice(0, 3);
    // as a batch, every element is one response (the unfinished one has finishReason null)
    const batch = rl.parseSglang(n2, { stream: false });
    expect(batch.map((s) => [s.index, s.tokenIds.length, s.finishReason])).toEqual([[0, 1, 'length'], [1, 1, null], [2, 2, 'length']]);
    expect(rl.parseSglang(fixture('sglang/generate_batch.json')).map((s) => s.index)).toEqual([0, 1]);
    // a single finished chunk reads the same either way
    const last = fixture('sglang/generate_stream.json')[2];
    expect(rl.parseSglang([last], { stream: true })).toEqual(rl.parseSglang([last]));
    expect(rl.parseSglang(last, { stream: true })).toEqual(rl.parseSglang([last]));
    expect(rl.parseSglang(['[DONE]'])).toEqual([]);
  });

  it('detection without completion_tokens: lists that cannot be cumulative are incremental, the rest is ambiguous', () => {
    const inc = fixture('sglang/generate_stream_incremental.json');
    for (const c of inc) delete c.meta_info.completion_tokens;
    expectParis(rl.parseSglang(inc)[0]); // [[12095]] then [[13]]: the second does not repeat the first
    const cum = fixture('sglang/generate_stream.json');
    for (const c of cum) delete c.meta_info.completion_tokens;
    throwsCode(() => rl.parseSglang(cum), 'ERR_OPTION',
      /^chunks\[0\]\.meta_info\.completion_tokens: expected running token counts to tell cumulative from incremental.*options\.incremental/);
    expectParis(rl.parseSglang(cum, { incremental: false })[0]);
    // only the last chunk has tokens: both readings agree
    const one = fixture('sglang/generate_stream_incremental.json');
    one[0].meta_info.output_token_logprobs = [];
    one[0].meta_info.output_top_logprobs = [];
    one[0].output_ids = [];
    one[1].meta_info.output_token_logprobs = [];
    one[1].meta_info.output_top_logprobs = [];
    one[1].output_ids = [];
    for (const c of one) delete c.meta_info.completion_tokens;
    expect(Array.from(rl.parseSglang(one)[0]!.tokenIds)).toEqual([151645]);
  });

  it('a stream cut short, or chunks after the final one, are refused', () => {
    const cut = fixture('sglang/generate_stream.json').slice(0, 2);
    throwsCode(() => rl.parseSglang(cut), 'ERR_SHAPE',
      /^chunks\[1\]\.meta_info\.finish_reason: expected a finish reason on the last chunk of request index 0 \(the stream was cut short\), got null/);
    const n2 = fixture('sglang/generate_stream_n2.json');
    throwsCode(() => rl.parseSglang(n2.slice(0, 2)), 'ERR_SHAPE', /^chunks\[1\]\.meta_info\.finish_reason: expected a finish reason on the last chunk of request index 1/);
    const after = fixture('sglang/generate_stream_incremental.json');
    after.push(structuredClone(after[2]));
    throwsCode(() => rl.parseSglang(after), 'ERR_SHAPE', /^chunks\[3\]: expected no chunk of request index 0 after its final chunk chunks\[2\]/);
    const done = fixture('sglang/generate_stream_n2.json');
    done.splice(1, 0, '[DONE]');
    throwsCode(() => rl.parseSglang(done), 'ERR_SHAPE', `chunks[1]: expected the '[DONE]' terminator only as the last chunk, got "[DONE]"`);
  });

  it('inconsistent chunks name the chunk and field', () => {
    const shrink = fixture('sglang/generate_stream.json');
    shrink[1].meta_info.output_token_logprobs.pop();
    shrink[1].meta_info.output_top_logprobs.pop();
    throwsCode(() => rl.parseSglang(shrink, { incremental: false }), 'ERR_SHAPE',
      'chunks[1].meta_info.output_token_logprobs.length: expected 2 (meta_info.completion_tokens, cumulative lists), got 1');
    throwsCode(() => rl.parseSglang(shrink), 'ERR_SHAPE',
      'chunks[2].meta_info.output_token_logprobs.length: expected 1 (meta_info.completion_tokens 3 read with incremental lists; ' +
      'cumulative lists disagree from chunks[1] on), got 3');
    const grow = fixture('sglang/generate_stream.json');
    grow[2].meta_info.completion_tokens = 4;
    throwsCode(() => rl.parseSglang(grow), 'ERR_SHAPE',
      'chunks[2].meta_info.output_token_logprobs.length: expected 4 (meta_info.completion_tokens 4 read with cumulative lists; ' +
      'incremental lists disagree from chunks[1] on), got 3');
    const changed = fixture('sglang/generate_stream.json');
    changed[2].meta_info.output_token_logprobs[1][1] = 14;
    throwsCode(() => rl.parseSglang(changed), 'ERR_SHAPE',
      'chunks[2].meta_info.output_token_logprobs[1]: expected the same [logprob, token_id] as chunks[1] (cumulative lists), got "[-0.125, 14]"');
    const wrongMode = fixture('sglang/generate_stream_incremental.json');
    throwsCode(() => rl.parseSglang(wrongMode, { incremental: false }), 'ERR_SHAPE',
      'chunks[1].meta_info.output_token_logprobs[0]: expected the same [logprob, token_id] as chunks[0] (cumulative lists), got "[-0.125, 13]"');
    throwsCode(() => rl.parseSglang(fixture('sglang/generate_stream.json'), { incremental: true }), 'ERR_SHAPE',
      /^chunks\[1\]\.meta_info\.output_token_logprobs\.length: expected 1 \(meta_info\.completion_tokens 2 less the 1 tokens before, incremental lists\), got 2/);
    const ids = fixture('sglang/generate_stream_incremental.json');
    ids[1].output_ids = [11];
    throwsCode(() => rl.parseSglang(ids), 'ERR_TARGET_RANGE', /^chunks\[1\]\.output_ids\[0\]: expected 13 \(the token id of output_token_logprobs\[0\], token 1 of the stream\), got 11/);
    const idsCum = fixture('sglang/generate_stream.json');
    idsCum[2].output_ids.pop();
    throwsCode(() => rl.parseSglang(idsCum), 'ERR_SHAPE', 'chunks[2].output_ids.length: expected 3 (one per output_token_logprobs entry), got 2');
    const tops = fixture('sglang/generate_stream_incremental.json');
    tops[1].meta_info.output_top_logprobs.push(null);
    throwsCode(() => rl.parseSglang(tops), 'ERR_SHAPE', 'chunks[1].meta_info.output_top_logprobs.length: expected 1 (one per token), got 2');
  });

  it('bad tuples and bad chunks name their chunk', () => {
    const inc = fixture('sglang/generate_stream_incremental.json');
    inc[2].meta_info.output_token_logprobs[0][0] = 0.5;
    throwsCode(() => rl.parseSglang(inc), 'ERR_OPTION', 'chunks[2].meta_info.output_token_logprobs[0][0]: expected a finite number ≤ 0, got 0.5');
    const top = fixture('sglang/generate_stream_incremental.json');
    top[1].meta_info.output_top_logprobs[0][1][1] = -4;
    throwsCode(() => rl.parseSglang(top), 'ERR_TARGET_RANGE', /^chunks\[1\]\.meta_info\.output_top_logprobs\[0\]\[1\]\[1\]/);
    const cum = fixture('sglang/generate_stream.json');
    cum[2].meta_info.output_token_logprobs[2][1] = 'x';
    throwsCode(() => rl.parseSglang(cum), 'ERR_DTYPE', /^chunks\[2\]\.meta_info\.output_token_logprobs\[2\]\[1\]/);
    const err = fixture('sglang/generate_stream.json');
    err[1] = { error: { message: 'out of memory' } };
    throwsCode(() => rl.parseSglang(err), 'ERR_OPTION', /^chunks\[1\]\.error: expected a response without an error/);
    const noLp = fixture('sglang/generate_stream.json');
    delete noLp[0].meta_info.output_token_logprobs;
    throwsCode(() => rl.parseSglang(noLp), 'ERR_SHAPE', /^chunks\[0\]\.meta_info\.output_token_logprobs: expected per-token log-probs/);
    const ix = fixture('sglang/generate_stream_n2.json');
    ix[1].index = -1;
    throwsCode(() => rl.parseSglang(ix), 'ERR_TARGET_RANGE', /^chunks\[1\]\.index: expected an integer request index/);
    throwsCode(() => rl.parseSglang([1, '[DONE]']), 'ERR_DTYPE', 'chunks[0]: expected an object, got 1');
    throwsCode(() => rl.parseSglang([], { stream: 1 as unknown as boolean }), 'ERR_OPTION', 'parseSglang: options.stream: expected a boolean, got 1');
    throwsCode(() => rl.parseSglang([], { incremental: 'yes' as unknown as boolean }), 'ERR_OPTION', /^parseSglang: options\.incremental: expected a boolean/);
    throwsCode(() => rl.parseSglang([], { streaming: true } as never), 'ERR_OPTION', /^parseSglang: options\.streaming: expected a known option/);
  });
});

// Every field of the stream fixtures replaced by a wrong value (or deleted): a result or a coded error.
const BAD: unknown[] = [undefined, null, 'x', -1, 0.5, NaN, 2 ** 40, {}, [], [[]], true, '[DONE]'];

function paths(x: unknown, prefix: (string | number)[] = [], out: (string | number)[][] = []): (string | number)[][] {
  if (x !== null && typeof x === 'object') {
    for (const [k, v] of Object.entries(x)) {
      const p = [...prefix, Array.isArray(x) ? Number(k) : k];
      // the prompt's log-probs are not read by parseSglang: skip their many leaves
      if (k === 'input_token_logprobs' || k === 'input_top_logprobs') continue;
      out.push(p);
      paths(v, p, out);
    }
  }
  return out;
}

describe('hostile streamed chunks', () => {
  for (const file of ['sglang/generate_stream.json', 'sglang/generate_stream_incremental.json', 'sglang/generate_stream_n2.json']) {
    it(`${file}: every field replaced or deleted gives well-formed sequences or a coded GearError`, () => {
      const base = fixture(file);
      let errors = 0;
      let results = 0;
      for (const p of paths(base)) {
        for (const v of BAD) {
          const copy = structuredClone(base);
          let node = copy;
          for (let i = 0; i < p.length - 1; i++) node = node[p[i]!];
          if (v === undefined) delete node[p[p.length - 1]!];
          else node[p[p.length - 1]!] = v;
          let out: rl.ServerSequence[];
          try {
            out = rl.parseSglang(copy);
          } catch (e) {
            if (!(e instanceof rl.GearError)) throw new Error(`${file} ${JSON.stringify(p)} = ${String(v)}: ${String(e)}`);
            errors++;
            continue;
          }
          results++;
          for (const s of out) {
            expect(s.tokenIds.length).toBe(s.logprobs.length);
            for (const id of s.tokenIds) expect(id).toBeGreaterThanOrEqual(0);
            for (const lp of s.logprobs) expect(lp <= 0 && lp > -Infinity).toBe(true);
          }
        }
      }
      expect(errors).toBeGreaterThan(0);
      expect(results).toBeGreaterThan(0);
    });
  }
});
