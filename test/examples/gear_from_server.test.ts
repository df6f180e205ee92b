// Runs the compiled examples/gear-from-server.ts as a user would (`node dist-examples/gear-from-server.js`)
// and checks it against values worked out by hand from its toy model: the teacher's request is the
// answer-conditioned prompt teacherInput builds, the parsed log-probs are the toy model's, both modes are
// raw at T = 1, and GEAR with the log-ratio signal anchors the wrong answers and keeps GRPO's row totals.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const VOCAB = ['<s>', 'User', ':', 'What', 'is', '2', '+', '?', 'Assistant', 'The', 'answer', '3', '4', '5', '.', 'Reference', '</s>'];
const id = (w: string) => VOCAB.indexOf(w);

interface Out {
  requests: { student: { input_ids: number[]; logprob_start_len: number; sampling_params: Record<string, number> };
    teacher: { input_ids: number[]; logprob_start_len: number; top_logprobs_num: number }; vllm: { prompt: number[]; prompt_logprobs: number }; openai: { echo: boolean } }[];
  rows: number; offsets: number[]; tokenIds: number[]; rewards: number[]; logprobs: number[]; teacherLogprobs: number[];
  modes: unknown[]; grpo: number[]; advantages: number[]; weights: number[]; anchors: number[]; logratio: number[];
}
let out: Out;
let text: string;

beforeAll(() => {
  if (!existsSync(join(ROOT, 'dist/index.js'))) throw new Error('dist/ is missing: run `npm run build:ts` (npm test does it in pretest)');
  execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.examples.json'], { cwd: ROOT });
  const json = spawnSync(process.execPath, ['dist-examples/gear-from-server.js', '--json'], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
  if (json.status !== 0) throw new Error(`gear-from-server --json exited ${json.status}: ${json.stderr}`);
  out = JSON.parse(json.stdout.trim().split('\n').pop()!) as Out;
  const plain = spawnSync(process.execPath, ['dist-examples/gear-from-server.js'], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
  if (plain.status !== 0) throw new Error(`gear-from-server exited ${plain.status}: ${plain.stderr}`);
  text = plain.stdout;
}, 120_000);

const f32 = (x: number) => Math.fround(x);

describe('examples/gear-from-server', () => {
  it("sends the rollout at T = 1 without top-k / top-p, and the teacher's prompt with the reference at the end of the user's message", () => {
    const prompt = ['<s>', 'User', ':', 'What', 'is', '2', '+', '2', '?', 'Assistant', ':'].map(id);
    expect(out.requests[0]!.student.input_ids).toEqual(prompt);
    expect(out.requests[0]!.student.sampling_params).toMatchObject({ temperature: 1, top_p: 1, top_k: -1 });
    for (let r = 0; r < out.rows; r++) {
      const response = out.tokenIds.slice(out.offsets[r]!, out.offsets[r + 1]!);
      const want = [...prompt.slice(0, 9), id('Reference'), id('4'), ...prompt.slice(9), ...response];
      expect(out.requests[r]!.teacher.input_ids).toEqual(want);
      expect(out.requests[r]!.teacher.logprob_start_len).toBe(prompt.length + 2);
      expect(out.requests[r]!.vllm.prompt).toEqual(want);
      expect(out.requests[r]!.openai.echo).toBe(true);
    }
    expect(out.modes).toEqual([{ kind: 'raw', temperature: 1, topK: 0, topP: 1 }, { kind: 'raw', temperature: 1, topK: 0, topP: 1 }]);
  });

  it("reads the toy model's log-probs: the answer digit after 'is' (student: 3 .30, 4 .35, 5 .25; teacher: 4 .85, others .03; .002 elsewhere)", () => {
    const zs = 0.3 + 0.35 + 0.25 + 14 * 0.002, zt = 0.85 + 0.03 + 0.03 + 14 * 0.002;
    const student = { 3: 0.3, 4: 0.35, 5: 0.25 } as Record<string, number>, teacher = { 3: 0.03, 4: 0.85, 5: 0.03 } as Record<string, number>;
    let digits = 0;
    for (let t = 1; t < out.tokenIds.length; t++) {
      const w = VOCAB[out.tokenIds[t]!]!;
      if (!(w in student) || out.tokenIds[t - 1] !== id('is')) continue;
      digits++;
      expect(out.logprobs[t]).toBe(f32(Math.log(student[w]! / zs)));
      expect(out.teacherLogprobs[t]).toBe(f32(Math.log(teacher[w]! / zt)));
    }
    expect(digits).toBeGreaterThanOrEqual(4);
  });

  it("anchors exactly the wrong answers after 'is' (the teacher disbelieves them) and keeps each row's GRPO total", () => {
    const wrong: number[] = [];
    for (let t = 1; t < out.tokenIds.length; t++) {
      const w = VOCAB[out.tokenIds[t]!]!;
      if ((w === '3' || w === '5') && out.tokenIds[t - 1] === id('is')) wrong.push(t);
    }
    expect(wrong.length).toBeGreaterThan(0);
    expect(out.anchors).toEqual(wrong);
    for (let r = 0; r < out.rows; r++) {
      const a = out.offsets[r]!, b = out.offsets[r + 1]!;
      const sum = out.advantages.slice(a, b).reduce((x, y) => x + y, 0);
      expect(sum).toBeCloseTo(out.grpo[r]! * (b - a), 4);
      const success = out.tokenIds.slice(a, b).includes(id('4'));
      expect(out.rewards[r]).toBe(success ? 1 : 0);
    }
    expect(text).toMatch(/student log-probs: raw at T = 1; teacher: raw at T = 1/);
    expect(text).toMatch(/5:2\.13->-[\d.]+▲/);
  });
});
