/**
 * Runs a registered advantage estimator by name and gives every estimator the same result shape:
 * per-token float32 advantages ready for `policyLoss`, whatever the estimator's level.
 *
 * @module
 */
import { fail } from '../core/errors.js';
import * as v from '../core/validate.js';
import { segmentBroadcast } from '../ops/segment.js';
import { resolveOptions } from '../registry/schema.js';
import './builtins.js';
import { type EstimatorLevel, estimators } from './registry.js';

/**
 * The packed-row layout that a row-level estimator's output is broadcast over.
 *
 * @category Advantages
 */
export interface TokenLayout {
  /** Int32Array of length R+1: row r owns tokens `[offsets[r], offsets[r+1])`. */
  offsets: Int32Array;
  /** 0/1 per token; masked tokens get advantage 0. */
  mask?: Uint8Array;
}

/**
 * The one result shape of {@link computeAdvantages}.
 *
 * @category Advantages
 */
export interface AdvantageResult {
  /** The estimator's canonical name. */
  estimator: string;
  /** The estimator's level. */
  level: EstimatorLevel;
  /** Per-token advantages (length N, 0 on masked tokens of a row-level estimator): `policyLoss`'s `advantages`. */
  tokenAdvantages: Float32Array;
  /** Per-row advantages of a row-level estimator (float64); `undefined` for a token-level one. */
  rowAdvantages: Float64Array | undefined;
  /** The estimator's own return value (e.g. GiGPO's or GEAR's result object with its diagnostics). */
  details: unknown;
}

function advantagesOf(out: unknown, what: string): ArrayLike<number> {
  const x = out !== null && typeof out === 'object' && !ArrayBuffer.isView(out) && !Array.isArray(out) && 'advantages' in out
    ? (out as { advantages: unknown }).advantages : out;
  if (!(v.isTypedArray(x) || Array.isArray(x))) fail('ERR_DTYPE', what, 'an array of advantages (or { advantages })', x);
  if (!Array.isArray(x)) v.attached(x, what);
  return x as ArrayLike<number>;
}

/**
 * Runs the estimator registered under `name` on `args` (checked against its options schema first).
 * A row-level estimator's per-row output is broadcast over `layout` (`segmentBroadcast`); a token-level
 * estimator's output is returned as float32, checked against `layout` (or its own `offsets`) when known.
 * The caller never needs to know which estimators are which.
 *
 * @param name an estimator name or alias (see {@link listAdvantageEstimators})
 * @param args the estimator's arguments, e.g. `{ rewards, groups }` for `'grpo'`
 * @param layout packed rows and mask to broadcast over (required for row-level estimators; a token-level
 *   estimator falls back to `args.offsets` / `args.mask`)
 * @returns per-token advantages, per-row ones where they exist, and the estimator's own result
 * @throws GearError `ERR_OPTION` for an unknown name, options outside the schema or a row-level
 *   estimator without `layout`; `ERR_SHAPE` when the output does not fit the layout
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * // any estimator by name: a row-level one is broadcast over the packed rows
 * const layout = { offsets: Int32Array.of(0, 2, 5), mask: Uint8Array.of(1, 1, 1, 0, 1) };
 * const r = rl.computeAdvantages('grpo', { rewards: [1, 0], groups: [0, 0] }, layout);
 * console.log(r.level, r.rowAdvantages, r.tokenAdvantages); // 'row'  [0.707..., -0.707...]  per token, 0 on the tool token
 * console.log(rl.listAdvantageEstimators());
 * ```
 * @category Advantages
 */
export function computeAdvantages(name: string, args: Record<string, unknown> | object, layout?: TokenLayout): AdvantageResult {
  const def = estimators.get(name);
  if (args === null || typeof args !== 'object') fail('ERR_OPTION', `${def.name}: args`, 'an arguments object', args);
  // The arguments and the layout are read once, before anything is checked: the estimator and the
  // broadcast see the values the checks saw. A built-in estimator reads its arguments against its
  // schema itself; a user-registered one gets them checked and defaulted here.
  const a: Record<string, unknown> = { ...args };
  let offsets: unknown, mask: unknown;
  if (layout !== undefined) {
    v.knownKeys(layout, 'layout', ['offsets', 'mask']);
    offsets = layout.offsets;
    mask = layout.mask;
  } else if (def.level === 'token' && a.offsets !== undefined) {
    offsets = a.offsets;
    mask = a.mask;
  } else if (def.level === 'row') {
    fail('ERR_OPTION', `${def.name}: layout`, '{ offsets, mask? } to broadcast row advantages over', undefined);
  }
  const input = estimators.isBuiltin(def) ? a : { ...a, ...resolveOptions(def.options, a, def.name) };
  let n: number | undefined;
  if (offsets !== undefined) {
    const off = v.i32(offsets, 'layout.offsets');
    n = off[off.length - 1];
    if (n !== undefined) v.offsets(off, 'layout.offsets', n);
  }
  const details = def.compute(input);
  const adv = advantagesOf(details, `${def.name}: result`);
  if (def.level === 'row') {
    const off = offsets as Int32Array;
    const rows = off.length - 1;
    if (adv.length !== rows) fail('ERR_SHAPE', `${def.name}: result.length`, `the row count ${rows}`, adv.length);
    const rowAdvantages = v.isTyped(adv, Float64Array) ? adv : Float64Array.from(adv);
    const tokenAdvantages = segmentBroadcast(rowAdvantages, off, mask as Uint8Array | undefined);
    return { estimator: def.name, level: 'row', tokenAdvantages, rowAdvantages, details };
  }
  if (n !== undefined && adv.length !== n) fail('ERR_SHAPE', `${def.name}: result.length`, `the token count ${n}`, adv.length);
  const tokenAdvantages = v.isTyped(adv, Float32Array) ? adv : Float32Array.from(adv);
  return { estimator: def.name, level: 'token', tokenAdvantages, rowAdvantages: undefined, details };
}
