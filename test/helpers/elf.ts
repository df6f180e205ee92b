// What a Linux binary asks of the system at load: the symbol versions it requires (.gnu.version_r,
// which ld.so checks before anything runs), its DT_NEEDED libraries and its undefined dynamic symbols.
// Read with binutils (readelf/objdump), which read foreign-architecture ELF files as well.
import { execFileSync } from 'node:child_process';

export interface ElfLoadNeeds {
  /** Required symbol versions, `libc.so.6: GLIBC_2.17` style (file, then version). */
  versions: { file: string; version: string }[];
  /** DT_NEEDED entries. */
  needed: string[];
  /** Undefined dynamic symbols with their version (`''` when unversioned, e.g. Node's napi_*). */
  undefinedSymbols: { name: string; version: string }[];
}

const run = (cmd: string, args: string[]) => execFileSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 * 2 ** 20 });

export function elfLoadNeeds(file: string): ElfLoadNeeds {
  const versions: ElfLoadNeeds['versions'] = [];
  const v = run('readelf', ['-V', '-W', file]);
  const at = v.indexOf(".gnu.version_r'");  // "Version needs section '.gnu.version_r' contains N entries:"
  let current = '';
  for (const line of at < 0 ? [] : v.slice(at).split('\n')) {
    const f = /File: (\S+)/.exec(line);
    if (f) current = f[1]!;
    const n = /Name: (\S+)/.exec(line);
    if (n) versions.push({ file: current, version: n[1]! });
  }
  const needed = [...run('readelf', ['-d', '-W', file]).matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1]!);
  // objdump -T: "0000000000000000      DF *UND*	0000000000000000 (GLIBC_2.2.5) exp" ("Base" when unversioned)
  const undefinedSymbols = run('objdump', ['-T', file]).split('\n').filter((l) => l.includes('*UND*')).map((l) => {
    const parts = l.trim().split(/\s+/);
    const name = parts[parts.length - 1]!;
    const ver = parts[parts.length - 2]!.replace(/[()]/g, '');
    return { name, version: ver === 'Base' ? '' : ver };
  });
  return { versions, needed, undefinedSymbols };
}

/** The numeric parts of GLIBC_2.2.5 -> [2, 2, 5]. */
export function versionNumbers(v: string): number[] {
  return v.replace(/^[A-Z_]+?_(?=\d)/, '').split('.').map(Number);
}

/** a > b for dotted versions ([2, 29] > [2, 28, 9]). */
export function versionAbove(a: number[], b: number[]): boolean {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const x = a[i] ?? 0, y = b[i] ?? 0;
    if (x !== y) return x > y;
  }
  return false;
}

/** Libraries a linux binary of this package may need: the C library's own files, nothing from GCC. */
export const ALLOWED_NEEDED = /^(libc\.so\.6|libm\.so\.6|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|ld-linux-(x86-64|aarch64)\.so\.[12])$/;

/**
 * Every reason `file` would not load on glibc `floor` (default 2.28) without libstdc++/libgcc_s: required
 * versions above the floor, any GLIBCXX / CXXABI / GCC version, a DT_NEEDED outside ALLOWED_NEEDED, and an
 * undefined __wrap_ / __real_ symbol (a name in the link's --wrap list without its compat wrapper).
 * Empty when the binary is fine.
 */
export function glibcFloorProblems(file: string, floor = [2, 28]): string[] {
  const n = elfLoadNeeds(file);
  const problems: string[] = [];
  for (const { file: lib, version } of n.versions) {
    if (/^GLIBC_\d/.test(version)) {
      if (versionAbove(versionNumbers(version), floor)) problems.push(`${lib}: ${version} > GLIBC_${floor.join('.')}`);
    } else if (/^(GLIBCXX|CXXABI|GCC)_/.test(version)) {
      problems.push(`${lib}: ${version} (C++ runtime version; libstdc++/libgcc must be linked statically)`);
    }
  }
  for (const lib of n.needed) if (!ALLOWED_NEEDED.test(lib)) problems.push(`DT_NEEDED ${lib}`);
  for (const s of n.undefinedSymbols) {
    if (/^__(wrap|real)_/.test(s.name)) problems.push(`undefined ${s.name} (a --wrap name without its wrapper)`);
  }
  return problems;
}

/** `GLIBC_2.2.5: exp, log` lines of the versions the binary's undefined symbols ask for, newest first. */
export function versionReport(file: string): string[] {
  const by = new Map<string, string[]>();
  for (const s of elfLoadNeeds(file).undefinedSymbols) {
    if (!s.version) continue;
    by.set(s.version, [...(by.get(s.version) ?? []), s.name]);
  }
  return [...by.entries()]
    .sort(([a], [b]) => (versionAbove(versionNumbers(a), versionNumbers(b)) ? -1 : 1))
    .map(([v, names]) => `${v}: ${names.sort().join(', ')}`);
}
