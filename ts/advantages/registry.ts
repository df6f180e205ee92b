/**
 * The advantage-estimator registry (as verl's `register_adv_est`): every estimator, built-in or
 * user-defined, is an entry with its level (`'row'` or `'token'`) and its options' schema, and
 * {@link computeAdvantages} runs any of them by name with one result contract.
 *
 * @module
 */
import { fail } from '../core/errors.js';
import * as v from '../core/validate.js';
import { type OptionsSchema, checkSchema } from '../registry/schema.js';

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
  /** The arguments' schema, checked with coded errors before `compute` runs. */
  options?: OptionsSchema;
  /** Computes the advantages from the arguments. */
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

interface Entry { def: Readonly<AdvantageEstimatorDefinition>; builtin: boolean }

const entries = new Map<string, Entry>();
const names = new Map<string, string>();
const NAME = /^[A-Za-z0-9_.-]{1,64}$/;
const FIELDS = ['name', 'aliases', 'description', 'level', 'options', 'compute'];

function checkDefinition(def: unknown): AdvantageEstimatorDefinition {
  if (def === null || typeof def !== 'object') fail('ERR_OPTION', 'registerAdvantageEstimator', 'a definition object', def);
  const d = def as AdvantageEstimatorDefinition;
  v.knownKeys(d, 'registerAdvantageEstimator', FIELDS);
  if (d.aliases !== undefined && !Array.isArray(d.aliases)) fail('ERR_OPTION', 'registerAdvantageEstimator: aliases', 'an array of names', d.aliases);
  for (const n of [d.name, ...(d.aliases ?? [])]) {
    if (typeof n !== 'string' || !NAME.test(n)) {
      fail('ERR_OPTION', 'registerAdvantageEstimator: name', 'a name of letters, digits, _ - . (1 to 64)', n);
    }
  }
  if (d.level !== 'row' && d.level !== 'token') fail('ERR_OPTION', `registerAdvantageEstimator(${d.name}): level`, "'row' or 'token'", d.level);
  if (typeof d.compute !== 'function') fail('ERR_OPTION', `registerAdvantageEstimator(${d.name}): compute`, 'a function', d.compute);
  checkSchema(d.options, `registerAdvantageEstimator(${d.name}): options`);
  return d;
}

function add(def: AdvantageEstimatorDefinition, builtin: boolean, opts: RegisterEstimatorOptions): void {
  const d = checkDefinition(def);
  const replace = opts.replace === true;
  for (const n of [d.name, ...(d.aliases ?? [])]) {
    const owner = names.get(n);
    if (owner === undefined || (replace && owner === d.name)) continue;
    fail('ERR_OPTION', 'registerAdvantageEstimator: name', `a name not already registered${entries.get(owner)!.builtin ? ' (built-in)' : ''}`, n);
  }
  const prev = entries.get(d.name);
  if (prev !== undefined) {
    if (prev.builtin) fail('ERR_OPTION', 'registerAdvantageEstimator: name', 'not a built-in estimator', d.name);
    removeEntry(d.name);
  }
  const frozen = Object.freeze({ ...d, aliases: Object.freeze([...(d.aliases ?? [])]) });
  entries.set(d.name, { def: frozen as Readonly<AdvantageEstimatorDefinition>, builtin });
  for (const n of [d.name, ...frozen.aliases]) names.set(n, d.name);
}

function removeEntry(name: string): void {
  const e = entries.get(name);
  if (e === undefined) return;
  for (const n of [name, ...(e.def.aliases ?? [])]) names.delete(n);
  entries.delete(name);
}

/** @internal Registers a built-in estimator (cannot be replaced or removed). */
export function registerBuiltinEstimator<A>(def: AdvantageEstimatorDefinition<A>): void {
  add(def as unknown as AdvantageEstimatorDefinition, true, {});
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
  add(def as unknown as AdvantageEstimatorDefinition, false, opts);
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
  const canonical = names.get(name);
  if (canonical === undefined || canonical !== name) return false;
  if (entries.get(canonical)!.builtin) fail('ERR_OPTION', 'unregisterAdvantageEstimator', 'a user-registered estimator', name);
  removeEntry(canonical);
  return true;
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
  const canonical = typeof name === 'string' ? names.get(name) : undefined;
  if (canonical === undefined) {
    fail('ERR_OPTION', 'estimator', `one of ${[...names.keys()].map((a) => `'${a}'`).join(', ')}`, name);
  }
  return entries.get(canonical)!.def;
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
  return [...entries.keys()];
}
