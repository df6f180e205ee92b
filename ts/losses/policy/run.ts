/**
 * Argument checks and the float64 TypeScript path of {@link policyLoss}: the registered kind supplies
 * per-token terms (aggregated here, with the importance weights) or its own reduction.
 *
 * @module
 */
import { fail } from '../../core/errors.js';
import * as v from '../../core/validate.js';
import { validateOptions } from '../../registry/schema.js';
import { AGG_MODES, AggMode, AggregateOptions, aggWeights, checkAggOptions } from '../aggregate.js';
import { COMPAT_VALUES, type Compat, SEMANTICS, type Semantics, compatOpt } from '../compat.js';
import { FloatArray, finite, floats, rowsOf, sameType } from '../inputs.js';
import { TrlLossArgs, trlLoss } from '../trl_loss.js';
import './builtins.js';
import { type PolicyLossContext, type PolicyLossDefinition, findPolicyLoss, policyLossNames } from './registry.js';
import { rolloutCorrectionWeights } from './rollout_correction.js';
import { type Opts, POLICY_LOSS_ARG_KEYS, type PolicyLossArgs, type PolicyLossResult } from './types.js';

function checkLength(x: ArrayLike<number> | undefined, n: number, what: string): void {
  if (x === null || typeof x !== 'object' || typeof x.length !== 'number') fail('ERR_DTYPE', what, 'an array of numbers', x);
  if (x.length !== n) fail('ERR_SHAPE', `${what}.length`, String(n), x.length);
}

/** @internal Validates the shared numeric options (for every kind, so a typo fails whichever kind runs). */
export function resolveOpts(a: PolicyLossArgs, kind: string, sem: Semantics): Opts {
  const lo = v.numOpt(a.clipLow, 'clipLow', 0.2, { min: 0, finite: true });
  const hi = v.numOpt(a.clipHigh, 'clipHigh', lo, { min: 0, finite: true });
  const isDppo = kind === 'dppo_tv' || kind === 'dppo_kl';
  const c = isDppo
    ? v.numOpt(a.clipC, 'clipC', 20, { min: 0, minOpen: true })
    : v.numOpt(a.clipC, 'clipC', 3, { min: 1, minOpen: true });
  let clamp: number;
  if (a.logRatioClamp === null) clamp = Infinity;
  else if (a.logRatioClamp === undefined) clamp = sem === 'verl-agent' ? Infinity : 20;
  else clamp = v.numOpt(a.logRatioClamp, 'logRatioClamp', 20, { min: 0, minOpen: true });
  const droBeta = kind === 'dro'
    ? (a.droBeta === undefined ? fail('ERR_OPTION', 'droBeta', 'a number > 0 (required for kind dro)', undefined)
      : v.numOpt(a.droBeta, 'droBeta', 0, { min: 0, minOpen: true }))
    : 0;
  return {
    kind, lo, hi, c, clamp,
    tauPos: v.numOpt(a.tauPos, 'tauPos', 1.0, { min: 0, minOpen: true }),
    tauNeg: v.numOpt(a.tauNeg, 'tauNeg', 1.05, { min: 0, minOpen: true }),
    clipCovRatio: v.numOpt(a.clipCovRatio, 'clipCovRatio', 2e-4, { min: 0, minOpen: true }),
    clipCovLb: v.numOpt(a.clipCovLb, 'clipCovLb', 1.0),
    clipCovUb: v.numOpt(a.clipCovUb, 'clipCovUb', 5.0),
    seed: v.numOpt(a.seed, 'seed', 0, { int: true, min: 0, max: 2 ** 32 - 1 }),
    klCovRatio: v.numOpt(a.klCovRatio, 'klCovRatio', 2e-4, { min: 0, minOpen: true }),
    ppoKlCoef: v.numOpt(a.ppoKlCoef, 'ppoKlCoef', 1.0),
    droBeta,
  };
}

/** @internal Validated and resolved arguments. */
export interface Prepared {
  lp: FloatArray; old: FloatArray; A: FloatArray; offsets: Int32Array; mask: Uint8Array | undefined; kind: string; def: Readonly<PolicyLossDefinition>;
  agg: AggMode; aggOpts: AggregateOptions; o: Opts; useNative: boolean; out: FloatArray | undefined;
}

/** @internal Validates the arguments of {@link policyLoss} (a `flavor: 'trl'` call runs {@link trlLoss} here). */
export function prepare(a: PolicyLossArgs): Prepared | { trl: PolicyLossResult } {
  if (a === null || typeof a !== 'object') fail('ERR_OPTION', 'policyLoss', 'an arguments object', a);
  const compat: Compat | undefined = a.compat === undefined ? undefined : v.enumOpt(a.compat, 'compat', COMPAT_VALUES, 'verl');
  const flavor = v.enumOpt(a.flavor, 'flavor', ['verl', 'trl'] as const, 'verl');
  if (compat !== undefined && a.flavor !== undefined && (compat === 'trl') !== (flavor === 'trl')) {
    fail('ERR_OPTION', 'compat', `a value agreeing with the deprecated flavor '${flavor}' (give compat only)`, compat);
  }
  if (flavor === 'trl' || compat === 'trl') {
    const { flavor: _f, compat: _c, ...rest } = a as PolicyLossArgs & Record<string, unknown>;
    return { trl: trlLoss(rest as unknown as TrlLossArgs) };
  }
  // a registered kind may add its own option names
  const found = findPolicyLoss(a.kind ?? 'ppo');
  v.knownKeys(a, 'policyLoss', found?.options === undefined ? POLICY_LOSS_ARG_KEYS : [...POLICY_LOSS_ARG_KEYS, ...Object.keys(found.options)]);
  const lp = floats(a.logprob, 'logprob');
  const n = lp.length;
  const old = floats(a.oldLogprob, 'oldLogprob', n);
  const A = floats(a.advantages, 'advantages', n);
  const offsets = a.offsets; // read once: a getter may answer differently on a second read
  rowsOf(offsets, n);
  v.enumOpt(a.kind, 'kind', policyLossNames(), 'ppo');
  const def = found!;
  const kind = def.name;
  // The fused native pass validates the mask values and the finiteness of valid tokens itself, in the
  // same pass over memory; the TS path checks them before computing.
  const useNative = a.native !== false && kind === 'ppo' && a.isWeights === undefined && a.rolloutCorrection === undefined &&
    v.isTyped(lp, Float32Array) && v.isTyped(old, Float32Array) && v.isTyped(A, Float32Array);
  if (a.native !== undefined && typeof a.native !== 'boolean') fail('ERR_OPTION', 'native', 'a boolean', a.native);
  let mask: Uint8Array | undefined;
  const mask0 = a.mask; // read once: a getter may answer differently on a second read
  if (useNative && mask0 !== undefined) {
    if (!v.isTyped(mask0, Uint8Array)) fail('ERR_DTYPE', 'mask', 'Uint8Array', mask0);
    if (mask0.length !== n) fail('ERR_SHAPE', 'mask.length', String(n), mask0.length);
    mask = mask0;
  } else {
    mask = v.optMask(mask0, 'mask', n);
  }
  const sem = compatOpt(a as unknown as Record<string, unknown>, '', SEMANTICS, 'verl', { key: 'semantics', values: SEMANTICS });
  const agg = v.enumOpt(a.agg, 'agg', AGG_MODES, 'token-mean');
  const aggOpts: AggregateOptions = checkAggOptions({
    globalTokens: a.globalTokens, globalRows: a.globalRows, lossScaleFactor: a.lossScaleFactor, dpSize: a.dpSize, semantics: sem,
  }, 'policyLoss');
  const o = resolveOpts(a, kind, sem);
  validateOptions(def.options, a as unknown as Record<string, unknown>, `policyLoss(${kind})`);
  let out: FloatArray | undefined;
  if (a.out !== undefined) {
    out = v.isTyped(lp, Float64Array) ? v.f64(a.out, 'out', n) : v.f32(a.out, 'out', n);
    for (const [x, what] of [[lp, 'logprob'], [old, 'oldLogprob'], [A, 'advantages']] as const) {
      const overlap = x.buffer === out.buffer && x.byteOffset < out.byteOffset + out.byteLength &&
        out.byteOffset < x.byteOffset + x.byteLength;
      if (overlap) fail('ERR_OPTION', 'out', `an array not overlapping ${what}`, out);
    }
  }
  return { lp, old, A, offsets, mask, kind, def, agg, aggOpts, o, useNative, out };
}

/** @internal The float64 TypeScript path: weights, then the registered kind's terms or reduction. */
export function policyLossTs(a: PolicyLossArgs, p: Prepared): PolicyLossResult {
  const { lp, old, A, offsets, kind, agg, aggOpts, o } = p;
  let mask = p.mask;
  const n = lp.length;
  finite(lp, 'logprob', mask);
  finite(old, 'oldLogprob', mask);
  finite(A, 'advantages', mask);

  let isw: Float64Array | undefined;
  let extra: Record<string, number> = {};
  if (a.isWeights !== undefined) {
    const w = floats(a.isWeights, 'isWeights', n);
    finite(w, 'isWeights', mask);
    for (let t = 0; t < n; t++) if ((mask === undefined || mask[t]) && w[t]! < 0) fail('ERR_OPTION', `isWeights[${t}]`, '>= 0', w[t]);
    isw = Float64Array.from(w);
  }
  if (a.rolloutCorrection !== undefined) {
    if (isw !== undefined) fail('ERR_OPTION', 'rolloutCorrection', 'not together with isWeights', 'both');
    const rc = rolloutCorrectionWeights(old, offsets, mask, a.rolloutCorrection);
    isw = rc.weights;
    extra = rc.metrics;
    // rejection sampling: the rejected tokens leave the loss (verl replaces response_mask)
    if (rc.mask !== undefined) mask = rc.mask;
  }

  const ctx: PolicyLossContext = {
    logprob: lp, oldLogprob: old, advantages: A, offsets, mask, options: o,
    args: a as unknown as Record<string, unknown>, isWeights: isw, agg, aggOptions: aggOpts,
  };
  if (p.def.reduce !== undefined) {
    const r = p.def.reduce(ctx);
    checkLength(r.grad, n, `policyLoss(${kind}): reduce().grad`);
    const grad = p.out ?? sameType(lp, n);
    for (let t = 0; t < n; t++) grad[t] = r.grad[t]!;
    return { loss: r.loss, grad, metrics: { ...r.metrics, ...extra } };
  }

  const terms = p.def.terms!(ctx);
  checkLength(terms.loss, n, `policyLoss(${kind}): terms().loss`);
  checkLength(terms.dloss, n, `policyLoss(${kind}): terms().dloss`);
  if (terms.agg !== undefined) v.enumOpt(terms.agg, `policyLoss(${kind}): terms().agg`, AGG_MODES, 'token-mean');
  const { w, nan } = aggWeights(offsets, mask, terms.agg ?? agg, aggOpts);
  let loss = 0;
  const grad = p.out?.fill(0) ?? sameType(lp, n); // the loop below writes only tokens with weight
  for (let t = 0; t < n; t++) {
    const wt = w[t]!;
    if (wt === 0) continue;
    const s = isw === undefined ? 1 : isw[t]!;
    loss += wt * terms.loss[t]! * s;
    grad[t] = wt * terms.dloss[t]! * s;
  }
  return { loss: nan ? NaN : loss, grad, metrics: { ...terms.metrics, ...extra } };
}
