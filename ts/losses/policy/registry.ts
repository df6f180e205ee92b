/**
 * The policy-loss registry (as verl's `register_policy_loss`): every loss kind, built-in or user-defined,
 * is an entry that {@link policyLoss} looks up by its `kind` name.
 *
 * @module
 */
import { fail } from '../../core/errors.js';
import { createRegistry, replaceOpt } from '../../registry/registry.js';
import type { OptionsSchema } from '../../registry/schema.js';
import type { AggMode, AggregateOptions } from '../aggregate.js';
import type { FloatArray } from '../inputs.js';

/**
 * @internal The argument names of {@link policyLoss} that belong to no kind, in the order they are read
 * (the kinds' options come after them).
 */
export const POLICY_LOSS_COMMON_KEYS = [
  'compat', 'flavor', 'kind', 'logprob', 'oldLogprob', 'advantages', 'offsets', 'mask', 'agg', 'globalTokens', 'globalRows', 'lossScaleFactor', 'dpSize',
  'semantics', 'isWeights', 'rolloutCorrection', 'native', 'out',
] as const;

/**
 * The built-in kinds' numeric options of one {@link policyLoss} call, checked and with their defaults
 * filled in, under short names (as {@link PolicyLossContext.options} gives them).
 *
 * @category Losses
 */
export interface ResolvedPolicyLossOptions {
  /** The canonical kind name (aliases resolved). */
  kind: string;
  /** ε_low. */
  lo: number;
  /** ε_high. */
  hi: number;
  /** Dual-clip constant (or the DPPO truncation). */
  c: number;
  /** ±clamp of the log-ratio before exp (`Infinity` = none). */
  clamp: number;
  /** SAPO temperature for A > 0. */
  tauPos: number;
  /** SAPO temperature for A <= 0. */
  tauNeg: number;
  /** Clip-Cov share of valid tokens. */
  clipCovRatio: number;
  /** Clip-Cov lower covariance bound. */
  clipCovLb: number;
  /** Clip-Cov upper covariance bound. */
  clipCovUb: number;
  /** Clip-Cov seed. */
  seed: number;
  /** KL-Cov share of valid tokens. */
  klCovRatio: number;
  /** KL-Cov coefficient. */
  ppoKlCoef: number;
  /** DRO β (0 when not given). */
  droBeta: number;
}

/**
 * What a registered loss receives: the validated inputs and options of one {@link policyLoss} call.
 *
 * @category Registry
 */
export interface PolicyLossContext {
  /** Current policy log-probs ℓ (the variable the gradient is taken with respect to). */
  logprob: FloatArray;
  /** Old / behaviour policy log-probs ℓ_old. */
  oldLogprob: FloatArray;
  /** Per-token advantages. */
  advantages: FloatArray;
  /** Packed rows (length R+1). */
  offsets: Int32Array;
  /** 0/1 loss mask, when given. */
  mask: Uint8Array | undefined;
  /**
   * The built-in kinds' numeric options under their short names, with their defaults filled in.
   *
   * @deprecated Read the options from `args`: a kind's own options (declared in its schema) are there
   * with their defaults filled in.
   */
  readonly options: ResolvedPolicyLossOptions;
  /**
   * The call's arguments, each read once, with this kind's own options (declared in its schema)
   * checked and their defaults filled in.
   */
  args: Readonly<Record<string, unknown>>;
  /** Detached per-token importance weights (from `isWeights` or `rolloutCorrection`), when given. */
  isWeights: Float64Array | undefined;
  /** The aggregation mode asked for. */
  agg: AggMode;
  /** The aggregation's global normalisers. */
  aggOptions: AggregateOptions;
}

/**
 * Per-token loss terms, before aggregation: {@link policyLoss} aggregates them with the call's `agg`
 * (or the loss's own `agg`) and applies the importance weights.
 *
 * @category Registry
 */
export interface PolicyLossTerms {
  /** The per-token loss L_t (length N). */
  loss: ArrayLike<number>;
  /** d L_t / d ℓ_t per token (length N). */
  dloss: ArrayLike<number>;
  /** Metrics to report. */
  metrics?: Record<string, number>;
  /** An aggregation mode this loss always uses, overriding the call's `agg` (as GSPO and SAPO do). */
  agg?: AggMode;
}

/**
 * A loss that does its own reduction (as GMPO's per-row geometric mean): the final value and gradient.
 *
 * @category Registry
 */
export interface PolicyLossReduction {
  /** The aggregated loss. */
  loss: number;
  /** d loss / d ℓ per token (length N). */
  grad: ArrayLike<number>;
  /** Metrics to report. */
  metrics?: Record<string, number>;
}

/**
 * A policy-loss kind. Give exactly one of `terms` (per-token terms, aggregated by the library: the
 * usual case) or `reduce` (the loss does its own reduction).
 *
 * @category Registry
 */
export interface PolicyLossDefinition {
  /** The `kind` name, e.g. `'my_clip'` (letters, digits, `_`, `-`, `.`). */
  name: string;
  /** Other accepted names (verl's `vanilla` for `ppo`, say). */
  aliases?: readonly string[];
  /** One line for listings. */
  description?: string;
  /**
   * The loss's own options, read from the {@link policyLoss} arguments, validated with coded errors
   * and given their declared defaults before the loss runs (the loss finds them in
   * {@link PolicyLossContext.args}). Names must not be argument names of `policyLoss` itself nor options
   * of a built-in kind.
   */
  options?: OptionsSchema;
  /** Per-token terms (aggregated by the library). */
  terms?: (ctx: PolicyLossContext) => PolicyLossTerms;
  /** Full reduction (the loss aggregates itself). */
  reduce?: (ctx: PolicyLossContext) => PolicyLossReduction;
}

/**
 * Options of {@link registerPolicyLoss}.
 *
 * @category Registry
 */
export interface RegisterPolicyLossOptions {
  /**
   * Replace a user-registered entry of the same name instead of throwing (built-ins cannot be replaced).
   *
   * @defaultValue `false`
   */
  replace?: boolean;
}

/** @internal The policy-loss registry. */
export const policyLosses = createRegistry<PolicyLossDefinition>({
  register: 'registerPolicyLoss',
  unregister: 'unregisterPolicyLoss',
  lookup: 'kind',
  noun: 'kind',
  fields: ['name', 'aliases', 'description', 'options', 'terms', 'reduce'],
  check(d, builtin) {
    const hasTerms = typeof d.terms === 'function';
    const hasReduce = typeof d.reduce === 'function';
    if (hasTerms === hasReduce || (d.terms !== undefined && !hasTerms) || (d.reduce !== undefined && !hasReduce)) {
      fail('ERR_OPTION', `registerPolicyLoss(${d.name}): terms / reduce`, 'exactly one of the two functions', hasTerms ? 'both' : 'neither');
    }
    // a user loss must not shadow a policyLoss argument or a built-in kind's option
    if (builtin || d.options === null || typeof d.options !== 'object') return;
    const reserved = reservedOptionNames();
    for (const k of Object.keys(d.options)) {
      if (reserved.has(k)) {
        fail('ERR_OPTION', `registerPolicyLoss(${d.name}): options.${k}`, 'a name that is not a policyLoss argument', k);
      }
    }
  },
});

/** @internal The names a user kind's options may not take: the arguments and the built-in kinds' options. */
function reservedOptionNames(): Set<string> {
  const out = new Set<string>(POLICY_LOSS_COMMON_KEYS);
  for (const d of policyLosses.all()) if (policyLosses.isBuiltin(d)) for (const k of Object.keys(d.options ?? {})) out.add(k);
  return out;
}

/** @internal Registers a built-in kind (cannot be replaced or removed). */
export function registerBuiltinPolicyLoss(def: PolicyLossDefinition): void {
  policyLosses.add(def, true, false);
}

/**
 * Registers a policy-loss kind, usable as `policyLoss({ kind: def.name, ... })` (and through `trainStep`
 * style loops that call `policyLoss`) without editing the library.
 *
 * @param def the loss: name, optional aliases and options schema, and `terms` or `reduce`
 * @param opts `replace: true` to overwrite an earlier user registration of the same name
 * @throws GearError `ERR_OPTION` on a malformed definition, a taken name, or an option name that
 *   shadows a `policyLoss` argument
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * // a REINFORCE-style loss L_t = -scale * A_t * logprob_t; the library checks inputs and aggregates
 * rl.registerPolicyLoss({
 *   name: 'scaled_pg',
 *   options: { scale: { type: 'number', min: 0, description: 'loss multiplier' } },
 *   terms: ({ logprob, advantages, args }) => {
 *     const scale = (args.scale as number | undefined) ?? 1;
 *     return {
 *       loss: logprob.map((l, t) => -scale * advantages[t]! * l),
 *       dloss: advantages.map((a) => -scale * a),
 *     };
 *   },
 * });
 * // the loss's own options travel with the arguments
 * const args = {
 *   kind: 'scaled_pg', scale: 0.5, offsets: Int32Array.of(0, 2),
 *   logprob: Float64Array.of(-1, -2), oldLogprob: Float64Array.of(-1, -2), advantages: Float64Array.of(1, 1),
 * };
 * const r = rl.policyLoss(args);
 * console.log(r.loss, r.grad); // 0.75, Float64Array [-0.25, -0.25] (token-mean)
 * rl.unregisterPolicyLoss('scaled_pg');
 * ```
 * @category Registry
 */
export function registerPolicyLoss(def: PolicyLossDefinition, opts: RegisterPolicyLossOptions = {}): void {
  policyLosses.add(def, false, replaceOpt(opts, 'registerPolicyLoss'));
}

/**
 * Removes a user-registered loss kind.
 *
 * @param name its name
 * @returns whether an entry was removed
 * @throws GearError `ERR_OPTION` for a built-in kind
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * rl.registerPolicyLoss({ name: 'zero_loss', terms: ({ logprob }) => ({ loss: logprob.map(() => 0), dloss: logprob.map(() => 0) }) });
 * console.log(rl.listPolicyLosses().includes('zero_loss')); // true
 * console.log(rl.unregisterPolicyLoss('zero_loss'));          // true
 * ```
 * @category Registry
 */
export function unregisterPolicyLoss(name: string): boolean {
  return policyLosses.remove(name);
}

/**
 * The registered loss of a name or alias.
 *
 * @param name a kind name or alias
 * @returns its definition
 * @throws GearError `ERR_OPTION` when nothing is registered under that name
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const def = rl.getPolicyLoss('vanilla'); // an alias of 'ppo'
 * console.log(def.name, def.aliases, def.description);
 * ```
 * @category Registry
 */
export function getPolicyLoss(name: string): Readonly<PolicyLossDefinition> {
  return policyLosses.get(name);
}

/**
 * The canonical names of the registered loss kinds, built-ins first, in registration order.
 *
 * @returns the names
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * console.log(rl.listPolicyLosses()); // ['ppo', 'gspo', 'sapo', ...]: canonical names, aliases left out
 * ```
 * @category Registry
 */
export function listPolicyLosses(): string[] {
  return policyLosses.list();
}

/**
 * @internal A built-in kind: its definition, typed with its names and with the options interface it
 * declares (which `PolicyLossArgs` must include: `builtins.ts` checks it).
 */
export type BuiltinPolicyLoss<O, N extends string = string, A extends string = string> = PolicyLossDefinition & {
  readonly name: N;
  readonly aliases?: readonly A[];
  /** Type only: the options interface. */
  readonly __options?: O;
};

/** @internal Types a built-in kind's definition (`builtinPolicyLoss<SapoOptions>()({ ... })`). */
export function builtinPolicyLoss<O>() {
  return <const N extends string, const A extends string = never>(
    def: PolicyLossDefinition & { name: N; aliases?: readonly A[] },
  ): BuiltinPolicyLoss<O, N, A> => def;
}

/** @internal A kind's options as its code reads them from {@link PolicyLossContext.args} (declared defaults filled in). */
export type KindOptions<O> = { readonly [K in keyof O]-?: Exclude<O[K], undefined> };
