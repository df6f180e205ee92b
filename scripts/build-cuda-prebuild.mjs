#!/usr/bin/env node
// The CUDA prebuild: prebuilds/linux-x64/gear-rl.cuda.node, run by prepack. nvcc (CUDA >= 12) compiles the
// CUDA module for sm_80 and sm_90 machine code plus sm_90 PTX (newer GPUs compile it at load), with the
// CUDA runtime and the C++ runtime linked statically and the glibc floor of the CPU prebuild
// (native/linux-ldflags.mjs --cuda): a machine with an NVIDIA driver needs nothing else. The loader
// uses it under GEAR_RL_VARIANT=auto only where a driver is present, and host arrays keep the CPU kernels.
//
//   node scripts/build-cuda-prebuild.mjs           build (incremental, build-cuda/prebuild/) and strip into prebuilds/
//   GEAR_RL_CUDA_PREBUILT=<file>                   use this build of the module instead (the tests share one)
//   GEAR_RL_PACK_CUDA=0                            pack without the CUDA prebuild
import { execFileSync, execSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync } from 'node:fs';
import { delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const CUDA_PREBUILD = join(ROOT, 'prebuilds', 'linux-x64', 'gear-rl.cuda.node');
export const CUDA_ARCHS = '80-real;90';
export const BUILD_DIR = join(ROOT, 'build-cuda', 'prebuild');

export function findNvcc() {
  return ['/usr/local/cuda/bin', ...(process.env.PATH ?? '').split(delimiter)].map((d) => join(d, 'nvcc')).find((p) => existsSync(p));
}

/** Builds the CUDA module of the prebuild into build-cuda/prebuild (incremental); returns its path. */
export function buildCudaModule() {
  const nvcc = findNvcc();
  if (!nvcc) throw new Error('the CUDA prebuild needs nvcc (CUDA >= 12): install the CUDA toolkit, or set GEAR_RL_PACK_CUDA=0 to pack without it');
  const env = { ...process.env, PATH: `${dirname(nvcc)}${delimiter}${process.env.PATH}`, CUDACXX: nvcc };
  execSync(`npx cmake-js compile --out build-cuda/prebuild -T gear_rl_cuda -p 2 "--CDGEAR_CUDA_ARCHS=${CUDA_ARCHS}"`,
    { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'inherit'] });
  return join(BUILD_DIR, 'Release', 'gear_rl_cuda.node');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.env.GEAR_RL_PACK_CUDA === '0') {
    console.log('[cuda-prebuild] GEAR_RL_PACK_CUDA=0: packing without the CUDA prebuild');
    process.exit(0);
  }
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    console.log(`[cuda-prebuild] the CUDA prebuild is linux-x64 only; none on ${process.platform}-${process.arch}`);
    process.exit(0);
  }
  try {
    const built = process.env.GEAR_RL_CUDA_PREBUILT ? resolve(process.env.GEAR_RL_CUDA_PREBUILT) : buildCudaModule();
    mkdirSync(dirname(CUDA_PREBUILD), { recursive: true });
    copyFileSync(built, CUDA_PREBUILD);
    execFileSync('strip', ['--strip-unneeded', CUDA_PREBUILD]);
    console.log(`[cuda-prebuild] ${CUDA_PREBUILD}`);
  } catch (e) {
    console.error(`[cuda-prebuild] ${e.message}`);
    process.exit(1);
  }
}
