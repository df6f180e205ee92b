// The CUDA kernels' per-thread work, run on the host (test/cuda/sim): nvcc compiles the kernels' own
// __host__ __device__ functions into a host program that walks every (row, part, lane) of a pass, reduces
// each group in the kernels' order and compares with float64 references: every dtype, temperatures 1,
// 0.7 and 2, masked entries (-Infinity and finite masks), fully masked / NaN / +Infinity / spiked rows,
// vocabularies from 1 to 20,011 (heads and tails around the 16-byte vectors), warp and block groups,
// rows split in up to 5 parts, every 16-byte access checked for alignment, and the error a backward's
// output still gives after an in-place write. This needs nvcc, not a GPU.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const nvcc = ['/usr/local/cuda/bin', ...(process.env.PATH ?? '').split(delimiter)].map((d) => join(d, 'nvcc')).find((p) => existsSync(p));
const dir = mkdtempSync(join(tmpdir(), 'gear-rl-sim-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

it('every pass of every logits kernel agrees with float64 on the host simulation', () => {
  expect(nvcc, 'nvcc in /usr/local/cuda/bin or on PATH').toBeDefined();
  const exe = join(dir, 'kernel_sim');
  const src = (p: string) => join(ROOT, p);
  const cc = spawnSync(nvcc!, ['-std=c++17', '-O2', '-arch=sm_80', `-I${src('native/include')}`,
    src('test/cuda/sim/main.cu'), src('test/cuda/sim/token_stats_sim.cu'), src('test/cuda/sim/divergence_sim.cu'),
    src('native/src/cuda/device.cu'), src('native/src/core/checks.cc'), src('native/src/cpu/thread_pool.cc'), '-o', exe],
  { encoding: 'utf8', maxBuffer: 16 * 2 ** 20 });
  expect(cc.status, cc.stderr.slice(-4000)).toBe(0);
  const r = spawnSync(exe, [], { encoding: 'utf8', maxBuffer: 16 * 2 ** 20 });
  const failures = r.stdout.split('\n').filter((l) => l.startsWith('FAIL'));
  expect(failures).toEqual([]);
  expect(r.status, r.stderr).toBe(0);
  expect(r.stdout).toMatch(/^(\d+) cases, 0 failures$/m);
  expect(Number(/^(\d+) cases/m.exec(r.stdout)![1])).toBeGreaterThanOrEqual(290);
}, 600_000);
