// Rows with a single finite logit (1 x 1 rows, and one-hot rows: one finite entry, the rest -Infinity)
// for tokenStats / tokenStatsBackward: every dtype, temperatures 0.3 to 2.5, logits from 2^-8 to the
// dtype's largest, with and without the forward's statistics. Shared by the host simulation
// (kernel_sim.test.ts) and the device parity suite (parity_cases.ts). Framework-free: checks return the
// failures as lines that name the inputs.
//
// What can hold. Such a row's softmax is exactly one-hot, so its gradient is exactly 0 and a backward
// that recomputes the statistics gives 0. A backward given the forward's float32 logsumexp cannot: with
// lse_f = lse + d (d the float32 rounding, |d| <= ulp(lse_f) / 2), it computes p = e^-d at the finite
// entry, and (entropy 0, target there) the gradient
//   g(d) = (gl / T)(1 - e^-d) + (ge / T) d e^-d,
// about (gl + ge) d / T: 1e-6 at lse ~ 60, 0.5 = gl / T once d is a few units (lse ~ 1e8), and +-Infinity
// once e^-d overflows. The same holds on the CPU, whose kernel forms p the same way; so the checks are:
// given statistics, the device equals the CPU given the same statistics, each equals g(d) in float64 (d
// known exactly), and |g| stays within max |g(+-ulp(lse_f)/2)|; recomputed, both are 0.
import { encode, type DType } from '../helpers/reference.js';

export interface SingleLogitCase {
  dtype: DType;
  T: number;
  gl: number;
  ge: number;
  /** The row's logits: entry 0 finite (the target), the others -Infinity. */
  z: number[];
}

/** The results of one backend for a case: its forward's statistics and both backwards. */
export interface SingleLogitResult {
  lse: number;
  entropy: number;
  given: ArrayLike<number> | null;  // null when the forward's logsumexp overflowed (nothing to give)
  recomputed: ArrayLike<number>;
  flags?: number[];
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
/** The spacing of float32 numbers at |x| (x a float32). */
export function ulp32(x: number): number {
  f32[0] = Math.abs(x);
  const bits = u32[0]!;
  u32[0] = bits + 1;
  return f32[0] - Math.abs(x);
}

const LARGEST_EXP: Record<DType, number> = { float32: 127, bfloat16: 127, float16: 15 };

/** The sweep: 1 x 1 rows at every power of two (and half-steps), one-hot rows of 33 and 4099 entries. */
export function singleLogitCases(step = 1): SingleLogitCase[] {
  const cases: SingleLogitCase[] = [];
  for (const dtype of ['float32', 'bfloat16', 'float16'] as DType[]) {
    const xs: number[] = [0, 0.5, 2.3712, 41.5, -7.25, dtype === 'float16' ? 65504 : 3.3e38];
    for (let e = -8; e <= LARGEST_EXP[dtype]; e += step) xs.push(2 ** e, -(2 ** e), 1.5 * 2 ** e);
    for (const T of [0.3, 0.7, 1, 1.7, 2.5]) {
      xs.forEach((x, i) => {
        const gl = 0.85, ge = -0.4312;
        cases.push({ dtype, T, gl, ge, z: [x] });
        if (i % 8 === 0) cases.push({ dtype, T, gl, ge, z: [x, ...new Array(32).fill(-Infinity)] });
        if (i % 61 === 0) cases.push({ dtype, T, gl: 1.1684, ge, z: [x, ...new Array(4098).fill(-Infinity)] });
      });
    }
  }
  return cases;
}

function fmt(x: number): string {
  return Object.is(x, -0) ? '-0' : String(x);
}

/** The inputs of a case, as a failure names them. */
export function describeCase(c: SingleLogitCase): string {
  return `${c.dtype} 1x${c.z.length} T=${c.T} logit ${fmt(c.z[0]!)} (the rest -Infinity) gl=${c.gl} ge=${c.ge}`;
}

/** The stored value of x in the dtype (the logit the kernels see). */
export function stored(x: number, dtype: DType): number {
  return encode([x], dtype).decoded[0]!;
}

/**
 * The failures of `device` against `cpu` and float64 for case `c` (empty when it passes). `cpu.given` is
 * the CPU backward given `cpu.lse` / `cpu.entropy`, and `device.given` the device's given the same.
 */
export function checkSingleLogit(c: SingleLogitCase, r: { cpu: SingleLogitResult; device: SingleLogitResult }): string[] {
  const out: string[] = [];
  const what = describeCase(c);
  const x = stored(c.z[0]!, c.dtype);
  const exactLse = x / c.T;
  const { cpu, device } = r;
  const same = (a: number, b: number, tol: number) =>
    Number.isFinite(a) || Number.isFinite(b) ? Math.abs(a - b) <= tol * Math.max(1, Math.abs(b)) : Object.is(a, b) || (Number.isNaN(a) && Number.isNaN(b));
  if (!same(device.lse, cpu.lse, 1e-6)) out.push(`${what}: logsumexp ${device.lse}, the CPU ${cpu.lse}`);
  if (Math.abs(device.lse - exactLse) > ulp32(exactLse)) out.push(`${what}: logsumexp ${device.lse}, float64 ${exactLse}`);
  if (device.entropy !== 0 || cpu.entropy !== 0) out.push(`${what}: entropy ${device.entropy} (the CPU ${cpu.entropy}), expected 0`);
  if (device.flags && device.flags.some((f) => f !== 0)) out.push(`${what}: flagged ${device.flags.join(',')}`);
  for (let v = 0; v < c.z.length; v++) {
    const a = device.recomputed[v]!, b = cpu.recomputed[v]!;
    if (!(Math.abs(a) <= 1e-6) || !(Math.abs(b) <= 1e-6)) {
      out.push(`${what}: recomputed statistics: gradient[${v}] ${a} (the CPU ${b}), expected 0`);
      break;
    }
  }
  if (!cpu.given || !device.given) {
    if (!cpu.given !== !device.given) out.push(`${what}: given statistics: one backend ran, the other did not`);
    return out;
  }
  // given the float32 statistics lse_f = lse + d: g(d) at the finite entry, 0 elsewhere
  const T = c.T, d = cpu.lse - exactLse;
  const g = (dd: number) => (c.gl / T) * -Math.expm1(-dd) + (c.ge / T) * dd * Math.exp(-dd);
  const ref = g(d);
  const u = ulp32(cpu.lse) / 2;
  const b0 = Math.max(Math.abs(g(u)), Math.abs(g(-u)));
  const bound = Number.isNaN(b0) ? Infinity : b0;  // NaN (inf - inf) once e^-d overflows
  for (let v = 0; v < c.z.length; v++) {
    const a = device.given[v]!, b = cpu.given[v]!;
    const want = v === 0 ? ref : 0;
    if (!same(a, b, 2e-5)) {
      out.push(`${what}: given statistics (lse ${cpu.lse}): gradient[${v}] ${a}, the CPU ${b}`);
      break;
    }
    // float64 of the same float32 statistics; a huge or infinite one only needs a huge or infinite result
    const fine = Math.abs(want) <= 1e30 ? Math.abs(a - want) <= 2e-5 * Math.max(1, Math.abs(want)) : !(Math.abs(a) <= 1e29);
    if (!fine) {
      out.push(`${what}: given statistics (lse ${cpu.lse}, off by ${d}): gradient[${v}] ${a}, float64 of the same statistics ${want}`);
      break;
    }
    const within = bound <= 1e30 ? Math.abs(a) <= bound * (1 + 1e-5) + 2e-5 : !(Math.abs(a) <= 1e29) || Math.abs(a) <= bound;
    if (!within) {
      out.push(`${what}: given statistics: gradient[${v}] ${a} beyond the float32 logsumexp's bound ${bound}`);
      break;
    }
  }
  return out;
}
