// The true per-token advantage A*_t = V(prefix + y_t) - V(prefix) by Monte Carlo rollouts, on a hand-built
// policy whose values are worked out by hand: exact where nothing is left to sample, unbiased where a
// free token is, 0 once the response is doomed; and on the demo's own policy against a plain Monte Carlo
// estimate that samples every token.
import { describe, expect, it } from 'vitest';
import { AnswerChain } from '../../examples/env/answer_chain.js';
import { Rng } from '../../examples/env/rng.js';
import { policyModel } from '../../examples/trainer/measure.js';
import { advantagesFromValues, prefixValues, type SequenceModel } from '../../examples/trainer/oracle.js';
import { warmStart } from '../../examples/trainer/train.js';

// Vocabulary: 0 = filler a, 1 = filler b, 2 = right, 3 = wrong. Positions: filler, decision, decision.
// Allowed for success: {a, b}, {right}, {right}. The policy (a context = the tokens so far):
//   filler position: p = [0.45, 0.45, 0.05, 0.05]  (0.9 on the allowed fillers)
//   first decision: p(right) = 0.9 after a, 0.6 after b (the rest on wrong)
//   second decision: p(right) = 0.8
// V(prompt)          = 0.45·0.9·0.8 + 0.45·0.6·0.8 = 0.54
// V(a) = 0.72, V(b) = 0.48; V(a, right) = V(b, right) = 0.8; V(x, wrong) = 0; V(complete) = outcome.
const ALLOWED = [[0, 1], [2], [2]];
const handBuilt: SequenceModel<number[]> = {
  vocab: 4,
  context: () => [],
  fork: (c) => c.slice(),
  push: (c, x) => { c.push(x); },
  next: (c, out) => {
    // ignore the prompt (token 9)
    const r = c.filter((x) => x !== 9);
    const p = r.length === 0 ? [0.45, 0.45, 0.05, 0.05] : r.length === 1 ? (r[0] === 0 ? [0, 0, 0.9, 0.1] : [0, 0, 0.6, 0.4]) : [0, 0, 0.8, 0.2];
    for (let j = 0; j < 4; j++) out[j] = p[j]! > 0 ? Math.log(p[j]!) : -1e9;
  },
};

describe('Monte Carlo true advantages', () => {
  it('a hand-built policy: exact where no free token is left, unbiased where one is, doomed prefixes 0', () => {
    const rng = new Rng(1);
    // A success a, right, right: V = [V(), V(a), V(a,right), 1].
    const V = prefixValues(handBuilt, [9], ALLOWED, [0, 2, 2], 20000, rng);
    expect(V[1]).toBeCloseTo(0.72, 6); // only forced choices follow: exact
    expect(V[2]).toBeCloseTo(0.8, 6);
    expect(V[3]).toBe(1);
    // V() averages the free filler: each rollout is 0.9·0.9·0.8 = 0.648 (a) or 0.9·0.6·0.8 = 0.432 (b),
    // each with probability 1/2: mean 0.54, sd 0.108; 20000 rollouts: se 7.6e-4.
    expect(Math.abs(V[0]! - 0.54)).toBeLessThan(4 * 0.108 / Math.sqrt(20000));
    const A = advantagesFromValues(V);
    expect(A[1]).toBeCloseTo(0.8 - 0.72, 6);
    expect(A[2]).toBeCloseTo(1 - 0.8, 6);
    // The advantages telescope to the outcome minus the start value.
    expect(A.reduce((a, b) => a + b, 0)).toBeCloseTo(1 - V[0]!, 12);

    // A departure at the first decision (b, wrong, right): A* = -V(b) there, 0 on the doomed rest.
    const W = prefixValues(handBuilt, [9], ALLOWED, [1, 3, 2], 1, rng);
    expect(Array.from(W.subarray(1))).toEqual([W[1]!, 0, 0]);
    expect(W[1]).toBeCloseTo(0.48, 6);
    const B = advantagesFromValues(W);
    expect(B[1]).toBeCloseTo(-0.48, 6);
    expect(B[2]).toBe(0);
    // A filler outside the allowed set departs at once: everything after the prompt is 0.
    const X = prefixValues(handBuilt, [9], ALLOWED, [2, 2, 2], 1, rng);
    expect(Array.from(X.subarray(1))).toEqual([0, 0, 0]);
  });

  it('on the demo policy, agrees with plain Monte Carlo that samples every token and checks the outcome', () => {
    const env = new AnswerChain({ items: 2, fillers: 1, forced: 1, digits: 3, words: 3 });
    // A short warm-start, so success is neither rare nor certain.
    const policy = warmStart(env, { steps: 60, batch: 32, eps: 0.5, lr: 0.03, seed: 2 }).policy;
    const model = policyModel(policy);
    const task = env.makeTask(5);
    const allowed = env.allowed(task);
    const prompt = env.prompt(task, false);
    const right = allowed.map((a) => a[0]!);
    const rng = new Rng(3);
    const V = prefixValues(model, prompt, allowed, right, 4000, rng);
    // Plain Monte Carlo from the prompt: sample the whole response, success if every token is allowed.
    const logits = new Float32Array(env.vocab.length);
    let wins = 0;
    const n = 40000;
    for (let k = 0; k < n; k++) {
      const ctx = model.context();
      for (const x of prompt) model.push(ctx, x);
      let ok = true;
      for (let t = 0; t < allowed.length && ok; t++) {
        model.next(ctx, logits);
        const x = rng.sampleLogits(logits, env.vocab.length);
        ok = allowed[t]!.includes(x);
        if (t < allowed.length - 1) model.push(ctx, x);
      }
      if (ok) wins++;
    }
    const p = wins / n;
    expect(V[0]).toBeGreaterThan(0.05);
    expect(V[0]).toBeLessThan(0.95);
    // 4 se of the plain estimate, plus 0.002 for the conditional one's own error (its filler average over 4000 rollouts).
    expect(Math.abs(V[0]! - p)).toBeLessThan(4 * Math.sqrt(p * (1 - p) / n) + 0.002);
  });
});
