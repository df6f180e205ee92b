/**
 * The advantage-estimator registry (as verl's `register_adv_est`): every estimator, built-in or
 * user-defined, is an entry with its level (`'row'` or `'token'`) and its options' schema, and
 * {@link computeAdvantages} runs any of them by name with one result contract.
 *
 * @module
 */
import { fail } from '../core/errors.js';
import { createRegistry, replaceOpt } from '../registry/registry.js';
import { type OptionsSchema, type ResolvedOptions, readArgs, resolveOptions } from '../registry/schema.js';

/**
 * Where an estimator's output lives: `'row'` = one value per row (broadcast to the row's tokens by
 * {@link computeAdvantages}), `'token'` = one value per token.
 *
 * @category Registry
 */
export type EstimatorLevel = 'row' | 'token';

/**
 * What an estimator's `compute` may return: the advantages themselves, or an object with them under
 * `advantages` (plus anything else, e.g. diagnostics, kept as {@link AdvantageResult.details}).
 *
 * @category Registry
 */
export type EstimatorOutput = ArrayLike<number> | { advantages: ArrayLike<number> };

/**
 * An advantage estimator.
 *
 * @category Registry
 */
export interface AdvantageEstimatorDefinition<A = Record<string, unknown>> {
  /** The name, e.g. `'grpo'` (letters, digits, `_`, `-`, `.`). */
  name: string;
  /** Other accepted names (verl's estimator names for the built-ins, say). */
  aliases?: readonly string[];
  /** One line for listings. */
  description?: string;
  /** `'row'` (per-row output) or `'token'` (per-token output). */
  level: EstimatorLevel;
  /**
   * The arguments' schema, checked with coded errors before `compute` runs (an option absent from the
   * arguments takes the value its spec declares).
   */
  options?: OptionsSchema;
  /** Computes the advantages from the arguments (read once, checked against `options`). */
  compute: (args: A) => EstimatorOutput;
}

/**
 * Options of {@link registerAdvantageEstimator}.
 *
 * @category Registry
 */
export interface RegisterEstimatorOptions {
  /**
   * Replace a user-registered entry of the same name instead of throwing (built-ins cannot be replaced).
   *
   * @defaultValue `false`
   */
  replace?: boolean;
}

/** @internal The advantage-estimator registry. */
export const estimators = createRegistry<AdvantageEstimatorDefinition>({
  register: 'registerAdvantageEstimator',
  unregister: 'unregisterAdvantageEstimator',
  lookup: 'estimator',
  noun: 'estimator',
  fields: ['name', 'aliases', 'description', 'level', 'options', 'compute'],
  check(d) {
    if (d.level !== 'row' && d.level !== 'token') fail('ERR_OPTION', `registerAdvantageEstimator(${d.name}): level`, "'row' or 'token'", d.level);
    if (typeof d.compute !== 'function') fail('ERR_OPTION', `registerAdvantageEstimator(${d.name}): compute`, 'a function', d.compute);
  },
});

/**
 * @internal Registers a built-in estimator (cannot be replaced or removed). Its `compute` is the public
 * function, which reads its arguments with {@link estimatorArgs} against the same schema.
 */
export function registerBuiltinEstimator<A>(def: AdvantageEstimatorDefinition<A>): void {
  estimators.add(def, true, false);
}

/**
 * @internal Reads a built-in estimator's arguments object once (its own enumerable properties, each
 * getter run once), refuses keys outside `schema`, and checks the options against it, filling in their
 * defaults: the schema is the one place an estimator's option names, bounds and defaults are written.
 */
export function estimatorArgs<S extends OptionsSchema>(schema: S, a: unknown, fn: string): ResolvedOptions<S> {
  return resolveOptions(schema, readArgs(a, fn, Object.keys(schema)), fn);
}

/**
 * Registers an advantage estimator, runnable by name with {@link computeAdvantages} (and so in any
 * training loop that picks its estimator by name) without editing the library.
 *
 * @param def name, level, options schema and `compute`
 * @param opts `replace: true` to overwrite an earlier user registration of the same name
 * @throws GearError `ERR_OPTION` on a malformed definition or a taken name
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * // a row-level estimator: reward minus the batch mean, scaled by a checked option
 * rl.registerAdvantageEstimator<{ rewards: number[]; scale?: number }>({
 *   name: 'mean-baseline',
 *   level: 'row',
 *   description: 'reward minus the batch mean',
 *   options: { rewards: { type: 'array', required: true }, scale: { type: 'number', min: 0 } },
 *   compute: ({ rewards, scale = 1 }) => {
 *     const mean = rewards.reduce((s, r) => s + r, 0) / rewards.length;
 *     return rewards.map((r) => scale * (r - mean));
 *   },
 * });
 * const r = rl.computeAdvantages('mean-baseline', { rewards: [1, 0, 0.5] }, { offsets: Int32Array.of(0, 1, 2, 3) });
 * console.log(r.tokenAdvantages); // Float32Array [0.5, -0.5, 0]
 * rl.unregisterAdvantageEstimator('mean-baseline');
 * ```
 * @category Registry
 */
export function registerAdvantageEstimator<A = Record<string, unknown>>(
  def: AdvantageEstimatorDefinition<A>, opts: RegisterEstimatorOptions = {},
): void {
  estimators.add(def, false, replaceOpt(opts, 'registerAdvantageEstimator'));
}

/**
 * Removes a user-registered estimator.
 *
 * @param name its name
 * @returns whether an entry was removed
 * @throws GearError `ERR_OPTION` for a built-in estimator
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * rl.registerAdvantageEstimator({ name: 'zeros', level: 'row', compute: (a) => new Float64Array((a.rewards as number[]).length) });
 * console.log(rl.unregisterAdvantageEstimator('zeros')); // true
 * console.log(rl.unregisterAdvantageEstimator('zeros')); // false: nothing left to remove
 * ```
 * @category Registry
 */
export function unregisterAdvantageEstimator(name: string): boolean {
  return estimators.remove(name);
}

/**
 * The registered estimator of a name or alias.
 *
 * @param name a name or alias
 * @returns its definition
 * @throws GearError `ERR_OPTION` when nothing is registered under that name
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const def = rl.getAdvantageEstimator('grpo');
 * console.log(def.name, def.level, def.aliases, Object.keys(def.options ?? {}));
 * ```
 * @category Registry
 */
export function getAdvantageEstimator(name: string): Readonly<AdvantageEstimatorDefinition> {
  return estimators.get(name);
}

/**
 * The canonical names of the registered estimators, built-ins first, in registration order.
 *
 * @returns the names
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * console.log(rl.listAdvantageEstimators()); // ['grpo', 'grpo_passk', 'rloo', ..., then user-registered ones]
 * ```
 * @category Registry
 */
export function listAdvantageEstimators(): string[] {
  return estimators.list();
}
