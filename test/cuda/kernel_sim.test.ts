// The CUDA kernels' per-thread work, run on the host (test/cuda/sim): nvcc compiles the kernels' own
// __host__ __device__ functions into a host program that walks every (row, part, lane) of a pass, reduces
// each group in the kernels' order and compares with float64 references: every dtype, temperatures 1,
// 0.7 and 2, masked entries (-Infinity and finite masks), fully masked / NaN / +Infinity / spiked rows,
// vocabularies from 1 to 20,011 (heads and tails around the 16-byte vectors), warp and block groups,
// rows split in up to 37 parts (merged as the finishing warp merges them), the streaming passes' pivots
// (ascending rows, jumps, rows held at the pivot's floor, logits beyond its band that go through the
// exact accumulators), every 16-byte access checked for alignment, the error a backward's output still
// gives after an in-place write, and the staging ring's copy against memcpy. This needs nvcc, not a GPU.
// A second test sweeps rows with a single finite logit (1 x 1 and one-hot rows) through the kernels'
// tokenStats code against the CPU module and float64.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { encode, type DType } from '../helpers/reference.js';
import { checkSingleLogit, singleLogitCases, stored } from './single_logit.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const nvcc = ['/usr/local/cuda/bin', ...(process.env.PATH ?? '').split(delimiter)].map((d) => join(d, 'nvcc')).find((p) => existsSync(p));
const dir = mkdtempSync(join(tmpdir(), 'gear-rl-sim-'));
const exe = join(dir, 'kernel_sim');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

beforeAll(() => {
  expect(nvcc, 'nvcc in /usr/local/cuda/bin or on PATH').toBeDefined();
  const src = (p: string) => join(ROOT, p);
  const cc = spawnSync(nvcc!, ['-std=c++17', '-O2', '-arch=sm_80', `-I${src('native/include')}`,
    src('test/cuda/sim/main.cu'), src('test/cuda/sim/token_stats_sim.cu'), src('test/cuda/sim/divergence_sim.cu'),
    src('native/src/cuda/runtime.cc'), src('native/src/cuda/transfers.cc'), src('native/src/cuda/call.cc'),
    src('native/src/core/checks.cc'), src('native/src/core/host_memory.cc'), src('native/src/cpu/thread_pool.cc'), '-o', exe],
  { encoding: 'utf8', maxBuffer: 16 * 2 ** 20 });
  expect(cc.status, cc.stderr.slice(-4000)).toBe(0);
}, 600_000);

it('every pass of every logits kernel agrees with float64 on the host simulation', () => {
  const r = spawnSync(exe, [], { encoding: 'utf8', maxBuffer: 16 * 2 ** 20 });
  const failures = r.stdout.split('\n').filter((l) => l.startsWith('FAIL'));
  expect(failures).toEqual([]);
  expect(r.status, r.stderr).toBe(0);
  expect(r.stdout).toMatch(/^(\d+) cases, 0 failures$/m);
  expect(Number(/^(\d+) cases/m.exec(r.stdout)![1])).toBeGreaterThanOrEqual(290);
}, 600_000);

it('rows with one finite logit (1 x 1, one-hot): the kernels give the CPU module\'s results, every dtype and temperature', () => {
  const cases = singleLogitCases();
  // the CPU module's forward statistics are what the backward is given (as a caller passes them)
  const rows = cases.map((c) => {
    const { data } = encode(c.z, c.dtype);
    const host = { data, rows: 1, vocab: c.z.length, ...(c.dtype === 'float32' ? {} : { dtype: c.dtype }) } as rl.Logits;
    const y = Int32Array.of(0);
    const stats = rl.tokenStats(host, y, { temperature: c.T });
    const grad = { logprob: Float32Array.of(c.gl), entropy: Float32Array.of(c.ge) };
    const given = Number.isFinite(stats.logsumexp[0]) ? rl.tokenStatsBackward(host, y, grad, { temperature: c.T, stats }) : null;
    return { c, stats, given, recomputed: rl.tokenStatsBackward(host, y, grad, { temperature: c.T }) };
  });
  const dt: Record<DType, number> = { float32: 0, bfloat16: 1, float16: 2 };
  const input = rows.map(({ c, stats }) => [dt[c.dtype], c.T, c.gl, c.ge, Number.isFinite(stats.logsumexp[0]) ? stats.logsumexp[0] : 0,
    stats.entropy[0], c.z.length, ...c.z.map((x) => (x === -Infinity ? '-inf' : String(stored(x, c.dtype))))].join(' ')).join('\n');
  const r = spawnSync(exe, ['--sweep'], { input, encoding: 'utf8', maxBuffer: 256 * 2 ** 20 });
  expect(r.status, r.stderr).toBe(0);
  const num = (x: number | string) => (typeof x === 'number' ? x : Number(x));
  const out = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as { lse: (number | string)[]; ent: (number | string)[]; flags: number[]; given: (number | string)[]; recomputed: (number | string)[] });
  expect(out.length).toBe(cases.length);
  const failures: string[] = [];
  rows.forEach(({ c, stats, given, recomputed }, i) => {
    const o = out[i]!;
    failures.push(...checkSingleLogit(c, {
      cpu: { lse: stats.logsumexp[0]!, entropy: stats.entropy[0]!, given, recomputed },
      device: { lse: num(o.lse[0]!), entropy: num(o.ent[0]!), given: given ? o.given.map(num) : null, recomputed: o.recomputed.map(num), flags: o.flags },
    }));
  });
  expect(failures.slice(0, 20), `${failures.length} of ${cases.length} rows`).toEqual([]);
  expect(cases.length).toBeGreaterThan(1000);
}, 600_000);
