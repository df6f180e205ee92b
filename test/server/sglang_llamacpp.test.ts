// SGLang (/generate meta_info tuples) and llama.cpp (/completion completion_probabilities, current and old
// forms, probabilities, streams). Expected values are written out by hand from the fixtures.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { f32, fixture, throwsCode } from './helpers.js';

const PAD = -Infinity;

describe('parseSglang', () => {
  it('reads output_token_logprobs and output_top_logprobs tuples', () => {
    const [s] = rl.parseSglang(fixture('sglang/generate.json'));
    expect(Array.from(s!.tokenIds)).toEqual([12095, 13]);
    expect(Array.from(s!.logprobs)).toEqual([-0.5, -0.125]);
    expect(Array.from(s!.topK!.ids)).toEqual([12095, 264, 13, 11]);
    expect(Array.from(s!.topK!.logprobs)).toEqual([-0.5, -2.5, -0.125, -3]);
    expect(s!.text).toBe(' Paris.');
    expect(s!.finishReason).toBe('stop');
  });

  it('a batch (n = 2) gives one sequence per response, padded top-k where narrower', () => {
    const seqs = rl.parseSglang(fixture('sglang/generate_batch.json'));
    expect(seqs.map((s) => [s.index, Array.from(s.tokenIds)])).toEqual([[0, [12095]], [1, [264, 3283]]]);
    expect(Array.from(seqs[1]!.topK!.ids)).toEqual([12095, 264, 3283, -1]);
    expect(Array.from(seqs[1]!.topK!.logprobs)).toEqual([-0.5, -2.5, -1, PAD]);
    expect(rl.parseSglang([])).toEqual([]);
  });

  it('input_token_logprobs: teacher scores of the last positions', () => {
    const t = rl.parseSglangInputLogprobs(fixture('sglang/generate.json'), { length: 2 });
    expect(Array.from(t.tokenIds)).toEqual([9625, 374]);
    expect(Array.from(t.logprobs)).toEqual([-4, -0.5]);
    expect(Array.from(t.topK!.ids)).toEqual([6876, 9625, 374, 702]);
    const all = rl.parseSglangInputLogprobs(fixture('sglang/generate.json'));
    expect(Array.from(all.tokenIds)).toEqual([6722, 315, 9625, 374]); // the first position has no log-prob
  });

  it('errors name the tuple position', () => {
    const r = fixture('sglang/generate.json');
    r.meta_info.output_top_logprobs[1][1][0] = 2;
    throwsCode(() => rl.parseSglang(r), 'ERR_OPTION', 'response.meta_info.output_top_logprobs[1][1][0]: expected a finite number ≤ 0, got 2');
    const r2 = fixture('sglang/generate.json');
    r2.meta_info.output_token_logprobs[0][1] = -3;
    throwsCode(() => rl.parseSglang(r2), 'ERR_TARGET_RANGE', /^response\.meta_info\.output_token_logprobs\[0\]\[1\]/);
    const r3 = fixture('sglang/generate.json');
    r3.meta_info.output_top_logprobs.pop();
    throwsCode(() => rl.parseSglang(r3), 'ERR_SHAPE', 'response.meta_info.output_top_logprobs.length: expected 2 (one per token), got 1');
    const r4 = fixture('sglang/generate_batch.json');
    delete r4[1].meta_info.output_token_logprobs;
    throwsCode(() => rl.parseSglang(r4), 'ERR_SHAPE', /^response\[1\]\.meta_info\.output_token_logprobs: expected per-token log-probs/);
    throwsCode(() => rl.parseSglangInputLogprobs(fixture('sglang/generate.json'), { start: 0 }), 'ERR_DTYPE',
      /^response\.meta_info\.input_token_logprobs\[0\]\[0\]: expected a finite number ≤ 0, got null/);
  });
});

describe('parseLlamaCpp', () => {
  it('current form: id / token / logprob / bytes / top_logprobs', () => {
    const [s] = rl.parseLlamaCpp(fixture('llamacpp/completion.json'));
    expect(Array.from(s!.tokenIds)).toEqual([3681, 275]);
    expect(Array.from(s!.logprobs)).toEqual([-0.25, -0.0078125]);
    expect(Array.from(s!.topK!.ids)).toEqual([3681, 263, 275, 1338]);
    expect(Array.from(s!.topK!.logprobs)).toEqual([-0.25, -1.75, -0.0078125, -5]);
    expect(s!.text).toBe(' Paris');
    expect(s!.finishReason).toBe('limit');
  });

  it('post_sampling_probs: prob / top_probs become log-probs, a probability of 0 is left out', () => {
    const [s] = rl.parseLlamaCpp(fixture('llamacpp/completion_post_sampling.json'));
    expect(Array.from(s!.tokenIds)).toEqual([3681, 275]);
    expect(Array.from(s!.logprobs)).toEqual(f32([Math.log(0.75), 0]));
    expect(Array.from(s!.topK!.ids)).toEqual([3681, 263, 275, -1]);
    expect(Array.from(s!.topK!.logprobs)).toEqual(f32([Math.log(0.75), Math.log(0.25), 0, PAD]));
  });

  it('old form (content + probs with tok_str / prob) needs a token map', () => {
    const r = fixture('llamacpp/completion_old_probs.json');
    throwsCode(() => rl.parseLlamaCpp(r), 'ERR_OPTION', /^completion_probabilities\[0\]\.content\.token: expected a token id in the response/);
    const m = new Map([[' Par', 3681], [' a', 263], ['is', 275], ['ise', 1338]]);
    const [s] = rl.parseLlamaCpp(r, { tokenMap: m });
    expect(Array.from(s!.tokenIds)).toEqual([3681, 275]);
    expect(Array.from(s!.logprobs)).toEqual(f32([Math.log(0.5), Math.log(0.125)]));
    expect(Array.from(s!.topK!.ids)).toEqual([3681, 263, 1338, 275]);
    // ids from `tokens` (return_tokens) cover the sampled tokens; alternatives skipped
    const [t] = rl.parseLlamaCpp({ ...r, tokens: [3681, 275] }, { topLogprobs: false });
    expect(Array.from(t!.tokenIds)).toEqual([3681, 275]);
    // the sampled token missing from probs: its log-prob is unknown
    r.completion_probabilities[1].probs.pop();
    throwsCode(() => rl.parseLlamaCpp(r, { tokenMap: m }), 'ERR_SHAPE', /^completion_probabilities\[1\]\.probs: expected an entry with tok_str "is".*raise n_probs/);
  });

  it('streamed chunks (stop: false until the last) concatenate', () => {
    const [s] = rl.parseLlamaCpp(fixture('llamacpp/completion_stream.json'));
    expect(Array.from(s!.tokenIds)).toEqual([3681, 275]);
    expect(Array.from(s!.topK!.ids)).toEqual([3681, 263, 275, 1338]);
    expect(s!.text).toBe(' Paris');
    expect(s!.finishReason).toBe('limit');
  });

  it('a batch (array of finished responses) gives one sequence each', () => {
    const a = fixture('llamacpp/completion.json');
    const b = fixture('llamacpp/completion.json');
    b.index = 1;
    b.completion_probabilities.pop();
    const seqs = rl.parseLlamaCpp([a, b]);
    expect(seqs.map((s) => [s.index, s.tokenIds.length])).toEqual([[0, 2], [1, 1]]);
  });

  it('errors name the position', () => {
    const r = fixture('llamacpp/completion.json');
    r.completion_probabilities[1].top_logprobs[1].logprob = 0.25;
    throwsCode(() => rl.parseLlamaCpp(r), 'ERR_OPTION', 'completion_probabilities[1].top_logprobs[1].logprob: expected a finite number ≤ 0, got 0.25');
    const r2 = fixture('llamacpp/completion_post_sampling.json');
    r2.completion_probabilities[0].top_probs[1].prob = 1.5;
    throwsCode(() => rl.parseLlamaCpp(r2), 'ERR_OPTION', 'completion_probabilities[0].top_probs[1].prob: expected a probability in [0, 1], got 1.5');
    const r3 = fixture('llamacpp/completion_post_sampling.json');
    r3.tokens[1] = 9;
    throwsCode(() => rl.parseLlamaCpp(r3), 'ERR_TARGET_RANGE', 'completion_probabilities[1].id: expected 9 (as in tokens), got 275');
    const s = fixture('llamacpp/completion_stream.json');
    s[1].tokens.push(5);
    throwsCode(() => rl.parseLlamaCpp(s), 'ERR_SHAPE', 'chunks[1].tokens.length: expected 1 (one per completion_probabilities entry), got 2');
    throwsCode(() => rl.parseLlamaCpp({ content: 'x', stop: true }), 'ERR_SHAPE', /^response\.completion_probabilities: expected per-token probabilities \(request n_probs: k\)/);
  });
});
