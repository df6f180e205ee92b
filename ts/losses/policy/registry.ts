/**
 * The policy-loss registry (as verl's `register_policy_loss`): every loss kind, built-in or user-defined,
 * is an entry that {@link policyLoss} looks up by its `kind` name.
 *
 * @module
 */
import { fail } from '../../core/errors.js';
import * as v from '../../core/validate.js';
import { type OptionsSchema, checkSchema } from '../../registry/schema.js';
import type { AggMode, AggregateOptions } from '../aggregate.js';
import type { FloatArray } from '../inputs.js';
import { POLICY_LOSS_ARG_KEYS, type ResolvedPolicyLossOptions } from './types.js';

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
  /** The shared options (clip bounds, clamp, ...) with their defaults filled in. */
  options: ResolvedPolicyLossOptions;
  /** The call's raw arguments: a loss reads its own options (declared in its schema) from here. */
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
   * The loss's own options, read from the {@link policyLoss} arguments and validated with coded errors
   * before the loss runs. Names must not be argument names of `policyLoss` itself.
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

interface Entry { def: Readonly<PolicyLossDefinition>; builtin: boolean }

const entries = new Map<string, Entry>();  // canonical name -> entry
const names = new Map<string, string>();   // name or alias -> canonical name
const NAME = /^[A-Za-z0-9_.-]{1,64}$/;
const RESERVED: readonly string[] = POLICY_LOSS_ARG_KEYS;

function checkDefinition(def: unknown, builtin: boolean): PolicyLossDefinition {
  if (def === null || typeof def !== 'object') fail('ERR_OPTION', 'registerPolicyLoss', 'a definition object', def);
  const d = def as PolicyLossDefinition;
  v.knownKeys(d, 'registerPolicyLoss', ['name', 'aliases', 'description', 'options', 'terms', 'reduce']);
  const all = [d.name, ...(d.aliases ?? [])];
  if (d.aliases !== undefined && !Array.isArray(d.aliases)) fail('ERR_OPTION', 'registerPolicyLoss: aliases', 'an array of names', d.aliases);
  for (const n of all) {
    if (typeof n !== 'string' || !NAME.test(n)) fail('ERR_OPTION', 'registerPolicyLoss: name', 'a name of letters, digits, _ - . (1 to 64)', n);
  }
  const hasTerms = typeof d.terms === 'function';
  const hasReduce = typeof d.reduce === 'function';
  if (hasTerms === hasReduce || (d.terms !== undefined && !hasTerms) || (d.reduce !== undefined && !hasReduce)) {
    fail('ERR_OPTION', `registerPolicyLoss(${d.name}): terms / reduce`, 'exactly one of the two functions', hasTerms ? 'both' : 'neither');
  }
  checkSchema(d.options, `registerPolicyLoss(${d.name}): options`);
  // the built-ins' schemas describe the shared arguments they read; a user loss must not shadow them
  for (const k of builtin ? [] : Object.keys(d.options ?? {})) {
    if (RESERVED.includes(k)) fail('ERR_OPTION', `registerPolicyLoss(${d.name}): options.${k}`, 'a name that is not a policyLoss argument', k);
  }
  return d;
}

function add(def: PolicyLossDefinition, builtin: boolean, opts: RegisterPolicyLossOptions): void {
  const d = checkDefinition(def, builtin);
  const replace = opts.replace === true;
  const prev = entries.get(d.name);
  for (const n of [d.name, ...(d.aliases ?? [])]) {
    const owner = names.get(n);
    if (owner === undefined || (replace && owner === d.name)) continue;
    const e = entries.get(owner)!;
    fail('ERR_OPTION', 'registerPolicyLoss: name', `a name not already registered${e.builtin ? ' (built-in)' : ''}`, n);
  }
  if (prev !== undefined) {
    if (prev.builtin) fail('ERR_OPTION', 'registerPolicyLoss: name', 'not a built-in kind', d.name);
    removeEntry(d.name);
  }
  const frozen = Object.freeze({ ...d, aliases: Object.freeze([...(d.aliases ?? [])]) });
  entries.set(d.name, { def: frozen, builtin });
  for (const n of [d.name, ...frozen.aliases]) names.set(n, d.name);
}

function removeEntry(name: string): void {
  const e = entries.get(name);
  if (e === undefined) return;
  for (const n of [name, ...(e.def.aliases ?? [])]) names.delete(n);
  entries.delete(name);
}

/** @internal Registers a built-in kind (cannot be replaced or removed). */
export function registerBuiltinPolicyLoss(def: PolicyLossDefinition): void {
  add(def, true, {});
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
  add(def, false, opts);
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
  const canonical = names.get(name);
  if (canonical === undefined || canonical !== name) return false;
  if (entries.get(canonical)!.builtin) fail('ERR_OPTION', 'unregisterPolicyLoss', 'a user-registered kind', name);
  removeEntry(canonical);
  return true;
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
  const canonical = typeof name === 'string' ? names.get(name) : undefined;
  if (canonical === undefined) fail('ERR_OPTION', 'kind', `one of ${policyLossNames().map((a) => `'${a}'`).join(', ')}`, name);
  return entries.get(canonical)!.def;
}

/** @internal The definition under a name or alias, or undefined. */
export function findPolicyLoss(name: unknown): Readonly<PolicyLossDefinition> | undefined {
  const canonical = typeof name === 'string' ? names.get(name) : undefined;
  return canonical === undefined ? undefined : entries.get(canonical)!.def;
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
  return [...entries.keys()];
}

/** @internal Every accepted name (canonical names and aliases), for error messages. */
export function policyLossNames(): string[] {
  return [...names.keys()];
}
