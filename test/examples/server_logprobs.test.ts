// Runs the compiled examples/server-logprobs.ts as a user would (`node dist-examples/server-logprobs.js`)
// and checks its numbers against values worked out by hand from the recorded responses: the packed
// layout, the old and teacher log-probs, GRPO and GiGPO advantages, and GEAR's reweighting.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');

interface Summary {
  rows: number; tokens: number; k: number; teacherK: number; offsets: number[]; tokenIds: number[]; rewards: number[];
  grpo: number[]; gigpo: number[]; gigpoStep: number[]; gear: number[]; divergence: number[]; tokenGigpo: number[];
  logprobs: number[]; teacherLogprobs: number[]; loss: number;
}

let out: Summary;
let text: string;

beforeAll(() => {
  if (!existsSync(join(ROOT, 'dist/index.js'))) throw new Error('dist/ is missing: run `npm run build:ts` (npm test does it in pretest)');
  execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.examples.json'], { cwd: ROOT });
  const json = spawnSync(process.execPath, ['dist-examples/server-logprobs.js', '--json'], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
  if (json.status !== 0) throw new Error(`server-logprobs --json exited ${json.status}: ${json.stderr}`);
  out = JSON.parse(json.stdout.trim().split('\n').pop()!) as Summary;
  const plain = spawnSync(process.execPath, ['dist-examples/server-logprobs.js'], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
  if (plain.status !== 0) throw new Error(`server-logprobs exited ${plain.status}: ${plain.stderr}`);
  text = plain.stdout;
}, 120_000);

const f32 = (xs: number[]) => Array.from(new Float32Array(xs));

describe('examples/server-logprobs', () => {
  it('packs 4 rollouts x 2 assistant turns into 8 step rows of 6 tokens, tool tokens left out', () => {
    expect([out.rows, out.tokens, out.k, out.teacherK]).toEqual([8, 48, 3, 3]);
    expect(out.offsets).toEqual([0, 6, 12, 18, 24, 30, 36, 42, 48]);
    // rollout-0: <tool_call> get_weather ( Paris ) </tool_call>, then "It is 18°C<|im_end|>"
    expect(out.tokenIds.slice(0, 12)).toEqual([151657, 5765, 7, 12095, 8, 151658, 2132, 374, 220, 1958, 30937, 151645]);
    // rollout-3 called for Rome and answered 22
    expect(out.tokenIds.slice(36, 48)).toEqual([151657, 5765, 7, 22051, 8, 151658, 2132, 374, 220, 1167, 30937, 151645]);
    expect(out.tokenIds).not.toContain(151665); // <tool_response> belongs to the next prompt
    expect(out.rewards).toEqual([1, 1, 1, 1, 0, 0, 0, 0]);
  });

  it('keeps the recorded student and teacher log-probs of the sampled tokens', () => {
    expect(out.logprobs.slice(0, 6)).toEqual(f32([-0.02, -0.05, -0.01, -0.4, -0.02, -0.01]));
    expect(out.teacherLogprobs.slice(42, 48)).toEqual(f32([-0.3, -0.2, -0.3, -4.8, -0.5, -0.1]));
    expect(out.teacherLogprobs.slice(30, 36)).toEqual(f32([-0.06, -0.04, -0.1, -5.2, -0.3, -0.05]));
  });

  it('GRPO: rewards [1, 1, 0, 0] give +-0.5 / std = +-0.866 per trajectory, on both of its rows', () => {
    const a = 0.5 / (Math.sqrt(1 / 3) + 1e-6);
    const expected = [a, a, a, a, -a, -a, -a, -a];
    out.grpo.forEach((x, r) => expect(x).toBeCloseTo(expected[r]!, 6));
  });

  it('GiGPO: episode +-0.5 plus the step level of each anchor group (gamma 0.95)', () => {
    // step 0, one anchor for all four: returns 0.95, 0.95, 0, 0 -> +-0.475
    // step 1, "tool said 18°C for Paris" (rollouts 0, 1, 2): returns 1, 1, 0 -> 1/3, 1/3, -2/3; rollout-3 alone -> 0
    const expected = [0.975, 0.5 + 1 / 3, 0.975, 0.5 + 1 / 3, -0.975, -0.5 - 2 / 3, -0.975, -0.5];
    out.gigpo.forEach((x, r) => expect(x).toBeCloseTo(expected[r]!, 5));
    for (let r = 0; r < 8; r++) for (let i = 6 * r; i < 6 * r + 6; i++) expect(out.tokenGigpo[i]).toBeCloseTo(expected[r]!, 5);
  });

  it('GEAR keeps each row\'s sign and total and moves credit to the token where the teacher disagrees most', () => {
    for (let r = 0; r < 8; r++) {
      const row = out.gear.slice(6 * r, 6 * r + 6);
      const div = out.divergence.slice(6 * r, 6 * r + 6);
      for (const x of row) expect(Math.sign(x)).toBe(Math.sign(out.grpo[r]!));
      expect(row.reduce((s, x) => s + x, 0)).toBeCloseTo(6 * out.grpo[r]!, 3);
      const peak = div.indexOf(Math.max(...div));
      expect(peak).toBe(3); // the city / temperature token
      const mags = row.map(Math.abs);
      expect(mags[peak]).toBe(Math.max(...mags));
      expect(mags[peak]!).toBeGreaterThan(Math.abs(out.grpo[r]!));
    }
    expect(Math.abs(out.loss)).toBeLessThan(1e-6); // ratio 1 and zero-mean advantages
  });

  it('prints a readable table', () => {
    expect(text).toMatch(/^8 rows \(agent steps\), 48 tokens, student top-3, teacher top-3/);
    expect(text.split('\n').filter((l) => /^\s+\d+\s+rollout-\d/.test(l))).toHaveLength(8);
    expect(text).toMatch(/48 token advantages ready/);
  });
});
