import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { native } from '../../ts/core/addon.js';
import type { AdamStepParams } from '../../ts/optim/adamw.js';
import type { ClipGradNormParams, GradNormParams } from '../../ts/optim/clip.js';
import { bits, clone, randomTensors } from './reference.js';

const LENGTHS = [4, 0, 9];
const code = (c: string) => expect.objectContaining({ name: 'GearError', code: c });

/** Snapshot of params and optimizer state; after a rejected call both must be unchanged. */
function snapshot(params: Float32Array[], opt: rl.Optimizer) {
  return JSON.stringify({ p: bits(params), s: opt.state(), step: opt.stepCount, lr: opt.lr }, (_k, val) =>
    val instanceof Float32Array ? Array.from(new Uint32Array(val.buffer, val.byteOffset, val.length)) : val);
}

function fresh(kind: 'adamw' | 'adam' | 'sgd') {
  const params = randomTensors(1, LENGTHS);
  const opt = kind === 'adamw' ? new rl.AdamW(params, { amsgrad: true }) : kind === 'adam' ? new rl.Adam(params) : new rl.SGD(params, { lr: 0.01, momentum: 0.9 });
  opt.step(randomTensors(2, LENGTHS)); // non-trivial state
  return { params, opt };
}

describe('step rejects bad gradients before modifying anything', () => {
  const bad: [string, (p: Float32Array[]) => unknown, string][] = [
    ['too few gradients', () => randomTensors(3, [4, 0]), 'ERR_SHAPE'],
    ['too many gradients', () => randomTensors(3, [4, 0, 9, 1]), 'ERR_SHAPE'],
    ['a wrong length in the last tensor', () => randomTensors(3, [4, 0, 8]), 'ERR_SHAPE'],
    ['a Float64Array', () => [new Float32Array(4), new Float32Array(0), new Float64Array(9)], 'ERR_DTYPE'],
    ['a plain array', () => [new Float32Array(4), new Float32Array(0), new Array(9).fill(0)], 'ERR_DTYPE'],
    ['not an array', () => new Float32Array(13), 'ERR_DTYPE'],
    ['null', () => null, 'ERR_DTYPE'],
    ['a gradient that is a parameter', (p) => [p[0], new Float32Array(0), new Float32Array(9)], 'ERR_SHAPE'],
  ];
  for (const kind of ['adamw', 'adam', 'sgd'] as const) {
    for (const [name, make, c] of bad) {
      it(`${kind}: ${name} -> ${c}`, () => {
        const { params, opt } = fresh(kind);
        const before = snapshot(params, opt);
        const g = make(params);
        expect(() => opt.step(g as Float32Array[])).toThrow(code(c));
        expect(snapshot(params, opt)).toBe(before);
      });
    }
  }

  it('a gradient partly overlapping a parameter (views of one buffer) -> ERR_SHAPE, nothing modified', () => {
    const buf = new Float32Array(40).fill(0.5);
    const params = [buf.subarray(0, 4), buf.subarray(4, 4), buf.subarray(4, 13)];
    const opt = new rl.AdamW(params);
    const before = snapshot(params, opt);
    const all = bits([buf]);
    expect(() => opt.step([buf.subarray(20, 24), new Float32Array(0), buf.subarray(12, 21)])).toThrow(code('ERR_SHAPE'));
    expect(snapshot(params, opt)).toBe(before);
    expect(bits([buf])).toEqual(all);
  });

  it('overlapping views need a shared buffer: a gradient next to (not over) a parameter is fine', () => {
    const buf = new Float32Array(8);
    const p = [buf.subarray(0, 4)];
    const g = [buf.subarray(4, 8)];
    g[0]!.fill(1);
    const opt = new rl.SGD(p, { lr: 0.5 });
    opt.step(g);
    expect(Array.from(p[0]!)).toEqual([-0.5, -0.5, -0.5, -0.5]);
  });
});

describe('constructor and lr validation', () => {
  const p = () => randomTensors(4, [3]);
  const cases: [string, () => unknown, string][] = [
    ['lr < 0', () => new rl.AdamW(p(), { lr: -1 }), 'ERR_OPTION'],
    ['lr NaN', () => new rl.AdamW(p(), { lr: NaN }), 'ERR_OPTION'],
    ['lr Infinity', () => new rl.Adam(p(), { lr: Infinity }), 'ERR_OPTION'],
    ['beta1 = 1', () => new rl.AdamW(p(), { betas: [1, 0.999] }), 'ERR_OPTION'],
    ['beta2 = 1', () => new rl.AdamW(p(), { betas: [0.9, 1] }), 'ERR_OPTION'],
    ['beta1 < 0', () => new rl.Adam(p(), { betas: [-0.1, 0.999] }), 'ERR_OPTION'],
    ['betas of length 1', () => new rl.AdamW(p(), { betas: [0.9] as unknown as [number, number] }), 'ERR_SHAPE'],
    ['eps < 0', () => new rl.AdamW(p(), { eps: -1e-8 }), 'ERR_OPTION'],
    ['weightDecay < 0', () => new rl.AdamW(p(), { weightDecay: -0.1 }), 'ERR_OPTION'],
    ['amsgrad not boolean', () => new rl.AdamW(p(), { amsgrad: 1 as unknown as boolean }), 'ERR_OPTION'],
    ['unknown option (snake case)', () => new rl.AdamW(p(), { weight_decay: 0.1 } as unknown as rl.AdamOptions), 'ERR_OPTION'],
    ['params not an array', () => new rl.AdamW(new Float32Array(3) as unknown as Float32Array[]), 'ERR_DTYPE'],
    ['a Float64Array param', () => new rl.SGD([new Float64Array(3) as unknown as Float32Array], { lr: 0.1 }), 'ERR_DTYPE'],
    ['a param listed twice', () => { const a = new Float32Array(3); return new rl.AdamW([a, a]); }, 'ERR_SHAPE'],
    ['overlapping params', () => { const a = new Float32Array(6); return new rl.SGD([a.subarray(0, 4), a.subarray(3)], { lr: 0.1 }); }, 'ERR_SHAPE'],
    ['SGD without lr', () => new rl.SGD(p(), { momentum: 0.9 } as rl.SGDOptions), 'ERR_OPTION'],
    ['SGD without options', () => new (rl.SGD as unknown as new (p: Float32Array[]) => rl.SGD)(p()), 'ERR_OPTION'],
    ['SGD momentum < 0', () => new rl.SGD(p(), { lr: 0.1, momentum: -0.9 }), 'ERR_OPTION'],
    ['SGD dampening > 1', () => new rl.SGD(p(), { lr: 0.1, momentum: 0.9, dampening: 1.5 }), 'ERR_OPTION'],
    ['SGD nesterov without momentum', () => new rl.SGD(p(), { lr: 0.1, nesterov: true }), 'ERR_OPTION'],
    ['SGD nesterov with dampening', () => new rl.SGD(p(), { lr: 0.1, nesterov: true, momentum: 0.9, dampening: 0.1 }), 'ERR_OPTION'],
  ];
  for (const [name, make, c] of cases) it(`${name} -> ${c}`, () => expect(make).toThrow(code(c)));

  it('setting lr to a bad value throws ERR_OPTION and keeps the old lr', () => {
    const opt = new rl.AdamW(p(), { lr: 0.1 });
    for (const bad of [-1, NaN, Infinity, '0.1']) {
      expect(() => { opt.lr = bad as number; }).toThrow(code('ERR_OPTION'));
      expect(opt.lr).toBe(0.1);
    }
    opt.lr = 0;
    expect(opt.lr).toBe(0);
  });

  it('messages read "what: expected X, got Y"', () => {
    const { opt } = fresh('adamw');
    expect(() => opt.step(randomTensors(3, [4, 0, 8]))).toThrow('grads[2].length: expected 9, got 8');
    expect(() => new rl.AdamW(p(), { betas: [1, 0.9] })).toThrow(/betas\[0\]: expected .*< 1, got 1/);
  });
});

describe('fromState rejects a state that does not fit', () => {
  const good = () => {
    const params = randomTensors(5, LENGTHS);
    const opt = new rl.AdamW(params);
    opt.step(randomTensors(6, LENGTHS));
    return { params, st: opt.state() };
  };
  const cases: [string, (s: rl.AdamState) => unknown, string][] = [
    ['another kind', (s) => ({ ...s, kind: 'adam' }), 'ERR_STATE'],
    ['an SGD state', () => new rl.SGD(randomTensors(5, LENGTHS), { lr: 0.1 }).state(), 'ERR_STATE'],
    ['a wrong version', (s) => ({ ...s, version: 2 }), 'ERR_STATE'],
    ['a negative step', (s) => ({ ...s, step: -1 }), 'ERR_STATE'],
    ['a fractional step', (s) => ({ ...s, step: 1.5 }), 'ERR_STATE'],
    ['a missing buffer', (s) => ({ ...s, expAvg: s.expAvg.slice(1) }), 'ERR_STATE'],
    ['a buffer of the wrong length', (s) => ({ ...s, expAvgSq: [s.expAvgSq[0], s.expAvgSq[1], new Float32Array(8)] }), 'ERR_STATE'],
    ['a Float64Array buffer', (s) => ({ ...s, expAvg: [new Float64Array(4), s.expAvg[1], s.expAvg[2]] }), 'ERR_STATE'],
    ['amsgrad buffers missing', (s) => ({ ...s, amsgrad: true }), 'ERR_STATE'],
    ['betas out of range', (s) => ({ ...s, betas: [1.2, 0.9] }), 'ERR_STATE'],
    ['lr missing', (s) => { const c: Partial<rl.AdamState> = { ...s }; delete c.lr; return c; }, 'ERR_STATE'],
    ['null', () => null, 'ERR_STATE'],
    // corrupted checkpoints: the next step would turn the parameters into NaN
    ['a NaN first moment', (s) => ({ ...s, expAvg: [Float32Array.from(s.expAvg[0]!, (x, i) => (i === 1 ? NaN : x)), s.expAvg[1], s.expAvg[2]] }), 'ERR_STATE'],
    ['an infinite first moment', (s) => ({ ...s, expAvg: [Float32Array.from(s.expAvg[0]!, (x, i) => (i === 2 ? Infinity : x)), s.expAvg[1], s.expAvg[2]] }), 'ERR_STATE'],
    ['a negative second moment', (s) => ({ ...s, expAvgSq: [Float32Array.from(s.expAvgSq[0]!, (x, i) => (i === 3 ? -1e-9 : x)), s.expAvgSq[1], s.expAvgSq[2]] }), 'ERR_STATE'],
    ['an infinite second moment', (s) => ({ ...s, expAvgSq: [s.expAvgSq[0], s.expAvgSq[1], s.expAvgSq[2]!.map(() => Infinity)] }), 'ERR_STATE'],
  ];
  for (const [name, mutate, c] of cases) {
    it(`${name} -> ${c}`, () => {
      const { params, st } = good();
      const before = bits(params);
      expect(() => rl.AdamW.fromState(params, mutate(st) as rl.AdamState)).toThrow(code(c));
      expect(bits(params)).toEqual(before);
    });
  }
  it('params of another count -> ERR_STATE', () => {
    const { st } = good();
    expect(() => rl.AdamW.fromState(randomTensors(5, [4, 0]), st)).toThrow(code('ERR_STATE'));
  });
  it('AMSGrad: a NaN or negative running max -> ERR_STATE; SGD: a NaN momentum buffer -> ERR_STATE', () => {
    const params = randomTensors(5, LENGTHS);
    const ams = new rl.AdamW(params, { amsgrad: true });
    ams.step(randomTensors(6, LENGTHS));
    const st = ams.state();
    for (const bad of [NaN, -1]) {
      const vmax = st.maxExpAvgSq!.map((b, i) => (i === 0 ? Float32Array.from(b, (x, j) => (j === 0 ? bad : x)) : b));
      expect(() => rl.AdamW.fromState(randomTensors(5, LENGTHS), { ...st, maxExpAvgSq: vmax })).toThrow(code('ERR_STATE'));
    }
    const sgd = new rl.SGD(randomTensors(5, LENGTHS), { lr: 0.1, momentum: 0.9 });
    sgd.step(randomTensors(7, LENGTHS));
    const ss = sgd.state();
    const buf = ss.momentumBuffer!.map((b, i) => (i === 2 ? b.map(() => NaN) : b));
    expect(() => rl.SGD.fromState(randomTensors(5, LENGTHS), { ...ss, momentumBuffer: buf })).toThrow(code('ERR_STATE'));
    // an ordinary state still loads (zeros and negative first moments are in the domain)
    expect(() => rl.AdamW.fromState(randomTensors(5, LENGTHS), st)).not.toThrow();
  });
  it('SGD: momentum buffers of a momentum-free state -> ERR_STATE', () => {
    const s = new rl.SGD(randomTensors(5, LENGTHS), { lr: 0.1, momentum: 0.9 }).state();
    expect(() => rl.SGD.fromState(randomTensors(5, LENGTHS), { ...s, momentum: 0 })).toThrow(code('ERR_STATE'));
    expect(() => rl.SGD.fromState(randomTensors(5, LENGTHS), { ...s, momentumBuffer: null })).toThrow(code('ERR_STATE'));
  });
});

describe('native layer re-checks its inputs on its own', () => {
  function args() {
    const p = randomTensors(7, [5, 3]);
    const g = randomTensors(8, [5, 3]);
    const m = [new Float32Array(5), new Float32Array(3)];
    const v = [new Float32Array(5), new Float32Array(3)];
    return { p, g, m, v };
  }
  // the raw addon's adamStep, with some named parameters replaced
  const adam = (a: ReturnType<typeof args>, over: Record<string, unknown> = {}) => {
    const params: Record<string, unknown> = {
      params: a.p, grads: a.g, expAvg: a.m, expAvgSq: a.v, maxExpAvgSq: null, lr: 1e-3, beta1: 0.9, beta2: 0.999,
      eps: 1e-8, weightDecay: 0.01, step: 1, decoupled: true, amsgrad: false, maximize: false, async: false, abort: null,
    };
    return native.adamStep({ ...params, ...over } as unknown as AdamStepParams);
  };
  const cases: [string, (a: ReturnType<typeof args>) => Record<string, unknown>, string][] = [
    ['grads count', (a) => ({ grads: a.g.slice(0, 1) }), 'ERR_SHAPE'],
    ['expAvg length', (a) => ({ expAvg: [a.m[0], new Float32Array(2)] }), 'ERR_SHAPE'],
    ['expAvgSq dtype', (a) => ({ expAvgSq: [a.v[0], new Float64Array(3)] }), 'ERR_DTYPE'],
    ['params not an array', () => ({ params: new Float32Array(8) }), 'ERR_DTYPE'],
    ['amsgrad without buffers', () => ({ amsgrad: true }), 'ERR_DTYPE'],
    ['beta1 = 1', () => ({ beta1: 1 }), 'ERR_OPTION'],
    ['beta2 NaN', () => ({ beta2: NaN }), 'ERR_OPTION'],
    ['lr < 0', () => ({ lr: -1 }), 'ERR_OPTION'],
    ['eps Infinity', () => ({ eps: Infinity }), 'ERR_OPTION'],
    ['weight decay < 0', () => ({ weightDecay: -1 }), 'ERR_OPTION'],
    ['step 0', () => ({ step: 0 }), 'ERR_OPTION'],
    ['step 1.5', () => ({ step: 1.5 }), 'ERR_OPTION'],
    ['grad aliasing a moment', (a) => ({ grads: [a.m[0], a.g[1]] }), 'ERR_SHAPE'],
    ['a parameter twice', (a) => ({ params: [a.p[0], a.p[0]], grads: [a.g[0], new Float32Array(5)], expAvg: [a.m[0], new Float32Array(5)], expAvgSq: [a.v[0], new Float32Array(5)] }), 'ERR_SHAPE'],
  ];
  for (const [name, over, c] of cases) {
    it(`adamStep: ${name} -> ${c}, nothing written`, () => {
      const a = args();
      const before = bits([...a.p, ...a.g, ...a.m, ...a.v]);
      expect(() => adam(a, over(a))).toThrow(code(c));
      expect(bits([...a.p, ...a.g, ...a.m, ...a.v])).toEqual(before);
    });
  }
  it('adamStep with good arguments works (the harness above is not always failing)', () => {
    const a = args();
    const before = bits(a.p);
    adam(a);
    expect(bits(a.p)).not.toEqual(before);
  });
  it('sgdStep: bad lengths, nesterov without momentum, dampening > 1 -> GearError, nothing written', () => {
    const a = args();
    const before = bits([...a.p, ...a.m]);
    const sgd = (grads: Float32Array[], momentumBuffer: Float32Array[] | null, momentum: number, dampening: number, nesterov: boolean) =>
      native.sgdStep({ params: a.p, grads, momentumBuffer, lr: 0.1, momentum, dampening, weightDecay: 0, nesterov,
        maximize: false, firstStep: true, async: false, abort: null });
    expect(() => sgd([a.g[0], new Float32Array(2)], a.m, 0.9, 0, false)).toThrow(code('ERR_SHAPE'));
    expect(() => sgd(a.g, null, 0.9, 0, false)).toThrow(code('ERR_DTYPE'));
    expect(() => sgd(a.g, null, 0, 0, true)).toThrow(code('ERR_OPTION'));
    expect(() => sgd(a.g, a.m, 0.9, 1.5, false)).toThrow(code('ERR_OPTION'));
    expect(bits([...a.p, ...a.m])).toEqual(before);
  });
  it('clipGradNorm / gradNorm: bad lists -> GearError', () => {
    const g = randomTensors(9, [3, 4]);
    const before = bits(g);
    const clip = (grads: unknown, maxNorm: number, out: Float64Array) =>
      native.clipGradNorm({ grads, maxNorm, errorIfNonfinite: true, out, async: false, abort: null } as unknown as ClipGradNormParams);
    expect(() => clip([g[0], new Float64Array(2)], 1, new Float64Array(1))).toThrow(code('ERR_DTYPE'));
    expect(() => clip(g, -1, new Float64Array(1))).toThrow(code('ERR_OPTION'));
    expect(() => clip(g, 1, new Float64Array(2))).toThrow(code('ERR_SHAPE'));
    expect(() => clip([g[0], g[0]], 1, new Float64Array(1))).toThrow(code('ERR_SHAPE'));
    expect(() => native.gradNorm({ grads: 'x' } as unknown as GradNormParams)).toThrow(code('ERR_DTYPE'));
    expect(bits(g)).toEqual(before);
  });
});

describe('NaN / Infinity in gradients propagate as in PyTorch (no silent filtering)', () => {
  it('a NaN gradient entry makes only that parameter entry NaN', () => {
    const p = [Float32Array.of(1, 2, 3)];
    const opt = new rl.AdamW(clone(p).map((x) => x));
    const params = opt.params as Float32Array[];
    opt.step([Float32Array.of(0.1, NaN, -0.1)]);
    expect(Number.isNaN(params[0]![1]!)).toBe(true);
    expect(Number.isFinite(params[0]![0]!) && Number.isFinite(params[0]![2]!)).toBe(true);
  });
});
