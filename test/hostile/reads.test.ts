// Every argument is read once, in a fixed order, before it is checked: a getter that detaches, shrinks or
// swaps an input yields a coded GearError or a correct result, never a TypeError / RangeError from inside;
// the same for holes, Symbols, null options and frozen or getter-only objects. Two sweeps over a table of
// valid calls (every object argument rebuilt with getters; the attack fired at the k-th read, for every k
// the call makes), then one test per class of escape that the adversarial campaign found.
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import * as diagnostics from '../../ts/diagnostics.js';
import * as similarity from '../../ts/similarity.js';
import * as report from '../../ts/report.js';

type Call = () => [(...a: never[]) => unknown, unknown[]];
type Mode = 'detach' | 'shrink' | 'swapSymbol' | 'swapUndefined';

const f32 = (...x: number[]) => Float32Array.from(x);
const i32 = (...x: number[]) => Int32Array.from(x);
const u8 = (...x: number[]) => Uint8Array.from(x);
const lp = () => f32(-1, -0.5, -2, -0.1, -1.2);
const old = () => f32(-1.1, -0.5, -1.8, -0.2, -1);
const adv = () => f32(1, 1, -0.5, -0.5, 0.3);
const off = () => i32(0, 2, 5);
const mask = () => u8(1, 1, 0, 1, 1);
const logits = (rows = 5, vocab = 4, s = 1) => ({ data: Float32Array.from({ length: rows * vocab }, (_, i) => s * Math.sin(i)), rows, vocab });
const detach = (x: ArrayBufferView) => { structuredClone(x.buffer, { transfer: [x.buffer as ArrayBuffer] }); };

/** Valid calls of the exports that take objects or arrays. */
function table(): [string, Call][] {
  const T: [string, Call][] = [];
  const add = (name: string, make: Call) => T.push([name, make]);
  const fn = <F>(f: F) => f as unknown as (...a: never[]) => unknown;
  for (const kind of ['ppo', 'gspo', 'sapo', 'gpg', 'cispo', 'gmpo', 'clip_cov', 'kl_cov', 'dppo_tv', 'dro']) {
    for (const f64 of [false, true]) {
      const cv = f64 ? (x: Float32Array) => Float64Array.from(x) : (x: Float32Array) => x;
      add(`policyLoss ${kind} ${f64 ? 'f64' : 'f32'}`, () => [fn(rl.policyLoss), [{
        logprob: cv(lp()), oldLogprob: cv(old()), advantages: cv(adv()), offsets: off(), mask: mask(), kind, droBeta: 0.1,
      }]]);
    }
  }
  add('policyLoss with rolloutCorrection', () => [fn(rl.policyLoss), [{
    logprob: lp(), oldLogprob: old(), advantages: adv(), offsets: off(), mask: mask(), kind: 'gspo',
    rolloutCorrection: { rolloutLogprob: old(), threshold: 2, rejection: [{ statistic: 'k1', threshold: 3 }] },
  }]]);
  add('policyLoss isWeights, out', () => [fn(rl.policyLoss), [{
    logprob: lp(), oldLogprob: old(), advantages: adv(), offsets: off(), mask: mask(), isWeights: f32(1, 1, 1, 1, 1), out: new Float32Array(5),
  }]]);
  add('policyLoss compat trl', () => [fn(rl.policyLoss), [{ logprob: lp(), oldLogprob: old(), advantages: [1, -1], offsets: off(), mask: mask(), compat: 'trl' }]]);
  add('policyLossAsync', () => [fn(rl.policyLossAsync), [{ logprob: lp(), oldLogprob: old(), advantages: adv(), offsets: off(), mask: mask() }, {}]]);
  add('policyLossAsync gspo', () => [fn(rl.policyLossAsync), [{ logprob: lp(), oldLogprob: old(), advantages: adv(), offsets: off(), kind: 'gspo' }]]);
  add('trlLoss', () => [fn(rl.trlLoss), [{ logprob: lp(), oldLogprob: old(), advantages: [1, -1], offsets: off(), mask: mask() }]]);
  add('rolloutCorrectionWeights', () => [fn(rl.rolloutCorrectionWeights), [old(), off(), mask(), { rolloutLogprob: lp(), rejection: [{ statistic: 'k3', threshold: 1 }] }]]);
  add('klPenalty', () => [fn(rl.klPenalty), [{ logprob: lp(), refLogprob: old(), estimator: 'k3' }]]);
  add('klLoss', () => [fn(rl.klLoss), [{ logprob: lp(), refLogprob: old(), offsets: off(), mask: mask() }]]);
  add('applyKlPenalty', () => [fn(rl.applyKlPenalty), [{
    tokenRewards: f32(0, 1, 0, 0, 1), oldLogprob: lp(), refLogprob: old(), offsets: off(), mask: mask(), controller: new rl.FixedKlController(0.1),
  }]]);
  add('aggregate', () => [fn(rl.aggregate), [lp(), off(), mask(), 'seq-mean-token-sum-norm', { globalTokens: 4 }]]);
  add('effectiveRowWeights', () => [fn(diagnostics.effectiveRowWeights), [off(), mask(), 'token-mean', { globalTokens: 4 }]]);
  add('maskedMean', () => [fn(diagnostics.maskedMean), [[1, 2, 3, 4, 5], mask()]]);
  add('maskedRowMean', () => [fn(diagnostics.maskedRowMean), [[1, 2, 3, 4, 5], off(), mask()]]);
  add('maskedVar', () => [fn(diagnostics.maskedVar), [[1, 2, 3, 4, 5], mask()]]);
  add('maskedWhiten', () => [fn(diagnostics.maskedWhiten), [[1, 2, 3, 4, 5], mask(), { shiftMean: false }]]);
  add('lossGradToLogits', () => [fn(rl.lossGradToLogits), [{ logits: logits(), targets: i32(0, 1, 2, 3, 0), gradLogprob: f32(1, 1, 1, 1, 1) }]]);
  add('entropyBonus', () => [fn(rl.entropyBonus), [lp(), off(), mask(), 0.1]]);
  add('grpo', () => [fn(rl.grpo), [{ rewards: [1, 0, 1, 0], groups: ['a', 'a', 'b', 'b'] }]]);
  add('grpo float32', () => [fn(rl.grpo), [{ rewards: [1, 0, 1, 0], groups: [0, 0, 1, 1], precision: 'float32' }]]);
  add('grpoPassK', () => [fn(rl.grpoPassK), [{ rewards: [1, 0, 1, 0], groups: [0, 0, 1, 1] }]]);
  add('rloo', () => [fn(rl.rloo), [{ rewards: [1, 0, 1, 0], groups: [0, 0, 1, 1] }]]);
  add('opo', () => [fn(rl.opo), [{ rewards: [1, 0, 1, 0], groups: [0, 0, 1, 1], lengths: [1, 2, 3, 4] }]]);
  add('gdpo', () => [fn(rl.gdpo), [{ rewards: [[1, 0, 1, 0], [0, 1, 1, 0]], groups: [0, 0, 1, 1] }]]);
  add('trlAdvantages', () => [fn(rl.trlAdvantages), [{ rewards: [[1, 0, 1, 0]], numGenerations: 2 }]]);
  add('reinforcePlusPlus', () => [fn(rl.reinforcePlusPlus), [{ tokenRewards: f32(0, 1, 0, 0, 1), offsets: off(), mask: mask() }]]);
  add('remax', () => [fn(rl.remax), [{ tokenRewards: f32(0, 1, 0, 0, 1), offsets: off(), baselines: [0, 1] }]]);
  add('gigpo', () => [fn(rl.gigpo), [{
    episodeRewards: [1, 1, 0, 0], stepRewards: [0, 1, 0, 0], trajectories: [0, 0, 1, 1], groups: [0, 0, 0, 0], anchors: ['a', 'b', 'a', 'c'],
  }]]);
  add('computeAdvantages grpo', () => [fn(rl.computeAdvantages), ['grpo', { rewards: [1, 0], groups: [0, 0] }, { offsets: off(), mask: mask() }]]);
  add('computeAdvantages reinforce_plus_plus', () => [fn(rl.computeAdvantages), ['reinforce_plus_plus', { tokenRewards: f32(0, 1, 0, 0, 1), offsets: off(), mask: mask() }]]);
  add('gear', () => [fn(rl.gear), [{
    advantages: [1, -1], offsets: off(), mask: mask(), divergence: f32(0.1, 3, 0, 0.2, 4), entropy: f32(1, 2, 0, 1, 0.5), options: { alpha: 0.5 },
  }]]);
  add('gearFromLogits', () => [fn(rl.gearFromLogits), [{
    student: logits(), teacher: logits(5, 4, 2), targets: i32(0, 1, 2, 3, 0), advantages: [1, -1], offsets: off(), mask: mask(), distillCoef: 0.1,
  }]]);
  add('distillLoss', () => [fn(rl.distillLoss), [{ student: logits(), teacher: logits(5, 4, 2), mask: mask(), distillCoef: 0.5 }]]);
  add('teacherInput', () => [fn(rl.teacherInput), [{
    prompt: [1, 2, 3], insertAt: 2, response: [4, 5], reference: { groundTruth: '42', encode: (t: string) => [7, t.length % 5] },
  }]]);
  add('teacherInput { before, after }', () => [fn(rl.teacherInput), [{ prompt: { before: [1, 2], after: [3] }, response: [4, 5], reference: [9, 9] }]]);
  add('teacherMessages', () => [fn(rl.teacherMessages), [[{ role: 'user', content: 'hi' }], '42']]);
  add('gatherRows', () => [fn(rl.gatherRows), [logits(), [0, 2]]]);
  add('tokenStats', () => [fn(rl.tokenStats), [logits(), i32(0, 1, 2, 3, 0), { temperature: 1 }]]);
  add('divergence', () => [fn(rl.divergence), [logits(), logits(5, 4, 2), { kind: 'jsd', targets: i32(0, 1, 2, 3, 0) }]]);
  add('mergeTokenStats', () => {
    const t = i32(0, 1);
    const part = (vocabStart: number) => rl.tokenStatsPartial({ data: f32(1, 2, 3, 4), rows: 2, vocab: 2 }, t, { vocabStart });
    return [fn(rl.mergeTokenStats), [[part(0), part(2)]]];
  });
  add('segmentReduce', () => [fn(rl.segmentReduce), [lp(), off(), 'mean', mask()]]);
  add('segmentBroadcast', () => [fn(rl.segmentBroadcast), [[1, 2], off(), mask()]]);
  add('AdamW and step', () => [fn((p: Float32Array[], o: rl.AdamOptions) => new rl.AdamW(p, o).step([f32(1, 1), f32(1)])), [[f32(1, 2), f32(3)], { lr: 0.1, betas: [0.9, 0.99] }]]);
  add('AdamW.fromState and step', () => {
    const p = [f32(1, 2), f32(3)];
    const o = new rl.AdamW(p);
    o.step([f32(1, 1), f32(1)]);
    return [fn((pp: Float32Array[], s: rl.AdamState) => rl.AdamW.fromState(pp, s).step([f32(1, 1), f32(1)])), [p, o.state()]];
  });
  add('SGD.fromState and step', () => {
    const p = [f32(1, 2), f32(3)];
    const o = new rl.SGD(p, { lr: 0.1, momentum: 0.9 });
    o.step([f32(1, 1), f32(1)]);
    return [fn((pp: Float32Array[], s: rl.SGDState) => rl.SGD.fromState(pp, s).step([f32(1, 1), f32(1)])), [p, o.state()]];
  });
  add('zeroGrad', () => [fn(rl.zeroGrad), [[f32(1, 2), f32(3)]]]);
  add('clipGradNorm', () => [fn(rl.clipGradNorm), [[f32(1, 2), f32(3)], 1, { errorIfNonfinite: true }]]);
  add('gradNorm', () => [fn(rl.gradNorm), [[f32(1, 2), f32(3)]]]);
  add('cosineSchedule', () => [fn((o: rl.CosineScheduleOptions) => rl.cosineSchedule(o)(3)), [{ peak: 1, totalSteps: 10, warmupSteps: 2 }]]);
  add('linearWarmupSchedule', () => [fn((o: Required<rl.ScheduleOptions>) => rl.linearWarmupSchedule(o)(3)), [{ peak: 1, warmupSteps: 2 }]]);
  add('LRScheduler', () => [fn((o: { lr: number }) => new rl.LRScheduler(o, rl.constantSchedule({ peak: 1 })).step()), [{ lr: 0.1 }]]);
  add('buildRolloutBatch', () => [fn(rl.buildRolloutBatch), [{ trajectories: [{ group: 0, steps: [{ tokens: [1, 2] }, { tokens: [3], reward: 1 }] }] }]]);
  add('rowLengths', () => [fn(rl.rowLengths), [off(), mask()]]);
  add('lastTokenValues', () => [fn(rl.lastTokenValues), [[1, 2], off()]]);
  add('stepGroups', () => [fn(rl.stepGroups), [['a', 'b', 'a'], [0, 0, 0], { threshold: 0.5 }]]);
  add('anchorIds', () => [fn(similarity.anchorIds), [[{ a: 1 }, { a: 2 }, { a: 1 }]]]);
  add('groupIndex', () => [fn(diagnostics.groupIndex), [['a', 'b', 'a']]]);
  add('similarityClusters', () => [fn(similarity.similarityClusters), [['abc', 'abd', 'xyz'], 0.5]]);
  add('quantileLinear', () => [fn(diagnostics.quantileLinear), [[1, 2, 3], 0.5]]);
  add('batchStats', () => [fn(diagnostics.batchStats), [[1, 2, 3]]]);
  add('groupStats', () => [fn(diagnostics.groupStats), [[1, 2, 3], diagnostics.groupIndex([0, 0, 1])]]);
  // every option given, so that each read of the call is a getter (an option read after the arrays were checked)
  add('klLoss, every option', () => [fn(rl.klLoss), [{
    logprob: lp(), refLogprob: old(), offsets: off(), mask: mask(), estimator: 'k3', coef: 0.1, agg: 'seq-mean-token-mean',
    aggOptions: { globalTokens: 4, globalRows: 2, dpSize: 1, lossScaleFactor: 2 }, compat: 'verl',
  }]]);
  add('entropyBonus, every option', () => [fn(rl.entropyBonus), [lp(), off(), mask(), 0.1, 'seq-mean-token-sum', { globalTokens: 4, globalRows: 2, dpSize: 1 }]]);
  add('applyKlPenalty, every option', () => [fn(rl.applyKlPenalty), [{
    tokenRewards: f32(0, 1, 0, 0, 1), oldLogprob: lp(), refLogprob: old(), offsets: off(), mask: mask(), estimator: 'k2', compat: 'verl',
    controller: new rl.FixedKlController(0.1),
  }]]);
  add('klPenalty, every option', () => [fn(rl.klPenalty), [{ logprob: lp(), refLogprob: old(), estimator: 'k3', compat: 'verl' }]]);
  add('trlLoss, every option', () => [fn(rl.trlLoss), [{
    logprob: lp(), oldLogprob: old(), refLogprob: old(), samplingLogprob: old(), entropy: f32(1, 2, 0.5, 1, 0.3), advantages: [1, -1],
    offsets: off(), mask: mask(), lossType: 'grpo', importanceSampling: 'sequence', epsilon: 0.2, epsilonHigh: 0.3, delta: 4, beta: 0.1,
    topEntropyQuantile: 0.5, offPolicyMaskThreshold: 1, useBiasCorrectionKl: true, entropyCoef: 0.01, maxCompletionLength: 4,
    gradientAccumulationSteps: 1, numProcesses: 1,
  }]]);
  add('lossGradToLogits, every option', () => [fn(rl.lossGradToLogits), [{
    logits: logits(), targets: i32(0, 1, 2, 3, 0), gradLogprob: f32(1, 1, 1, 1, 1), gradEntropy: f32(0, 1, 0, 1, 0), entropyCoef: 0.1,
    entropyAgg: 'seq-mean-token-mean', offsets: off(), mask: mask(), aggOptions: { globalTokens: 4, dpSize: 1 },
    distill: { teacher: logits(5, 4, 2), coef: 0.5, agg: 'token-mean', kind: 'jsd', beta: 0.5, klCap: 10 }, temperature: 1,
  }]]);
  add('segmentBroadcast, every option', () => [fn(rl.segmentBroadcast), [[1, 2], off(), mask(), { out: new Float32Array(5) }]]);
  add('segmentReduce, f64', () => [fn(rl.segmentReduce), [Float64Array.from(lp()), off(), 'max', mask()]]);
  add('reinforcePlusPlus, every option', () => [fn(rl.reinforcePlusPlus), [{
    tokenRewards: f32(0, 1, 0, 0, 1), offsets: off(), mask: mask(), gamma: 0.9, compat: 'verl', precision: 'float64',
  }]]);
  add('remax, typed baselines', () => [fn(rl.remax), [{ tokenRewards: f32(0, 1, 0, 0, 1), offsets: off(), mask: mask(), baselines: Float64Array.of(0, 1), precision: 'float64' }]]);
  add('gigpo, every option', () => [fn(rl.gigpo), [{
    episodeRewards: [1, 1, 0, 0], stepRewards: [0, 1, 0, 0], trajectories: [0, 0, 1, 1], groups: [0, 0, 0, 0], anchors: ['look', 'go', 'look', 'go!'],
    gamma: 0.9, stepWeight: 0.5, mode: 'mean_std_norm', epsilon: 1e-6, crossStepStats: false, similarity: { threshold: 0.5 },
  }]]);
  add('computeAdvantages grpo, typed rewards', () => [fn(rl.computeAdvantages), ['grpo', { rewards: Float64Array.of(1, 0), groups: [0, 0] }, { offsets: off(), mask: mask() }]]);
  add('gear, every option', () => [fn(rl.gear), [{
    advantages: Float64Array.of(1, -1), offsets: off(), mask: mask(), divergence: f32(0.1, 3, 0, 0.2, 4), entropy: f32(1, 2, 0, 1, 0.5),
    logratio: f32(0, 0.1, 0, -0.1, 0.2), options: { alpha: 0.5, peakRule: 'quantile', peakQuantile: 0.5, signMode: 'rlsd', normalize: 'none' },
    out: { advantages: new Float32Array(5), weights: new Float32Array(5), segmentId: new Int32Array(5) },
  }]]);
  add('tokenStats, every option', () => [fn(rl.tokenStats), [logits(), i32(0, 1, 2, 3, 0), {
    temperature: 0.7, out: { logprob: new Float32Array(5), entropy: new Float32Array(5) },
  }]]);
  add('gearFromLogits, every option', () => [fn(rl.gearFromLogits), [{
    student: logits(), teacher: logits(5, 4, 2), targets: i32(0, 1, 2, 3, 0), advantages: Float64Array.of(1, -1), offsets: off(), mask: mask(),
    temperature: 0.8, options: { alpha: 0.5, klCap: 10 }, distillCoef: 0.1,
  }]]);
  add('tokenStatsBackward, every option', () => {
    const l = logits();
    const t = i32(0, 1, 2, 3, 0);
    const stats = rl.tokenStats(l, t);
    return [fn(rl.tokenStatsBackward), [l, t, { logprob: f32(1, 1, 1, 1, 1), entropy: f32(0, 1, 0, 1, 0) }, { temperature: 1, stats: { ...stats }, out: new Float32Array(20) }]];
  });
  add('divergenceBackward, every option', () => [fn(rl.divergenceBackward), [logits(), logits(5, 4, 2), f32(1, 1, 1, 1, 1), { kind: 'jsd', beta: 0.3, temperature: 1, klCap: 10, out: new Float32Array(20) }]]);
  add('computeAdvantages rloo, typed rewards', () => [fn(rl.computeAdvantages), ['rloo', { rewards: f32(1, 0, 1, 0), groups: ['a', 'a', 'b', 'b'], singleton: 'zero' }, { offsets: i32(0, 1, 2, 3, 5), mask: mask() }]]);
  add('lastTokenValues with a mask', () => [fn(rl.lastTokenValues), [[1, 2], off(), mask()]]);
  add('rowLengths, typed', () => [fn(rl.rowLengths), [off(), mask()]]);
  add('aggregate, every option', () => [fn(rl.aggregate), [lp(), off(), mask(), 'seq-mean-token-sum-norm', { globalTokens: 4, globalRows: 2, dpSize: 1, lossScaleFactor: 2 }]]);
  // typed rewards are kept as they are while the group ids (a list with getters) are read
  for (const precision of ['float64', 'float32'] as const) {
    for (const scale of ['group', 'none'] as const) {
      add(`grpo ${precision} ${scale}, typed rewards`, () => [fn(rl.grpo), [{ rewards: Float64Array.of(1, 0, 1, 0.5), groups: [0, 0, 1, 1], precision, scale, epsilon: 1e-6, singleton: 'raw' }]]);
      add(`grpo ${precision} ${scale}, typed rewards, string groups`, () => [fn(rl.grpo), [{ rewards: Float64Array.of(1, 0, 1, 0.5), groups: ['a', 'b', 'a', 'b'], precision, scale }]]);
    }
  }
  add('grpo batch, typed rewards', () => [fn(rl.grpo), [{ rewards: f32(1, 0, 1, 0.5), groups: ['a', 'b', 'a', 'b'], scale: 'batch' }]]);
  add('grpoPassK, typed rewards', () => [fn(rl.grpoPassK), [{ rewards: Float64Array.of(1, 0, 1, 0), groups: [0, 0, 1, 1], k: 2 }]]);
  add('rloo, typed rewards', () => [fn(rl.rloo), [{ rewards: Float64Array.of(1, 0, 1, 0), groups: ['a', 'a', 'b', 'b'] }]]);
  add('opo, typed rewards', () => [fn(rl.opo), [{ rewards: Float64Array.of(1, 0, 1, 0), groups: [0, 0, 1, 1], lengths: Float64Array.of(1, 2, 3, 4) }]]);
  add('gdpo, typed rewards', () => [fn(rl.gdpo), [{ rewards: [Float64Array.of(1, 0, 1, 0), Float64Array.of(0, 1, 1, 0)], groups: [0, 0, 1, 1] }]]);
  add('gigpo, typed rewards', () => [fn(rl.gigpo), [{
    episodeRewards: Float64Array.of(1, 1, 0, 0), stepRewards: Float64Array.of(0, 1, 0, 0), trajectories: [0, 0, 1, 1], groups: [0, 0, 0, 0], anchors: ['a', 'b', 'a', 'c'],
  }]]);
  add('groupMeanStd, typed scores', () => [fn(diagnostics.groupMeanStd), [Float64Array.of(1, 0, 3, 5), [7, 7, 9, 9]]]);
  add('quantileLinear, typed values', () => [fn(diagnostics.quantileLinear), [Float64Array.of(1, 2, 3), 0.5]]);
  add('maskedMean, typed values', () => [fn(diagnostics.maskedMean), [Float64Array.of(1, 2, 3, 4, 5), mask()]]);
  // the saved-batch format and the report: lists of strings and options read after the arrays
  const batch = () => ({
    advantages: [1, -0.5], offsets: i32(0, 2, 5), divergence: f32(0.01, 3.5, 0.02, 0.2, 4), entropy: f32(0.3, 2, 0.1, 1.5, 0.2),
    mask: mask(), logratio: f32(0, 0.1, -0.1, 0, 0.2),
    tokens: ['a', 'b', 'c', 'd', 'e'], rowLabels: ['r0', 'r1'], options: { alpha: 0.5 }, meta: { step: 3, run: 'x', ok: true },
  });
  const withResult = () => {
    const b = batch();
    const r = rl.gear({ advantages: b.advantages, offsets: b.offsets, divergence: b.divergence, entropy: b.entropy, mask: b.mask, options: b.options });
    return { ...b, result: { ...r, anchors: Int32Array.from(r.anchors), diagnostics: JSON.parse(JSON.stringify(r.diagnostics)) } };
  };
  add('toSavedBatch', () => [fn(report.toSavedBatch), [batch()]]);
  add('toSavedBatch with a result', () => [fn(report.toSavedBatch), [withResult()]]);
  add('saveBatch', () => [fn(report.saveBatch), [join(tmpdir(), `gear-reads-${process.pid}.json`), withResult()]]);
  add('renderReport', () => [fn(report.renderReport), [batch(), { title: 't', metric: 'weight', maxRows: 10, order: 'batch' }]]);
  add('renderReport with a result', () => [fn(report.renderReport), [withResult()]]);
  add('fromSavedBatch', () => [fn(report.fromSavedBatch), [JSON.parse(JSON.stringify(report.toSavedBatch(withResult())))]]);
  add('registerPolicyLoss', () => [fn((d: rl.PolicyLossDefinition) => { rl.registerPolicyLoss(d); rl.unregisterPolicyLoss('hostile_loss'); }), [{
    name: 'hostile_loss', aliases: ['hostile_alias'], options: { k: { type: 'number', min: 0 } },
    terms: (c: rl.PolicyLossContext) => ({ loss: c.logprob, dloss: c.logprob }),
  }]]);
  add('registerAdvantageEstimator', () => [fn((d: rl.AdvantageEstimatorDefinition) => { rl.registerAdvantageEstimator(d); rl.unregisterAdvantageEstimator('hostile_est'); }), [{
    name: 'hostile_est', level: 'row', options: { k: { type: 'number', default: 1 } }, compute: () => [1],
  }]]);
  return T;
}

/**
 * Runs a call; undefined when it returned or threw a coded GearError, else what it threw. What it
 * returned goes to `got.value` (and `got.returned` is set).
 */
async function outcome(f: (...a: never[]) => unknown, args: unknown[], got: { value?: unknown; returned?: boolean } = {}): Promise<string | undefined> {
  try {
    const r = f(...(args as never[]));
    got.value = r instanceof Promise ? await r : r;
    got.returned = true;
  } catch (e) {
    if (e instanceof rl.GearError && /^ERR_/.test(e.code)) return undefined;
    return `${(e as Error)?.constructor?.name}: ${String((e as Error)?.message).slice(0, 160)}`;
  }
  return undefined;
}

/** A call's result as text to compare: typed arrays read element by element (a detached one as empty). */
function shown(x: unknown): string {
  return JSON.stringify(x, (_k, y: unknown) => {
    if (ArrayBuffer.isView(y) && !(y instanceof DataView)) return { [y.constructor.name]: Array.from({ length: (y as Float32Array).length }, (_, i) => String((y as Float32Array)[i])) };
    if (typeof y === 'number' && !Number.isFinite(y)) return String(y);
    return y;
  }) ?? String(x);
}

/**
 * The arguments rebuilt with a getter for every property and array element (plain objects and arrays,
 * four levels deep). Reads are counted across the call; at read number `at` every typed array of the
 * arguments is detached (`detach`) or its resizable buffer shrunk to nothing (`shrink`); `swap*` modes
 * hand out the value on a property's first read and a Symbol / undefined on every later one.
 */
function hostile(args: unknown[], mode: Mode, at: number): { args: unknown[]; fired: () => boolean } {
  let reads = 0;
  let fired = false;
  const arrays: ArrayBufferView[] = [];
  const attack = () => {
    fired = true;
    for (const a of arrays) {
      if (mode === 'detach' && a.buffer.byteLength > 0) detach(a);
      if (mode === 'shrink') (a.buffer as ArrayBuffer).resize(0);
    }
  };
  const wrap = (x: unknown, depth: number): unknown => {
    if (ArrayBuffer.isView(x) && !(x instanceof DataView)) {
      const src = x as unknown as Float32Array;
      const C = src.constructor as Float32ArrayConstructor;
      const y = mode === 'shrink' ? new C(new ArrayBuffer(src.byteLength, { maxByteLength: src.byteLength + 8 })) : new C(src.length);
      y.set(src);
      arrays.push(y);
      return y;
    }
    if (depth > 4 || x === null || typeof x !== 'object') return x;
    const isArr = Array.isArray(x);
    if (!isArr && Object.getPrototypeOf(x) !== Object.prototype) return x; // class instances as they are
    const out: Record<string, unknown> = isArr ? new Array((x as unknown[]).length) as unknown as Record<string, unknown> : {};
    for (const k of Object.keys(x)) {
      const val = wrap((x as Record<string, unknown>)[k], depth + 1);
      let n = 0;
      Object.defineProperty(out, k, {
        enumerable: true, configurable: true,
        get() {
          if (++reads === at) attack();
          n++;
          if (mode === 'swapSymbol' && n > 1) return Symbol('swapped');
          if (mode === 'swapUndefined' && n > 1) return undefined;
          return val;
        },
      });
    }
    return out;
  };
  return { args: args.map((a) => wrap(a, 0)), fired: () => fired };
}

let totalAttacks = 0;

describe('a getter that detaches, shrinks or swaps an input, at any read of the arguments', () => {
  for (const [name, make] of table()) {
    it(name, async () => {
      const found: string[] = [];
      let attacks = 0;
      // with its inputs detached, a call that returns must return what it returns without the attack
      // (it copied what it uses before the attack): anything else was computed from emptied arrays
      const plain: { value?: unknown; returned?: boolean } = {};
      expect(await outcome(...make(), plain)).toBe(undefined);
      expect(plain.returned, 'the call of the table returns').toBe(true);
      for (const mode of ['detach', 'shrink'] as const) {
        for (let at = 1; at < 500; at++) {
          const [f, args] = make();
          const h = hostile(args, mode, at);
          const got: { value?: unknown; returned?: boolean } = {};
          const bad = await outcome(f, h.args, got);
          if (bad !== undefined) found.push(`${mode} at read ${at}: ${bad}`);
          else if (mode === 'detach' && got.returned && shown(got.value) !== shown(plain.value)) {
            found.push(`${mode} at read ${at}: a result other than the call's without the attack`);
          }
          if (!h.fired()) break;
          attacks++;
        }
      }
      for (const mode of ['swapSymbol', 'swapUndefined'] as const) {
        const [f, args] = make();
        const bad = await outcome(f, hostile(args, mode, 0).args);
        if (bad !== undefined) found.push(`${mode}: ${bad}`);
      }
      expect(found).toEqual([]);
      totalAttacks += attacks;
    });
  }
  it('the sweep fired its attacks (the arguments are read through the getters)', () => {
    expect(totalAttacks).toBeGreaterThan(500);
  });
});

/** Every place of the argument tree (object keys and array indices, four levels deep). */
function places(x: unknown, pre: string[] = [], out: string[][] = [], depth = 0): string[][] {
  if (depth > 4 || x === null || typeof x !== 'object' || ArrayBuffer.isView(x)) return out;
  if (!Array.isArray(x) && Object.getPrototypeOf(x) !== Object.prototype) return out;
  for (const k of Object.keys(x)) {
    out.push([...pre, k]);
    places((x as Record<string, unknown>)[k], [...pre, k], out, depth + 1);
  }
  return out;
}

describe('a hole, a Symbol, null or a frozen object at any place of the arguments', () => {
  for (const [name, make] of table()) {
    it(name, async () => {
      const found: string[] = [];
      const [, a0] = make();
      for (const how of ['hole', 'symbol', 'null', 'frozen'] as const) {
        for (const p of places(a0)) {
          const [f, args] = make();
          let o = args as unknown as Record<string, unknown>;
          for (const k of p.slice(0, -1)) o = o[k] as Record<string, unknown>;
          const last = p[p.length - 1]!;
          if (how === 'hole') {
            if (!Array.isArray(o)) continue;
            delete o[last];
          } else if (how === 'symbol') o[last] = Symbol('s');
          else if (how === 'null') o[last] = null;
          else if (typeof o[last] === 'object' && o[last] !== null && !ArrayBuffer.isView(o[last])) Object.freeze(o[last]);
          else continue;
          const bad = await outcome(f, args);
          if (bad !== undefined) found.push(`${how} at ${p.join('.')}: ${bad}`);
        }
      }
      expect(found).toEqual([]);
    });
  }
});

/** The call's GearError code, or 'ok' when it returned. */
async function codeOf(f: () => unknown): Promise<string> {
  try {
    await f();
    return 'ok';
  } catch (e) {
    expect(e, String(e)).toBeInstanceOf(rl.GearError);
    expect((e as Error).message).toMatch(/: expected .+, got /);
    return (e as rl.GearError).code;
  }
}

/** `obj` with `key` turned into a getter that runs `effect` (once, on its first read) and returns `value`. */
function withGetter<T extends object>(obj: T, key: string, value: unknown, effect: () => void): T {
  let done = false;
  return Object.defineProperty(obj, key, {
    enumerable: true, configurable: true,
    get() {
      if (!done) { done = true; effect(); }
      return value;
    },
  });
}

/** A Float32Array on a resizable buffer (so that it can shrink under its reader). */
function resizable(...x: number[]): Float32Array {
  const a = new Float32Array(new ArrayBuffer(4 * x.length, { maxByteLength: 64 }));
  a.set(x);
  return a;
}

describe('the classes of escape of the adversarial campaign, one by one', () => {
  const base = () => ({ logprob: Float64Array.of(-1, -2, -1), oldLogprob: Float64Array.of(-1, -1.5, -1), advantages: Float64Array.of(1, 1, -1), offsets: i32(0, 2, 3) });

  it('policyLoss kind gspo: logprob detached by a later getter is ERR_SHAPE', async () => {
    const a = base();
    const args = withGetter({ ...a, kind: 'gspo' }, 'agg', 'token-mean', () => detach(a.logprob));
    expect(await codeOf(() => rl.policyLoss(args as rl.PolicyLossArgs))).toBe('ERR_SHAPE');
  });

  it('policyLoss kind gspo: offsets shrunk by a later getter is a coded error', async () => {
    const a = base();
    const offsets = new Int32Array(new ArrayBuffer(12, { maxByteLength: 64 }));
    offsets.set([0, 2, 3]);
    const args = withGetter({ ...a, offsets, kind: 'gspo' }, 'clipLow', 0.2, () => offsets.buffer.resize(4));
    expect(await codeOf(() => rl.policyLoss(args as rl.PolicyLossArgs))).toMatch(/^ERR_(SHAPE|OFFSETS)$/);
  });

  it('policyLoss with rollout correction: a getter of rolloutCorrection that detaches or shrinks an input is coded', async () => {
    const a = base();
    const rc = withGetter({ threshold: 2 }, 'rolloutLogprob', Float64Array.of(-1, -1, -1), () => detach(a.oldLogprob));
    expect(await codeOf(() => rl.policyLoss({ ...a, rolloutCorrection: rc as rl.RolloutCorrection }))).toBe('ERR_SHAPE');
    const b = { ...base(), logprob: resizable(-1, -2, -1), oldLogprob: resizable(-1, -1.5, -1), advantages: resizable(1, 1, -1) };
    const rc2 = withGetter({ threshold: 2 }, 'rolloutLogprob', f32(-1, -1, -1), () => b.advantages.buffer.resize(4));
    expect(await codeOf(() => rl.policyLoss({ ...b, kind: 'gspo', rolloutCorrection: rc2 as rl.RolloutCorrection }))).toBe('ERR_SHAPE');
  });

  it('maskedMean: the mask detached, or the values shrunk, by a getter of one of its elements is coded or correct', async () => {
    const m = u8(1, 1, 1);
    const values = withGetter([1, 2, 3], '1', 2, () => detach(m));
    expect(await codeOf(() => diagnostics.maskedMean(values, m))).toBe('ERR_SHAPE');
    // the getter empties the values array and detaches the mask: the values were read once (one element)
    const m1 = u8(1);
    const emptied: number[] = [];
    Object.defineProperty(emptied, '0', {
      get() { emptied.length = 0; detach(m1); return 4; }, enumerable: true, configurable: true,
    });
    expect(await codeOf(() => diagnostics.maskedMean(emptied, m1))).toBe('ERR_SHAPE');
    // a detached mask is refused even where an empty one is accepted (it reads as empty)
    const m0 = u8(1);
    detach(m0);
    expect(await codeOf(() => diagnostics.maskedMean([], m0))).toBe('ERR_SHAPE');
    expect(await codeOf(() => diagnostics.maskedMean([], u8()))).toBe('ok');
    const m2 = new Uint8Array(new ArrayBuffer(3, { maxByteLength: 8 }));
    m2.set([1, 1, 0]);
    const values2 = withGetter([1, 2, 3], '2', 3, () => m2.buffer.resize(1));
    expect(await codeOf(() => diagnostics.maskedMean(values2, m2))).toBe('ERR_SHAPE');
    expect(diagnostics.maskedMean(withGetter([1, 2, 3], '0', 1, () => {}), u8(1, 1, 0))).toBeCloseTo(1.5);
  });

  it('AdamW.fromState: a state getter that detaches the parameters or the moments is coded, or restores an empty optimizer', async () => {
    const p = [f32(1, 2)];
    const opt = new rl.AdamW(p);
    opt.step([f32(1, 1)]);
    const state = opt.state();
    const params = [f32(1, 2)];
    // the parameters are checked after the state was read: the detached one is refused as such
    const s1 = withGetter({ ...state }, 'expAvg', state.expAvg, () => detach(params[0]!));
    expect(await codeOf(() => rl.AdamW.fromState(params, s1 as rl.AdamState))).toBe('ERR_SHAPE');
    const s2 = withGetter({ ...state }, 'kind', 'adamw', () => { detach(state.expAvg[0]!); });
    expect(await codeOf(() => rl.AdamW.fromState([f32(1, 2)], s2 as rl.AdamState))).toBe('ERR_STATE');
    // a field that answers differently on a second read is read once: the state restores
    let n = 0;
    const fresh = opt.state();
    const s3 = Object.defineProperty({ ...fresh }, 'betas', { get: () => (n++ === 0 ? [0.9, 0.999] : undefined), enumerable: true });
    expect(await codeOf(() => rl.AdamW.fromState([f32(1, 2)], s3 as rl.AdamState))).toBe('ok');
    expect(n).toBe(1);
  });

  it('zeroGrad: an element getter that detaches another gradient, or swaps itself, is coded or correct', async () => {
    const g0 = f32(1, 2);
    const grads = withGetter([g0, f32(3)], '1', f32(3), () => detach(g0));
    expect(await codeOf(() => rl.zeroGrad(grads))).toBe('ok');
    let n = 0;
    const swapping = Object.defineProperty([f32(1)], '0', { get: () => (n++ === 0 ? f32(1) : 'not an array'), enumerable: true });
    expect(await codeOf(() => rl.zeroGrad(swapping as Float32Array[]))).toBe('ok');
    const g = f32(4, 5);
    rl.zeroGrad([g]);
    expect(Array.from(g)).toEqual([0, 0]);
  });

  it('mergeTokenStats: a sparse parts array is ERR_DTYPE', async () => {
    const part = rl.tokenStatsPartial({ data: f32(1, 2, 3, 4), rows: 2, vocab: 2 }, i32(0, 1), { vocabStart: 0 });
    // eslint-disable-next-line no-sparse-arrays
    expect(await codeOf(() => rl.mergeTokenStats([, part] as rl.PartialStats[]))).toBe('ERR_DTYPE');
    const sparse: rl.PartialStats[] = [];
    sparse[1] = part;
    expect(await codeOf(() => rl.mergeTokenStats(sparse))).toBe('ERR_DTYPE');
    // a getter of the first part that empties the list while it is read
    const parts: rl.PartialStats[] = [];
    parts[0] = { ...part, get vocabStart() { parts.length = 0; return 0; } } as rl.PartialStats;
    parts[1] = { ...part, vocabStart: 2 };
    expect(await codeOf(() => rl.mergeTokenStats(parts))).toBe('ERR_DTYPE');
  });

  it('SGD.fromState: a sparse momentum buffer list is ERR_STATE', async () => {
    const p = [f32(1, 2), f32(3)];
    const opt = new rl.SGD(p, { lr: 0.1, momentum: 0.9 });
    opt.step([f32(1, 1), f32(1)]);
    const state = opt.state();
    const buf: Float32Array[] = [];
    buf[1] = state.momentumBuffer![1]!;
    expect(await codeOf(() => rl.SGD.fromState([f32(1, 2), f32(3)], { ...state, momentumBuffer: buf }))).toBe('ERR_STATE');
  });

  it('gatherRows: Symbol rows or row indices are coded', async () => {
    const l = logits(3, 2);
    expect(await codeOf(() => rl.gatherRows({ ...l, rows: Symbol('r') as unknown as number }, [0]))).toBe('ERR_SHAPE');
    expect(await codeOf(() => rl.gatherRows(l, [Symbol('i') as unknown as number]))).toBe('ERR_DTYPE');
    expect(await codeOf(() => rl.gatherRows({ ...l, vocab: Symbol('v') as unknown as number }, [0]))).toBe('ERR_SHAPE');
  });

  it('linearWarmupSchedule: a Symbol warmupSteps or peak is ERR_OPTION', async () => {
    expect(await codeOf(() => rl.linearWarmupSchedule({ peak: 1, warmupSteps: Symbol('w') as unknown as number }))).toBe('ERR_OPTION');
    expect(await codeOf(() => rl.linearWarmupSchedule({ peak: Symbol('p') as unknown as number, warmupSteps: 2 }))).toBe('ERR_OPTION');
    expect(rl.linearWarmupSchedule({ peak: 1, warmupSteps: 2 })(1)).toBe(0.5);
  });

  it('LRScheduler: a frozen or getter-only optimizer is ERR_OPTION, and so is one frozen later', async () => {
    const sched = rl.constantSchedule({ peak: 0.5 });
    expect(await codeOf(() => new rl.LRScheduler(Object.freeze({ lr: 0.1 }), sched))).toBe('ERR_OPTION');
    expect(await codeOf(() => new rl.LRScheduler({ get lr() { return 0.1; } }, sched))).toBe('ERR_OPTION');
    const target = { lr: 0.1 };
    const s = new rl.LRScheduler(target, rl.linearWarmupSchedule({ peak: 1, warmupSteps: 4 }));
    Object.freeze(target);
    expect(await codeOf(() => s.step())).toBe('ERR_OPTION');
    const live = { lr: 0.1 };
    new rl.LRScheduler(live, sched).step();
    expect(live.lr).toBe(0.5);
  });

  it('policyLossAsync(args, null) rejects with ERR_OPTION (never throws)', async () => {
    let p: Promise<unknown> | undefined;
    expect(() => { p = rl.policyLossAsync({ ...base() }, null as never); }).not.toThrow();
    const e = await p!.then(() => undefined, (x: unknown) => x);
    expect(e).toBeInstanceOf(rl.GearError);
    expect((e as rl.GearError).code).toBe('ERR_OPTION');
  });

  it('klLoss and entropyBonus: an option getter that detaches or shrinks the offsets is coded', async () => {
    const o1 = i32(0, 2, 5);
    const a1 = withGetter({ logprob: lp(), refLogprob: old(), offsets: o1 }, 'agg', 'token-mean', () => detach(o1));
    expect(await codeOf(() => rl.klLoss(a1 as rl.KlLossArgs))).toBe('ERR_SHAPE');
    const o2 = i32(0, 2, 5);
    const ao = withGetter({}, 'dpSize', 1, () => detach(o2));
    expect(await codeOf(() => rl.klLoss({ logprob: lp(), refLogprob: old(), offsets: o2, aggOptions: ao }))).toBe('ERR_SHAPE');
    const o3 = i32(0, 2, 5);
    expect(await codeOf(() => rl.entropyBonus(lp(), o3, undefined, 0.1, 'token-mean', withGetter({}, 'globalTokens', 5, () => detach(o3))))).toBe('ERR_SHAPE');
    const o4 = new Int32Array(new ArrayBuffer(12, { maxByteLength: 12 }));
    o4.set([0, 2, 5]);
    expect(await codeOf(() => rl.entropyBonus(lp(), o4, undefined, 0.1, 'token-mean', withGetter({}, 'dpSize', 1, () => o4.buffer.resize(4))))).toBe('ERR_OFFSETS');
    // the options are read once, before the arrays: a getter that does no harm leaves the result as it was
    const plain = rl.klLoss({ logprob: lp(), refLogprob: old(), offsets: off(), agg: 'seq-mean-token-mean' });
    expect(rl.klLoss(withGetter({ logprob: lp(), refLogprob: old(), offsets: off() }, 'agg', 'seq-mean-token-mean', () => {}) as rl.KlLossArgs)).toEqual(plain);
  });

  it('applyKlPenalty: a getter of the estimator or of the controller\'s β that detaches an input is coded', async () => {
    const args = () => ({ tokenRewards: f32(0, 1, 0, 0, 1), oldLogprob: lp(), refLogprob: old(), offsets: off(), controller: new rl.FixedKlController(0.1) });
    const a = args();
    expect(await codeOf(() => rl.applyKlPenalty(withGetter({ ...a }, 'estimator', 'kl', () => detach(a.offsets)) as rl.ApplyKlPenaltyArgs))).toBe('ERR_SHAPE');
    const b = args();
    const controller = { get value() { detach(b.tokenRewards); return 0.1; }, update() {} };
    expect(await codeOf(() => rl.applyKlPenalty({ ...b, controller }))).toBe('ERR_SHAPE');
  });

  it('grpo and the row estimators: a group id getter that detaches typed rewards leaves the result as it was', async () => {
    for (const precision of ['float32', 'float64'] as const) {
      const want = rl.grpo({ rewards: [1, 0, 1, 0.5], groups: [0, 0, 1, 1], precision });
      const rewards = Float64Array.of(1, 0, 1, 0.5);
      const groups = withGetter([0, 0, 1, 1], '2', 1, () => detach(rewards));
      // before: a TypeError (float32), or 0 advantages for 4 rewards (float64)
      expect(rl.grpo({ rewards, groups, precision })).toEqual(want);
    }
    const rewards = Float64Array.of(1, 0, 1, 0);
    expect(rl.rloo({ rewards, groups: withGetter(['a', 'a', 'b', 'b'], '1', 'a', () => detach(rewards)) })).toEqual(rl.rloo({ rewards: [1, 0, 1, 0], groups: ['a', 'a', 'b', 'b'] }));
  });

  it('toSavedBatch and saveBatch: a token or row label getter that detaches an array already checked is coded', async () => {
    const batch = () => ({ advantages: [1, -1], offsets: off(), divergence: f32(0.1, 3, 0.2, 0, 1), entropy: f32(1, 2, 0.5, 0, 1) });
    const b1 = batch();
    const tokens = withGetter(['a', 'b', 'c', 'd', 'e'], '1', 'b', () => detach(b1.divergence));
    expect(await codeOf(() => report.toSavedBatch({ ...b1, tokens }))).toBe('ERR_SHAPE');
    const b2 = batch();
    const rowLabels = withGetter(['r0', 'r1'], '0', 'r0', () => detach(b2.offsets));
    expect(await codeOf(() => report.saveBatch(join(tmpdir(), `gear-reads-save-${process.pid}.json`), { ...b2, rowLabels }))).toBe('ERR_SHAPE');
    const b3 = batch();
    const r = rl.gear(b3);
    const result = { ...r, anchors: withGetter(Array.from(r.anchors), '0', r.anchors[0], () => detach(r.weights)) };
    expect(await codeOf(() => report.toSavedBatch({ ...b3, result }))).toBe('ERR_SHAPE');
    // a getter that does no harm: the saved batch is that of the plain record
    const b4 = batch();
    expect(report.toSavedBatch({ ...b4, tokens: withGetter(['a', 'b', 'c', 'd', 'e'], '1', 'b', () => {}) })).toEqual(report.toSavedBatch({ ...batch(), tokens: ['a', 'b', 'c', 'd', 'e'] }));
  });

  it('gigpo and stepGroups: an anchor that answers differently on a second read is read once', () => {
    // each anchor element a getter: the first read gives the state, a later one another state
    const swapping = (states: string[]) => {
      const reads = states.map(() => 0);
      const list: string[] = [];
      states.forEach((x, i) => Object.defineProperty(list, i, { get: () => (reads[i]++ === 0 ? x : `other ${i}`), enumerable: true }));
      return { list, reads };
    };
    const states = ['look', 'go', 'look', 'go!'];
    const args = { episodeRewards: [1, 1, 0, 0], stepRewards: [0, 1, 0, 0], trajectories: [0, 0, 1, 1], groups: [0, 0, 0, 0] };
    for (const sim of [undefined, { threshold: 0.5 }]) {
      const want = rl.gigpo({ ...args, anchors: states, ...(sim ? { similarity: sim } : {}) });
      const s = swapping(states);
      expect(rl.gigpo({ ...args, anchors: s.list, ...(sim ? { similarity: sim } : {}) })).toEqual(want);
      expect(s.reads).toEqual([1, 1, 1, 1]);
      const g = swapping(states);
      expect(rl.stepGroups(g.list, [0, 0, 0, 0], sim)).toEqual(rl.stepGroups(states, [0, 0, 0, 0], sim));
      expect(g.reads).toEqual([1, 1, 1, 1]);
    }
    const a = swapping(states);
    expect(similarity.anchorIds(a.list)).toEqual(similarity.anchorIds(states));
    expect(a.reads).toEqual([1, 1, 1, 1]);
  });

  it('every logits argument of every public function is read once (each field, one read in the whole call)', async () => {
    /** Logits whose fields are getters counting their reads. */
    const counted = (rows = 5, vocab = 4, s = 1) => {
      const l = logits(rows, vocab, s);
      const reads: Record<string, number> = { data: 0, rows: 0, vocab: 0 };
      const o = {};
      for (const k of Object.keys(reads)) {
        Object.defineProperty(o, k, { get: () => { reads[k]!++; return l[k as keyof typeof l]; }, enumerable: true });
      }
      return { l: o as rl.Logits, reads };
    };
    const t = () => i32(0, 1, 2, 3, 0);
    const g = () => f32(1, 1, -1, 0.5, 0);
    type Case = (a: () => rl.Logits, b: () => rl.Logits) => unknown;
    const cases: Record<string, Case> = {
      tokenStats: (a) => rl.tokenStats(a(), t()),
      tokenStatsAsync: (a) => rl.tokenStatsAsync(a(), t()),
      tokenStatsBackward: (a) => rl.tokenStatsBackward(a(), t(), { logprob: g(), entropy: g() }),
      tokenStatsBackwardAsync: (a) => rl.tokenStatsBackwardAsync(a(), t(), { logprob: g() }),
      tokenStatsPartial: (a) => rl.tokenStatsPartial(a(), t(), { vocabStart: 0 }),
      tokenStatsPartialAsync: (a) => rl.tokenStatsPartialAsync(a(), t(), { vocabStart: 0 }),
      divergence: (a, b) => rl.divergence(a(), b(), { targets: t() }),
      divergenceAsync: (a, b) => rl.divergenceAsync(a(), b(), { kind: 'jsd' }),
      divergenceBackward: (a, b) => rl.divergenceBackward(a(), b(), g(), { klCap: 10 }),
      divergenceBackwardAsync: (a, b) => rl.divergenceBackwardAsync(a(), b(), g()),
      distillLoss: (a, b) => rl.distillLoss({ student: a(), teacher: b(), distillCoef: 0.5, mask: mask() }),
      gearFromLogits: (a, b) => rl.gearFromLogits({
        student: a(), teacher: b(), targets: t(), advantages: [1, -1], offsets: off(), mask: mask(), distillCoef: 0.1,
      }),
      lossGradToLogits: (a, b) => rl.lossGradToLogits({
        logits: a(), targets: t(), gradLogprob: g(), offsets: off(), distill: { teacher: b(), coef: 0.5 },
      }),
      gatherRows: (a) => rl.gatherRows(a(), [0, 2]),
    };
    // the public functions taking logits that may live on a device (listed from the declarations), and the host-only ones
    const { deviceFunctions } = await import('../device/public_functions.js');
    const listed = deviceFunctions().filter((f) => !f.startsWith('DeviceLogits.') && !f.startsWith('cuda.'));
    expect(Object.keys(cases).filter((f) => !listed.includes(f)).sort()).toEqual(['gatherRows', 'lossGradToLogits']);
    expect(listed.filter((f) => !(f in cases))).toEqual([]);
    const found: string[] = [];
    for (const [name, call] of Object.entries(cases)) {
      const a = counted(), b = counted(5, 4, 2);
      await call(() => a.l, () => b.l);
      for (const [side, c] of [['first', a], ['second', b]] as const) {
        for (const [k, n] of Object.entries(c.reads)) if (n > 1 || (side === 'first' && n !== 1)) found.push(`${name}: ${side} logits .${k} read ${n} times`);
      }
    }
    expect(found).toEqual([]);
  }, 60_000);

  it('gearFromSparse: the top-k lists and the options are read once (with and without a teacher)', () => {
    const counting = <T extends object>(o: T) => {
      const reads: Record<string, number> = {};
      const out = {};
      for (const [k, x] of Object.entries(o)) {
        reads[k] = 0;
        Object.defineProperty(out, k, { get: () => { reads[k]!++; return x; }, enumerable: true });
      }
      return { o: out as T, reads };
    };
    const lp = (...p: number[]) => Float32Array.from(p, Math.log);
    const topk = () => ({ ids: Int32Array.of(5, 1, 8, 2, 3, 4), logprobs: lp(0.7, 0.2, 0.6, 0.3, 0.9, 0.05), k: 2 });
    const layout = { advantages: [1], offsets: i32(0, 3), vocab: 16, studentLogprob: lp(0.7, 0.3, 0.9), teacherLogprob: lp(0.6, 0.01, 0.8) };
    for (const teacher of [true, false]) {
      const st = counting(topk()), te = counting(topk());
      const o = counting({ peakMinKl: 0.1, alpha: 0.5, ...(teacher ? {} : { anchorSignal: 'logratio' as const }) });
      rl.gearFromSparse({ ...layout, student: st.o, ...(teacher ? { teacher: te.o } : {}), options: o.o });
      const all = { ...Object.fromEntries(Object.entries(st.reads).map(([k, n]) => [`student.${k}`, n])),
        ...(teacher ? Object.fromEntries(Object.entries(te.reads).map(([k, n]) => [`teacher.${k}`, n])) : {}),
        ...Object.fromEntries(Object.entries(o.reads).map(([k, n]) => [`options.${k}`, n])) };
      expect(Object.entries(all).filter(([, n]) => n !== 1), `teacher: ${teacher}`).toEqual([]);
    }
  });

  it('gearFromLogits without targets is ERR_DTYPE', async () => {
    const args = { student: logits(2, 3), teacher: logits(2, 3, 2), advantages: [1], offsets: i32(0, 2) };
    expect(await codeOf(() => rl.gearFromLogits(args as unknown as rl.GearFromLogitsInput))).toBe('ERR_DTYPE');
  });

  it('teacherInput: a reference whose encode changes between reads is read once', async () => {
    let n = 0;
    const reference = { groundTruth: '42', get encode() { return n++ === 0 ? () => [7, 8] : 'not a function'; } };
    const r = rl.teacherInput({ prompt: [1, 2], insertAt: 2, response: [3], reference: reference as unknown as rl.TeacherReference });
    expect(Array.from(r.referenceIds)).toEqual([7, 8]);
    expect(n).toBe(1);
  });

  it('distillLoss: logits, mask and stats that change between reads are read once', async () => {
    const student = logits(2, 3), teacher = logits(2, 3, 2);
    let n = 0;
    const swapping = { get data() { return n++ === 0 ? student.data : undefined; }, rows: 2, vocab: 3 };
    const r = rl.distillLoss({ student: swapping as unknown as rl.Logits, teacher, distillCoef: 1 });
    expect(r.grad.length).toBe(6);
    expect(n).toBe(1);
    const stats = rl.divergence(student, teacher, { kind: 'reverse_kl', klCap: 20 });
    let m = 0;
    const s2 = { ...stats, get value() { return m++ === 0 ? stats.value : undefined; } };
    expect(rl.distillLoss({ student, teacher, distillCoef: 1, stats: s2 as rl.Divergence }).loss).toBeCloseTo(rl.distillLoss({ student, teacher, distillCoef: 1 }).loss, 12);
    expect(await codeOf(() => rl.distillLoss({ student: undefined as unknown as rl.Logits, teacher, distillCoef: 1 }))).toBe('ERR_DTYPE');
  });
});
