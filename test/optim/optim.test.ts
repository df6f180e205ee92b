import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { BEST, ISAS, restoreBackendAfterAll } from '../helpers/isa.js';
import { data, expectClose, loadPeer } from '../helpers/peer.js';
import {
  adam64, bits, clone, randomTensors, sgd64, torchAdam, torchSgd, type AdamHp, type SgdHp,
} from './reference.js';

const peer = loadPeer('torch_optim.json');
const f32 = (t: unknown) => Float32Array.from(data(t) as number[]);

restoreBackendAfterAll();

describe('torch_optim.json (PyTorch 1.13), every step of every case', () => {
  expect(peer.cases.length).toBeGreaterThanOrEqual(9);
  for (const c of peer.cases) {
    it(`${c.name}: parameters and state buffers match (bit for bit unless the step clips)`, () => {
      const kind = (c as unknown as { optimizer: string }).optimizer;
      const steps = (c as unknown as { steps: number }).steps;
      const pr = c.params;
      const params = (c.inputs.initial_params as unknown[]).map(f32);
      let opt: rl.AdamW | rl.Adam | rl.SGD;
      if (kind === 'adamw' || kind === 'adam') {
        const o: rl.AdamOptions = { lr: pr.lr };
        if (pr.betas) o.betas = [pr.betas[0], pr.betas[1]];
        if (pr.eps !== undefined) o.eps = pr.eps;
        if (pr.weight_decay !== undefined) o.weightDecay = pr.weight_decay;
        opt = kind === 'adamw' ? new rl.AdamW(params, o) : new rl.Adam(params, o);
      } else {
        expect(kind).toBe('sgd');
        opt = new rl.SGD(params, {
          lr: pr.lr, momentum: pr.momentum ?? 0, nesterov: pr.nesterov ?? false, weightDecay: pr.weight_decay ?? 0,
        });
      }
      const sched = pr.lr_per_step ? new rl.LRScheduler(opt, (s) => pr.lr_per_step[Math.min(s, steps - 1)] as number) : null;
      const grads = c.inputs.grads_per_step as unknown[][];
      const after = c.outputs!.after_step as Record<string, unknown[]>[];
      expect(grads.length).toBe(steps);
      expect(after.length).toBe(steps);
      for (let s = 0; s < steps; s++) {
        const g = grads[s]!.map(f32);
        if (pr.clip_grad_norm !== undefined) {
          const norm = rl.clipGradNorm(g, pr.clip_grad_norm);
          // torch reports its float32 norm; ours is float64.
          expectClose([norm], [c.outputs!.grad_norm_before_clip[s]], { rtol: 1e-6, what: `${c.name} norm ${s}` });
        }
        opt.step(g);
        sched?.step();
        const st = opt.state();
        expect(st.step).toBe(s + 1);
        const want = after[s]!;
        const expected: [string, Float32Array[], Float32Array[]][] = [['params', params, (want.params as unknown[]).map(f32)]];
        if (st.kind === 'sgd') {
          if (want.momentum_buffer) expected.push(['momentum_buffer', st.momentumBuffer!, (want.momentum_buffer as unknown[]).map(f32)]);
          else expect(st.momentumBuffer).toBeNull();
        } else {
          expected.push(['exp_avg', st.expAvg, (want.exp_avg as unknown[]).map(f32)]);
          expected.push(['exp_avg_sq', st.expAvgSq, (want.exp_avg_sq as unknown[]).map(f32)]);
        }
        for (const [what, got, exp] of expected) {
          if (pr.clip_grad_norm === undefined) {
            expect(bits(got), `${c.name} ${what} step ${s + 1}`).toEqual(bits(exp));
          } else {
            // torch accumulates the norm in float32 (and rounds each tensor's norm to float32 first);
            // ours is float64, so the clip coefficient can differ in its last bit: README tolerance.
            // Absolute part scaled to the tensor: exp_avg can cancel to far below its terms.
            got.forEach((a, t) => {
              const scale = exp[t]!.reduce((mx, x) => Math.max(mx, Math.abs(x)), 0);
              expectClose(a, exp[t]!, { rtol: 1e-6, atol: 1e-6 * scale, what: `${c.name} ${what}[${t}] step ${s + 1}` });
            });
          }
        }
      }
    });
  }
});

// Lengths covering empty tensors, length 1, odd SIMD tails and tensors spanning several native blocks.
const LENGTHS = [0, 1, 3, 7, 15, 16, 17, 31, 33, 63, 100, 1023, 4099, 32768, 32769, 70001, 0, 5];

function adamCases(): { name: string; decoupled: boolean; hp: AdamHp }[] {
  return [
    { name: 'AdamW defaults', decoupled: true, hp: { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, wd: 0.01, amsgrad: false, maximize: false } },
    { name: 'AdamW amsgrad, betas 0.8/0.95', decoupled: true, hp: { lr: 3e-3, beta1: 0.8, beta2: 0.95, eps: 1e-6, wd: 0.1, amsgrad: true, maximize: false } },
    { name: 'AdamW maximize, wd 0', decoupled: true, hp: { lr: 1e-2, beta1: 0.9, beta2: 0.999, eps: 1e-8, wd: 0, amsgrad: false, maximize: true } },
    { name: 'Adam L2', decoupled: false, hp: { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, wd: 0.01, amsgrad: false, maximize: false } },
    { name: 'Adam wd 0, beta1 0', decoupled: false, hp: { lr: 1e-3, beta1: 0, beta2: 0.99, eps: 1e-8, wd: 0, amsgrad: true, maximize: false } },
  ];
}

function makeAdam(params: Float32Array[], decoupled: boolean, hp: AdamHp) {
  const o: rl.AdamOptions = { lr: hp.lr, betas: [hp.beta1, hp.beta2], eps: hp.eps, weightDecay: hp.wd, amsgrad: hp.amsgrad, maximize: hp.maximize };
  return decoupled ? new rl.AdamW(params, o) : new rl.Adam(params, o);
}

describe('AdamW / Adam on random shapes', () => {
  for (const { name, decoupled, hp } of adamCases()) {
    it(`${name}: bit-exact vs a float32 emulation of torch and close to float64 AdamW`, () => {
      const params = randomTensors(1, LENGTHS);
      const ref = clone(params);
      const m = LENGTHS.map((n) => new Float32Array(n)), v = LENGTHS.map((n) => new Float32Array(n));
      const vmax = LENGTHS.map((n) => new Float32Array(n));
      const p64 = params.map((a) => Array.from(a)), m64 = LENGTHS.map((n) => new Array<number>(n).fill(0));
      const v64 = LENGTHS.map((n) => new Array<number>(n).fill(0));
      const vmax64 = LENGTHS.map((n) => new Array<number>(n).fill(0));
      const opt = makeAdam(params, decoupled, hp);
      for (let s = 1; s <= 4; s++) {
        const g = randomTensors(100 + s, LENGTHS, s);
        opt.step(g);
        LENGTHS.forEach((_, t) => {
          torchAdam(ref[t]!, g[t]!, m[t]!, v[t]!, vmax[t]!, hp, s, decoupled);
          adam64(p64[t]!, Array.from(g[t]!), m64[t]!, v64[t]!, vmax64[t]!, hp, s, decoupled);
        });
      }
      const st = opt.state();
      expect(bits(params)).toEqual(bits(ref));
      expect(bits(st.expAvg)).toEqual(bits(m));
      expect(bits(st.expAvgSq)).toEqual(bits(v));
      if (hp.amsgrad) expect(bits(st.maxExpAvgSq!)).toEqual(bits(vmax));
      else expect(st.maxExpAvgSq).toBeNull();
      // float32 rounding vs float64: a few ulps of the parameter plus a fraction of one lr-sized update
      params.forEach((p, t) => expectClose(p, p64[t]!, { rtol: 1e-6, atol: hp.lr * 1e-2, what: `${name} p64[${t}]` }));
    });
  }
});

function sgdCases(): { name: string; hp: SgdHp }[] {
  return [
    { name: 'plain', hp: { lr: 0.1, momentum: 0, dampening: 0, wd: 0, nesterov: false, maximize: false } },
    { name: 'momentum + dampening + wd', hp: { lr: 0.05, momentum: 0.9, dampening: 0.3, wd: 0.01, nesterov: false, maximize: false } },
    { name: 'nesterov + wd', hp: { lr: 0.05, momentum: 0.9, dampening: 0, wd: 0.01, nesterov: true, maximize: false } },
    { name: 'maximize + momentum', hp: { lr: 0.01, momentum: 0.5, dampening: 0, wd: 0, nesterov: false, maximize: true } },
  ];
}

describe('SGD on random shapes', () => {
  for (const { name, hp } of sgdCases()) {
    it(`${name}: bit-exact vs a float32 emulation of torch and close to float64 SGD`, () => {
      const params = randomTensors(2, LENGTHS);
      const ref = clone(params);
      const buf = LENGTHS.map((n) => new Float32Array(n));
      const p64 = params.map((a) => Array.from(a)), b64 = LENGTHS.map((n) => new Array<number>(n).fill(0));
      const opt = new rl.SGD(params, { lr: hp.lr, momentum: hp.momentum, dampening: hp.dampening, weightDecay: hp.wd, nesterov: hp.nesterov, maximize: hp.maximize });
      for (let s = 0; s < 4; s++) {
        const g = randomTensors(200 + s, LENGTHS);
        opt.step(g);
        LENGTHS.forEach((_, t) => {
          torchSgd(ref[t]!, g[t]!, buf[t]!, hp, s === 0);
          sgd64(p64[t]!, Array.from(g[t]!), b64[t]!, hp, s === 0);
        });
      }
      expect(bits(params)).toEqual(bits(ref));
      const st = opt.state();
      if (hp.momentum !== 0) expect(bits(st.momentumBuffer!)).toEqual(bits(buf));
      else expect(st.momentumBuffer).toBeNull();
      params.forEach((p, t) => expectClose(p, p64[t]!, { rtol: 1e-5, atol: 1e-5, what: `${name} p64[${t}]` }));
    });
  }
});

describe('determinism', () => {
  const lengths = [200_003, 1, 65_536, 131_073, 0, 77];
  function run(threads: number, isa: rl.Isa, kind: 'adamw' | 'sgd') {
    rl.setNumThreads(threads);
    rl.setIsa(isa);
    const params = randomTensors(3, lengths);
    const opt = kind === 'adamw' ? new rl.AdamW(params, { amsgrad: true }) : new rl.SGD(params, { lr: 0.01, momentum: 0.9, nesterov: true, weightDecay: 1e-2 });
    for (let s = 0; s < 3; s++) {
      const g = randomTensors(300 + s, lengths);
      const norm = rl.clipGradNorm(g, 50);
      opt.step(g);
      params.push(Float32Array.of(norm)); // fold the norm into the compared output
      params.pop();
    }
    const st = opt.state();
    return { p: bits(params), s: st.kind === 'sgd' ? bits(st.momentumBuffer!) : bits([...st.expAvg, ...st.expAvgSq, ...st.maxExpAvgSq!]) };
  }
  for (const kind of ['adamw', 'sgd'] as const) {
    it(`${kind}: bit-identical for 1, 2, 3, 8 threads and every ISA`, () => {
      const want = run(1, BEST, kind);
      for (const t of [2, 3, 8]) expect(run(t, BEST, kind)).toEqual(want);
      for (const isa of ISAS) expect(run(2, isa, kind)).toEqual(want);
    });
  }
});

describe('state export / import', () => {
  const lengths = [5, 0, 40_000, 1];
  function roundTrip<T extends rl.Optimizer>(
    make: (p: Float32Array[]) => T, restore: (p: Float32Array[], s: rl.OptimizerState) => T,
  ) {
    const a = randomTensors(4, lengths);
    const optA = make(a);
    for (let s = 0; s < 3; s++) optA.step(randomTensors(400 + s, lengths));
    const snap = optA.state();
    const b = clone(a);
    const optB = restore(b, snap);
    // the restored optimizer owns copies: clobbering the snapshot must not matter
    for (const list of Object.values(snap)) if (Array.isArray(list)) for (const x of list) if (x instanceof Float32Array) x.fill(NaN);
    expect(optB.stepCount).toBe(3);
    expect(optB.lr).toBe(optA.lr);
    for (let s = 3; s < 6; s++) {
      const g = randomTensors(400 + s, lengths);
      optA.step(g);
      optB.step(clone(g));
    }
    expect(bits(b)).toEqual(bits(a));
    expect(optB.state()).toEqual(optA.state());
  }
  it('AdamW: restore then continue equals never stopping, bit for bit', () => {
    roundTrip((p) => {
      const o = new rl.AdamW(p, { lr: 2e-3, betas: [0.8, 0.9], amsgrad: true, weightDecay: 0.05 });
      o.lr = 1.5e-3;
      return o;
    }, (p, s) => rl.AdamW.fromState(p, s as rl.AdamState));
  });
  it('Adam: round trip', () => {
    roundTrip((p) => new rl.Adam(p, { weightDecay: 0.01, maximize: true }), (p, s) => rl.Adam.fromState(p, s as rl.AdamState));
  });
  it('SGD: round trip (momentum buffer and first-step flag)', () => {
    roundTrip((p) => new rl.SGD(p, { lr: 0.01, momentum: 0.9, dampening: 0.1 }), (p, s) => rl.SGD.fromState(p, s as rl.SGDState));
    // restored before any step: the buffer must still be initialised from the first gradient
    const a = randomTensors(5, lengths), b = clone(a);
    const optA = new rl.SGD(a, { lr: 0.01, momentum: 0.9 });
    const optB = rl.SGD.fromState(b, optA.state());
    const g = randomTensors(6, lengths);
    optA.step(g);
    optB.step(g);
    expect(bits(b)).toEqual(bits(a));
  });
  it('state() is a snapshot: later steps do not change it', () => {
    const a = randomTensors(15, lengths);
    const opt = new rl.AdamW(a);
    opt.step(randomTensors(16, lengths));
    const snap = opt.state();
    const frozen = bits([...snap.expAvg, ...snap.expAvgSq]);
    opt.step(randomTensors(17, lengths));
    expect(snap.step).toBe(1);
    expect(bits([...snap.expAvg, ...snap.expAvgSq])).toEqual(frozen);
    expect(bits(opt.state().expAvg)).not.toEqual(bits(snap.expAvg));
  });
  it('an empty parameter list steps (and counts steps) without error', () => {
    const opt = new rl.AdamW([]);
    opt.step([]);
    expect(opt.stepCount).toBe(1);
    expect(rl.AdamW.fromState([], opt.state()).stepCount).toBe(1);
  });
  it('state survives structuredClone (worker / storage transfer)', () => {
    const a = randomTensors(7, lengths);
    const opt = new rl.AdamW(a);
    opt.step(randomTensors(8, lengths));
    const copy = structuredClone(opt.state());
    const b = clone(a);
    const opt2 = rl.AdamW.fromState(b, copy);
    const g = randomTensors(9, lengths);
    opt.step(g);
    opt2.step(g);
    expect(bits(b)).toEqual(bits(a));
  });
});

describe('stepAsync', () => {
  it('equals step, and a pending step makes another throw ERR_BUSY', async () => {
    const lengths = [100_000, 3];
    const a = randomTensors(10, lengths), b = clone(a);
    const optA = new rl.AdamW(a), optB = new rl.AdamW(b);
    const g = randomTensors(11, lengths);
    optA.step(g);
    const pending = optB.stepAsync(g);
    expect(() => optB.step(g)).toThrow(expect.objectContaining({ code: 'ERR_BUSY' }));
    expect(() => optB.state()).toThrow(expect.objectContaining({ code: 'ERR_BUSY' }));
    await pending;
    expect(optB.stepCount).toBe(1);
    expect(bits(b)).toEqual(bits(a));
  });
  it('an already-aborted signal rejects with ERR_ABORTED and changes nothing', async () => {
    const p = randomTensors(12, [10, 20]);
    const before = bits(p);
    const opt = new rl.SGD(p, { lr: 0.01, momentum: 0.9 });
    const ac = new AbortController();
    ac.abort();
    await expect(opt.stepAsync(randomTensors(13, [10, 20]), { signal: ac.signal })).rejects.toMatchObject({ code: 'ERR_ABORTED' });
    expect(bits(p)).toEqual(before);
    expect(opt.stepCount).toBe(0);
    // usable afterwards
    await opt.stepAsync(randomTensors(13, [10, 20]));
    expect(opt.stepCount).toBe(1);
  });
});

describe('zeroGrad', () => {
  it('zeroes every gradient', () => {
    const g = randomTensors(14, [3, 0, 9]);
    rl.zeroGrad(g);
    expect(g.every((a) => a.every((x) => x === 0))).toBe(true);
    expect(() => rl.zeroGrad([new Float64Array(2) as unknown as Float32Array])).toThrow(expect.objectContaining({ code: 'ERR_DTYPE' }));
  });
});
