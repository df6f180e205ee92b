/**
 * The peer-compatibility switch, `compat`: which peer library's (or peer version's) behaviour to follow
 * where the peers differ. One word and one value set across the library; each function accepts the
 * values that mean something for it (docs/compat.md has the table). The older option names
 * (`semantics`, `flavor`) are accepted as deprecated aliases.
 *
 * @module
 */
import { fail } from '../core/errors.js';
import * as v from '../core/validate.js';

/**
 * Which peer to follow: `'verl'` (current verl, the default), `'verl-legacy'` (verl before the
 * aggregation / KL changes), `'verl-agent'` (verl-agent, GiGPO's trainer) or `'trl'` (TRL's
 * `GRPOTrainer`).
 *
 * @category Losses
 */
export type Compat = 'verl' | 'verl-legacy' | 'verl-agent' | 'trl';
/**
 * Every {@link Compat} value.
 *
 * @category Losses
 */
export const COMPAT_VALUES: readonly Compat[] = ['verl', 'verl-legacy', 'verl-agent', 'trl'];

/**
 * The verl versions: the {@link Compat} values of the aggregation modes and the verl policy losses.
 *
 * @category Losses
 */
export type Semantics = 'verl' | 'verl-legacy' | 'verl-agent';
/** The accepted {@link Semantics} names. */
export const SEMANTICS: readonly Semantics[] = ['verl', 'verl-legacy', 'verl-agent'];

/**
 * @internal Reads `compat` and its deprecated alias from `o` (`prefix` starts the names in error messages). The alias keeps its own value set
 * (mapped onto compat values by `map`) and its own error messages; giving both with different meanings
 * throws `ERR_OPTION`.
 */
export function compatOpt<T extends string>(
  o: Record<string, unknown>, prefix: string, allowed: readonly T[], dflt: T,
  alias: { key: string; values: readonly string[]; map?: Readonly<Record<string, T>> },
): T {
  const c = o.compat === undefined ? undefined : v.enumOpt(o.compat, `${prefix}compat`, allowed, dflt);
  const raw = o[alias.key];
  const old = raw === undefined ? undefined : v.enumOpt(raw, `${prefix}${alias.key}`, alias.values, alias.values[0]!);
  const mapped = old === undefined ? undefined : (alias.map?.[old] ?? (old as unknown as T));
  if (c !== undefined && mapped !== undefined && c !== mapped) {
    fail('ERR_OPTION', `${prefix}compat`, `a value agreeing with the deprecated ${alias.key} '${String(old)}' (give compat only)`, c);
  }
  return c ?? mapped ?? dflt;
}
