// Float64 reference of the sparse (top-k) divergences, written from the definitions (ts/ops/sparse_divergence.ts
// module notes) with a Map for the id matching and the dense reference's divergenceFromLog for the sum, plus
// helpers that cut full distributions down to their top-k and the exact entropy bounds.
import { type Kind, divergenceFromLog } from './reference.js';

export interface RefTopk { ids: Int32Array; logprobs: Float64Array; k: number }
export interface RefSparseOptions { kind: Kind; beta?: number; support?: 'tail' | 'renormalize'; tailClamp?: number }

const lse = (xs: number[]): number => {
  const m = Math.max(-Infinity, ...xs);
  if (m === -Infinity) return -Infinity;
  return m + Math.log(xs.reduce((s, x) => s + Math.exp(x - m), 0));
};

/** The shared categories of token t: [student log-prob, teacher log-prob, student entry index]. */
export function sharedCells(s: RefTopk, t: RefTopk, row: number): [number, number, number][] {
  const teacher = new Map<number, number>();
  for (let j = 0; j < t.k; j++) {
    const id = t.ids[row * t.k + j]!;
    if (id >= 0) teacher.set(id, t.logprobs[row * t.k + j]!);
  }
  const out: [number, number, number][] = [];
  for (let i = 0; i < s.k; i++) {
    const id = s.ids[row * s.k + i]!;
    if (id >= 0 && teacher.has(id)) out.push([s.logprobs[row * s.k + i]!, teacher.get(id)!, i]);
  }
  return out;
}

/** The divergence of one token from its shared cells (tail bucket or renormalised). */
export function refSparseRow(cells: [number, number, number][], o: RefSparseOptions): number {
  const beta = o.beta ?? 0.5;
  const a = cells.map((c) => c[0]);
  const c = cells.map((x) => x[1]);
  const la = lse(a), lc = lse(c);
  if ((o.support ?? 'tail') === 'tail') {
    const clamp = o.tailClamp ?? 1e-7;
    const bucket = (l: number) => (l === -Infinity ? 0 : Math.log(-Math.expm1(Math.min(l, -clamp))));
    a.push(bucket(la));
    c.push(bucket(lc));
  } else {
    if (la === -Infinity || lc === -Infinity) return 0;
    for (let i = 0; i < a.length; i++) { a[i] = a[i]! - la; c[i] = c[i]! - lc; }
  }
  return Math.max(0, divergenceFromLog(Float64Array.from(a), Float64Array.from(c), o.kind, beta));
}

export function refSparse(s: RefTopk, t: RefTopk, n: number, o: RefSparseOptions): Float64Array {
  const out = new Float64Array(n);
  for (let r = 0; r < n; r++) out[r] = refSparseRow(sharedCells(s, t, r), o);
  return out;
}

/** d value / d student log-prob by central differences in float64 (step h on each entry). */
export function refSparseGradFd(s: RefTopk, t: RefTopk, n: number, o: RefSparseOptions, h = 1e-6): Float64Array {
  const g = new Float64Array(n * s.k);
  for (let r = 0; r < n; r++) {
    for (let i = 0; i < s.k; i++) {
      const x = s.logprobs[r * s.k + i]!;
      if (!Number.isFinite(x)) continue;
      const lp = Float64Array.from(s.logprobs);
      lp[r * s.k + i] = x + h;
      const up = refSparseRow(sharedCells({ ...s, logprobs: lp }, t, r), o);
      lp[r * s.k + i] = x - h;
      const dn = refSparseRow(sharedCells({ ...s, logprobs: lp }, t, r), o);
      g[r * s.k + i] = (up - dn) / (2 * h);
    }
  }
  return g;
}

/** The top-k of each row of full log-prob rows (n x vocab), ids by decreasing probability. */
export function topkOf(logp: Float64Array, n: number, vocab: number, k: number): RefTopk {
  const ids = new Int32Array(n * k).fill(-1);
  const logprobs = new Float64Array(n * k).fill(-Infinity);
  for (let r = 0; r < n; r++) {
    const order = Array.from({ length: vocab }, (_, v) => v).sort((x, y) => logp[r * vocab + y]! - logp[r * vocab + x]! || x - y);
    for (let j = 0; j < Math.min(k, vocab); j++) {
      ids[r * k + j] = order[j]!;
      logprobs[r * k + j] = logp[r * vocab + order[j]!]!;
    }
  }
  return { ids, logprobs, k };
}

/** The teacher's log-probs at the student's ids (TRL SDPO's projection of the teacher onto the student's top-k). */
export function projectOnto(s: RefTopk, logp: Float64Array, n: number, vocab: number): RefTopk {
  const logprobs = new Float64Array(n * s.k).fill(-Infinity);
  for (let r = 0; r < n; r++) {
    for (let j = 0; j < s.k; j++) {
      const id = s.ids[r * s.k + j]!;
      if (id >= 0) logprobs[r * s.k + j] = logp[r * vocab + id]!;
    }
  }
  return { ids: s.ids, logprobs, k: s.k };
}

/** Exact entropy of each full row. */
export function fullEntropy(logp: Float64Array, n: number, vocab: number): Float64Array {
  const h = new Float64Array(n);
  for (let r = 0; r < n; r++) {
    for (let v = 0; v < vocab; v++) {
      const x = logp[r * vocab + v]!;
      if (x > -Infinity) h[r] -= Math.exp(x) * x;
    }
  }
  return h;
}

/** Row-wise log-softmax of n x vocab logits. */
export function logSoftmaxRows(z: ArrayLike<number>, n: number, vocab: number): Float64Array {
  const out = new Float64Array(n * vocab);
  for (let r = 0; r < n; r++) {
    const row = Array.from({ length: vocab }, (_, v) => z[r * vocab + v]!);
    const l = lse(row);
    for (let v = 0; v < vocab; v++) out[r * vocab + v] = row[v]! - l;
  }
  return out;
}

/** As float32 arrays for the native op. */
export function f32Topk(x: RefTopk): { ids: Int32Array; logprobs: Float32Array; k: number } {
  return { ids: x.ids, logprobs: Float32Array.from(x.logprobs), k: x.k };
}
