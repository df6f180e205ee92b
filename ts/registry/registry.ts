/**
 * One registry for every pluggable kind (advantage estimators, policy losses, ...): names and aliases,
 * built-ins that cannot be replaced or removed, user entries that can, lookups whose error lists the
 * known names, and an option schema per entry (checked and copied at registration).
 *
 * @internal
 * @module
 */
import { fail } from '../core/errors.js';
import * as v from '../core/validate.js';
import { type OptionsSchema, checkSchema } from './schema.js';

/** What every registered definition has. @internal */
export interface Named {
  name: string;
  aliases?: readonly string[];
  description?: string;
  options?: OptionsSchema;
}

/** How a registry names itself in error messages, and what its definitions hold. @internal */
export interface RegistryConfig<D extends Named> {
  /** The registering function, e.g. `'registerPolicyLoss'`. */
  register: string;
  /** The removing function, e.g. `'unregisterPolicyLoss'`. */
  unregister: string;
  /** What a failed lookup names, e.g. `'kind'`. */
  lookup: string;
  /** What one entry is called, e.g. `'kind'` ("not a built-in kind"). */
  noun: string;
  /** Every field a definition may have (`name`, `aliases`, `description` and `options` included). */
  fields: readonly string[];
  /** Checks the kind's own fields of a definition (read once into `def`); name, aliases and options are checked here. */
  check(def: D, builtin: boolean): void;
}

/** A registry of definitions of one kind. @internal */
export interface Registry<D extends Named> {
  /** Adds a definition (read once and frozen); `replace` overwrites a user entry of the same name. */
  add(def: unknown, builtin: boolean, replace: boolean): Readonly<D>;
  /** Removes a user entry by its canonical name; false when there is none. */
  remove(name: unknown): boolean;
  /**
   * The definition under a name or alias, or a GearError `ERR_OPTION` listing the known names; with
   * `only`, among the definitions it admits (and listing theirs).
   */
  get(name: unknown, only?: (def: Readonly<D>) => boolean): Readonly<D>;
  /** The definition under a name or alias, or undefined. */
  find(name: unknown): Readonly<D> | undefined;
  /** Whether the definition is a built-in one. */
  isBuiltin(def: Readonly<D>): boolean;
  /** Canonical names, built-ins first, in registration order. */
  list(): string[];
  /** Every accepted name (canonical names and aliases). */
  names(): string[];
  /** Every definition, in registration order. */
  all(): Readonly<D>[];
}

const NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/**
 * Creates a registry.
 *
 * @internal
 */
export function createRegistry<D extends Named>(cfg: RegistryConfig<D>): Registry<D> {
  const entries = new Map<string, { def: Readonly<D>; builtin: boolean }>();  // canonical name -> entry
  const names = new Map<string, string>();                                       // name or alias -> canonical name
  const builtins = new WeakSet<object>();

  function read(def: unknown, builtin: boolean): D {
    if (def === null || typeof def !== 'object') fail('ERR_OPTION', cfg.register, 'a definition object', def);
    v.knownKeys(def, cfg.register, cfg.fields);
    // every field read once, in a fixed order (methods of a class instance included): a getter cannot
    // change a checked field afterwards
    const d: Record<string, unknown> = {};
    for (const f of cfg.fields) {
      const x = (def as Record<string, unknown>)[f];
      if (x !== undefined) d[f] = x;
    }
    if (d.aliases !== undefined && !Array.isArray(d.aliases)) fail('ERR_OPTION', `${cfg.register}: aliases`, 'an array of names', d.aliases);
    const aliases = d.aliases === undefined ? [] : Array.from(d.aliases as unknown[]);
    for (const n of [d.name, ...aliases]) {
      if (typeof n !== 'string' || !NAME.test(n)) fail('ERR_OPTION', `${cfg.register}: name`, 'a name of letters, digits, _ - . (1 to 64)', n);
    }
    d.aliases = Object.freeze(aliases);
    if (d.description !== undefined && typeof d.description !== 'string') {
      fail('ERR_OPTION', `${cfg.register}(${d.name as string}): description`, 'a string', d.description);
    }
    cfg.check(d as unknown as D, builtin);
    const options = checkSchema(d.options, `${cfg.register}(${d.name as string}): options`);
    if (options === undefined) delete d.options;
    else d.options = options;
    return d as unknown as D;
  }

  function removeEntry(name: string): void {
    const e = entries.get(name);
    if (e === undefined) return;
    for (const n of [name, ...(e.def.aliases ?? [])]) names.delete(n);
    entries.delete(name);
  }

  return {
    add(def, builtin, replace) {
      const d = read(def, builtin);
      for (const n of [d.name, ...(d.aliases ?? [])]) {
        const owner = names.get(n);
        if (owner === undefined || (replace && owner === d.name)) continue;
        fail('ERR_OPTION', `${cfg.register}: name`, `a name not already registered${entries.get(owner)!.builtin ? ' (built-in)' : ''}`, n);
      }
      const prev = entries.get(d.name);
      if (prev !== undefined) {
        if (prev.builtin) fail('ERR_OPTION', `${cfg.register}: name`, `not a built-in ${cfg.noun}`, d.name);
        removeEntry(d.name);
      }
      const frozen = Object.freeze(d);
      entries.set(d.name, { def: frozen, builtin });
      if (builtin) builtins.add(frozen);
      for (const n of [d.name, ...(d.aliases ?? [])]) names.set(n, d.name);
      return frozen;
    },
    remove(name) {
      const canonical = typeof name === 'string' ? names.get(name) : undefined;
      if (canonical === undefined || canonical !== name) return false;
      if (entries.get(canonical)!.builtin) fail('ERR_OPTION', cfg.unregister, `a user-registered ${cfg.noun}`, name);
      removeEntry(canonical);
      return true;
    },
    get(name, only) {
      const admits = (c: string) => only === undefined || only(entries.get(c)!.def);
      const canonical = typeof name === 'string' ? names.get(name) : undefined;
      if (canonical === undefined || !admits(canonical)) {
        const known = [...names].filter(([, c]) => admits(c)).map(([a]) => `'${a}'`);
        fail('ERR_OPTION', cfg.lookup, `one of ${known.join(', ')}`, name);
      }
      return entries.get(canonical)!.def;
    },
    find(name) {
      const canonical = typeof name === 'string' ? names.get(name) : undefined;
      return canonical === undefined ? undefined : entries.get(canonical)!.def;
    },
    isBuiltin: (def) => builtins.has(def),
    list: () => [...entries.keys()],
    names: () => [...names.keys()],
    all: () => [...entries.values()].map((e) => e.def),
  };
}

/**
 * The `replace` flag of a register call's options (`undefined` or an object; anything else `ERR_OPTION`).
 *
 * @internal
 */
export function replaceOpt(opts: unknown, what: string): boolean {
  if (opts === undefined) return false;
  if (opts === null || typeof opts !== 'object') fail('ERR_OPTION', `${what}: opts`, 'an options object', opts);
  const replace = (opts as { replace?: unknown }).replace;
  if (replace !== undefined && typeof replace !== 'boolean') fail('ERR_OPTION', `${what}: opts.replace`, 'a boolean', replace);
  return replace === true;
}
