// Every argument is read once, in a fixed order, before it is checked: a getter that detaches, shrinks or
// swaps an input yields a coded GearError or a correct result, never a TypeError / RangeError from inside;
// the same for holes, Symbols, null options and frozen or getter-only objects. Two sweeps over a table of
// valid calls (every object argument rebuilt with getters; the attack fired at the k-th read, for every k
// the call makes), then one test per class of escape that the adversarial campaign found.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import * as diagnostics from '../../ts/diagnostics.js';
import * as similarity from '../../ts/similarity.js';

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
  add('registerPolicyLoss', () => [fn((d: rl.PolicyLossDefinition) => { rl.registerPolicyLoss(d); rl.unregisterPolicyLoss('hostile_loss'); }), [{
    name: 'hostile_loss', aliases: ['hostile_alias'], options: { k: { type: 'number', min: 0 } },
    terms: (c: rl.PolicyLossContext) => ({ loss: c.logprob, dloss: c.logprob }),
  }]]);
  add('registerAdvantageEstimator', () => [fn((d: rl.AdvantageEstimatorDefinition) => { rl.registerAdvantageEstimator(d); rl.unregisterAdvantageEstimator('hostile_est'); }), [{
    name: 'hostile_est', level: 'row', options: { k: { type: 'number', default: 1 } }, compute: () => [1],
  }]]);
  return T;
}

/** Runs a call; undefined when it returned or threw a coded GearError, else what it threw. */
async function outcome(f: (...a: never[]) => unknown, args: unknown[]): Promise<string | undefined> {
  try {
    const r = f(...(args as never[]));
    if (r instanceof Promise) await r;
  } catch (e) {
    if (e instanceof rl.GearError && /^ERR_/.test(e.code)) return undefined;
    return `${(e as Error)?.constructor?.name}: ${String((e as Error)?.message).slice(0, 160)}`;
  }
  return undefined;
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
      for (const mode of ['detach', 'shrink'] as const) {
        for (let at = 1; at < 500; at++) {
          const [f, args] = make();
          const h = hostile(args, mode, at);
          const bad = await outcome(f, h.args);
          if (bad !== undefined) found.push(`${mode} at read ${at}: ${bad}`);
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
    const m0 = u8(1);
    detach(m0);
    expect(await codeOf(() => diagnostics.maskedMean([], m0))).toBe('ok');
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
    const s1 = withGetter({ ...state }, 'expAvg', state.expAvg, () => detach(params[0]!));
    expect(await codeOf(() => rl.AdamW.fromState(params, s1 as rl.AdamState))).toBe('ERR_STATE');
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
