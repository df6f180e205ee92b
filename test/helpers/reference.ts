// Float64 reference implementations of the logits kernels, written from their textbook formulas
// (log_softmax, entropy, KL, JSD and their gradients, as in docs/ and each op's TSDoc), plus bfloat16 /
// float16 encoders and decoders so low-precision inputs are compared on the same rounded values.
// Deliberately plain: no streaming, no pivots, no shared code with the implementation.

const f32Scratch = new Float32Array(1);
const u32Scratch = new Uint32Array(f32Scratch.buffer);

/** Float32 -> bfloat16 word, round to nearest even (NaN kept quiet). */
export function toBf16(x: number): number {
  f32Scratch[0] = x;
  const u = u32Scratch[0]!;
  if (Number.isNaN(x)) return 0x7fc0;
  const lsb = (u >>> 16) & 1;
  return ((u + 0x7fff + lsb) >>> 16) & 0xffff;
}

/** bfloat16 word -> number. */
export function fromBf16(h: number): number {
  u32Scratch[0] = h << 16;
  return f32Scratch[0]!;
}

/** Number -> IEEE half word (round to nearest even; overflow to Infinity). */
export function toF16(x: number): number {
  if (Number.isNaN(x)) return 0x7e00;
  const sign = x < 0 || Object.is(x, -0) ? 0x8000 : 0;
  let a = Math.abs(x);
  if (a === Infinity) return sign | 0x7c00;
  if (a >= 65520) return sign | 0x7c00;
  if (a < 2 ** -24 / 2) return sign;
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e -= 1;
  if (2 ** (e + 1) <= a) e += 1;
  if (e < -14) {
    // subnormal: multiple of 2^-24
    const m = roundEven(a / 2 ** -24);
    return sign | m;
  }
  let m = roundEven((a / 2 ** e - 1) * 1024);
  if (m === 1024) { m = 0; e += 1; }
  if (e > 15) return sign | 0x7c00;
  return sign | ((e + 15) << 10) | m;
}

function roundEven(x: number): number {
  const f = Math.floor(x);
  const d = x - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

/** IEEE half word -> number. */
export function fromF16(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0x1f) return m ? NaN : s * Infinity;
  if (e === 0) return s * m * 2 ** -24;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

export type DType = 'float32' | 'bfloat16' | 'float16';

/** Encodes float values as the given dtype's storage; returns it and the decoded (rounded) values. */
export function encode(values: ArrayLike<number>, dtype: DType): { data: Float32Array | Uint16Array; decoded: Float64Array } {
  if (dtype === 'float32') {
    const data = Float32Array.from(values);
    return { data, decoded: Float64Array.from(data) };
  }
  const enc = dtype === 'bfloat16' ? toBf16 : toF16;
  const dec = dtype === 'bfloat16' ? fromBf16 : fromF16;
  const data = new Uint16Array(values.length);
  const decoded = new Float64Array(values.length);
  for (let i = 0; i < values.length; i++) {
    data[i] = enc(values[i]!);
    decoded[i] = dec(data[i]!);
  }
  return { data, decoded };
}

/** log_softmax of one row of z / T (float64); -Infinity entries stay -Infinity. */
export function logSoftmax(z: ArrayLike<number>, off: number, vocab: number, T: number): Float64Array {
  let m = -Infinity;
  for (let v = 0; v < vocab; v++) m = Math.max(m, z[off + v]! / T);
  let s = 0;
  for (let v = 0; v < vocab; v++) s += Math.exp(z[off + v]! / T - m);
  const lse = m + Math.log(s);
  const out = new Float64Array(vocab);
  for (let v = 0; v < vocab; v++) out[v] = z[off + v]! / T - lse;
  return out;
}

function lseRow(z: ArrayLike<number>, off: number, vocab: number, T: number): number {
  let m = -Infinity;
  for (let v = 0; v < vocab; v++) m = Math.max(m, z[off + v]! / T);
  let s = 0;
  for (let v = 0; v < vocab; v++) s += Math.exp(z[off + v]! / T - m);
  return m + Math.log(s);
}

/** Per-row log-prob of the target, entropy (0 log 0 = 0) and logsumexp. */
export function refTokenStats(z: ArrayLike<number>, rows: number, vocab: number, targets: ArrayLike<number>, T = 1) {
  const logprob = new Float64Array(rows);
  const entropy = new Float64Array(rows);
  const logsumexp = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    const lp = logSoftmax(z, r * vocab, vocab, T);
    let h = 0;
    for (let v = 0; v < vocab; v++) if (lp[v]! > -Infinity) h -= Math.exp(lp[v]!) * lp[v]!;
    logprob[r] = lp[targets[r]!]!;
    entropy[r] = h;
    logsumexp[r] = lseRow(z, r * vocab, vocab, T);
  }
  return { logprob, entropy, logsumexp };
}

/** Gradient of sum_r gl[r] logprob[r] + ge[r] entropy[r] w.r.t. z (float64, from the formula). */
export function refTokenStatsGrad(z: ArrayLike<number>, rows: number, vocab: number, targets: ArrayLike<number> | null,
  gl: ArrayLike<number> | null, ge: ArrayLike<number> | null, T = 1): Float64Array {
  const out = new Float64Array(rows * vocab);
  for (let r = 0; r < rows; r++) {
    const lp = logSoftmax(z, r * vocab, vocab, T);
    let h = 0;
    for (let v = 0; v < vocab; v++) if (lp[v]! > -Infinity) h -= Math.exp(lp[v]!) * lp[v]!;
    const a = gl ? gl[r]! : 0;
    const b = ge ? ge[r]! : 0;
    for (let v = 0; v < vocab; v++) {
      const p = Math.exp(lp[v]!);
      let g = p > 0 ? -a * p - b * p * (lp[v]! + h) : 0;
      if (targets && v === targets[r]) g += a;
      out[r * vocab + v] = g / T;
    }
  }
  return out;
}

export type Kind = 'reverse_kl' | 'forward_kl' | 'jsd';

function klRow(pLog: Float64Array, qLog: Float64Array): number {
  // KL(p || q) = sum p (log p - log q), 0 log 0 = 0, +Infinity where p > 0 and q = 0
  let d = 0;
  for (let v = 0; v < pLog.length; v++) {
    const w = Math.exp(pLog[v]!);
    if (w === 0) continue; // masked or underflowed: 0 log 0 = 0
    d += w * (pLog[v]! - qLog[v]!);
  }
  return d;
}

function mixtureLog(a: Float64Array, b: Float64Array, beta: number): Float64Array {
  const out = new Float64Array(a.length);
  // log((1-beta) e^a + beta e^b) in log space (no underflow): logaddexp(a + log(1-beta), b + log(beta))
  for (let v = 0; v < a.length; v++) {
    const x = a[v]! + Math.log(1 - beta);
    const y = b[v]! + Math.log(beta);
    const hi = Math.max(x, y);
    out[v] = hi === -Infinity ? -Infinity : hi + Math.log(Math.exp(x - hi) + Math.exp(y - hi));
  }
  return out;
}

/** One row's divergence of the given kind between student and teacher log-probs. */
export function divergenceFromLog(a: Float64Array, b: Float64Array, kind: Kind, beta: number): number {
  if (kind === 'reverse_kl' || (kind === 'jsd' && beta === 1)) return klRow(a, b);
  if (kind === 'forward_kl' || (kind === 'jsd' && beta === 0)) return klRow(b, a);
  const m = mixtureLog(a, b, beta);
  return beta * klRow(b, m) + (1 - beta) * klRow(a, m);
}

/** Per-row divergence, student entropy, both logsumexps and (with targets) both log-probs. */
export function refDivergence(zs: ArrayLike<number>, zt: ArrayLike<number>, rows: number, vocab: number,
  kind: Kind, beta = 0.5, T = 1, targets?: ArrayLike<number>) {
  const value = new Float64Array(rows);
  const studentEntropy = new Float64Array(rows);
  const studentLogsumexp = new Float64Array(rows);
  const teacherLogsumexp = new Float64Array(rows);
  const studentLogprob = new Float64Array(rows);
  const teacherLogprob = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    const a = logSoftmax(zs, r * vocab, vocab, T);
    const b = logSoftmax(zt, r * vocab, vocab, T);
    value[r] = divergenceFromLog(a, b, kind, beta);
    let h = 0;
    for (let v = 0; v < vocab; v++) if (a[v]! > -Infinity) h -= Math.exp(a[v]!) * a[v]!;
    studentEntropy[r] = h;
    studentLogsumexp[r] = lseRow(zs, r * vocab, vocab, T);
    teacherLogsumexp[r] = lseRow(zt, r * vocab, vocab, T);
    if (targets) {
      studentLogprob[r] = a[targets[r]!]!;
      teacherLogprob[r] = b[targets[r]!]!;
    }
  }
  return { value, studentEntropy, studentLogsumexp, teacherLogsumexp, studentLogprob, teacherLogprob };
}

/**
 * Gradient of sum_r g[r] * divergence_r w.r.t. the student logits, from the closed forms:
 * reverse p_s (a - b - D)/T, forward (p_s - p_t)/T, JSD (1-beta) p_s (a - log M - KL(p_s||M))/T.
 */
export function refDivergenceGrad(zs: ArrayLike<number>, zt: ArrayLike<number>, rows: number, vocab: number,
  kind: Kind, beta: number, T: number, g: ArrayLike<number>): Float64Array {
  const out = new Float64Array(rows * vocab);
  const k = kind === 'jsd' && beta === 1 ? 'reverse_kl' : kind === 'jsd' && beta === 0 ? 'forward_kl' : kind;
  for (let r = 0; r < rows; r++) {
    const a = logSoftmax(zs, r * vocab, vocab, T);
    const b = logSoftmax(zt, r * vocab, vocab, T);
    if (k === 'reverse_kl') {
      const d = klRow(a, b);
      for (let v = 0; v < vocab; v++) {
        const p = Math.exp(a[v]!);
        out[r * vocab + v] = p > 0 ? (g[r]! * p * (a[v]! - b[v]! - d)) / T : 0;
      }
    } else if (k === 'forward_kl') {
      for (let v = 0; v < vocab; v++) out[r * vocab + v] = (g[r]! * (Math.exp(a[v]!) - Math.exp(b[v]!))) / T;
    } else {
      const m = mixtureLog(a, b, beta);
      const ksm = klRow(a, m);
      for (let v = 0; v < vocab; v++) {
        const p = Math.exp(a[v]!);
        out[r * vocab + v] = p > 0 ? (g[r]! * (1 - beta) * p * (a[v]! - m[v]! - ksm)) / T : 0;
      }
    }
  }
  return out;
}

/** Seeded uniform [0, 1) generator (LCG): tests are reproducible. */
export function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/** rows x vocab random logits: roughly N(0, scale) via a sum of uniforms. */
export function randomLogits(seed: number, rows: number, vocab: number, scale = 3): Float64Array {
  const r = rng(seed);
  const out = new Float64Array(rows * vocab);
  for (let i = 0; i < out.length; i++) out[i] = (r() + r() + r() - 1.5) * 2 * scale;
  return out;
}

/** Largest |a - e| / max(1, |e|) over finite expected values; infinities must match exactly. */
export function maxScaledError(actual: ArrayLike<number>, expected: ArrayLike<number>): number {
  let worst = 0;
  for (let i = 0; i < expected.length; i++) {
    const e = expected[i]!;
    const a = actual[i]!;
    if (!Number.isFinite(e)) {
      if (a !== e && !(Number.isNaN(a) && Number.isNaN(e))) return Infinity;
      continue;
    }
    const err = Math.abs(a - e) / Math.max(1, Math.abs(e));
    if (!(err <= worst)) worst = Number.isNaN(err) ? Infinity : err;
  }
  return worst;
}
