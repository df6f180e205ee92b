#!/usr/bin/env node
// Runs before `npm test` and `npm run test:platforms`: makes sure what the suites need is here — the
// native addon (built when no prebuild or local build loads), the compiled TypeScript (the packaging
// test and the demo run from dist/), and the Debian tools of the platform tests, installed in one apt
// run when root:
//   chromium                       the visualiser's browser test (test/gear/visualize.test.ts)
//   clang, musl-tools              the clang build and the musl link check (test/platform/clang.test.ts,
//                                  test/packaging/glibc_floor.test.ts)
//   g++-aarch64-linux-gnu,         the linux-arm64 build and its suites under qemu-user, and an AVX2-only
//   qemu-user                      x86-64 CPU model (test/platform/aarch64.test.ts, avx2_cpu.test.ts)
//   g++-mingw-w64-x86-64-posix,    the win32-x64 build and its suites under Wine (test/platform/win32.test.ts)
//   wine64
// then the foreign Nodes those runs use (npm registry, cached under .cache/). The package list lives in
// scripts/toolchains.mjs (npm pack checks its own part of it).
import { execSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { ensureTools } from './toolchains.mjs';

const require = createRequire(import.meta.url);
const run = (cmd) => execSync(cmd, { stdio: 'inherit' });

try {
  require('node-gyp-build')(process.cwd());
} catch {
  console.log('[pretest] building the native addon from source');
  run('npx node-gyp rebuild');
}

console.log('[pretest] compiling TypeScript');
run('npx tsc -p tsconfig.json');
if (existsSync('tsconfig.examples.json')) run('npx tsc -p tsconfig.examples.json');

if (!ensureTools('test')) process.exit(1);

// The Windows Node and its Wine prefix (.cache/win32/), the arm64 Node and the arm64 rolldown binding
// vitest needs there (.cache/node-arm64/). The cross builds themselves run in the tests.
run(`"${process.execPath}" scripts/wine-node.mjs setup`);
run(`"${process.execPath}" scripts/cross-build.mjs --setup`);
