/**
 * Option schemas of registered estimators and losses: each entry names an option, its type and its
 * bounds, so that user-defined plug-ins get the same coded `ERR_OPTION` / `ERR_DTYPE` errors as the
 * built-ins without writing their own checks.
 *
 * @module
 */
import { fail } from '../core/errors.js';
import * as v from '../core/validate.js';

/**
 * The type of one option in an {@link OptionsSchema}.
 *
 * @category Registry
 */
export type OptionType = 'number' | 'boolean' | 'string' | 'array' | 'typedArray' | 'object' | 'function' | 'any';

/**
 * One option of an {@link OptionsSchema}.
 *
 * @category Registry
 */
export interface OptionSpec {
  /** The accepted type (`'typedArray'`: any typed array; `'any'`: anything but `undefined` when required). */
  type: OptionType;
  /**
   * Whether the option must be given (default false).
   *
   * @defaultValue `false`
   */
  required?: boolean;
  /** `'number'`: lower bound (inclusive unless `minOpen`). */
  min?: number;
  /** `'number'`: upper bound (inclusive unless `maxOpen`). */
  max?: number;
  /**
   * `'number'`: exclusive lower bound.
   *
   * @defaultValue `false`
   */
  minOpen?: boolean;
  /**
   * `'number'`: exclusive upper bound.
   *
   * @defaultValue `false`
   */
  maxOpen?: boolean;
  /**
   * `'number'`: must be an integer.
   *
   * @defaultValue `false`
   */
  int?: boolean;
  /**
   * `'number'`: must be finite.
   *
   * @defaultValue `false`
   */
  finite?: boolean;
  /** `'string'`: the accepted values (any string when absent). */
  values?: readonly string[];
  /** One line for listings and docs. */
  description?: string;
}

/**
 * Option name → its {@link OptionSpec}.
 *
 * @category Registry
 */
export type OptionsSchema = Readonly<Record<string, OptionSpec>>;

const TYPES: readonly OptionType[] = ['number', 'boolean', 'string', 'array', 'typedArray', 'object', 'function', 'any'];

/**
 * Checks that `schema` is a well-formed {@link OptionsSchema} (used at registration time).
 *
 * @param schema the schema to check (`undefined` passes)
 * @param what name used in error messages
 * @throws GearError `ERR_OPTION` on a malformed schema
 */
export function checkSchema(schema: unknown, what: string): void {
  if (schema === undefined) return;
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) fail('ERR_OPTION', what, 'an object of option specs', schema);
  for (const [k, s] of Object.entries(schema as Record<string, unknown>)) {
    if (s === null || typeof s !== 'object') fail('ERR_OPTION', `${what}.${k}`, 'an option spec object', s);
    const spec = s as Record<string, unknown>;
    v.knownKeys(spec, `${what}.${k}`, ['type', 'required', 'min', 'max', 'minOpen', 'maxOpen', 'int', 'finite', 'values', 'description']);
    v.enumOpt(spec.type, `${what}.${k}.type`, TYPES, 'any');
    if (spec.type === undefined) fail('ERR_OPTION', `${what}.${k}.type`, `one of ${TYPES.join(', ')}`, undefined);
    for (const b of ['min', 'max'] as const) {
      if (spec[b] !== undefined && (typeof spec[b] !== 'number' || Number.isNaN(spec[b]))) {
        fail('ERR_OPTION', `${what}.${k}.${b}`, 'a number', spec[b]);
      }
    }
    if (spec.values !== undefined && (!Array.isArray(spec.values) || spec.values.some((x) => typeof x !== 'string'))) {
      fail('ERR_OPTION', `${what}.${k}.values`, 'an array of strings', spec.values);
    }
  }
}

function typeOk(x: unknown, t: OptionType): boolean {
  switch (t) {
    case 'number': return typeof x === 'number';
    case 'boolean': return typeof x === 'boolean';
    case 'string': return typeof x === 'string';
    case 'array': return Array.isArray(x);
    case 'typedArray': return v.isTypedArray(x);
    case 'object': return x !== null && typeof x === 'object';
    case 'function': return typeof x === 'function';
    default: return true;
  }
}

/**
 * Validates the options named in `schema` on `obj` (keys not in the schema are left to the caller).
 * Wrong types throw `ERR_DTYPE` (typed arrays) or `ERR_OPTION`; out-of-range numbers, strings outside
 * `values` and missing required options throw `ERR_OPTION`.
 *
 * @param schema the option specs (`undefined`: nothing to check)
 * @param obj the options object
 * @param what name used in error messages, e.g. the estimator's name
 */
export function validateOptions(schema: OptionsSchema | undefined, obj: Record<string, unknown>, what: string): void {
  if (schema === undefined) return;
  for (const [k, spec] of Object.entries(schema)) {
    const x = obj[k];
    if (x === undefined) {
      if (spec.required === true) fail('ERR_OPTION', `${what}: ${k}`, 'a value (required)', undefined);
      continue;
    }
    if (!typeOk(x, spec.type)) fail(spec.type === 'typedArray' ? 'ERR_DTYPE' : 'ERR_OPTION', `${what}: ${k}`, `a value of type ${spec.type}`, x);
    if (spec.type === 'number') {
      const { min, max, minOpen, maxOpen, int, finite } = spec;
      v.numOpt(x, `${what}: ${k}`, 0, { min, max, minOpen, maxOpen, int, finite });
    } else if (spec.type === 'string' && spec.values !== undefined) {
      v.enumOpt(x, `${what}: ${k}`, spec.values, spec.values[0]!);
    }
  }
}
