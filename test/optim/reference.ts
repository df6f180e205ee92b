// Independent references for the optimizer tests, written from PyTorch 1.13's single-tensor code and
// ATen's CPU kernels (not from the native implementation):
//  * a float32-exact emulation of each torch op (Math.fround after every op, a correctly rounded fmaf),
//  * plain float64 versions of the textbook update rules.
const f = Math.fround;
const F = new Float32Array(1);
const U = new Uint32Array(F.buffer);

/** The float32 neighbour of r in direction dir (r finite, nonzero). */
function next32(r: number, dir: number): number {
  if (r === 0) return dir > 0 ? 2 ** -149 : -(2 ** -149);
  F[0] = r;
  if (r > 0 === dir > 0) U[0]!++;
  else U[0]!--;
  return F[0]!;
}

/**
 * Correctly rounded float32 fused multiply-add of float32 inputs: a*b is exact in double; the double sum
 * s and its exact error e (TwoSum) decide the one case where rounding s again could be wrong, a tie.
 */
export function fmaf(a: number, b: number, c: number): number {
  const p = a * b;
  const s = p + c;
  if (!Number.isFinite(s)) return f(p + c);
  const bb = s - p;
  const e = p - (s - bb) + (c - bb);
  const r = f(s);
  if (e === 0 || r === s) return r;
  const d = s - r;
  const other = next32(r, d);
  if (s - r === other - s && Math.sign(e) === Math.sign(d)) return other;
  return r;
}

export interface AdamHp { lr: number; beta1: number; beta2: number; eps: number; wd: number; amsgrad: boolean; maximize: boolean }

/** torch.optim.AdamW / Adam (_single_tensor_adam[w]) on one tensor, float32 exact. step is 1-based. */
export function torchAdam(
  p: Float32Array, g: Float32Array, m: Float32Array, v: Float32Array, vmax: Float32Array | null,
  hp: AdamHp, step: number, decoupled: boolean,
): void {
  const bc1 = 1 - hp.beta1 ** step;
  const bc2 = 1 - hp.beta2 ** step;
  const stepSize = hp.lr / bc1;
  const bc2s = f(Math.sqrt(bc2));
  const decay = f(1 - hp.lr * hp.wd);
  const b1 = f(hp.beta1), omb1 = f(1 - hp.beta1), b2 = f(hp.beta2), omb2 = f(1 - hp.beta2);
  const eps = f(hp.eps), negStep = f(-stepSize), wd = f(hp.wd);
  for (let i = 0; i < p.length; i++) {
    let gi = hp.maximize ? -g[i]! : g[i]!;
    let pi = p[i]!;
    if (decoupled) pi = f(pi * decay);
    else if (hp.wd !== 0) gi = fmaf(wd, pi, gi);
    const mi = fmaf(omb1, gi, f(m[i]! * b1));
    const vi = fmaf(f(omb2 * gi), gi, f(v[i]! * b2));
    m[i] = mi;
    v[i] = vi;
    let vd = vi;
    if (hp.amsgrad) {
      const a = vmax![i]!;
      vd = Number.isNaN(a) || Number.isNaN(vi) ? NaN : Math.max(a, vi);
      vmax![i] = vd;
    }
    const den = f(f(f(Math.sqrt(vd)) / bc2s) + eps);
    p[i] = f(pi + f(f(negStep * mi) / den));
  }
}

export interface SgdHp { lr: number; momentum: number; dampening: number; wd: number; nesterov: boolean; maximize: boolean }

/** torch.optim.SGD (_single_tensor_sgd) on one tensor, float32 exact. first: the buffer is still None. */
export function torchSgd(p: Float32Array, g: Float32Array, buf: Float32Array | null, hp: SgdHp, first: boolean): void {
  const wd = f(hp.wd), mom = f(hp.momentum), omd = f(1 - hp.dampening), negLr = f(-hp.lr);
  for (let i = 0; i < p.length; i++) {
    let d = hp.maximize ? -g[i]! : g[i]!;
    if (hp.wd !== 0) d = fmaf(wd, p[i]!, d);
    if (hp.momentum !== 0) {
      const b = first ? d : fmaf(omd, d, f(buf![i]! * mom));
      buf![i] = b;
      d = hp.nesterov ? fmaf(mom, b, d) : b;
    }
    p[i] = fmaf(negLr, d, p[i]!);
  }
}

/** Textbook AdamW / Adam in float64 (arrays of numbers updated in place). */
export function adam64(
  p: number[], g: number[], m: number[], v: number[], vmax: number[], hp: AdamHp, step: number, decoupled: boolean,
): void {
  for (let i = 0; i < p.length; i++) {
    let gi = hp.maximize ? -g[i]! : g[i]!;
    if (decoupled) p[i] = p[i]! * (1 - hp.lr * hp.wd);
    else gi += hp.wd * p[i]!;
    m[i] = hp.beta1 * m[i]! + (1 - hp.beta1) * gi;
    v[i] = hp.beta2 * v[i]! + (1 - hp.beta2) * gi * gi;
    const mhat = m[i]! / (1 - hp.beta1 ** step);
    if (hp.amsgrad) vmax[i] = Math.max(vmax[i]!, v[i]!);
    const vhat = (hp.amsgrad ? vmax[i]! : v[i]!) / (1 - hp.beta2 ** step);
    // torch puts eps outside the bias-corrected sqrt exactly like this
    p[i] = p[i]! - hp.lr * mhat / (Math.sqrt(vhat) + hp.eps);
  }
}

/** Textbook SGD with momentum in float64. */
export function sgd64(p: number[], g: number[], buf: number[], hp: SgdHp, first: boolean): void {
  for (let i = 0; i < p.length; i++) {
    let d = (hp.maximize ? -g[i]! : g[i]!) + hp.wd * p[i]!;
    if (hp.momentum !== 0) {
      buf[i] = first ? d : hp.momentum * buf[i]! + (1 - hp.dampening) * d;
      d = hp.nesterov ? d + hp.momentum * buf[i]! : buf[i]!;
    }
    p[i] = p[i]! - hp.lr * d;
  }
}

/** Deterministic pseudo-random numbers (LCG + Box-Muller). */
export function rng(seed: number) {
  let s = seed >>> 0;
  const u = () => ((s = (s * 1664525 + 1013904223) >>> 0) + 0.5) / 2 ** 32;
  return {
    u,
    normal: () => Math.sqrt(-2 * Math.log(u())) * Math.cos(2 * Math.PI * u()),
  };
}

/** Random float32 tensors of the given lengths. */
export function randomTensors(seed: number, lengths: number[], scale = 1): Float32Array[] {
  const r = rng(seed);
  return lengths.map((n) => Float32Array.from({ length: n }, () => r.normal() * scale));
}

/** Bit patterns, for exact comparisons that also distinguish -0 and NaN payloads. */
export function bits(list: readonly Float32Array[]): number[][] {
  return list.map((a) => Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length)));
}

export function clone(list: readonly Float32Array[]): Float32Array[] {
  return list.map((a) => a.slice());
}
