// Peak memory: the logits kernels allocate no N x V temporary. A child process allocates and touches
// its inputs and outputs, records its peak RSS (process.resourceUsage().maxRSS: VmHWM on Linux, the peak
// working set on Windows), runs every kernel, and reports how much the peak grew; it must stay within the 64 MiB budget (thread stacks, block buffers, per-row statistics).
import { spawnSync } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const DIST = pathToFileURL(join(ROOT, 'dist', 'index.js')).href;

const script = `
import * as rl from ${JSON.stringify(DIST)};
const hwm = () => process.resourceUsage().maxRSS * 1024; // kB
const rows = 1024, vocab = 65536, n = rows * vocab;              // 256 MiB per float32 array
const zs = new Float32Array(n), zt = new Float32Array(n), dz = new Float32Array(n);
for (let i = 0; i < n; i++) { zs[i] = Math.sin(i) * 3; zt[i] = Math.cos(i) * 3; }
dz.fill(0);
const targets = Int32Array.from({ length: rows }, (_, r) => (r * 7919) % vocab);
const s = { data: zs, rows, vocab }, t = { data: zt, rows, vocab };
const stats = { logprob: new Float32Array(rows), entropy: new Float32Array(rows), logsumexp: new Float32Array(rows) };
const g = new Float32Array(rows).fill(1);
rl.tokenStats(s, targets, { out: stats });                       // warm up code paths and the pool
const before = hwm();
rl.tokenStats(s, targets, { out: stats });
rl.tokenStatsBackward(s, targets, { logprob: g, entropy: g }, { stats, out: dz });
const d = rl.divergence(s, t, { kind: 'reverse_kl', targets });
rl.divergenceBackward(s, t, g, { kind: 'reverse_kl', stats: d, out: dz });
rl.divergence(s, t, { kind: 'jsd', beta: 0.5 });
await rl.tokenStatsAsync(s, targets, { out: stats });
rl.tokenStatsBackward(s, targets, { logprob: g }, { inPlace: true });
console.log(JSON.stringify({ before, after: hwm(), inputs: 3 * n * 4 }));
`;

describe('logits kernels memory', () => {
  it('peak RSS grows by less than 64 MiB over inputs and outputs (no N x V temporary)', { timeout: 300_000 }, () => {
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', cwd: ROOT });
    expect(r.status, r.stderr).toBe(0);
    const { before, after, inputs } = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(before).toBeGreaterThan(inputs);                          // the arrays really are resident
    expect(after - before).toBeLessThan(64 * 2 ** 20);
  });
});
