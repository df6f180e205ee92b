// The CUDA module the tests share: the prebuild's configuration (sm_80 and sm_90 machine code, sm_90 PTX,
// static runtimes; scripts/build-cuda-prebuild.mjs), built incrementally into build-cuda/prebuild/ and
// serialised with a lock file, so test/packaging/cuda.test.ts and pack.test.ts build it once between them.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { ROOT } from './child.js';
import { CUDA_ARCHS, findNvcc } from '../../scripts/build-cuda-prebuild.mjs';

export const CUDA_MODULE = join(ROOT, 'build-cuda', 'prebuild', 'Release', 'gear_rl_cuda.node');
export const NVCC: string | undefined = findNvcc();

/** Builds (or brings up to date) the shared CUDA module; throws with the build's output when it fails. */
export function buildCudaModule(): string {
  if (!NVCC) throw new Error('nvcc in /usr/local/cuda/bin or on PATH');
  const env = { ...process.env, PATH: `${dirname(NVCC)}${delimiter}${process.env.PATH}`, CUDACXX: NVCC };
  const r = spawnSync('flock', [join(tmpdir(), 'gear-rl-cuda-build.lock'), 'npx', 'cmake-js', 'compile', '--out',
    join(ROOT, 'build-cuda', 'prebuild'), '-T', 'gear_rl_cuda', '-p', '2', `--CDGEAR_CUDA_ARCHS=${CUDA_ARCHS}`],
  { cwd: ROOT, env, encoding: 'utf8', maxBuffer: 64 * 2 ** 20 });
  if (r.status !== 0) throw new Error(`CUDA build failed:\n${r.stdout.slice(-4000)}\n${r.stderr.slice(-4000)}`);
  return CUDA_MODULE;
}

/**
 * The device code a CUDA module embeds: every entry of its fat binaries (the .nv_fatbin blobs: a 16-byte
 * header with magic 0xBA55ED50, then entries with their kind, 1 PTX / 2 machine code, and the sm number at
 * byte 28 of each entry's header), deduplicated as "sass sm_80" / "ptx sm_90".
 */
export function fatbinEntries(file: string): string[] {
  const data = readFileSync(file);
  const found = new Set<string>();
  for (let i = data.indexOf(MAGIC); i >= 0; i = data.indexOf(MAGIC, i + 4)) {
    const headerSize = data.readUInt16LE(i + 6), size = Number(data.readBigUInt64LE(i + 8));
    for (let p = i + headerSize, end = i + headerSize + size; p < end;) {
      const kind = data.readUInt16LE(p), entryHeader = data.readUInt32LE(p + 4), payload = Number(data.readBigUInt64LE(p + 8));
      found.add(`${kind === 1 ? 'ptx' : kind === 2 ? 'sass' : `kind${kind}`} sm_${data.readUInt32LE(p + 28)}`);
      p += entryHeader + payload;
    }
  }
  return [...found].sort();
}
const MAGIC = Buffer.from([0x50, 0xed, 0x55, 0xba]);
