/**
 * Argument parsing of the row-level estimators (`{ rewards, groups, singleton, ... }`).
 *
 * @internal
 * @module
 */
import * as v from '../core/validate.js';
import { type GroupId, type GroupIndex, type SingletonPolicy, SINGLETON, groupIndex, objectArg, rewardsArg } from './groups.js';

/** Parsed `{ rewards, groups, singleton }` arguments of a row-level estimator. @internal */
export interface RowArgs {
  a: Record<string, unknown>;
  rewards: Float64Array;
  idx: GroupIndex;
  singleton: SingletonPolicy;
}

/** Parses `{ rewards, groups, singleton }` plus the estimator's own keys. @internal */
export function rowArgs(a: unknown, fn: string, keys: readonly string[]): RowArgs {
  const o = objectArg(a, fn);
  v.knownKeys(o, fn, ['rewards', 'groups', 'singleton', ...keys]);
  const rewards = rewardsArg(o.rewards, `${fn}: rewards`);
  const idx = groupIndex(o.groups as ArrayLike<GroupId>, `${fn}: groups`, rewards.length);
  const singleton = v.enumOpt(o.singleton, `${fn}: singleton`, SINGLETON, 'raw');
  return { a: o, rewards, idx, singleton };
}
