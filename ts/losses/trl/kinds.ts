/**
 * TRL's `GRPOTrainer` loss types as kinds of the policy-loss registry: `trl.grpo`, `trl.bnpo`,
 * `trl.dr_grpo`, `trl.dapo`, `trl.cispo`, `trl.sapo`, `trl.luspo`, `trl.vespo`. Each is its per-token
 * term, its reduction weights and its own metrics over the steps all of them share (`./steps.ts`). They
 * read TRL's arguments (`./args.ts`), so they run through {@link trlLoss} and
 * `policyLoss({ compat: 'trl', lossType })`, which look them up here by their `lossType`.
 *
 * @module
 */
import { fail } from '../../core/errors.js';
import type { AggregateOptions } from '../aggregate.js';
import { sameType } from '../inputs.js';
import { type PolicyLossContext, type PolicyLossDefinition, type PolicyLossReduction, policyLosses } from '../policy/registry.js';
import { TRL_LOSS_TYPES, type TrlInputs, type TrlLossResult, type TrlLossType } from './args.js';
import {
  type MetricStats, type TermFn, type TrlTerms, type WeightFn, entropyBonusTerm, entropyMask, f32, logWeights, offPolicyMask,
  reduceTerms, reductionWeights, tokenTerms, trlMetrics,
} from './steps.js';

/** What a TRL loss type adds to the shared steps. */
interface TrlKind {
  description: string;
  /** The per-token term before the masks and the KL. */
  term: TermFn;
  /** The reduction weight of a token. */
  weight: WeightFn;
  /** Divides by the batch's active tokens (DAPO's normaliser) rather than by the gradient-accumulation steps. */
  batchNorm: boolean;
  /** A per-token factor the term reads (VESPO's phi; zeros when absent). */
  phi?: (p: TrlInputs) => Float64Array;
  /** The loss type's own metrics. */
  metrics?: (p: TrlInputs, terms: TrlTerms, phi: Float64Array, stats: MetricStats, metrics: Record<string, number>) => void;
}

// ---- per-token terms ----

/** The two-sided PPO clip (grpo, bnpo, dr_grpo, dapo, luspo), with INTELLECT-2's `delta` cap. */
const clipped: TermFn = (p, t, adv, c1, _phi, o, terms) => {
  const lo = 1 - p.eps, hi = 1 + p.epsHigh;
  const c2 = Math.min(Math.max(c1, lo), hi);
  const dc2 = c1 >= lo && c1 <= hi ? 1 : 0;
  let c1d = c1, dc1 = 1;
  if (p.delta !== undefined && c1 > p.delta) { c1d = p.delta; dc1 = 0; }
  const p1 = c1d * adv, p2 = c2 * adv;
  const d1 = adv * dc1, d2 = adv * dc2;
  const mn = Math.min(p1, p2);
  const dmn = p1 < p2 ? d1 : p2 < p1 ? d2 : 0.5 * (d1 + d2);
  o.L = -mn;
  o.dd = 0;
  o.dw = -dmn * c1;
  terms.lowC[t] = c1d < lo && adv < 0 ? 1 : 0;
  terms.highC[t] = c1d > hi && adv > 0 ? 1 : 0;
};

/** CISPO: the ratio capped at ε_high, detached, times A ℓ. */
const cispo: TermFn = (p, t, adv, c1, _phi, o, terms) => {
  const w = Math.min(c1, p.epsHigh);
  o.L = -w * adv * p.lp[t]!;
  o.dd = -w * adv;
  o.dw = 0;
  terms.cispoC[t] = c1 > p.epsHigh && adv > 0 ? 1 : 0;
};

/** SAPO: the soft gate σ(τ (w − 1)) · 4 / τ. */
const sapo: TermFn = (p, _t, adv, c1, _phi, o) => {
  // TRL builds the temperatures with torch.where on Python floats: a float32 tensor
  const tau = f32(adv > 0 ? p.tPos : p.tNeg);
  const sg = 1 / (1 + Math.exp(-tau * (c1 - 1)));
  o.L = -sg * 4 / tau * adv;
  o.dd = 0;
  o.dw = -adv * 4 * sg * (1 - sg) * c1;
};

/** VESPO: −φ A ℓ with the row's detached φ. */
const vespo: TermFn = (p, t, adv, _c1, phi, o) => {
  o.L = -phi[t]! * adv * p.lp[t]!;
  o.dd = -phi[t]! * adv;
  o.dw = 0;
};

/** VESPO's φ per token from the row's summed clamped log ratio. */
function vespoPhi(p: TrlInputs): Float64Array {
  const { n, rows, off, onPolicy, lp, old, A, kPos, kNeg, lPos, lNeg, mk } = p;
  const phi = new Float64Array(n);
  const lower = Math.log(1e-8);
  for (let i = 0; i < rows; i++) {
    let s = 0;
    for (let t = off[i]!; t < off[i + 1]!; t++) s += Math.min(Math.max(onPolicy ? 0 : lp[t]! - old[t]!, -20), 20) * mk(t);
    const lws = Math.min(Math.max(s, lower), 20);
    const ws = Math.exp(lws);
    for (let t = off[i]!; t < off[i + 1]!; t++) {
      const pos = A[t]! >= 0;
      const k = pos ? kPos : kNeg;
      const lam = Math.max(pos ? lPos : lNeg, 1e-4);
      const pt = Math.exp(lam + k * lws - lam * ws);
      phi[t] = Number.isFinite(pt) ? pt : 0;
    }
  }
  return phi;
}

// ---- reduction weights (loss = Σ r_t L_t) ----

/** grpo, sapo: each row's mean, then the mean over rows, over the accumulation steps. */
const rowMean: WeightFn = (m, i, _t, R) => m / Math.max(R.len[i]!, 1) / R.B / R.nMb;
/** DAPO (and cispo, vespo): over the batch's active tokens. */
const batchTokens: WeightFn = (m, _i, _t, R) => m / R.dapoNorm;

// ---- metrics ----

/** The clip ratios of the clipped types. */
function clipMetrics(p: TrlInputs, terms: TrlTerms, _phi: Float64Array, st: MetricStats, metrics: Record<string, number>): void {
  const { lowC, highC } = terms;
  const region = new Uint8Array(p.n);
  for (let t = 0; t < p.n; t++) region[t] = lowC[t]! | highC[t]!;
  metrics['clip_ratio/low_mean'] = st.mean(lowC);
  metrics['clip_ratio/high_mean'] = st.mean(highC);
  metrics['clip_ratio/region_mean'] = st.mean(region);
  const lows = st.seqVals(lowC).filter((x) => !Number.isNaN(x));
  const highs = st.seqVals(highC).filter((x) => !Number.isNaN(x));
  metrics['clip_ratio/low_min'] = lows.length ? f32(Math.min(...lows)) : NaN;
  metrics['clip_ratio/high_max'] = highs.length ? f32(Math.max(...highs)) : NaN;
}

/** The loss types, each one's parts. */
const KINDS: Record<TrlLossType, TrlKind> = {
  grpo: { description: "TRL's grpo: the clipped ratio, each row's mean, then the mean over rows", term: clipped, weight: rowMean, batchNorm: false, metrics: clipMetrics },
  bnpo: {
    description: "TRL's bnpo: the clipped ratio over the call's valid tokens", term: clipped, batchNorm: false, metrics: clipMetrics,
    weight: (m, _i, _t, R) => m / R.bnpoDen / R.nMb,
  },
  dr_grpo: {
    description: "TRL's dr_grpo: the clipped ratio over B · maxCompletionLength", term: clipped, batchNorm: false, metrics: clipMetrics,
    weight: (m, _i, _t, R) => m / (R.B * R.mcl) / R.nMb,
  },
  dapo: { description: "TRL's dapo: the clipped ratio over the batch's active tokens", term: clipped, weight: batchTokens, batchNorm: true, metrics: clipMetrics },
  cispo: {
    description: "TRL's cispo: the capped ratio, detached, times A ℓ", term: cispo, weight: batchTokens, batchNorm: true,
    metrics: (_p, terms, _phi, st, metrics) => { metrics.cispo_clip_ratio = st.mean(terms.cispoC); },
  },
  sapo: { description: "TRL's sapo: the soft-gated ratio, each row's mean, then the mean over rows", term: sapo, weight: rowMean, batchNorm: false },
  luspo: {
    description: "TRL's luspo: the clipped ratio, each row weighted by its length", term: clipped, batchNorm: false, metrics: clipMetrics,
    // (B,1): one entry per row; (B,T): every entry, padding included (TRL's mean over B·T)
    weight: (_m, i, t, R) => (R.seqShape ? (t === R.off[i] ? R.len[i]! / R.B / R.nMb : 0) : R.len[i]! / (R.B * R.maxLen) / R.nMb),
  },
  vespo: {
    description: "TRL's vespo: −φ A ℓ with φ from the row's sequence ratio", term: vespo, weight: batchTokens, batchNorm: true, phi: vespoPhi,
    metrics: (p, _terms, phi, st, metrics) => {
      if (p.rowAdv) {
        let s = 0;
        for (let i = 0; i < p.rows; i++) s += p.off[i + 1]! > p.off[i]! ? phi[p.off[i]!]! : 0;
        metrics['vespo/phi_seq_mean'] = s / Math.max(p.rows, 1);
      } else metrics['vespo/phi_seq_mean'] = st.tokMean((t) => phi[t]!);
    },
  },
};

/** The steps of one loss type over checked inputs: the loss, its gradients and TRL's metrics. */
function runKind(kind: TrlKind, p: TrlInputs): TrlLossResult {
  const emask = entropyMask(p);
  const opMask = offPolicyMask(p);
  const logw = logWeights(p);
  const phi = kind.phi ? kind.phi(p) : new Float64Array(p.n);
  // Is the ratio (B,1)-shaped (clip metrics per row), and is TRL's per-token loss (B,1)-shaped (luspo)?
  const seqRatio = p.rowAdv && p.level === 'sequence';
  const seqShape = seqRatio && p.beta === 0 && emask === undefined;
  const terms = tokenTerms(p, kind.term, logw, phi, opMask, emask);
  const { r, dapoNorm } = reductionWeights(p, kind.weight, seqShape);
  const red = reduceTerms(p, terms, r);
  const metrics: Record<string, number> = {};
  const gH = sameType(p.lp, p.n);
  const loss = entropyBonusTerm(p, kind.batchNorm, red.loss, emask, dapoNorm, gH, metrics);
  const stats = trlMetrics(p, terms, seqRatio, metrics);
  kind.metrics?.(p, terms, phi, stats, metrics);
  const grad = sameType(p.lp, p.n);
  for (let t = 0; t < p.n; t++) grad[t] = red.g[t]!;
  return { loss, grad, gradEntropy: gH, metrics };
}

// The arguments of the contexts the TRL reader made (a TRL kind runs on nothing else).
const TRL_ARGS = new WeakSet<object>();
const NO_AGG: AggregateOptions = Object.freeze({});

/**
 * @internal The context a TRL kind runs in: TRL's checked inputs as its `args` (the old log-probs are the
 * current ones on-policy, the advantages one per token). A TRL kind reduces as its loss type does:
 * `agg` is left at its default, unused.
 */
export function trlContext(p: TrlInputs): PolicyLossContext {
  const args = Object.freeze(p);
  TRL_ARGS.add(args);
  return {
    logprob: p.lp, oldLogprob: p.old, advantages: p.A, offsets: p.off, mask: p.mask, args, isWeights: undefined,
    agg: 'token-mean', aggOptions: NO_AGG,
    get options(): never { return fail('ERR_OPTION', 'options', "a verl kind's context (a TRL kind's options are its args)", 'trl'); },
  };
}

/** A TRL kind's reduction: the shared steps with the kind's parts, on a context {@link trlContext} made. */
function reduceWith(name: string, kind: TrlKind): (ctx: PolicyLossContext) => PolicyLossReduction & TrlLossResult {
  return (ctx) => {
    const args = ctx !== null && typeof ctx === 'object' ? ctx.args : undefined;
    if (args === undefined || !TRL_ARGS.has(args)) fail('ERR_OPTION', `policyLoss(${name})`, "a call with compat: 'trl' (or trlLoss)", ctx);
    return runKind(kind, args as unknown as TrlInputs);
  };
}

/** @internal The policy-loss kind name of a TRL loss type. */
export const trlKindName = (type: TrlLossType): string => `trl.${type}`;

/** @internal Whether a registered policy loss is one of TRL's kinds (which read TRL's arguments). */
export function isTrlKind(def: Readonly<PolicyLossDefinition>): boolean {
  return policyLosses.isBuiltin(def) && def.name.startsWith('trl.');
}

/** @internal The TRL kinds' definitions, in TRL_LOSS_TYPES' order (registered after the verl kinds). */
export const TRL_KINDS: readonly PolicyLossDefinition[] = TRL_LOSS_TYPES.map((type) => {
  const name = trlKindName(type);
  return { name, description: KINDS[type].description, reduce: reduceWith(name, KINDS[type]) };
});
