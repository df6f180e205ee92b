/**
 * Option schemas of registered estimators and losses: each entry names an option, its type, its bounds
 * and its default, so that built-in and user-defined kinds are read and checked by one reader
 * ({@link resolveOptions}) with the same coded `ERR_OPTION` / `ERR_DTYPE` errors, and a kind's
 * defaults and bounds are written once, in its schema.
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
  /**
   * `null` is accepted as a value of its own (as "none", say), besides the type.
   *
   * @defaultValue `false`
   */
  nullable?: boolean;
  /**
   * The value an absent option takes (a number, string, boolean or `null`); it must satisfy the spec.
   * Without one an absent option stays `undefined`.
   */
  default?: number | string | boolean | null;
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
const SPEC_FIELDS = ['type', 'required', 'min', 'max', 'minOpen', 'maxOpen', 'int', 'finite', 'values', 'nullable', 'default', 'description'];

/**
 * Checks that `schema` is a well-formed {@link OptionsSchema} (at registration) and returns a frozen copy,
 * each spec read once, so that later changes to the caller's objects do not reach the registry.
 *
 * @param schema the schema to check (`undefined` passes)
 * @param what name used in error messages
 * @throws GearError `ERR_OPTION` on a malformed schema
 */
export function checkSchema(schema: unknown, what: string): OptionsSchema | undefined {
  if (schema === undefined) return undefined;
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) fail('ERR_OPTION', what, 'an object of option specs', schema);
  const out: Record<string, OptionSpec> = {};
  for (const [k, s] of Object.entries(schema as Record<string, unknown>)) {
    if (s === null || typeof s !== 'object') fail('ERR_OPTION', `${what}.${k}`, 'an option spec object', s);
    const spec = { ...s } as Record<string, unknown>;
    v.knownKeys(spec, `${what}.${k}`, SPEC_FIELDS);
    v.enumOpt(spec.type, `${what}.${k}.type`, TYPES, 'any');
    if (spec.type === undefined) fail('ERR_OPTION', `${what}.${k}.type`, `one of ${TYPES.join(', ')}`, undefined);
    for (const b of ['min', 'max'] as const) {
      if (spec[b] !== undefined && (typeof spec[b] !== 'number' || Number.isNaN(spec[b]))) {
        fail('ERR_OPTION', `${what}.${k}.${b}`, 'a number', spec[b]);
      }
    }
    for (const b of ['required', 'minOpen', 'maxOpen', 'int', 'finite', 'nullable'] as const) {
      if (spec[b] !== undefined && typeof spec[b] !== 'boolean') fail('ERR_OPTION', `${what}.${k}.${b}`, 'a boolean', spec[b]);
    }
    if (spec.values !== undefined) {
      const values = Array.isArray(spec.values) ? [...(spec.values as unknown[])] : undefined;
      if (values === undefined || values.some((x) => typeof x !== 'string')) fail('ERR_OPTION', `${what}.${k}.values`, 'an array of strings', spec.values);
      spec.values = Object.freeze(values);
    }
    const d = spec.default;
    if (d !== undefined) {
      if (!(d === null || typeof d === 'number' || typeof d === 'string' || typeof d === 'boolean')) {
        fail('ERR_OPTION', `${what}.${k}.default`, 'a number, string, boolean or null', d);
      }
      // the default must pass its own spec
      checkValue(spec as unknown as OptionSpec, d, `${what}.${k}.default`);
    }
    out[k] = Object.freeze(spec) as unknown as OptionSpec;
  }
  return Object.freeze(out);
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

/** Checks one given (not `undefined`) value against its spec; `what` names it in messages. */
function checkValue(spec: OptionSpec, x: unknown, what: string): void {
  if (x === null && spec.nullable === true) return;
  if (spec.type === 'number') {
    v.numOpt(x, what, 0, spec);  // a spec holds a number's bounds under the same names
  } else if (spec.type === 'string' && spec.values !== undefined) {
    v.enumOpt(x, what, spec.values, spec.values[0]!);
  } else if (!typeOk(x, spec.type)) {
    fail(spec.type === 'typedArray' ? 'ERR_DTYPE' : 'ERR_OPTION', what, `a value of type ${spec.type}`, x);
  }
}

/**
 * The options of an {@link OptionsSchema} resolved: each one's checked value, or its default.
 *
 * @internal
 */
export type ResolvedOptions<S extends OptionsSchema> = {
  -readonly [K in keyof S]: SpecValue<S[K]> | (S[K] extends { default: unknown } | { required: true } ? never : undefined)
};
/** @internal The value type of one spec. */
export type SpecValue<S extends OptionSpec> =
  | (S['type'] extends 'number' ? number
    : S['type'] extends 'boolean' ? boolean
    : S['type'] extends 'string' ? (S extends { values: readonly (infer V)[] } ? V : string)
    : unknown)
  | (S extends { nullable: true } ? null : never);

/**
 * Reads and checks the options named in `schema` from `obj` (a plain object already read once by the
 * caller): each option's value is checked against its spec and an absent one takes its default. Keys
 * not in the schema are left to the caller. Wrong types throw `ERR_DTYPE` (typed arrays) or
 * `ERR_OPTION`; out-of-range numbers, strings outside `values` and missing required options throw
 * `ERR_OPTION`.
 *
 * @internal
 * @param schema the option specs (`undefined`: nothing to read)
 * @param obj the arguments
 * @param what name used in error messages, e.g. the estimator's name (`"what: key"`; `''`: the key alone;
 *   ending with `.`, a path: `"options."` names `"options.key"`)
 * @param opts `foreign`: options checked when given but never required nor defaulted (another kind's)
 * @returns a new object with one entry per schema key
 */
export function resolveOptions<S extends OptionsSchema>(
  schema: S | undefined, obj: Readonly<Record<string, unknown>>, what: string, opts: { foreign?: ReadonlySet<string> } = {},
): ResolvedOptions<S> {
  if (schema === undefined) return {} as ResolvedOptions<S>;
  const { keys, specs, names, defaults } = optionNames(schema, what);
  const foreign = opts.foreign;
  // every key with its default (in the schema's order), then the values given
  const out: Record<string, unknown> = foreign === undefined ? { ...defaults } : {};
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i]!;
    const spec = specs[i]!;
    const x = obj[k];
    if (x === undefined) {
      if (foreign?.has(k) === true) continue;
      if (spec.required === true) fail('ERR_OPTION', names[i]!, 'a value (required)', undefined);
      if (foreign !== undefined) out[k] = spec.default;
      continue;
    }
    checkValue(spec, x, names[i]!);
    out[k] = x;
  }
  return out as ResolvedOptions<S>;
}

/**
 * A schema's keys, their names in messages for a given `what` and their defaults, kept per schema (a
 * registered schema is frozen; a kind's options are resolved on every call).
 */
interface SchemaNames {
  keys: readonly string[];
  specs: readonly OptionSpec[];
  names: readonly string[];
  defaults: Readonly<Record<string, unknown>>;
}
const NAMES = new WeakMap<OptionsSchema, Map<string, SchemaNames>>();
function optionNames(schema: OptionsSchema, what: string): SchemaNames {
  let byWhat = NAMES.get(schema);
  if (byWhat === undefined) NAMES.set(schema, (byWhat = new Map()));
  let kn = byWhat.get(what);
  if (kn === undefined) {
    const keys = Object.keys(schema);
    kn = {
      keys, specs: keys.map((k) => schema[k]!), names: keys.map((k) => (what === '' || what.endsWith('.') ? `${what}${k}` : `${what}: ${k}`)),
      defaults: Object.fromEntries(keys.map((k) => [k, schema[k]!.default])),
    };
    if (Object.isFrozen(schema) && byWhat.size < 64) byWhat.set(what, kn);
  }
  return kn;
}

/**
 * Reads the single arguments object of a kind's function once: refuses a non-object with `ERR_OPTION`,
 * copies its own enumerable properties (each getter runs once, in property order) and rejects keys
 * outside `known`. Everything after works on the copy, so a getter cannot change what was checked.
 *
 * @internal
 */
export function readArgs(a: unknown, what: string, known: readonly string[]): Record<string, unknown> {
  if (typeof a !== 'object' || a === null || Array.isArray(a)) fail('ERR_OPTION', what, 'an options object', a);
  const o = { ...a } as Record<string, unknown>;
  v.knownKeys(o, what, known);
  return o;
}
