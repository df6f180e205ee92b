/**
 * Argument reading and the float64 TypeScript path of {@link policyLoss}: the registered kind supplies
 * per-token terms (aggregated here, with the importance weights) or its own reduction.
 *
 * @module
 */
import { fail } from '../../core/errors.js';
import * as v from '../../core/validate.js';
import { type OptionSpec, type OptionsSchema, resolveOptions } from '../../registry/schema.js';
import { AGG_MODES, type AggMode, type AggregateOptions, aggWeights, checkAggOptions } from '../aggregate.js';
import { COMPAT_VALUES, type Compat, SEMANTICS, type Semantics, compatOpt } from '../compat.js';
import { type FloatArray, finite, floats, rowsOf, sameType } from '../inputs.js';
import { type TrlLossArgs, trlLoss } from '../trl_loss.js';
import { isTrlKind } from '../trl/kinds.js';
import './builtins.js';
import { clipRange } from './clip.js';
import {
  POLICY_LOSS_COMMON_KEYS, type PolicyLossContext, type PolicyLossDefinition, type ResolvedPolicyLossOptions, policyLosses,
} from './registry.js';
import { type RolloutCorrectionSettings, readRolloutCorrection, rolloutCorrectionOf } from './rollout_correction.js';
import type { PolicyLossResult } from './types.js';

function checkLength(x: ArrayLike<number> | undefined, n: number, what: string): void {
  if (x === null || typeof x !== 'object' || typeof x.length !== 'number') fail('ERR_DTYPE', what, 'an array of numbers', x);
  if (x.length !== n) fail('ERR_SHAPE', `${what}.length`, String(n), x.length);
}

/**
 * The options a call of one kind reads: the kind's own (required and defaulted as declared) and every
 * built-in kind's (checked when given, so a typo fails whichever kind runs; the first kind that
 * declares a name gives its spec), in declaration order, after the arguments common to every kind.
 */
interface KindSchema { schema: OptionsSchema; specs: ReadonlyMap<string, OptionSpec>; foreign: ReadonlySet<string>; keys: readonly string[] }
const kindSchemas = new WeakMap<object, KindSchema>();

function kindSchema(def: Readonly<PolicyLossDefinition> | undefined): KindSchema {
  const cached = def === undefined ? undefined : kindSchemas.get(def);
  if (cached !== undefined) return cached;
  const specs = new Map<string, OptionSpec>(Object.entries(def?.options ?? {}));
  const foreign = new Set<string>();
  for (const d of policyLosses.all()) {
    if (!policyLosses.isBuiltin(d)) continue;
    for (const [k, spec] of Object.entries(d.options ?? {})) {
      if (!specs.has(k)) { specs.set(k, spec); foreign.add(k); }
    }
  }
  // frozen: resolveOptions caches the names of a frozen schema (this one is built once per kind)
  const ks: KindSchema = { schema: Object.freeze(Object.fromEntries(specs)), specs, foreign, keys: [...POLICY_LOSS_COMMON_KEYS, ...specs.keys()] };
  if (def !== undefined) kindSchemas.set(def, ks);
  return ks;
}

/** @internal Checked and resolved arguments of one call. */
export interface Prepared {
  lp: FloatArray; old: FloatArray; A: FloatArray; offsets: Int32Array; rows: number; mask: Uint8Array | undefined;
  def: Readonly<PolicyLossDefinition>; kind: string; ks: KindSchema;
  /** The arguments, each read once, with the kind's own options resolved. */
  args: Readonly<Record<string, unknown>>;
  agg: AggMode; aggOpts: AggregateOptions; useNative: boolean; out: FloatArray | undefined;
  isWeights: FloatArray | undefined; rc: RolloutCorrectionSettings | undefined; roll: FloatArray | undefined;
}

/**
 * @internal Reads and checks the arguments of {@link policyLoss} (a `compat: 'trl'` call runs
 * {@link trlLoss} here). Every argument is read once, in a fixed order (`compat`, `flavor`, `kind`, the
 * arguments every kind takes, the kinds' options, then the fields of `rolloutCorrection`), before
 * anything is checked: a getter that detaches, shrinks or swaps an input runs before the checks that
 * see its effect, and no caller code runs between a check and the use of what it checked.
 */
export function prepare(a: unknown): Prepared | { trl: PolicyLossResult } {
  if (a === null || typeof a !== 'object') fail('ERR_OPTION', 'policyLoss', 'an arguments object', a);
  const args = a as Record<string, unknown>;
  const compat0 = args.compat, flavor0 = args.flavor;
  const compat: Compat | undefined = compat0 === undefined ? undefined : v.enumOpt(compat0, 'compat', COMPAT_VALUES, 'verl');
  const flavor = v.enumOpt(flavor0, 'flavor', ['verl', 'trl'] as const, 'verl');
  if (compat !== undefined && flavor0 !== undefined && (compat === 'trl') !== (flavor === 'trl')) {
    fail('ERR_OPTION', 'compat', `a value agreeing with the deprecated flavor '${flavor}' (give compat only)`, compat);
  }
  if (flavor === 'trl' || compat === 'trl') {
    const { flavor: _f, compat: _c, ...rest } = args;
    return { trl: trlLoss(rest as unknown as TrlLossArgs) };
  }
  const kind0 = args.kind;
  const found = kind0 === undefined ? policyLosses.get('ppo') : policyLosses.find(kind0);
  // TRL's kinds read TRL's arguments: they run through compat: 'trl' and its lossType, not by `kind`
  const def = found !== undefined && isTrlKind(found) ? undefined : found;
  const ks = kindSchema(def);
  v.knownKeys(args, 'policyLoss', ks.keys);
  if (def === undefined) {
    if (found !== undefined) {
      fail('ERR_OPTION', 'kind', `a kind with verl's arguments (${found.name} is TRL's: compat: 'trl', lossType: '${found.name.slice(4)}')`, kind0);
    }
    policyLosses.get(kind0, (d) => !isTrlKind(d)); // throws, listing the kinds
  }
  // Each key read once; only the given ones kept, so that `raw` stays a small object (a 35-key one
  // costs more per call than the fused native pass over 10^4 tokens).
  const raw: Record<string, unknown> = { compat: compat0, flavor: flavor0, kind: kind0 };
  for (let i = 3; i < ks.keys.length; i++) {
    const x = args[ks.keys[i]!];
    if (x !== undefined) raw[ks.keys[i]!] = x;
  }
  const rc = raw.rolloutCorrection === undefined ? undefined : readRolloutCorrection(raw.rolloutCorrection);
  // Nothing of the caller's runs from here on: the checks below see the values the computation uses.

  const lp = floats(raw.logprob, 'logprob');
  const n = lp.length;
  const old = floats(raw.oldLogprob, 'oldLogprob', n);
  const A = floats(raw.advantages, 'advantages', n);
  const offsets = raw.offsets as Int32Array;
  const rows = rowsOf(offsets, n);
  const kind = def!.name;
  if (raw.native !== undefined && typeof raw.native !== 'boolean') fail('ERR_OPTION', 'native', 'a boolean', raw.native);
  // The fused native pass checks the mask values and the finiteness of valid tokens itself, in the same
  // pass over memory; the TS path checks them before computing.
  const useNative = raw.native !== false && kind === 'ppo' && raw.isWeights === undefined && rc === undefined &&
    v.isTyped(lp, Float32Array) && v.isTyped(old, Float32Array) && v.isTyped(A, Float32Array);
  const mask = useNative ? v.optMaskShape(raw.mask, 'mask', n) : v.optMask(raw.mask, 'mask', n);
  const sem: Semantics = compatOpt(raw, '', SEMANTICS, 'verl', { key: 'semantics', values: SEMANTICS });
  const agg = v.enumOpt(raw.agg, 'agg', AGG_MODES, 'token-mean');
  const aggOpts: AggregateOptions = checkAggOptions({
    globalTokens: raw.globalTokens as number | undefined, globalRows: raw.globalRows as number | undefined,
    lossScaleFactor: raw.lossScaleFactor as number | undefined, dpSize: raw.dpSize as number | undefined,
  }, 'policyLoss', sem);
  // verl-agent's PPO clamps no log-ratio
  if (sem === 'verl-agent' && raw.logRatioClamp === undefined) raw.logRatioClamp = null;
  const own = resolveOptions(ks.schema, raw, '', { foreign: ks.foreign });
  const isWeights = raw.isWeights === undefined ? undefined : floats(raw.isWeights, 'isWeights', n);
  let roll: FloatArray | undefined;
  if (rc !== undefined) {
    if (isWeights !== undefined) fail('ERR_OPTION', 'rolloutCorrection', 'not together with isWeights', 'both');
    roll = floats(rc.rolloutLogprob, 'rolloutCorrection.rolloutLogprob', n);
  }
  let out: FloatArray | undefined;
  if (raw.out !== undefined) {
    out = v.isTyped(lp, Float64Array) ? v.f64(raw.out, 'out', n) : v.f32(raw.out, 'out', n);
    for (const [x, what] of [[lp, 'logprob'], [old, 'oldLogprob'], [A, 'advantages']] as const) {
      const overlap = x.buffer === out.buffer && x.byteOffset < out.byteOffset + out.byteLength &&
        out.byteOffset < x.byteOffset + x.byteLength;
      if (overlap) fail('ERR_OPTION', 'out', `an array not overlapping ${what}`, out);
    }
  }
  return {
    lp, old, A, offsets, rows, mask, def: def!, kind, ks, args: Object.freeze(Object.assign(raw, own)), agg, aggOpts, useNative, out,
    isWeights, rc, roll,
  };
}

/**
 * The built-in kinds' numeric options under their short names ({@link PolicyLossContext.options}):
 * each one's value, or the default of the spec the call reads it with.
 */
function shortOptions(p: Prepared): ResolvedPolicyLossOptions {
  const val = (k: string): number => (p.args[k] ?? p.ks.specs.get(k)?.default) as number;
  const { lo, hi } = clipRange({ clipLow: val('clipLow'), clipHigh: p.args.clipHigh });
  return {
    kind: p.kind, lo, hi, c: val('clipC'),
    clamp: p.args.logRatioClamp === null ? Infinity : val('logRatioClamp'),
    tauPos: val('tauPos'), tauNeg: val('tauNeg'), clipCovRatio: val('clipCovRatio'), clipCovLb: val('clipCovLb'),
    clipCovUb: val('clipCovUb'), seed: val('seed'), klCovRatio: val('klCovRatio'), ppoKlCoef: val('ppoKlCoef'),
    droBeta: (p.args.droBeta as number | undefined) ?? 0,
  };
}

/** A kind's result object, each field read once. */
function readResult(r: unknown, what: string, fields: readonly string[]): Record<string, unknown> {
  if (r === null || typeof r !== 'object') fail('ERR_DTYPE', what, 'a result object', r);
  const out: Record<string, unknown> = {};
  for (const f of fields) out[f] = (r as Record<string, unknown>)[f];
  return out;
}

/** `out` after a kind's code ran (which may be the caller's own): still the length it was checked at. */
function outAfterKind(p: Prepared): FloatArray | undefined {
  if (p.out !== undefined && p.out.length !== p.lp.length) fail('ERR_SHAPE', 'out.length', String(p.lp.length), p.out.length);
  return p.out;
}

/** @internal The float64 TypeScript path: weights, then the registered kind's terms or reduction. */
export function policyLossTs(p: Prepared): PolicyLossResult {
  const { lp, old, A, offsets, kind, agg, aggOpts } = p;
  let mask = p.mask;
  const n = lp.length;
  finite(lp, 'logprob', mask);
  finite(old, 'oldLogprob', mask);
  finite(A, 'advantages', mask);

  let isw: Float64Array | undefined;
  let extra: Record<string, number> = {};
  if (p.isWeights !== undefined) {
    const w = p.isWeights;
    finite(w, 'isWeights', mask);
    for (let t = 0; t < n; t++) if ((mask === undefined || mask[t]) && w[t]! < 0) fail('ERR_OPTION', `isWeights[${t}]`, '>= 0', w[t]);
    isw = Float64Array.from(w);
  }
  if (p.rc !== undefined) {
    finite(p.roll!, 'rolloutCorrection.rolloutLogprob', mask);
    const rc = rolloutCorrectionOf(old, p.roll!, offsets, p.rows, mask, p.rc);
    isw = rc.weights;
    extra = rc.metrics;
    // rejection sampling: the rejected tokens leave the loss (verl replaces response_mask)
    if (rc.mask !== undefined) mask = rc.mask;
  }

  let short: ResolvedPolicyLossOptions | undefined;
  const ctx: PolicyLossContext = {
    logprob: lp, oldLogprob: old, advantages: A, offsets, mask, args: p.args, isWeights: isw, agg, aggOptions: aggOpts,
    get options() { return (short ??= shortOptions(p)); },
  };
  if (p.def.reduce !== undefined) {
    const r = readResult(p.def.reduce(ctx), `policyLoss(${kind}): reduce()`, ['loss', 'grad', 'metrics']);
    checkLength(r.grad as ArrayLike<number>, n, `policyLoss(${kind}): reduce().grad`);
    const g = r.grad as ArrayLike<number>;
    const grad = outAfterKind(p) ?? sameType(lp, n);
    for (let t = 0; t < n; t++) grad[t] = g[t]!;
    return { loss: r.loss as number, grad, metrics: { ...(r.metrics as Record<string, number> | undefined), ...extra } };
  }

  const terms = readResult(p.def.terms!(ctx), `policyLoss(${kind}): terms()`, ['loss', 'dloss', 'metrics', 'agg']);
  const L = terms.loss as ArrayLike<number>, dL = terms.dloss as ArrayLike<number>;
  checkLength(L, n, `policyLoss(${kind}): terms().loss`);
  checkLength(dL, n, `policyLoss(${kind}): terms().dloss`);
  const tagg = terms.agg === undefined ? agg : v.enumOpt(terms.agg, `policyLoss(${kind}): terms().agg`, AGG_MODES, 'token-mean');
  const { w, nan } = aggWeights(offsets, mask, tagg, aggOpts);
  let loss = 0;
  const grad = outAfterKind(p)?.fill(0) ?? sameType(lp, n); // the loop below writes only tokens with weight
  for (let t = 0; t < n; t++) {
    const wt = w[t]!;
    if (wt === 0) continue;
    const s = isw === undefined ? 1 : isw[t]!;
    loss += wt * L[t]! * s;
    grad[t] = wt * dL[t]! * s;
  }
  return { loss: nan ? NaN : loss, grad, metrics: { ...(terms.metrics as Record<string, number> | undefined), ...extra } };
}
