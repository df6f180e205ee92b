// GEAR's options are declared once in TypeScript (the schema of ts/gear/options.ts) and once natively
// (GEAR_OPTIONS in native/src/cpu/gear_scan.h, which the binding reads by name): the two name the same
// options in the same order, the same enumerator names, leave the same options unset, and accept the same
// values; the defaults, the keys and the docs table come from the schema.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { native } from '../../ts/core/addon.js';
import { GEAR_OPTION_SCHEMA, gearOptionsTable, resolveGearOptions } from '../../ts/gear/options.js';
import type { OptionSpec } from '../../ts/registry/schema.js';
import { ROOT } from '../helpers/child.js';

/** The rows of GEAR_OPTIONS: kind, option name, and the enumerator names of a NAMED row. */
function nativeRows(): { kind: string; name: string; names: string[] }[] {
  const h = readFileSync(join(ROOT, 'native/src/cpu/gear_scan.h'), 'utf8');
  const m = /#define GEAR_OPTIONS\(NUMBER, UNSET, NAMED\)((?:.*\\\n)+.*)/.exec(h);
  expect(m, 'the GEAR_OPTIONS list').not.toBeNull();
  const body = m![1]!.replace(/\/\*[\s\S]*?\*\//g, '');
  return [...body.matchAll(/\b(NUMBER|UNSET|NAMED)\((\w+),([^)]*)\)/g)].map((r) => ({
    kind: r[1]!, name: r[2]!, names: [...r[3]!.matchAll(/"([^"]*)"/g)].map((x) => x[1]!),
  }));
}

const spec = (k: string) => (GEAR_OPTION_SCHEMA as Record<string, OptionSpec>)[k]!;

/** The native scan's verdict on options `o` (every other option as resolved): 'ok' or the error code. */
function nativeVerdict(o: Record<string, unknown>): string {
  try {
    native.gearScan({
      advantages: Float64Array.of(1), offsets: Int32Array.of(0, 3), divergence: Float32Array.of(0.1, 2, 0.3),
      entropy: Float32Array.of(1, 0.5, 2), logratio: Float32Array.of(0, -1, 0.5), options: { ...resolveGearOptions({}), ...o },
    } as never);
    return 'ok';
  } catch (e) {
    return (e as rl.GearError).code;
  }
}
function tsVerdict(o: Record<string, unknown>): string {
  try {
    resolveGearOptions(o as rl.GearOptions);
    return 'ok';
  } catch (e) {
    return (e as rl.GearError).code;
  }
}

describe("GEAR's options, declared once on each side of the boundary", () => {
  it('the native list names the schema\'s options in its order, NAMED rows its enumerations, UNSET rows its options without a default', () => {
    const rows = nativeRows();
    expect(rows.map((r) => r.name)).toEqual([...rl.GEAR_OPTION_KEYS]);
    for (const r of rows) {
      const s = spec(r.name);
      if (r.kind === 'NAMED') expect(r.names, r.name).toEqual(s.values);
      else expect(s.type, r.name).toBe('number');
      expect(r.kind === 'UNSET', r.name).toBe(s.default === undefined);
    }
  });

  it('the native check accepts what the schema accepts, option by option', () => {
    const probes = [-Infinity, -1, -1e-9, 0, 1e-9, 0.5, 1, 1.5, 2, 256, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 1e38,
      3.4028234663852886e38, 1e39, Infinity, NaN];
    const differ: string[] = [];
    let accepted = 0;
    for (const k of rl.GEAR_OPTION_KEYS) {
      const s = spec(k);
      const values: unknown[] = s.values ? [...s.values, 'x', '', s.values[0]!.toUpperCase(), 0, null] : [...probes, '1', null];
      for (const x of values) {
        const want = tsVerdict({ [k]: x });
        // null leaves a threshold unset natively, as undefined does in TypeScript
        const got = nativeVerdict({ [k]: x === null && s.default === undefined ? undefined : x });
        if (want === 'ok') accepted++;
        if (x === null && s.default === undefined) continue;
        if (want !== got) differ.push(`${k} = ${String(x)}: TypeScript ${want}, native ${got}`);
      }
    }
    expect(differ).toEqual([]);
    expect(accepted).toBeGreaterThan(100);
  });

  it('a cap that is 0 in float32 passes the schema and is refused by the scan (its float32 value is the cap)', () => {
    expect(tsVerdict({ klCap: 1e-50 })).toBe('ok');
    expect(nativeVerdict({ klCap: 1e-50 })).toBe('ERR_OPTION');
    expect(() => rl.gear({ advantages: [1], offsets: Int32Array.of(0, 1), divergence: Float32Array.of(1), entropy: Float32Array.of(1),
      options: { klCap: 1e-50 } })).toThrow(/options\.klCap: expected a number > 0 .* in float32, got 1e-50/);
  });

  it('every option reaches the scan: one left out is refused natively, by name', () => {
    for (const k of rl.GEAR_OPTION_KEYS) {
      if (spec(k).default === undefined) continue;
      const { [k]: _left, ...rest } = resolveGearOptions({});
      expect(() => native.gearScan({ advantages: Float64Array.of(1), offsets: Int32Array.of(0, 1), divergence: Float32Array.of(1),
        entropy: Float32Array.of(1), options: rest } as never), k).toThrow(new RegExp(`^options\\.${k}: expected`));
    }
  });

  it('defaults and keys come from the schema', () => {
    expect(Object.keys(rl.GEAR_DEFAULTS)).toEqual(Object.keys(GEAR_OPTION_SCHEMA));
    for (const k of rl.GEAR_OPTION_KEYS) expect(rl.GEAR_DEFAULTS[k], k).toBe(spec(k).default);
    expect(resolveGearOptions({})).toEqual({ ...rl.GEAR_DEFAULTS });
    expect(Object.isFrozen(rl.GEAR_DEFAULTS) && Object.isFrozen(rl.GEAR_OPTION_KEYS)).toBe(true);
  });

  it('docs/gear.md holds the options table made from the schema', () => {
    const doc = readFileSync(join(ROOT, 'docs/gear.md'), 'utf8');
    const m = /<!-- options table \(from GEAR_OPTION_SCHEMA\) -->\n([\s\S]*?)\n<!-- end of options table -->/.exec(doc);
    expect(m, 'the options table of docs/gear.md').not.toBeNull();
    expect(m![1], `docs/gear.md: replace the options table with\n${gearOptionsTable()}\n`).toBe(gearOptionsTable());
  });
});
