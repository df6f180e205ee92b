#!/usr/bin/env node
// Prepares the GPU check (scripts/device-check.sh) on a development machine, GPU or not: builds the CUDA
// module for sm_90 with nvcc (GEAR_CUDA_ARCHS overrides) in its own build directory (build-cuda-device/,
// so build-cuda's cached architectures stay as they are), the package (dist/) and the compiled parity
// runner (tsconfig.device.json), and puts what a GPU machine with no Node and no network needs into
// .device/ (git-ignored): the runner, the module, this Node binary compressed with xz, and a manifest
// (Node version, commit, whether the tree had uncommitted changes, the module's sha256), which the check
// prints. Carry `.device` and `dist` to the GPU machine and run `bash scripts/device-check.sh` there (npm
// run test:cuda runs both steps on a machine that has a GPU itself).
import { execFileSync, execSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DEV = join(ROOT, '.device');
const BUILD = 'build-cuda-device';
const archs = process.env.GEAR_CUDA_ARCHS ?? '90';
const run = (cmd) => execSync(cmd, { cwd: ROOT, stdio: 'inherit' });
const text = (cmd) => {
  try {
    return execSync(cmd, { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return null;
  }
};

mkdirSync(DEV, { recursive: true });
run(`npx cmake-js compile --out ${BUILD} -T gear_rl_cuda -p 2 --CDGEAR_CUDA_ARCHS=${archs}`);
const module = join(DEV, 'gear_rl_cuda.node');
copyFileSync(join(ROOT, BUILD, 'Release', 'gear_rl_cuda.node'), module);
run('node scripts/bundle-assets.mjs && npx tsc -p tsconfig.json && npx tsc -p tsconfig.device.json');
// Node for a machine without it: this binary (device-check.sh always runs it), xz-compressed once per
// binary.
const nodeXz = join(DEV, 'node.xz');
const manifestFile = join(DEV, 'manifest.json');
const previous = existsSync(manifestFile) ? JSON.parse(readFileSync(manifestFile, 'utf8')) : {};
if (!existsSync(nodeXz) || previous.node !== process.version || statSync(nodeXz).mtimeMs < statSync(process.execPath).mtimeMs) {
  execFileSync('sh', ['-c', `xz -T2 -6 -c "${process.execPath}" > "${nodeXz}"`], { stdio: 'inherit' });
}
const changed = (text('git status --porcelain') ?? '').split('\n').filter((l) => l.trim() !== '');
writeFileSync(manifestFile, JSON.stringify({
  node: process.version, archs, commit: text('git rev-parse --short HEAD') ?? 'unknown',
  dirty: changed.length > 0, dirtyFiles: changed.length,
  moduleSha256: createHash('sha256').update(readFileSync(module)).digest('hex'),
  nvcc: text('nvcc --version')?.match(/release [\d.]+, V([\d.]+)/)?.[1] ?? null,
  made: new Date().toISOString(),
}, null, 1));
console.log(`[device] ready: carry .device and dist, then run: bash scripts/device-check.sh  (sm ${archs}` +
  `${changed.length ? `; the tree has ${changed.length} uncommitted changes, recorded in the manifest` : ''})`);
