// Float64 reference of the GEAR-proposed reweighting (docs/gear.md), written directly from
// the spec with plain arrays and a full sort for quantiles — independent of the native kernel. Only the
// tests use it.
import type { GearOptions } from '../../ts/gear/options.js';

export type RefOptions = Required<Omit<GearOptions, 'entropyThreshold' | 'entropyLowThreshold'>> &
  Pick<GearOptions, 'entropyThreshold' | 'entropyLowThreshold'>;

export const REF_DEFAULTS: RefOptions = {
  klCap: 20, peakRule: 'zscore', peakZ: 2, peakMinKl: 0.25, peakQuantile: 0.95, entropyQuantile: 0.8,
  segmentEnd: 'next_fork', entropyLowQuantile: 0.5, maxSegmentLength: 256, alpha: 1, dRefQuantile: 0.95,
  signMode: 'symmetric', epsW: 0.2, normalize: 'mean_one', ablation: 'none', seed: 0, fixedSegmentLength: 0,
  anchorSignal: 'divergence',
};

export interface RefInput {
  advantages: ArrayLike<number>;
  offsets: ArrayLike<number>;
  mask?: ArrayLike<number>;
  /** Unread with `anchorSignal: 'logratio'`. */
  divergence?: ArrayLike<number>;
  entropy: ArrayLike<number>;
  logratio?: ArrayLike<number>;
  options?: GearOptions;
}

export interface RefResult {
  advantages: number[];
  weights: number[];
  segmentId: number[];
  anchors: number[];
  peaks: number;
  thresholds: { entropy: number; entropyLow: number; dRef: number; peakKl: number; fixedSegmentLength: number };
}

/** torch.quantile-style: sort, position q*(n-1), linear interpolation between neighbours. */
export function quantileRef(xs: number[], q: number): number {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  const pos = q * (s.length - 1);
  const lo = Math.floor(pos);
  const frac = pos - lo;
  const hi = frac > 0 && lo + 1 < s.length ? lo + 1 : lo;
  return s[lo]! + (s[hi]! - s[lo]!) * frac;
}

/** mulberry32 with the per-row seeding of the random-anchor ablation. */
export function rowRng(seed: number, row: number): (m: number) => number {
  let a = (seed ^ Math.imul(row + 1, 0x9e3779b9)) >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return (t ^ (t >>> 14)) >>> 0;
  };
  return (m: number) => Number((BigInt(next()) * BigInt(m)) >> 32n);
}

export function gearReference(inp: RefInput): RefResult {
  const o: RefOptions = { ...REF_DEFAULTS, ...(inp.options ?? {}) } as RefOptions;
  const off = Array.from(inp.offsets);
  const R = off.length - 1;
  const N = off[R]!;
  const valid = (t: number) => (inp.mask ? inp.mask[t] === 1 : true);
  const cap = Math.fround(o.klCap);
  // float32 cap and clamps, as the spec's inputs are float32. The anchor signal: D, or the log-ratio
  // signal max(0, l_student - l_teacher) = max(0, -logratio) (-Infinity logratio: the cap; +Infinity: 0).
  const raw = o.anchorSignal === 'logratio'
    ? (t: number) => -Math.fround(inp.logratio![t]!)
    : (t: number) => Math.fround(inp.divergence![t]!);
  const dc = (t: number) => {
    const d = raw(t);
    return d <= 0 ? 0 : d > cap ? cap : d;
  };
  const hc = (t: number) => {
    const h = Math.fround(inp.entropy[t]!);
    return h <= 0 ? 0 : h;
  };
  const allD: number[] = [], allH: number[] = [];
  for (let t = 0; t < N; t++) if (valid(t)) { allD.push(dc(t)); allH.push(hc(t)); }
  const dRef = Math.max(quantileRef(allD, o.dRefQuantile), 1e-6);
  const peakKl = quantileRef(allD, o.peakQuantile);
  const eta = o.entropyThreshold ?? quantileRef(allH, o.entropyQuantile);
  const etaLow = o.entropyLowThreshold ?? quantileRef(allH, o.entropyLowQuantile);

  const isPeakIn = (r: number) => {
    const V: number[] = [];
    for (let t = off[r]!; t < off[r + 1]!; t++) if (valid(t)) V.push(t);
    let mu = 0;
    for (const t of V) mu += dc(t);
    mu = V.length ? mu / V.length : 0;
    let v2 = 0;
    for (const t of V) v2 += (dc(t) - mu) ** 2;
    const sd = V.length ? Math.sqrt(v2 / V.length) : 0;
    const peak = new Set<number>();
    for (const t of V) {
      const d = dc(t);
      const over = o.peakRule === 'zscore' ? (d - mu) / (sd + 1e-6) >= o.peakZ : d >= peakKl;
      if (over && d >= o.peakMinKl) peak.add(t);
    }
    return { V, peak };
  };

  // Units of row r for a given anchor set and segment-length / entropy rule.
  const units = (r: number, anchors: Set<number>, mode: string, L: number) => {
    const out: { anchor: number; tokens: number[]; segment: boolean }[] = [];
    let t = off[r]!;
    const end = off[r + 1]!;
    while (t < end) {
      if (!valid(t)) { t++; continue; }
      if (mode !== 'token_only' && anchors.has(t)) {
        const a = t;
        const toks = [t];
        t++;
        while (t < end && valid(t) && !anchors.has(t) && t - a < L) {
          if (mode !== 'fixed_length') {
            if (o.segmentEnd === 'next_fork' && hc(t) >= eta) break;
            if (o.segmentEnd === 'entropy_settles' && hc(t) < etaLow) break;
          }
          toks.push(t);
          t++;
        }
        out.push({ anchor: a, tokens: toks, segment: true });
      } else {
        out.push({ anchor: t, tokens: [t], segment: false });
        t++;
      }
    }
    return out;
  };

  let L = o.maxSegmentLength;
  let fixedSegmentLength = 0;
  if (o.ablation === 'fixed_length') {
    L = o.fixedSegmentLength;
    if (L === 0) {
      let segs = 0, toks = 0;
      for (let r = 0; r < R; r++) {
        for (const u of units(r, isPeakIn(r).peak, 'none', o.maxSegmentLength)) {
          if (u.segment) { segs++; toks += u.tokens.length; }
        }
      }
      L = segs > 0 ? Math.max(1, Math.round(toks / segs)) : 1;
    }
    fixedSegmentLength = L;
  }

  const res: RefResult = {
    advantages: new Array(N).fill(0), weights: new Array(N).fill(0), segmentId: new Array(N).fill(-1),
    anchors: [], peaks: 0, thresholds: { entropy: eta, entropyLow: etaLow, dRef, peakKl, fixedSegmentLength },
  };
  for (let r = 0; r < R; r++) {
    const A = Number(inp.advantages[r]);
    const { V, peak } = isPeakIn(r);
    res.peaks += peak.size;
    let anchors = peak;
    if (o.ablation === 'random_anchors' && peak.size > 0) {
      const rnd = rowRng(o.seed, r);
      const idx = [...V];
      for (let i = 0; i < peak.size; i++) {
        const j = i + rnd(idx.length - i);
        [idx[i], idx[j]] = [idx[j]!, idx[i]!];
      }
      anchors = new Set(idx.slice(0, peak.size));
    }
    const us = units(r, anchors, o.ablation, L);
    const sign = A > 0 ? 1 : A < 0 ? -1 : 0;
    const unitW = (a: number) => {
      if (o.signMode === 'rlsd') {
        if (sign === 0) return 1;
        const w = Math.exp(sign * Math.fround(inp.logratio![a]!));
        return Math.min(Math.max(w, 1 - o.epsW), 1 + o.epsW);
      }
      if (o.signMode === 'negative_only' && !(A < 0)) return 1;
      return 1 + o.alpha * Math.min(dc(a) / dRef, 1);
    };
    const ws = us.map((u) => unitW(u.anchor));
    let sum = 0;
    us.forEach((u, k) => { for (const _ of u.tokens) sum += ws[k]!; });
    const uniform = ws.every((w) => w === ws[0]);
    us.forEach((u, k) => {
      const w = o.normalize === 'none' ? ws[k]! : uniform ? 1 : (ws[k]! * V.length) / sum;
      if (u.segment) res.anchors.push(u.anchor);
      const id = u.segment ? res.anchors.length - 1 : -1;
      for (const t of u.tokens) {
        res.weights[t] = w;
        res.advantages[t] = A * w;
        res.segmentId[t] = id;
      }
    });
  }
  return res;
}
