#!/usr/bin/env node
// The GPU bench: `npm run bench:cuda [-- --quick] [--out DIR] [--no-torch] [--torch-timeout S] [--budget S]`.
// Needs the CUDA module with a device (GEAR_RL_VARIANT=cuda or auto); elsewhere it says so and measures
// nothing. --torch-timeout: the most seconds the PyTorch anchor may take (default 240); --budget: the
// seconds the whole bench has (a caller's time limit), so the anchor gets what is left of it, less a
// margin, when that is less. An anchor stopped by either reports the ops it measured by then
// (eager first, then torch.compile). The results are written after every row, so a bench killed by a
// time limit keeps what it measured.
//
// In one run: the floors (device-to-device copy = HBM, host-to-device and back from pinned and pageable
// memory, host memory read and copy with every core), uploads (pageable through the staging ring, and from
// pinned memory), every logits op on device tensors (kernel time from CUDA events and wall time per call),
// host-array calls on the device end to end against their upload, the per-call cost on a small tensor,
// the CPU kernels on the same arrays, and PyTorch eager / torch.compile on the same GPU when Python has
// torch (bench/cuda_torch.py). Results: bench/results/cuda.{md,json}, newest run first (or --out DIR).
import { execSync, spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const rl = await import(join(ROOT, 'dist', 'index.js'));
const { native } = await import(join(ROOT, 'dist', 'core', 'addon.js'));

const started = performance.now();
const args = process.argv.slice(2);
const quick = args.includes('--quick');
const withTorch = !args.includes('--no-torch');
const outArg = args.indexOf('--out') >= 0 ? resolve(args[args.indexOf('--out') + 1]) : null;
const seconds = (name, fallback) => {
  const i = args.indexOf(name);
  if (i < 0) return fallback;
  const x = Number(args[i + 1]);
  if (!(x > 0)) throw new Error(`${name}: expected a number of seconds > 0, got ${args[i + 1]}`);
  return x;
};
const torchTimeoutS = seconds('--torch-timeout', 240);
const budgetS = seconds('--budget', Infinity);

if (!rl.cuda.available()) {
  console.log(`bench:cuda: no CUDA device in use (${rl.cuda.unavailableReason()}); nothing measured`);
  process.exit(0);
}

const R = quick ? 256 : 4096, V = quick ? 32000 : 151936;
const threads = cpus().length;
rl.setNumThreads(threads);
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const round = (x, d = 3) => (x === null || x === undefined ? null : +x.toFixed(d));
const now = () => performance.now();

// Kernel timing (two CUDA events per call) is off until the first query: this one turns it on.
native.cudaKernelMs({ device: 0 });

/** Median wall ms and median kernel ms (CUDA events, -1 when staged) of `fn` over `reps` calls after a warm-up. */
async function time(fn, reps = quick ? 5 : 10) {
  await fn();
  const wall = [], kernel = [];
  for (let i = 0; i < reps; i++) {
    const t = now();
    await fn();
    wall.push(now() - t);
    kernel.push(native.cudaKernelMs({ device: 0 }));
  }
  return { ms: median(wall), kernelMs: median(kernel) };
}

// ---- floors ----
const dev = rl.cuda.devices()[0];
const bw = (mode, bytes, reps) => median(native.cudaBandwidth({ device: 0, mode, bytes, reps }));
const f32Bytes = R * V * 4;
const GiB = 2 ** 30;
const floors = {
  hbmCopyGBs: bw(0, f32Bytes, 10),
  h2dPinnedGBs: bw(1, Math.min(f32Bytes, GiB), 3),
  h2dPageableGBs: bw(2, Math.min(f32Bytes, GiB), 3),
  d2hPinnedGBs: bw(3, Math.min(f32Bytes, GiB), 3),
  d2hPageableGBs: bw(4, Math.min(f32Bytes, GiB), 3),
  hostReadGBs: rl.memoryBandwidth({ mode: 'read2', bytes: GiB, threads, reps: 3 }).gbs,
  hostCopyGBs: rl.memoryBandwidth({ mode: 'copyPlain', bytes: GiB / 2, threads, reps: 3 }).gbs,
  // the same copy with non-temporal stores, as the staging ring is filled (read + write counted)
  hostCopyNTGBs: rl.memoryBandwidth({ mode: 'copy', bytes: GiB / 2, threads, reps: 3 }).gbs,
};
console.log('floors', JSON.stringify(floors));
const git = (cmd) => {
  try {
    return execSync(`git ${cmd}`, { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return 'unknown';
  }
};
const rows = [];
let torch = null;
const result = {
  date: new Date().toISOString().slice(0, 10), commit: git('rev-parse --short HEAD'), quick, shape: [R, V],
  device: dev, cpu: { threads, isa: rl.backend().isa, model: cpus()[0]?.model ?? 'unknown' },
  floors: Object.fromEntries(Object.entries(floors).map(([k, v]) => [k, round(v, 1)])), rows, torch, complete: false,
};
const markdown = () => [
  `## ${result.date} ${result.commit}: ${dev.name} (${dev.arch}), ${threads} CPU threads${quick ? ' (quick)' : ''}` +
    `${result.complete ? '' : ' (incomplete: stopped before the end)'}`, '',
  `Floors, same run: HBM device copy ${result.floors.hbmCopyGBs} GB/s (read + write); host to device ${result.floors.h2dPinnedGBs} GB/s pinned, ` +
  `${result.floors.h2dPageableGBs} pageable; device to host ${result.floors.d2hPinnedGBs} / ${result.floors.d2hPageableGBs}; host memory read ` +
  `${result.floors.hostReadGBs} GB/s, copy ${result.floors.hostCopyGBs} GB/s (${result.floors.hostCopyNTGBs} with non-temporal stores; ${threads} threads; read + write counted).`, '',
  '| op | ms | kernel ms | GB/s | % | torch.compile ms | target |', '| --- | ---: | ---: | ---: | ---: | ---: | --- |',
  ...rows.map((r) => `| ${r.op} | ${r.ms ?? (r.us !== undefined ? `${r.us} us${r.medianOf400Us !== undefined ? ` (median of 400: ${r.medianOf400Us} us; kernel ${r.kernelUs} us)` : ''}` : '')} | ${r.kernelMs ?? ''} | ${r.GBs ?? ''} | ${r.pctOfHbm ?? r.pctOfHostCopy ?? r.pctOfPinnedH2D ?? r.ratioToUpload ?? ''} | ${r.torchCompileMs ?? ''} | ${r.target ?? ''}${r.pctOfCeiling !== undefined ? ` (${r.pctOfCeiling} % of min(host copy, pinned host-to-device) = ${r.ceilingGBs} GB/s)` : ''} |`),
  '', torch && !torch.error ? `PyTorch ${torch.torch} on the same GPU (logits already there): ${Object.entries(torch).filter(([k]) => k.endsWith('_ms')).map(([k, v]) => `${k} ${round(v)}`).join(', ')}` +
    `${torch.timedOut ? ` (${torch.timedOut})` : ''}.` : `PyTorch: ${torch?.error ?? 'not run'}.`, '',
].join('\n');
// Written after every row (and at the end): a run stopped by a time limit keeps what it measured.
const dir = outArg ?? join(ROOT, 'bench', 'results');
const jf = join(dir, 'cuda.json'), mf = join(dir, 'cuda.md');
const head = '# bench:cuda results, newest first\n\n';
const prevJson = !outArg && !quick && existsSync(jf) ? JSON.parse(readFileSync(jf, 'utf8')) : [];
const prevMd = !outArg && !quick && existsSync(mf) ? readFileSync(mf, 'utf8').replace(head, '') : '';
const write = (file, text) => {  // whole or not at all: a kill mid-write leaves the previous version
  writeFileSync(`${file}.tmp`, text);
  renameSync(`${file}.tmp`, file);
};
function save() {
  result.torch = torch;
  if (outArg) {
    mkdirSync(dir, { recursive: true });
    write(jf, JSON.stringify(result, null, 1));
    write(mf, markdown());
  } else if (!quick) {
    mkdirSync(dir, { recursive: true });
    write(jf, JSON.stringify([result, ...prevJson], null, 1));
    write(mf, head + markdown() + '\n' + prevMd);
  }
}
save();

// ---- inputs: a random block repeated (cheap to make, the same work per logit as random data) ----
function logits(seed, n) {
  const a = new Float32Array(n);
  const block = Math.min(n, 1 << 20);
  let s = seed >>> 0;
  for (let i = 0; i < block; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    a[i] = (s / 2 ** 32 - 0.5) * 16;
  }
  for (let filled = block; filled < n; filled *= 2) a.copyWithin(filled, 0, Math.min(filled, n - filled));
  return a;
}
// 16-bit copies: the repeated block converted once, then repeated (as logits() repeats it)
const repeat16 = (f32, conv) => {
  const block = Math.min(f32.length, 1 << 20), out = new Uint16Array(f32.length);
  for (let i = 0; i < block; i++) out[i] = conv(f32[i]);
  for (let filled = block; filled < out.length; filled *= 2) out.copyWithin(filled, 0, Math.min(filled, out.length - filled));
  return out;
};
const u32 = new Uint32Array(1), f32v = new Float32Array(u32.buffer);
const bf16 = (x) => ((f32v[0] = x), u32[0] >>> 16);
const f16 = (x) => {  // round to nearest even; the bench's logits are within float16's normal range
  f32v[0] = x;
  const b = u32[0], sign = (b >>> 16) & 0x8000, e = ((b >>> 23) & 0xff) - 127 + 15, m = b & 0x7fffff;
  if (e <= 0) return sign;
  let h = sign | (e << 10) | (m >>> 13);
  const rest = m & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && (h & 1))) h++;
  return h;
};
const zs = logits(1, R * V), zt = logits(2, R * V);
const student = { data: zs, rows: R, vocab: V }, teacher = { data: zt, rows: R, vocab: V };
const studentBf16 = { data: repeat16(zs, bf16), rows: R, vocab: V, dtype: 'bfloat16' };
const teacherBf16 = { data: repeat16(zt, bf16), rows: R, vocab: V, dtype: 'bfloat16' };
const studentF16 = { data: repeat16(zs, f16), rows: R, vocab: V, dtype: 'float16' };
const teacherF16 = { data: repeat16(zt, f16), rows: R, vocab: V, dtype: 'float16' };
const targets = Int32Array.from({ length: R }, (_, r) => (r * 7919) % V);
const row = (op, r) => {
  rows.push({ op, ...r });
  console.log(op, JSON.stringify(r));
  save();
};

// ---- uploads ----
{
  const t = await time(async () => (await rl.cuda.upload(student)).dispose(), 3);
  // Against the host copy rate (the target), and against what the pipeline can reach at best: the ring is
  // filled by a host copy while the bus drains it, so the slower of the two bounds it.
  const ceiling = Math.min(floors.hostCopyGBs, floors.h2dPinnedGBs);
  row('upload f32, pageable', { ms: round(t.ms), GBs: round(f32Bytes / t.ms / 1e6, 1),
    pctOfHostCopy: round(100 * f32Bytes / t.ms / 1e6 / floors.hostCopyGBs, 1), ceilingGBs: round(ceiling, 1),
    pctOfCeiling: round(100 * f32Bytes / t.ms / 1e6 / ceiling, 1), target: '>= 80 % of the host copy rate' });
  const pinned = new Float32Array(rl.cuda.allocHost(f32Bytes));
  pinned.set(zs);
  const p = await time(async () => (await rl.cuda.upload({ data: pinned, rows: R, vocab: V })).dispose(), 3);
  row('upload f32, pinned (allocHost)', { ms: round(p.ms), GBs: round(f32Bytes / p.ms / 1e6, 1),
    pctOfPinnedH2D: round(100 * f32Bytes / p.ms / 1e6 / floors.h2dPinnedGBs, 1), target: '>= 80 % of pinned host-to-device' });
}

// ---- device tensors: kernel and wall times against the HBM floor ----
const hbm = (bytes, ms) => ({ GBs: round(bytes / ms / 1e6, 0), pctOfHbm: round(100 * bytes / ms / 1e6 / floors.hbmCopyGBs, 1) });
const ds = await rl.cuda.upload(student), dt = await rl.cuda.upload(teacher);
const dsb = await rl.cuda.upload(studentBf16), dtb = await rl.cuda.upload(teacherBf16);
const dsh = await rl.cuda.upload(studentF16), dth = await rl.cuda.upload(teacherF16);
const gradOut = await rl.cuda.upload({ data: new Float32Array(R * V), rows: R, vocab: V });
// every logits op of the device for every dtype (bytes: what it must read and write; JSD reads both rows
// twice, as its log-mixture terms need both rows' final logsumexp, but its floor counts one read), with
// the key of the same op in bench/cuda_torch.py
const deviceOps = [];
for (const [dn, s, t, bytes] of [['f32', ds, dt, f32Bytes], ['bf16', dsb, dtb, f32Bytes / 2], ['f16', dsh, dth, f32Bytes / 2]]) {
  deviceOps.push([`tokenStats ${dn}`, () => rl.tokenStats(s, targets), bytes, `tokenStats_${dn}`]);
  deviceOps.push([`reverse KL ${dn}`, () => rl.divergence(s, t), 2 * bytes, `reverseKL_${dn}`]);
  deviceOps.push([`forward KL ${dn}`, () => rl.divergence(s, t, { kind: 'forward_kl' }), 2 * bytes, `forwardKL_${dn}`]);
  deviceOps.push([`JSD ${dn}`, () => rl.divergence(s, t, { kind: 'jsd' }), 2 * bytes, `jsd_${dn}`]);
}
const ones = new Float32Array(R).fill(1 / R);
for (const [dn, s, t, bytes] of [['f32', ds, dt, f32Bytes], ['bf16', dsb, dtb, f32Bytes / 2], ['f16', dsh, dth, f32Bytes / 2]]) {
  const st = rl.tokenStats(s, targets), kl = rl.divergence(s, t), fkl = rl.divergence(s, t, { kind: 'forward_kl' });
  deviceOps.push([`tokenStatsBackward ${dn} (stats, out)`, () => rl.tokenStatsBackward(s, targets, { logprob: ones }, { stats: st, out: gradOut }), bytes + f32Bytes, `tokenStatsBackward_${dn}`]);
  deviceOps.push([`divergenceBackward reverse KL ${dn} (stats, out)`, () => rl.divergenceBackward(s, t, ones, { stats: kl, out: gradOut }), 2 * bytes + f32Bytes, `divergenceBackward_${dn}`]);
  deviceOps.push([`divergenceBackward forward KL ${dn} (stats, out)`, () => rl.divergenceBackward(s, t, ones, { kind: 'forward_kl', stats: fkl, out: gradOut }), 2 * bytes + f32Bytes, `forwardKLBackward_${dn}`]);
  deviceOps.push([`divergenceBackward JSD ${dn} (out)`, () => rl.divergenceBackward(s, t, ones, { kind: 'jsd', out: gradOut }), 2 * bytes + f32Bytes, `jsdBackward_${dn}`]);
}
for (const [op, fn, bytes, torchKey] of deviceOps) {
  const t = await time(fn);
  row(`${op}, ${R}x${V} device tensor`, { ms: round(t.ms), kernelMs: round(t.kernelMs), ...hbm(bytes, t.kernelMs), torchKey,
    target: '>= 80 % of the HBM copy floor, faster than torch.compile' });
}

// ---- host arrays on the device, end to end, against their upload ----
{
  const up = await time(async () => (await rl.cuda.upload(student)).dispose(), 3);
  const e2e = await time(() => rl.tokenStats(student, targets, { device: 'cuda' }), 3);
  row('tokenStats f32, host arrays on the device (end to end)', { ms: round(e2e.ms), uploadMs: round(up.ms),
    ratioToUpload: round(e2e.ms / up.ms, 3), target: '<= 1.25x the upload' });
}

// ---- per-call cost on a small tensor ----
{
  const small = await rl.cuda.upload({ data: logits(3, 8 * 32768), rows: 8, vocab: 32768 });
  const y = new Int32Array(8);
  for (let i = 0; i < 200; i++) rl.tokenStats(small, y);
  const n = quick ? 500 : 2000, laps = [];
  for (let k = 0; k < 5; k++) {
    const t = now();
    for (let i = 0; i < n; i++) rl.tokenStats(small, y);
    laps.push((now() - t) / n);
  }
  // and the median of single calls (what one call in a training step costs)
  const single = [];
  for (let i = 0; i < 400; i++) {
    const t = now();
    rl.tokenStats(small, y);
    single.push(now() - t);
  }
  row('tokenStats f32, 8x32768 device tensor (per call)', { us: round(median(laps) * 1000, 1), medianOf400Us: round(median(single) * 1000, 1),
    kernelUs: round(native.cudaKernelMs({ device: 0 }) * 1000, 1), target: '<= 30 us' });
  small.dispose();
}

// ---- the CPU kernels on the same host arrays, same process ----
const cpuOps = [
  ['tokenStats f32', () => rl.tokenStats(student, targets)],
  ['tokenStats bf16', () => rl.tokenStats(studentBf16, targets)],
  ['reverse KL f32', () => rl.divergence(student, teacher)],
];
for (const [op, fn] of cpuOps) {
  const t = await time(fn, 3);
  row(`${op}, ${R}x${V} host arrays, CPU (${threads} threads, ${rl.backend().isa})`, { ms: round(t.ms) });
}
for (const t of [ds, dt, dsb, dtb, dsh, dth, gradOut]) t.dispose();

// ---- PyTorch on the same GPU ----
// cuda_torch.py runs inside a wrapper that prints what it has measured when its time is up (a timer
// thread, a few seconds before the limit: it runs while the main thread waits in CUDA or on compile
// workers); the process group is killed at the limit (torch.compile's workers included). Its output goes
// to a file, so nothing here waits on a pipe a leftover worker holds.
const TORCH_WRAPPER = `
import json, os, signal, sys, threading
path, limit = sys.argv[1], float(sys.argv[2])
g = {'__name__': '__main__', '__file__': path}
def stop(*_):
    res = dict(g.get('res') or {})
    if not res: res['error'] = 'stopped after %.0f s before measuring anything' % limit
    res['timedOut'] = 'stopped after %.0f s; the ops missing were not measured' % limit
    print(json.dumps(res), flush=True)
    os._exit(0)
timer = threading.Timer(limit, stop)
timer.daemon = True
timer.start()
signal.signal(signal.SIGTERM, stop)
sys.argv = [path]
exec(compile(open(path).read(), path, 'exec'), g)
`;
async function runTorch(limitS) {
  // GEAR_RL_PYTHON chooses the interpreter; else PATH's python3 (where a machine's PyTorch usually is:
  // /usr/bin/python3 may be the system's, without it)
  const py = process.env.GEAR_RL_PYTHON || 'python3';
  const file = join(tmpdir(), `gear-rl-torch-${process.pid}.log`);
  const fd = openSync(file, 'w');
  let child;
  const code = await new Promise((done) => {
    child = spawn(py, ['-c', TORCH_WRAPPER, join(ROOT, 'bench', 'cuda_torch.py'), String(Math.max(1, limitS - 5))], {
      env: { ...process.env, R: String(R), V: String(V) }, stdio: ['ignore', fd, fd], detached: true,
    });
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {}
    }, limitS * 1000);
    child.on('error', (e) => {
      clearTimeout(timer);
      done(e.message);
    });
    child.on('exit', (c, sig) => {
      clearTimeout(timer);
      done(c ?? sig);
    });
  });
  closeSync(fd);
  try {
    if (child.pid) process.kill(-child.pid, 'SIGKILL');  // leftover compile workers
  } catch {}
  const text = existsSync(file) ? readFileSync(file, 'utf8') : '';
  rmSync(file, { force: true });
  const line = text.trim().split('\n').filter((l) => l.startsWith('{')).pop();
  return line ? JSON.parse(line) : { error: `exit ${code}: ${text.trim().split('\n').slice(-3).join(' | ') || 'no output'}` };
}
if (withTorch) {
  const leftS = Math.floor(budgetS - (performance.now() - started) / 1000 - 5);
  const limitS = Math.min(torchTimeoutS, leftS);
  if (limitS >= 15) {
    torch = await runTorch(limitS);
    console.log('torch', JSON.stringify(torch));
  } else {
    torch = { error: `not run: ${Math.max(0, leftS)} s left of --budget ${budgetS}` };
  }
}

// ---- record ----
for (const r of rows) {
  if (!r.torchKey || !torch) continue;
  r.torchCompileMs = round(torch[`compile_${r.torchKey}_ms`] ?? null);
  r.torchEagerMs = round(torch[`eager_${r.torchKey}_ms`] ?? null);
}
result.complete = true;
save();
console.log(markdown());
