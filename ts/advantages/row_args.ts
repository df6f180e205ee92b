/**
 * The options the estimators share, declared once (`{ rewards, groups, singleton }` of the row-level
 * estimators, the token-level estimators' `{ tokenRewards, offsets, mask, precision }`, `epsilon`), and
 * the parsing of the row-level estimators' arguments.
 *
 * @internal
 * @module
 */
import type { OptionsSchema } from '../registry/schema.js';
import { type GroupId, type GroupIndex, type SingletonPolicy, SINGLETON, groupIndex, rewardsArg } from './groups.js';
import { estimatorArgs } from './registry.js';

/** @internal A data argument (checked by the estimator itself: type, length, finiteness). */
export const DATA = { type: 'any', required: true } as const;
/** @internal An optional data argument. */
export const OPT_DATA = { type: 'any' } as const;
/** @internal `singleton`: what a group of one row gets. */
export const SINGLETON_OPTION = {
  type: 'string', values: SINGLETON, default: 'raw', description: "singleton groups: 'raw' (verl) or 'zero' (TRL)",
} as const;
/** @internal `epsilon` with the given default. */
export const epsilonOption = <D extends number>(d: D) => ({ type: 'number', min: 0, default: d, description: 'added to the std' }) as const;
/** @internal The arguments every row-level estimator takes. */
export const ROW_OPTIONS = Object.freeze({ rewards: DATA, groups: DATA, singleton: SINGLETON_OPTION } as const satisfies OptionsSchema);
/** @internal The arguments of the token-level estimators that read per-token rewards. */
export const TOKEN_OPTIONS = Object.freeze({ tokenRewards: DATA, offsets: DATA, mask: OPT_DATA } as const satisfies OptionsSchema);

/** Parsed `{ rewards, groups, singleton }` arguments of a row-level estimator. @internal */
export interface RowArgs<O> {
  a: O;
  rewards: Float64Array;
  idx: GroupIndex;
  singleton: SingletonPolicy;
}

/** Reads a row-level estimator's arguments against its schema (which includes {@link ROW_OPTIONS}). @internal */
export function rowArgs<S extends typeof ROW_OPTIONS & OptionsSchema>(a: unknown, fn: string, schema: S) {
  const o = estimatorArgs(schema, a, fn);
  const rewards = rewardsArg(o.rewards, `${fn}: rewards`);
  const idx = groupIndex(o.groups as ArrayLike<GroupId>, `${fn}: groups`, rewards.length);
  return { a: o, rewards, idx, singleton: o.singleton as SingletonPolicy } satisfies RowArgs<typeof o>;
}
