// Every field of every fixture, replaced by each of a set of wrong values (or deleted): a parser either
// returns a well-formed result or throws a GearError with a code — never a TypeError, never NaN ids.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { fixture } from './helpers.js';

const BYTE_VOCAB = new Map<string, number>([
  ['Hello', 9906], ['Hi', 13347], ['!', 0], ['Ġthere', 1070], ['Ġ', 220], ['ðŁ', 9468], ['ļĢ', 248], ['âľ', 38798],
]);
const LEGACY_VOCAB = new Map([[' Hello', 22691], [' Hi', 15902], ['!', 0], ['.', 13]]);
const OLD_VOCAB = new Map([[' Par', 3681], [' a', 263], ['is', 275], ['ise', 1338]]);

const CASES: [string, (r: unknown) => unknown][] = [
  ['openai/chat_logprobs.json', (r) => rl.parseOpenAIChat(r, { tokenMap: BYTE_VOCAB, tokenKeys: 'bytes' })],
  ['openai/chat_stream.json', (r) => rl.parseOpenAIChat(r, { tokenMap: BYTE_VOCAB, tokenKeys: 'bytes' })],
  ['openai/completion_legacy.json', (r) => rl.parseOpenAICompletion(r, { tokenMap: LEGACY_VOCAB })],
  ['openai/completion_stream.json', (r) => rl.parseOpenAICompletion(r, { tokenMap: LEGACY_VOCAB })],
  ['openai/completion_echo.json', (r) => rl.parseOpenAIPromptLogprobs(r, { tokenMap: (t: string) => t.length + 100, length: 4 })],
  ['vllm/chat_token_ids.json', (r) => rl.parseVllm(r)],
  ['vllm/completion_prompt_logprobs.json', (r) => rl.parseVllmPromptLogprobs(r, { length: 3 })],
  ['vllm/request_output.json', (r) => rl.parseVllmOutputs(r)],
  ['sglang/generate.json', (r) => [rl.parseSglang(r), rl.parseSglangInputLogprobs(r, { length: 2 })]],
  ['sglang/generate_batch.json', (r) => rl.parseSglang(r)],
  ['llamacpp/completion.json', (r) => rl.parseLlamaCpp(r)],
  ['llamacpp/completion_post_sampling.json', (r) => rl.parseLlamaCpp(r)],
  ['llamacpp/completion_old_probs.json', (r) => rl.parseLlamaCpp(r, { tokenMap: OLD_VOCAB })],
  ['llamacpp/completion_stream.json', (r) => rl.parseLlamaCpp(r)],
];

const BAD: unknown[] = [undefined, null, 'x', -1, 0.5, NaN, Infinity, 2 ** 40, {}, [], [[]], true];

/** Paths (as key lists) of every node below the root. */
function paths(x: unknown, prefix: (string | number)[] = [], out: (string | number)[][] = []): (string | number)[][] {
  if (x !== null && typeof x === 'object') {
    for (const [k, v] of Object.entries(x)) {
      const p = [...prefix, Array.isArray(x) ? Number(k) : k];
      out.push(p);
      paths(v, p, out);
    }
  }
  return out;
}

function mutate(root: unknown, path: (string | number)[], value: unknown): unknown {
  const copy = structuredClone(root) as Record<string | number, unknown>;
  let node = copy;
  for (let i = 0; i < path.length - 1; i++) node = node[path[i]!] as Record<string | number, unknown>;
  const last = path[path.length - 1]!;
  if (value === undefined) delete node[last];
  else node[last] = value;
  return copy;
}

function checkSeq(s: rl.ServerSequence): void {
  expect(s.tokenIds).toBeInstanceOf(Int32Array);
  for (const id of s.tokenIds) expect(id).toBeGreaterThanOrEqual(0);
  for (const lp of s.logprobs) expect(lp <= 0 && lp > -Infinity).toBe(true);
  if (s.topK) {
    expect(s.topK.ids.length).toBe(s.tokenIds.length * s.topK.k);
    s.topK.ids.forEach((id, i) => {
      const lp = s.topK!.logprobs[i]!;
      expect(id === -1 ? lp === -Infinity : id >= 0 && lp <= 0 && lp > -Infinity, `${id} ${lp}`).toBe(true);
    });
  }
}

describe('hostile responses', () => {
  for (const [file, parse] of CASES) {
    it(`${file}: every field replaced or deleted gives a result or a coded GearError`, () => {
      const base = fixture(file);
      let errors = 0;
      let results = 0;
      for (const p of paths(base)) {
        for (const v of BAD) {
          let out: unknown;
          try {
            out = parse(mutate(base, p, v));
          } catch (e) {
            if (!(e instanceof rl.GearError)) throw new Error(`${file} ${JSON.stringify(p)} = ${String(v)}: ${String(e)}`);
            expect(e.code).toMatch(/^ERR_/);
            errors++;
            continue;
          }
          results++;
          const seqs = ([] as unknown[]).concat(out).flat() as rl.ServerSequence[];
          for (const s of seqs) checkSeq(s);
        }
      }
      expect(errors).toBeGreaterThan(0);
      expect(results).toBeGreaterThan(0); // fields the parser does not read (text, usage, ...) change nothing
    });
  }
});

describe('hostile pack input', () => {
  it('wrong shapes anywhere in the trajectories give a coded GearError', () => {
    const [seq] = rl.parseSglang(fixture('sglang/generate.json'));
    const good = () => ({ group: 'g', turns: [{ role: 'assistant', response: seq, reward: 1 }, { role: 'tool', tokens: [1, 2] }] }) as any;
    const muts: ((t: any) => void)[] = [
      (t) => { t.turns = null; }, (t) => { t.turns[0] = null; }, (t) => { t.turns[0].response = null; },
      (t) => { t.turns[0].response = {}; }, (t) => { t.turns[0].response = { ...seq, tokenIds: [1, 2] }; },
      (t) => { t.turns[0].response = { ...seq, logprobs: new Float32Array(1) }; },
      (t) => { t.turns[0].response = { ...seq, topK: { k: 2, ids: new Int32Array(3), logprobs: new Float32Array(3) } }; },
      (t) => { t.turns[0].teacher = 'x'; }, (t) => { t.turns[0].reward = NaN; }, (t) => { t.turns[1].tokens = 'ab'; },
      (t) => { t.turns[1].tokens = [1.5]; }, (t) => { t.turns[1].extra = 1; }, (t) => { t.group = null; }, (t) => { t.id = {}; },
      (t) => { t.episodeReward = Infinity; }, (t) => { t.turns[0].role = undefined; },
    ];
    for (const [i, m] of muts.entries()) {
      const t = good();
      m(t);
      let err: unknown;
      try {
        rl.packServerRollouts({ trajectories: [t] });
      } catch (e) {
        err = e;
      }
      expect(err, `mutation ${i}`).toBeInstanceOf(rl.GearError);
    }
  });
});
