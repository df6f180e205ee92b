#!/usr/bin/env node
// What the CUDA kernels cost per element, without a GPU: `node bench/cuda_sass.mjs [--arch 90] [--out FILE]`.
// Compiles native/src/cuda/{token_stats,divergence}.cu to a cubin with nvcc (ptxas -v: registers, spills),
// disassembles it (cuobjdump -sass, or nvdisasm: NVDISASM=/path, or on PATH) and finds each kernel's
// streaming loop: the innermost loop (a backward branch) whose body holds the 16-byte loads. For it:
// the static instructions in the loop's span, the elements it consumes per iteration (16-byte loads x
// elements per load / inputs), instructions per element, MUFU (special-function) and float64 instructions
// in the span. Static counts, not a profile: a branch skipped at run time (a pivot move, a fold) still
// counts. Results are appended to bench/results/cuda_sass.md (newest first) with the commit, or --out.
//
// nvdisasm older than the CUDA 13 toolkit reads its cubins once the ELF header carries the older ABI
// (version 7, flags naming the SM): done on a copy when the first attempt fails.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = (name, fallback) => (args.indexOf(name) >= 0 ? args[args.indexOf(name) + 1] : fallback);
const arch = Number(opt('--arch', '90'));
const out = opt('--out', join(ROOT, 'bench', 'results', 'cuda_sass.md'));
const which = (name, extra = []) =>
  [...extra, ...(process.env.PATH ?? '').split(delimiter)].map((d) => join(d, name)).find((p) => existsSync(p));
const nvcc = which('nvcc', ['/usr/local/cuda/bin']);
if (!nvcc) throw new Error('nvcc not found (/usr/local/cuda/bin or PATH)');
const cuobjdump = which('cuobjdump', [dirname(nvcc)]);
const nvdisasm = process.env.NVDISASM ?? which('nvdisasm', [dirname(nvcc)]);
if (!cuobjdump && !nvdisasm) throw new Error('cuobjdump or nvdisasm needed (NVDISASM=/path/to/nvdisasm)');

const dir = mkdtempSync(join(tmpdir(), 'gear-rl-sass-'));
const demangle = (names) => {
  const r = spawnSync('c++filt', { input: names.join('\n'), encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trimEnd().split('\n') : names;
};
// "gear::cuda::(anonymous namespace)::stats_kernel<(gear::DType)1, 256>(...)" -> "stats_kernel<bf16, 256>"
const short = (d) => {
  const m = /::(\w+)<([^>]*)>\(/.exec(d) ?? /::(\w+)\(/.exec(d);
  if (!m) return d;
  const t = (m[2] ?? '').replace(/\(gear::DType\)0/, 'f32').replace(/\(gear::DType\)1/, 'bf16').replace(/\(gear::DType\)2/, 'f16');
  return t ? `${m[1]}<${t}>` : m[1];
};

function disassemble(cubin) {
  if (cuobjdump) {
    const r = spawnSync(cuobjdump, ['-sass', cubin], { encoding: 'utf8', maxBuffer: 1 << 28 });
    if (r.status === 0) return r.stdout;
  }
  let r = spawnSync(nvdisasm, ['-c', cubin], { encoding: 'utf8', maxBuffer: 1 << 28 });
  if (r.status === 0) return r.stdout;
  const b = readFileSync(cubin);
  b[8] = 7;  // EI_ABIVERSION
  b.writeUInt32LE((arch << 16) | 0x500 | arch, 0x30);  // e_flags: SM, virtual SM, 64-bit addresses, unified textures
  const old = `${cubin}.abi7`;
  writeFileSync(old, b);
  r = spawnSync(nvdisasm, ['-c', old], { encoding: 'utf8', maxBuffer: 1 << 28 });
  if (r.status !== 0) throw new Error(`nvdisasm: ${r.stderr}`);
  return r.stdout;
}

// Functions of a disassembly: name -> instructions ({ op, text, target? }) and labels -> index.
function functions(sass) {
  const fns = new Map();
  let cur = null;
  for (const line of sass.split('\n')) {
    const head = /^\s*(?:Function : |\.text\.)(\S+?):?\s*$/.exec(line);
    if (head && !line.includes('.section')) {
      cur = { insts: [], labels: new Map() };
      fns.set(head[1], cur);
      continue;
    }
    if (!cur) continue;
    const label = /^(\.L_x_\d+):/.exec(line);
    if (label) {
      cur.labels.set(label[1], cur.insts.length);
      continue;
    }
    const ins = /\/\*([0-9a-f]{4,})\*\/\s+(.*?);/.exec(line);
    if (!ins) continue;
    const text = ins[2].trim();
    const op = text.replace(/^@!?U?P\w+\s+/, '').split(/\s+/)[0];
    const addr = parseInt(ins[1], 16);
    const tgt = /BRA\s+(?:`\((\.L_x_\d+)\)|(0x[0-9a-f]+))/.exec(text);
    cur.insts.push({ op, text, addr, target: tgt ? tgt[1] ?? Number(tgt[2]) : undefined });
  }
  for (const f of fns.values()) {
    const byAddr = new Map(f.insts.map((x, i) => [x.addr, i]));
    for (const x of f.insts) {
      if (typeof x.target === 'string') x.to = f.labels.get(x.target);
      else if (typeof x.target === 'number') x.to = byAddr.get(x.target);
    }
  }
  return fns;
}

const isVecLoad = (x) => /^LDG\..*128/.test(x.op);
const isF64 = (x) => /^(DADD|DFMA|DMUL|DSETP|DMNMX)/.test(x.op) || /^F2F\.F64|^F2F\.F32\.F64/.test(x.op);
const conditional = (x) => /^@/.test(x.text);

// The fewest instructions from instruction a to instruction b (a <= b) that execute on a path going
// forward through [a, b] (branches leaving the range are not taken), or Infinity.
function shortest(f, a, b) {
  const d = new Array(b - a + 1).fill(Infinity);
  d[0] = 1;
  for (let i = a; i < b; i++) {
    const di = d[i - a];
    if (di === Infinity) continue;
    const x = f.insts[i];
    const jump = x.op === 'BRA' && x.to !== undefined && x.to > i && x.to <= b;
    const ends = (x.op === 'BRA' || x.op === 'EXIT' || x.op === 'RET') && !conditional(x);
    if (jump) d[x.to - a] = Math.min(d[x.to - a], di + 1);
    if (!ends) d[i + 1 - a] = Math.min(d[i + 1 - a], di + 1);
  }
  return d[b - a];
}

// The streaming loop of a kernel: among the loops (backward branches) holding 16-byte loads, the one
// with the most loads, then with special-function instructions, then the innermost. Its steady path:
// the fewest instructions from the loop head through every load to the backward branch, so code the
// iteration skips in the common case (a pivot move, a fold every few vectors) is left out; its span:
// every instruction between head and branch.
function hotLoop(f, inputs, elemsPerLoad) {
  let best = null;
  f.insts.forEach((x, i) => {
    if (x.op !== 'BRA' || x.to === undefined || x.to > i) return;
    const idx = [];
    for (let k = x.to; k <= i; k++) if (isVecLoad(f.insts[k])) idx.push(k);
    if (idx.length === 0) return;
    const body = f.insts.slice(x.to, i + 1);
    const mufu = body.some((y) => y.op.startsWith('MUFU'));
    const better = !best || idx.length > best.idx.length ||
      (idx.length === best.idx.length && (mufu && !best.mufu || (mufu === best.mufu && body.length < best.body.length)));
    if (better) best = { head: x.to, end: i, idx, body, mufu };
  });
  if (!best) return null;
  const stops = [best.head, ...best.idx, best.end];
  let path = 1;
  for (let k = 0; k + 1 < stops.length; k++) path += shortest(f, stops[k], stops[k + 1]) - 1;
  const elems = (best.idx.length * elemsPerLoad) / inputs;
  return {
    span: best.body.length, path, loads: best.idx.length, elems, perElem: +(path / elems).toFixed(2),
    mufu: best.body.filter((x) => x.op.startsWith('MUFU')).length, f64: best.body.filter(isF64).length,
  };
}

const git = (a) => {
  try {
    return execFileSync('git', a, { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return 'unknown';
  }
};
const rows = [];
for (const file of ['token_stats', 'divergence']) {
  const cubin = join(dir, `${file}.cubin`);
  const cc = spawnSync(nvcc, ['-std=c++17', '-O3', `-arch=sm_${arch}`, '-cubin', '-Xptxas', '-v', `-I${join(ROOT, 'native/include')}`,
    join(ROOT, 'native/src/cuda', `${file}.cu`), '-o', cubin], { encoding: 'utf8', maxBuffer: 1 << 26 });
  if (cc.status !== 0) throw new Error(cc.stderr);
  // ptxas -v: "Compiling entry function 'X'", then "Used N registers" and the spill line
  const res = new Map();
  let name = null;
  for (const line of cc.stderr.split('\n')) {
    const e = /Compiling entry function '(\S+)'/.exec(line) ?? /Function properties for (\S+)/.exec(line);
    if (e) name = e[1];
    const sp = /(\d+) bytes spill stores, (\d+) bytes spill loads/.exec(line);
    if (sp && name) res.set(name, { ...res.get(name), spills: Number(sp[1]) + Number(sp[2]) });
    const rg = /Used (\d+) registers/.exec(line);
    if (rg && name) res.set(name, { ...res.get(name), regs: Number(rg[1]) });
  }
  const fns = functions(disassemble(cubin));
  const mangled = [...fns.keys()];
  const pretty = demangle(mangled);
  mangled.forEach((m, i) => {
    const s = short(pretty[i]);
    const dt = /<(f32|bf16|f16)/.exec(s)?.[1];
    const inputs = file === 'divergence' && /pair_kernel|jsd_kernel|grad_kernel/.test(s) ? 2 : 1;
    const loop = dt ? hotLoop(fns.get(m), inputs, dt === 'f32' ? 4 : 8) : null;
    rows.push({ kernel: `${file}.cu ${s}`, ...(res.get(m) ?? {}), total: fns.get(m).insts.length, loop });
  });
}
rmSync(dir, { recursive: true, force: true });
rows.sort((a, b) => a.kernel.localeCompare(b.kernel));

const commit = git(['rev-parse', '--short', 'HEAD']);
const dirty = git(['status', '--porcelain', '--', 'native']) !== '';
const ver = /release (\S+),/.exec(execFileSync(nvcc, ['--version'], { encoding: 'utf8' }))?.[1] ?? '?';
const md = [
  `## ${new Date().toISOString().slice(0, 10)} ${commit}${dirty ? ' (with uncommitted changes in native/)' : ''}: sm_${arch}, nvcc ${ver}`, '',
  '| kernel | registers | spill bytes | instructions | loop span | loop path | elements per iteration | path per element | MUFU in span | float64 in span |',
  '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ...rows.map((r) => `| ${r.kernel} | ${r.regs ?? ''} | ${r.spills ?? ''} | ${r.total} | ${r.loop?.span ?? ''} | ${r.loop?.path ?? ''} | ${r.loop?.elems ?? ''} | ${r.loop?.perElem ?? ''} | ${r.loop?.mufu ?? ''} | ${r.loop?.f64 ?? ''} |`),
  '',
].join('\n');
const head = '# CUDA kernels: registers and SASS instructions, newest first\n\n' +
  'From `node bench/cuda_sass.mjs` (no GPU needed). The loop: the kernel\'s streaming loop (the one holding\n' +
  'its 16-byte loads). Span: the static instructions between its head and its backward branch; path: the\n' +
  'fewest of them an iteration executes through every load (what it skips in the common case, a pivot move\n' +
  'or a fold every few vectors, left out); per element: path / elements of each input per iteration. Static\n' +
  'counts, not a profile: time is measured on a GPU by bench:cuda.\n\n';
const prev = out.endsWith('cuda_sass.md') && existsSync(out) ? readFileSync(out, 'utf8').replace(head, '') : '';
writeFileSync(out, head + md + '\n' + prev);
console.log(md);
