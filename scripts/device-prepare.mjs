#!/usr/bin/env node
// Prepares the GPU check (scripts/device-check.sh) on a development machine, GPU or not: builds the CUDA
// module for sm_90 with nvcc (GEAR_CUDA_ARCHS overrides), the package (dist/) and the compiled parity
// runner (tsconfig.device.json), and puts what a GPU machine with no Node and no network needs into
// .device/ (git-ignored): the runner, the module, and this Node binary compressed with xz. Carry `.device`
// and `dist` to the GPU machine and run `bash scripts/device-check.sh` there (npm run test:cuda runs both
// steps on a machine that has a GPU itself).
import { execFileSync, execSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DEV = join(ROOT, '.device');
const archs = process.env.GEAR_CUDA_ARCHS ?? '90';
const run = (cmd) => execSync(cmd, { cwd: ROOT, stdio: 'inherit' });

mkdirSync(DEV, { recursive: true });
run(`npx cmake-js compile --out build-cuda -T gear_rl_cuda -p 2 --CDGEAR_CUDA_ARCHS=${archs}`);
copyFileSync(join(ROOT, 'build-cuda', 'Release', 'gear_rl_cuda.node'), join(DEV, 'gear_rl_cuda.node'));
run('node scripts/bundle-assets.mjs && npx tsc -p tsconfig.json && npx tsc -p tsconfig.device.json');
// Node for a machine without it: this binary (the same major as the build), xz-compressed once.
const nodeXz = join(DEV, 'node.xz');
if (!existsSync(nodeXz) || statSync(nodeXz).mtimeMs < statSync(process.execPath).mtimeMs) {
  execFileSync('sh', ['-c', `xz -T2 -6 -c "${process.execPath}" > "${nodeXz}"`], { stdio: 'inherit' });
}
writeFileSync(join(DEV, 'manifest.json'), JSON.stringify({
  node: process.version, archs, commit: execSync('git rev-parse --short HEAD', { cwd: ROOT, encoding: 'utf8' }).trim(),
  made: new Date().toISOString(),
}, null, 1));
console.log(`[device] ready: carry .device and dist, then run: bash scripts/device-check.sh  (${archs})`);
