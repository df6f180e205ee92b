// Memory reuse across steps: parse arenas (createParseArena) and packServerRollouts' `out`. Results must
// equal the fresh-allocation path exactly, reuse must really share memory, and nothing from an earlier
// step may leak into a later one.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { fixture, throwsCode } from './helpers.js';

/** A deterministic token map for responses without ids (any map works: both paths use the same one). */
const MAP = (tok: string): number => {
  let h = 7;
  for (let i = 0; i < tok.length; i++) h = (h * 31 + tok.charCodeAt(i)) % 100_000;
  return h;
};

/** Every parser on its fixture, with or without an arena. */
const CASES: [string, (o: { arena?: rl.ParseArena }) => rl.ServerSequence[]][] = [
  ['sglang generate', (o) => rl.parseSglang(fixture('sglang/generate.json'), o)],
  ['sglang batch', (o) => rl.parseSglang(fixture('sglang/generate_batch.json'), o)],
  ['sglang stream', (o) => rl.parseSglang(fixture('sglang/generate_stream.json'), o)],
  ['sglang input', (o) => [rl.parseSglangInputLogprobs(fixture('sglang/generate.json'), { ...o, length: 2 })]],
  ['llama.cpp', (o) => rl.parseLlamaCpp(fixture('llamacpp/completion.json'), o)],
  ['llama.cpp stream', (o) => rl.parseLlamaCpp(fixture('llamacpp/completion_stream.json'), o)],
  ['vllm outputs', (o) => rl.parseVllmOutputs(fixture('vllm/request_output.json'), o)],
  ['vllm chat ids', (o) => rl.parseVllm(fixture('vllm/chat_token_ids.json'), o)],
  ['vllm prompt', (o) => [rl.parseVllmPromptLogprobs(fixture('vllm/completion_prompt_logprobs.json'), { ...o, length: 3 })]],
  ['openai chat', (o) => rl.parseOpenAIChat(fixture('openai/chat_logprobs.json'), { ...o, tokenMap: MAP })],
  ['openai completion', (o) => rl.parseOpenAICompletion(fixture('openai/completion_legacy.json'), { ...o, tokenMap: MAP })],
];

function plain(s: rl.ServerSequence): unknown {
  return { ...s, tokenIds: Array.from(s.tokenIds), logprobs: Array.from(s.logprobs),
    topK: s.topK && { k: s.topK.k, ids: Array.from(s.topK.ids), logprobs: Array.from(s.topK.logprobs) } };
}

/** A top-k sequence of n tokens whose entries all derive from `seed`. */
function synthetic(n: number, k: number, seed: number, gaps = true): unknown {
  return { meta_info: {
    output_token_logprobs: Array.from({ length: n }, (_, i) => [-(i % 7) / 8 - seed / 64, 1000 * seed + i, null]),
    // every third row without alternatives (null), as SGLang sends for positions it did not score
    output_top_logprobs: Array.from({ length: n }, (_, i) => (gaps && i % 3 === 0 ? null : Array.from({ length: k },
      (_, j) => [-(j + 1) / 4 - seed / 64, 1000 * seed + i + j, null]))),
  } };
}

describe('createParseArena', () => {
  it.each(CASES)('%s: the same sequences as without an arena, allocated from its slabs', (_, parse) => {
    const arena = rl.createParseArena({ slabBytes: 4096 });
    const fresh = parse({}).map(plain);
    const pooled = parse({ arena });
    expect(pooled.map(plain)).toEqual(fresh);
    expect(arena.used).toBeGreaterThan(0);
    expect(arena.capacity).toBeGreaterThanOrEqual(arena.used);
    // the fixtures are far below a slab: a fresh buffer would be exactly the sequence's size
    for (const s of pooled) expect(s.tokenIds.buffer.byteLength).toBeGreaterThanOrEqual(4096);
  });

  it('reuses its memory after reset(); stale counts never pad a later row wrongly', () => {
    const arena = rl.createParseArena({ slabBytes: 1 << 16 });
    const [a] = rl.parseSglang(synthetic(300, 5, 1, false), { arena });
    const capacity = arena.capacity;
    const buf = a!.tokenIds.buffer;
    arena.reset();
    expect(arena.used).toBe(0);
    // rows i % 3 == 0 now have no alternatives: they must come back fully padded although the previous
    // step wrote entries (and counts) there
    const [b] = rl.parseSglang(synthetic(300, 5, 2), { arena });
    expect(b!.tokenIds.buffer).toBe(buf);
    expect(arena.capacity).toBe(capacity);
    expect(plain(b!)).toEqual(plain(rl.parseSglang(synthetic(300, 5, 2))[0]!));
    // the sequence from before the reset now shows the new data: documented
    expect(a!.tokenIds[0]).toBe(2000);
  });

  it('a sequence larger than a slab gets a slab of its own, kept for reuse', () => {
    const arena = rl.createParseArena({ slabBytes: 4096 });
    const [s] = rl.parseSglang(synthetic(2000, 8, 3), { arena });
    expect(s!.tokenIds.buffer.byteLength).toBeGreaterThan(4096);
    const cap = arena.capacity;
    arena.reset();
    rl.parseSglang(synthetic(2000, 8, 4), { arena });
    expect(arena.capacity).toBe(cap);
    arena.release();
    expect(arena.capacity).toBe(0);
    expect(plain(rl.parseSglang(synthetic(50, 2, 5), { arena })[0]!)).toEqual(plain(rl.parseSglang(synthetic(50, 2, 5))[0]!));
  });

  it('bad options and foreign arenas are coded errors', () => {
    throwsCode(() => rl.createParseArena({ slabBytes: 100 }), 'ERR_OPTION', /slabBytes/);
    throwsCode(() => rl.createParseArena({ slabBytes: 1.5e4 + 0.5 }), 'ERR_OPTION', /slabBytes/);
    throwsCode(() => rl.createParseArena({ slab: 1 } as never), 'ERR_OPTION', /slab/);
    throwsCode(() => rl.createParseArena(3 as never), 'ERR_OPTION');
    const fake = { reset() {}, capacity: 0, used: 0, release() {} };
    throwsCode(() => rl.parseSglang(synthetic(3, 1, 1), { arena: fake }), 'ERR_OPTION', /arena/);
    throwsCode(() => rl.parseLlamaCpp(fixture('llamacpp/completion.json'), { arena: {} as never }), 'ERR_OPTION', /arena/);
  });
});

describe('packServerRollouts out', () => {
  const traj = (seqs: rl.ServerSequence[], tool: number[]): rl.ServerTrajectory[] => seqs.map((s, i) => ({
    group: i >> 1, turns: [{ role: 'assistant', response: s, reward: i }, { role: 'tool', tokens: tool }] }));

  it('writes into the earlier batch\'s memory and equals a fresh pack, context tokens included', () => {
    const s1 = rl.parseSglang([synthetic(40, 4, 1), synthetic(30, 4, 2)]);
    const first = rl.packServerRollouts({ trajectories: traj(s1, [7, 8, 9]) });
    const s2 = rl.parseSglang([synthetic(20, 4, 3), synthetic(25, 4, 4)]);
    // the tool turns of step 2 sit where step 1 had assistant tokens: their log-probs must be 0 again
    const reused = rl.packServerRollouts({ trajectories: traj(s2, [5, 6, 7, 8, 9]), out: first });
    const fresh = rl.packServerRollouts({ trajectories: traj(s2, [5, 6, 7, 8, 9]) });
    expect(reused.logprobs.buffer).toBe(first.logprobs.buffer);
    expect(reused.topK.ids.buffer).toBe(first.logprobs.buffer);
    expect(Array.from(reused.logprobs)).toEqual(Array.from(fresh.logprobs));
    expect(Array.from(reused.topK.ids)).toEqual(Array.from(fresh.topK.ids));
    expect(Array.from(reused.topK.logprobs)).toEqual(Array.from(fresh.topK.logprobs));
    expect(Array.from(reused.mask)).toEqual(Array.from(fresh.mask));
  });

  it('teacher arrays too; a batch that is too small is replaced by one with headroom', () => {
    const s = rl.parseSglang([synthetic(10, 2, 1)])[0]!;
    const withTeacher = (q: rl.ServerSequence, t: rl.ServerSequence): rl.ServerTrajectory[] => [
      { group: 0, turns: [{ role: 'user', tokens: [1, 2] }, { role: 'assistant', response: q, teacher: t }] }];
    const small = rl.packServerRollouts({ trajectories: withTeacher(s, s) });
    const big = rl.parseSglang([synthetic(100, 3, 2)])[0]!;
    const grown = rl.packServerRollouts({ trajectories: withTeacher(big, big), out: small });
    expect(grown.logprobs.buffer).not.toBe(small.logprobs.buffer);
    const need = 4 * (102 + 2 * 102 * 3) * 2;
    expect(grown.logprobs.buffer.byteLength).toBeGreaterThanOrEqual(Math.floor(need * 1.25));
    const again = rl.packServerRollouts({ trajectories: withTeacher(s, s), out: grown });
    expect(again.logprobs.buffer).toBe(grown.logprobs.buffer);
    expect(Array.from(again.teacherLogprobs!)).toEqual([0, 0, ...Array.from(s.logprobs)]);
    expect(Array.from(again.teacherTopK!.ids)).toEqual(Array.from(small.teacherTopK!.ids));
  });

  it('refuses anything but a batch from packServerRollouts; a transferred batch is replaced', () => {
    const s = rl.parseSglang([synthetic(5, 2, 1)]);
    const b = rl.packServerRollouts({ trajectories: traj(s, [1]) });
    throwsCode(() => rl.packServerRollouts({ trajectories: traj(s, [1]), out: { ...b, logprobs: new Float32Array(100) } }), 'ERR_OPTION', /out/);
    throwsCode(() => rl.packServerRollouts({ trajectories: traj(s, [1]), out: {} as never }), 'ERR_OPTION', /out/);
    structuredClone(b.logprobs.buffer, { transfer: [b.logprobs.buffer] });
    const c = rl.packServerRollouts({ trajectories: traj(s, [1]), out: b });
    expect(c.logprobs.buffer.byteLength).toBeGreaterThan(0);
    expect(Array.from(c.logprobs)).toEqual([...Array.from(s[0]!.logprobs), 0]);
  });

  it('hand-built sequences are still checked entry by entry; parsed ones were checked when parsed', () => {
    const [s] = rl.parseSglang([synthetic(4, 2, 1)]);
    const hand: rl.ServerSequence = { index: 0, tokenIds: s!.tokenIds.slice(), logprobs: s!.logprobs.slice(),
      topK: { k: 2, ids: s!.topK!.ids.slice(), logprobs: s!.topK!.logprobs.slice() } };
    hand.topK!.logprobs[3] = 0.5;
    throwsCode(() => rl.packServerRollouts({ trajectories: [{ group: 0, turns: [{ role: 'assistant', response: hand }] }] }), 'ERR_OPTION', /topK\[1\]\[1\]/);
    // a parsed block that was edited afterwards is packed as is, and the sparse kernels reject it
    s!.topK!.logprobs[3] = Number.NaN;
    const b = rl.packServerRollouts({ trajectories: [{ group: 0, turns: [{ role: 'assistant', response: s! }] }] });
    expect(Number.isNaN(b.topK.logprobs[3])).toBe(true);
    throwsCode(() => rl.sparseDivergence(b.topK, b.topK, { vocab: 10_000 }), 'ERR_NON_FINITE');
  });
});
