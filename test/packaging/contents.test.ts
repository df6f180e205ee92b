// What `npm pack` puts in the tarball, pinned. A copy of the source tree (tracked and not-ignored files,
// as a clone with local edits has them) gets a fresh dist/ (tsc, as prepack does after emptying dist/),
// then `npm pack --dry-run --json` lists what would ship. Exact names where the list is fixed; per
// directory a pattern where it grows with the code, each tied to its source of truth: dist/ is exactly
// the compiled form of ts/, and the native sources are exactly what native/sources.mjs lists plus the
// headers and .inc fragments they include. A file that appears or disappears fails the test.
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, cleanEnv } from '../helpers/child.js';

const work = mkdtempSync(join(tmpdir(), 'gear-contents-'));
const src = join(work, 'src');
let files: string[] = [];
let pkg: { main: string; types: string; bin: Record<string, string>; exports: Record<string, unknown>; files: string[] };

beforeAll(() => {
  const list = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' })
    .split('\0')
    .filter((f) => f && !/^(node_modules|build|build-[^/]*|dist|dist-[^/]*|prebuilds|docs)\//.test(f) && existsSync(join(ROOT, f)));
  for (const f of list) {
    mkdirSync(dirname(join(src, f)), { recursive: true });
    cpSync(join(ROOT, f), join(src, f));
  }
  symlinkSync(join(ROOT, 'node_modules'), join(src, 'node_modules'), 'dir');
  // tsc exits non-zero on a type error but still emits; what matters here is which files it emits.
  spawnSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], { cwd: src, stdio: 'ignore' });
  expect(existsSync(join(src, 'dist', 'index.js'))).toBe(true);
  const r = spawnSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: src, env: cleanEnv(), encoding: 'utf8', maxBuffer: 64 * 2 ** 20 });
  expect(r.status, r.stderr).toBe(0);
  files = (JSON.parse(r.stdout) as { files: { path: string }[] }[])[0]!.files.map((f) => f.path).sort();
  pkg = JSON.parse(readFileSync(join(src, 'package.json'), 'utf8'));
}, 180_000);

afterAll(() => rmSync(work, { recursive: true, force: true }));

/** The files of the tarball under `dir` (a folder prefix ending in "/"). */
const under = (dir: string) => files.filter((f) => f.startsWith(dir));

describe('npm pack: the file list', () => {
  it('ships exactly: fixed top-level files, ts/, its compiled dist/, the native sources, and prebuilds', () => {
    const fixed = ['CHANGELOG.md', 'CMakeLists.txt', 'LICENSE', 'README.md', 'binding.gyp', 'native/linux-ldflags.mjs', 'native/sources.mjs', 'package.json',
      'ts/gear/report/page.css', 'ts/gear/report/page.html', 'ts/gear/report/page.js'];
    const patterns: [string, RegExp][] = [
      ['TypeScript sources', /^ts\/(?:[a-z_]+\/)*[a-z_.]+\.ts$/],
      ['compiled JS, declarations and their maps', /^dist\/(?:[a-z_]+\/)*[a-z_.]+\.(?:js|d\.ts)(?:\.map)?$/],
      ['public C++ headers', /^native\/include\/gear\/[a-z0-9_]+\.h$/],
      ['native sources and private headers', /^native\/src\/(?:addon|core|cpu|cpu\/simd|compat|cuda)\/[a-z0-9_]+\.(?:cc|h|inc|cu|cuh)$/],
      ['N-API prebuilds and the CUDA prebuild (added by prepack)', /^prebuilds\/(?:linux|darwin|win32)-(?:x64|arm64)\/gear-rl(?:\.glibc|\.musl|\.cuda)?\.node$/],
    ];
    const unexpected = files.filter((f) => !fixed.includes(f) && !patterns.some(([, re]) => re.test(f)));
    expect(unexpected).toEqual([]);
    expect(fixed.filter((f) => !files.includes(f))).toEqual([]);
    // no pattern is left empty but the prebuilds, which only a real `npm pack` (prepack) adds
    for (const [what, re] of patterns.slice(0, 4)) expect(files.some((f) => re.test(f)), what).toBe(true);
  });

  it('dist/ is exactly the compiled form of ts/ (no stale module, no missing one), with maps that resolve', () => {
    const mods = under('ts/').filter((f) => f.endsWith('.ts')).map((f) => f.slice(3, -3));
    const want = mods.flatMap((m) => [`dist/${m}.js`, `dist/${m}.js.map`, `dist/${m}.d.ts`, `dist/${m}.d.ts.map`]).sort();
    expect(under('dist/')).toEqual(want);
    // every source map names a source that ships
    for (const m of ['index', 'cli', 'gear/report/render']) {
      for (const map of [`dist/${m}.js.map`, `dist/${m}.d.ts.map`]) {
        const { sources } = JSON.parse(readFileSync(join(src, map), 'utf8')) as { sources: string[] };
        for (const s of sources) expect(files, `${map} -> ${s}`).toContain(join(dirname(map), s));
      }
    }
  });

  it('the native sources are exactly what native/sources.mjs lists (plus headers and .inc fragments)', async () => {
    const listed = await import(pathToFileURL(join(src, 'native/sources.mjs')).href) as { cpu: string[]; cuda: string[] };
    const compiled = under('native/src/').filter((f) => /\.(cc|cu)$/.test(f));
    expect(compiled).toEqual([...new Set([...listed.cpu, ...listed.cuda])].sort());
  });

  it('every entry point package.json names ships', () => {
    // the files the exports map points at (its values; its keys are subpaths, not files)
    const leaves = (x: unknown): string[] => (typeof x === 'string' ? [x] : Object.values(x as Record<string, unknown>).flatMap(leaves));
    const targets = [pkg.main, pkg.types, ...Object.values(pkg.bin), ...leaves(pkg.exports)]
      .map((p) => p.replace(/^\.\//, ''));
    for (const t of targets) expect(files, t).toContain(t);
    expect(readFileSync(join(src, pkg.bin['gear-rl']!), 'utf8').startsWith('#!/usr/bin/env node\n')).toBe(true);
  });
});
