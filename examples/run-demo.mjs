#!/usr/bin/env node
// `npm run demo` launcher: prints the usage without compiling anything, otherwise rebuilds the library
// (dist/) and the examples (dist-examples/) only when a source file is newer than its output, then runs
// the compiled demo in this process.
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';

const args = process.argv.slice(2);
if (args.includes('--help') || args.includes('-h')) {
  process.stdout.write(readFileSync(new URL('./usage.txt', import.meta.url), 'utf8'));
  process.exit(0);
}
const { spawnSync } = await import('node:child_process');
const { dirname, join, resolve } = await import('node:path');
const { fileURLToPath, pathToFileURL } = await import('node:url');
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** Newest modification time (ms) of the files under `dir` (0 when it does not exist). */
function newest(dir) {
  let t = 0;
  if (!existsSync(dir)) return t;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    t = Math.max(t, e.isDirectory() ? newest(p) : statSync(p).mtimeMs);
  }
  return t;
}
const mtime = (p) => (existsSync(p) ? statSync(p).mtimeMs : -1);
function run(cmd, cmdArgs) {
  process.stderr.write(`demo: ${cmd} ${cmdArgs.join(' ')}\n`);
  const r = spawnSync(cmd, cmdArgs, { cwd: ROOT, stdio: 'inherit', shell: process.platform === 'win32' });
  if (r.status !== 0) process.exit(r.status ?? 1);
}

const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
if (mtime(join(ROOT, 'dist', 'index.js')) < Math.max(newest(join(ROOT, 'ts')), mtime(join(ROOT, 'tsconfig.json')))) {
  run(process.execPath, [join(ROOT, 'scripts', 'bundle-assets.mjs')]);
  run(process.execPath, [tsc, '-p', 'tsconfig.json']);
}
const demo = join(ROOT, 'dist-examples', 'demo.js');
if (mtime(demo) < Math.max(newest(join(ROOT, 'examples')), mtime(join(ROOT, 'tsconfig.examples.json')), mtime(join(ROOT, 'dist', 'index.d.ts')))) {
  run(process.execPath, [tsc, '-p', 'tsconfig.examples.json']);
}
await import(pathToFileURL(demo).href);
