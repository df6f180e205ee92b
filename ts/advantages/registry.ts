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
 */
export type EstimatorLevel = 'row' | 'token';

/**
 * What an estimator's `compute` may return: the advantages themselves, or an object with them under
 * `advantages` (plus anything else, e.g. diagnostics, kept as {@link AdvantageResult.details}).
 */
export type EstimatorOutput = ArrayLike<number> | { advantages: ArrayLike<number> };

/** An advantage estimator. */
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

/** Options of {@link registerAdvantageEstimator}. */
export interface RegisterEstimatorOptions {
  /** Replace a user-registered entry of the same name instead of throwing (built-ins cannot be replaced). */
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
 */
export function listAdvantageEstimators(): string[] {
  return [...entries.keys()];
}
