// How many files an op spans, walked from the op lists (docs/extending.md, "A native op"): a backend-table
// op with a device kernel lives in at most 8 files (its line in gear/backend.h, its checked entry in
// core/backend.cc, the CPU driver and kernel body, the device kernel, the binding, the TypeScript wrapper,
// the export), a vectorised op in at most 7; no other native file defines or declares it, and no per-ISA
// file, table declaration or dispatcher entry exists for any family (isa_kernels.inc does that work).
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/child.js';

const read = (f: string) => readFileSync(join(ROOT, f), 'utf8');
/** Source without comments: a name in a comment is not a place. */
const code = (f: string) => read(f).replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '');
const walk = (d: string): string[] => readdirSync(join(ROOT, d), { withFileTypes: true })
  .flatMap((e) => (e.isDirectory() ? walk(join(d, e.name)) : [join(d, e.name)]));
const NATIVE = [...walk('native/include'), ...walk('native/src')].filter((f) => /\.(h|cc|cu|cuh|inc)$/.test(f));
const BACKEND = code('native/include/gear/backend.h');
const opList = (name: string) => {
  const m = new RegExp(`#define ${name}\\(X\\)([\\s\\S]*?)(?:\\n\\s*\\n|$)`).exec(BACKEND);
  expect(m, name).not.toBeNull();
  return [...m![1]!.matchAll(/X\((\w+)/g)].map((x) => x[1]!);
};
const OPS = opList('GEAR_BACKEND_OPS');
const DEVICE = new Set(opList('GEAR_DEVICE_OPS'));
const camel = (s: string) => s.replace(/_(\w)/g, (_, c: string) => c.toUpperCase());
/** The family of a backend op: the CPU driver that defines cpu::op. */
const familyOf = (op: string) => {
  const drivers = readdirSync(join(ROOT, 'native/src/cpu')).filter((f) => f.endsWith('.cc') &&
    new RegExp(`\\bStatus\\s+${op}\\s*\\(`).test(code(`native/src/cpu/${f}`)));
  expect(drivers, `the CPU driver of ${op}`).toHaveLength(1);
  return drivers[0]!.replace(/\.cc$/, '');
};
/** The TypeScript file that declares the op <name> (asyncOp('<name>', ...) or syncOp: ts/core/invoke.ts). */
const wrapperOf = (name: string) => {
  const files = walk('ts').filter((f) => f.endsWith('.ts') && new RegExp(`\\b(?:async|sync)Op\\(\\s*'${name}'`).test(code(f)));
  expect(files, `the wrapper declaring ${name}`).toHaveLength(1);
  return files[0]!;
};

/** The files of a backend op, each checked to hold what it must. */
function backendPlaces(op: string): string[] {
  const fam = familyOf(op);
  const name = camel(op);
  const places = ['native/include/gear/backend.h', 'native/src/core/backend.cc', `native/src/cpu/${fam}.cc`];
  expect(code('native/src/core/backend.cc'), `${op}: its checked entry`).toMatch(new RegExp(`\\bStatus\\s+${op}\\s*\\(`));
  if (existsSync(join(ROOT, `native/src/cpu/${fam}_kernels.inc`))) places.push(`native/src/cpu/${fam}_kernels.inc`);
  if (DEVICE.has(op)) {
    places.push(`native/src/cuda/${fam}.cu`);
    expect(code(`native/src/cuda/${fam}.cu`), `${op}: its device kernel`).toMatch(new RegExp(`\\bStatus\\s+${op}\\s*\\(`));
  }
  const binding = `native/src/addon/${fam}_binding.cc`;
  expect(code(binding), `${op}: its binding calls it`).toMatch(new RegExp(`\\b${op}\\(`));
  places.push(binding);
  const wrapper = wrapperOf(name);
  places.push(wrapper);
  if (new RegExp(`\\b${name}\\b`).test(code('ts/index.ts'))) places.push('ts/index.ts');
  return places;
}

describe('the files an op spans', () => {
  it('walks the op lists of gear/backend.h', () => {
    expect(OPS).toContain('token_stats');
    expect([...DEVICE].every((op) => OPS.includes(op))).toBe(true);
    expect(DEVICE.size).toBeGreaterThanOrEqual(5);
  });

  for (const op of OPS) {
    const limit = DEVICE.has(op) ? 8 : 7;
    it(`${op}: at most ${limit} files, and no other native file defines or declares it`, () => {
      const places = backendPlaces(op);
      expect(places.length, places.join('\n')).toBeLessThanOrEqual(limit);
      // definitions and declarations of `op` anywhere else in native code (the list generates the rest)
      const defining = NATIVE.filter((f) => new RegExp(`\\bStatus\\s+${op}\\s*\\(`).test(code(f)));
      expect(defining.sort()).toEqual(places.filter((f) => defining.includes(f)).sort());
      expect(defining.every((f) => places.includes(f)), defining.join(', ')).toBe(true);
    });
  }

  it('every vectorised family: one driver compiling its kernel body for every ISA, no per-ISA file, no dispatcher entry', () => {
    const families = readdirSync(join(ROOT, 'native/src/cpu')).filter((f) => f.endsWith('_kernels.inc') && f !== 'isa_kernels.inc')
      .map((f) => f.replace(/_kernels\.inc$/, ''));
    expect(families.sort()).toEqual(['divergence', 'optim', 'policy_loss', 'segment', 'sparse_divergence', 'token_stats']);
    const cpuFiles = readdirSync(join(ROOT, 'native/src/cpu'));
    expect(cpuFiles.filter((f) => /_(baseline|avx2|avx512|neon)\.cc$/.test(f))).toEqual([]);
    const dispatch = code('native/src/cpu/dispatch.cc');
    for (const fam of families) {
      const driver = `native/src/cpu/${fam}.cc`;
      expect(read(driver), driver).toMatch(new RegExp(`#define GEAR_KERNELS "${fam}_kernels\\.inc"\\s*\\n(?:#define[^\\n]*\\n)*#include "isa_kernels\\.inc"`));
      expect(code(`native/src/cpu/${fam}_kernels.inc`), `${fam}: its table`).toMatch(/\bkKernels\s*=/);
      expect(dispatch.includes(fam), `dispatch.cc names ${fam}`).toBe(false);
      // header, driver, body, kernel-interface header (when the driver and body share types), binding, wrapper
      const files = [`native/include/gear/${fam}.h`, driver, `native/src/cpu/${fam}_kernels.inc`, `native/src/cpu/${fam}_kernels.h`,
        `native/src/addon/${fam}_binding.cc`].filter((f) => existsSync(join(ROOT, f)));
      expect(files.length + 2, files.join('\n')).toBeLessThanOrEqual(8);  // + the TypeScript wrapper and its export
    }
  });

  it('a driver\'s own fragments (<family>_<step>.inc) belong to its driver: included by it and by nothing else', () => {
    const cpu = readdirSync(join(ROOT, 'native/src/cpu'));
    const families = cpu.filter((f) => f.endsWith('_kernels.inc') && f !== 'isa_kernels.inc').map((f) => f.replace(/_kernels\.inc$/, ''));
    const steps = cpu.filter((f) => f.endsWith('.inc') && !f.endsWith('_kernels.inc') && families.some((fam) => f.startsWith(`${fam}_`)));
    expect(steps.length).toBeGreaterThanOrEqual(3);
    for (const f of steps) {
      const fam = families.filter((x) => f.startsWith(`${x}_`)).sort((a, b) => b.length - a.length)[0]!;
      // included directly, or as the kernel body's prelude (optim_fma.inc)
      const includers = NATIVE.filter((g) => code(g).includes(`#include "${f}"`) || code(g).includes(`#define GEAR_KERNELS_PRELUDE "${f}"`));
      expect(includers, f).toEqual([`native/src/cpu/${fam}.cc`]);
    }
  });
});
