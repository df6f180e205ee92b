// The package as a consumer reaches it by name, installed from a tarball of this tree (`npm pack`
// without the prepack builds, so no prebuild: GEAR_RL_ADDON points the installed copy at this tree's
// build): ESM `import`, CommonJS `require` (Node >= 20.19 loads the ES module through the `default`
// export condition), a TypeScript project compiled with `module: nodenext` to CommonJS and to ESM that
// type-checks against the shipped declarations and runs, the same for each subpath of `exports`, and
// the package linters (publint and arethetypeswrong) on the same tarball.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, cleanEnv } from '../helpers/child.js';

const PKG = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { name: string; version: string };
const work = mkdtempSync(join(tmpdir(), 'gear-consumer-'));
const project = join(work, 'app');
const ADDON = join(ROOT, 'build', 'Release', 'gear_rl.node');
let tarball = '';

function sh(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = cleanEnv()) {
  const r = spawnSync(cmd, args, { cwd, env, encoding: 'utf8', maxBuffer: 64 * 2 ** 20, timeout: 240_000 });
  return { status: r.status, stdout: r.stdout ?? '', stderr: r.stderr ?? '', text: `${r.stdout ?? ''}\n${r.stderr ?? ''}` };
}

beforeAll(() => {
  // dist/ is what ships; the suite's pretest compiles it, this compiles it when run alone.
  if (!existsSync(join(ROOT, 'dist', 'index.d.ts'))) sh(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], ROOT);
  expect(existsSync(ADDON), 'a local build of the addon (build/Release/gear_rl.node)').toBe(true);
  const packed = sh('npm', ['pack', '--ignore-scripts', '--pack-destination', work], ROOT);
  expect(packed.status, packed.text.slice(-2000)).toBe(0);
  tarball = join(work, `${PKG.name}-${PKG.version}.tgz`);
  mkdirSync(project);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true, version: '1.0.0' }));
  const inst = sh('npm', ['install', '--ignore-scripts', '--prefer-offline', '--no-audit', '--no-fund', tarball], project);
  expect(inst.status, inst.text.slice(-2000)).toBe(0);
  // the consumer's own dev dependency, for `console` in the TypeScript consumer
  mkdirSync(join(project, 'node_modules', '@types'), { recursive: true });
  symlinkSync(join(ROOT, 'node_modules', '@types', 'node'), join(project, 'node_modules', '@types', 'node'), 'dir');
}, 300_000);

afterAll(() => rmSync(work, { recursive: true, force: true }));

// log softmax of [1, 2, 3] at 2, in float64
const WANT = 3 - Math.log(Math.exp(1) + Math.exp(2) + Math.exp(3));

function runNode(file: string): number {
  const r = sh(process.execPath, [file], project, { ...cleanEnv(), GEAR_RL_ADDON: ADDON });
  expect(r.status, r.stderr.slice(-1500)).toBe(0);
  return Number(r.stdout.trim().split('\n').pop());
}

function runFile(name: string, code: string): number {
  writeFileSync(join(project, name), code);
  return runNode(join(project, name));
}

const BODY = `const s = rl.tokenStats({ data: Float32Array.of(1, 2, 3), rows: 1, vocab: 3 }, Int32Array.of(2));
console.log(s.logprob[0]);`;

describe('consumers of the installed tarball, by name', () => {
  it('the installed copy is the tarball (not a link to this tree)', () => {
    const installed = join(project, 'node_modules', PKG.name);
    expect(existsSync(join(installed, 'dist', 'index.js'))).toBe(true);
    expect(existsSync(join(installed, 'test'))).toBe(false);
    expect(JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')).version).toBe(PKG.version);
  });

  it('ESM: import * as rl from "gear-rl"', () => {
    expect(Math.abs(runFile('esm.mjs', `import * as rl from 'gear-rl';\n${BODY}`) - WANT)).toBeLessThan(1e-6);
  });

  it('CommonJS: require("gear-rl") (Node\'s require of an ES module through the default condition)', () => {
    expect(Math.abs(runFile('cjs.cjs', `const rl = require('gear-rl');\n${BODY}`) - WANT)).toBeLessThan(1e-6);
  });

  it('TypeScript, module nodenext: a CommonJS and an ESM file type-check against the shipped types and run', () => {
    const ts = join(project, 'ts');
    mkdirSync(ts, { recursive: true });
    writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({
      compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', strict: true, outDir: 'out', rootDir: 'ts', types: ['node'] },
      include: ['ts'],
    }));
    // The typed check: if the declarations did not resolve, `rl` would be `any` and the
    // @ts-expect-error lines would themselves be errors.
    const code = `import * as rl from 'gear-rl';
const stats: rl.TokenStats = rl.tokenStats({ data: Float32Array.of(1, 2, 3), rows: 1, vocab: 3 }, Int32Array.of(2));
export function neverCalled(): void {
  // @ts-expect-error: targets must be an Int32Array
  rl.tokenStats({ data: Float32Array.of(1, 2, 3), rows: 1, vocab: 3 }, 'x');
  // @ts-expect-error: not an error code
  const code: rl.GearErrorCode = 'ERR_NOPE';
  void code;
}
console.log(stats.logprob[0]);
`;
    writeFileSync(join(ts, 'main.cts'), code);   // .cts: CommonJS whatever the package type
    writeFileSync(join(ts, 'main.ts'), code);    // .ts in a package without "type": CommonJS too
    writeFileSync(join(ts, 'main.mts'), code);   // .mts: ESM
    const tsc = sh(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], project);
    expect(tsc.status, tsc.text.slice(-3000)).toBe(0);
    expect(readFileSync(join(project, 'out', 'main.cjs'), 'utf8')).toMatch(/require\("gear-rl"\)/);
    expect(readFileSync(join(project, 'out', 'main.js'), 'utf8')).toMatch(/require\("gear-rl"\)/);
    expect(readFileSync(join(project, 'out', 'main.mjs'), 'utf8')).toMatch(/from 'gear-rl'/);
    for (const f of ['main.cjs', 'main.js', 'main.mjs']) expect(Math.abs(runNode(join(project, 'out', f)) - WANT), f).toBeLessThan(1e-6);
  });
});

// The subpaths of package.json's `exports`: each reached by name, the names they hold gone from the top level.
const SUBPATHS = `const top = Object.keys(rl);
const moved = [...Object.keys(diagnostics), ...Object.keys(similarity), ...Object.keys(report)];
if (moved.length < 25 || moved.some((n) => top.includes(n))) throw new Error('subpath names at the top level: ' + moved.filter((n) => top.includes(n)));
console.log(diagnostics.maskedMean([1, 3]) + similarity.sequenceMatcherRatio('abcd', 'abce') + (report.SAVED_BATCH_FORMAT === 'gear-rl/batch' ? 1 : 0));`;
const SUBPATHS_WANT = 4 / (2 + 1e-8) + 0.75 + 1;

describe('the subpaths gear-rl/diagnostics, gear-rl/similarity and gear-rl/report', () => {
  it('ESM import and CommonJS require', () => {
    const esm = `import * as rl from 'gear-rl';
import * as diagnostics from 'gear-rl/diagnostics';
import * as similarity from 'gear-rl/similarity';
import * as report from 'gear-rl/report';
${SUBPATHS}`;
    expect(Math.abs(runFile('sub-esm.mjs', esm) - SUBPATHS_WANT)).toBeLessThan(1e-9);
    const cjs = `const rl = require('gear-rl');
const diagnostics = require('gear-rl/diagnostics');
const similarity = require('gear-rl/similarity');
const report = require('gear-rl/report');
${SUBPATHS}`;
    expect(Math.abs(runFile('sub-cjs.cjs', cjs) - SUBPATHS_WANT)).toBeLessThan(1e-9);
  });

  it('TypeScript, module nodenext: the subpaths\' declarations resolve and type-check', () => {
    const ts = join(project, 'ts-sub');
    mkdirSync(ts, { recursive: true });
    writeFileSync(join(project, 'tsconfig.sub.json'), JSON.stringify({
      compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', strict: true, outDir: 'out-sub', rootDir: 'ts-sub', types: ['node'] },
      include: ['ts-sub'],
    }));
    const code = `import { maskedMean, type GroupIndex, groupIndex } from 'gear-rl/diagnostics';
import { sequenceMatcherRatio } from 'gear-rl/similarity';
import { type SavedBatch, SAVED_BATCH_FORMAT } from 'gear-rl/report';
const idx: GroupIndex = groupIndex(['a', 'b', 'a']);
const saved: SavedBatch['format'] = SAVED_BATCH_FORMAT;
export function neverCalled(): void {
  // @ts-expect-error: the texts must be strings
  sequenceMatcherRatio(1, 'a');
}
console.log(maskedMean([1, 3]) + sequenceMatcherRatio('abcd', 'abce') + (saved === 'gear-rl/batch' ? 1 : 0) + 0 * idx.count);
`;
    writeFileSync(join(ts, 'main.mts'), code);
    writeFileSync(join(ts, 'main.cts'), code);
    const tsc = sh(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.sub.json'], project);
    expect(tsc.status, tsc.text.slice(-3000)).toBe(0);
    for (const f of ['main.mjs', 'main.cjs']) expect(Math.abs(runNode(join(project, 'out-sub', f)) - SUBPATHS_WANT), f).toBeLessThan(1e-9);
  });
});

describe('package linters on the tarball', () => {
  it('publint --strict: no errors, warnings or suggestions', () => {
    const r = sh(process.execPath, [join(ROOT, 'node_modules/publint/src/cli.js'), 'run', tarball, '--strict'], work);
    expect(r.status, r.text).toBe(0);
    expect(r.stdout).toContain('All good!');
  });

  it('arethetypeswrong: every resolution mode finds the types (require of the ES module is Node >= 20.19\'s)', () => {
    // cjs-resolves-to-esm is the one finding by design: the package is an ES module, and `require`
    // of it is Node's require(esm) (Node >= 20.19; run above), so that rule is the only one ignored.
    const r = sh(process.execPath, [join(ROOT, 'node_modules/@arethetypeswrong/cli/dist/index.js'), tarball, '--format', 'json',
      '--ignore-rules', 'cjs-resolves-to-esm'], work);
    const report = JSON.parse(r.stdout) as { analysis: { problems: { kind: string }[] }; problems?: unknown };
    expect(report.analysis.problems.filter((p) => p.kind !== 'CJSResolvesToESM')).toEqual([]);
    expect(r.status, r.text.slice(-2000)).toBe(0);
  });
});
