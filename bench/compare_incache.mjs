// Before/after of the kernels themselves: `npm run bench:compare-incache -- --before DIR [--isa a,b]
// [--runs N] [--reps N] [--out DIR]`. Inputs small enough for the caches (policyLoss 1.7 MB, sparse lists
// 16 MB / 4 MB, segmentBroadcast 5 MB), one thread, each call's CPU time (process.cpuUsage), so neither
// the memory system nor the neighbours' bandwidth enters; the best of `reps` interleaved calls per side,
// the median of `runs` such bests. Both builds load into this process (see compare.mjs); every ISA
// listed runs on both (setIsa), default: every ISA this CPU runs. The table is added at the top of
// bench/results/compare.md.
import { execSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT } from './lib/harness.mjs';
import { packedRows } from './lib/packed.mjs';
import { addSection } from './lib/records.mjs';
import { makeTopk } from './sparse_divergence.bench.mjs';

function parseArgs(argv) {
  const o = { runs: 3, reps: 12, isa: undefined, before: undefined, out: join(ROOT, 'bench', 'results') };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => (a.includes('=') ? a.slice(a.indexOf('=') + 1) : argv[++i]);
    if (a.startsWith('--before')) o.before = resolve(val());
    else if (a.startsWith('--isa')) o.isa = val().split(',').map((s) => s.trim()).filter(Boolean);
    else if (a.startsWith('--runs')) o.runs = Number(val());
    else if (a.startsWith('--reps')) o.reps = Number(val());
    else if (a.startsWith('--out')) o.out = resolve(val());
    else if (a === '--help' || a === '-h') {
      console.log('usage: node bench/compare_incache.mjs --before DIR [--isa a,b] [--runs N] [--reps N] [--out DIR]');
      process.exit(0);
    } else throw new Error(`unknown argument ${a}`);
  }
  if (!o.before) throw new Error('--before DIR: expected a built checkout to compare against');
  for (const [k, n] of [['runs', o.runs], ['reps', o.reps]]) {
    if (!Number.isInteger(n) || n < 1) throw new Error(`--${k}: expected a positive integer, got ${n}`);
  }
  return o;
}

const sha = (dir) => {
  try {
    return execSync('git rev-parse --short HEAD', { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return 'nogit';
  }
};

async function load(dir) {
  const dist = join(dir, 'dist', 'index.js');
  if (!existsSync(dist)) throw new Error(`${dist} not found (build that checkout first)`);
  const rl = await import(pathToFileURL(dist).href);
  rl.setNumThreads(1);
  return rl;
}

/** The cases: a name and a call of one build. */
function cases() {
  const list = [];
  for (const tokens of [100_000, 10_000]) {
    const { offsets, n, rnd } = packedRows(tokens, 1);
    const logprob = new Float32Array(n), oldLogprob = new Float32Array(n), advantages = new Float32Array(n);
    const mask = new Uint8Array(n);
    for (let i = 0; i < n; i++) {
      oldLogprob[i] = -0.05 - rnd() * 3;
      logprob[i] = oldLogprob[i] + (rnd() * 2 - 1) * 0.4;
      advantages[i] = rnd() * 4 - 2;
      mask[i] = rnd() < 0.8 ? 1 : 0;
    }
    const out = new Float32Array(n);
    const args = { logprob, oldLogprob, advantages, offsets, mask, clipHigh: 0.28, agg: 'token-mean', out };
    list.push([`policyLoss(ppo, token-mean, out), ${n} tokens`, (rl) => rl.policyLoss(args)]);
  }
  for (const k of [20, 5]) {
    const N = 100_000, S = makeTopk(N, k, 2), T = makeTopk(N, k, 3), g = new Float32Array(N).fill(1);
    list.push([`sparseDivergence(reverse_kl, tail), 10^5 x ${k}`, (rl) => rl.sparseDivergence(S, T, { kind: 'reverse_kl', vocab: 151936 })]);
    list.push([`sparseDivergence(jsd, tail), 10^5 x ${k}`, (rl) => rl.sparseDivergence(S, T, { kind: 'jsd', vocab: 151936 })]);
    list.push([`sparseDivergenceBackward(reverse_kl, tail), 10^5 x ${k}`,
      (rl) => rl.sparseDivergenceBackward(S, T, g, { kind: 'reverse_kl', vocab: 151936 })]);
  }
  {
    const { offsets, rows, n, rnd } = packedRows(1_000_000, 1);
    const mask = new Uint8Array(n);
    for (let i = 0; i < n; i++) mask[i] = rnd() < 0.7 ? 1 : 0;
    const rowValues = Float64Array.from({ length: rows }, () => rnd() * 2 - 1), out = new Float32Array(n);
    list.push(['segmentBroadcast, 10^6 tokens', (rl) => rl.segmentBroadcast(rowValues, offsets, mask)]);
    list.push(['segmentBroadcast(out), 10^6 tokens', (rl) => rl.segmentBroadcast(rowValues, offsets, mask, { out })]);
  }
  return list;
}

const cpuMs = (f) => {
  const t = process.cpuUsage();
  f();
  const d = process.cpuUsage(t);
  return (d.user + d.system) / 1000;
};

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const sides = [await load(o.before), await load(ROOT)];
  const isas = o.isa ?? sides[1].backend().isas;
  for (const isa of isas) {
    if (!sides[0].backend().isas.includes(isa)) throw new Error(`--isa ${isa}: the before build does not offer it`);
  }
  const before = sha(o.before), after = sha(ROOT);
  console.log(`compare in cache ${before} (before) vs ${after} (after), ${isas.join(', ')}, 1 thread, ${o.runs} runs of ${o.reps}`);
  const all = cases();
  const rows = [];
  for (const isa of isas) {
    for (const rl of sides) rl.setIsa(isa);
    for (const [name, f] of all) {
      const bests = [[], []];
      for (let run = 0; run < o.runs; run++) {
        const best = [Infinity, Infinity];
        for (let r = 0; r < o.reps; r++) {
          const order = r % 2 === 0 ? [0, 1] : [1, 0];
          for (const s of order) best[s] = Math.min(best[s], cpuMs(() => f(sides[s])));
        }
        bests[0].push(best[0]);
        bests[1].push(best[1]);
      }
      const median = (a) => a.slice().sort((x, y) => x - y)[Math.floor(a.length / 2)];
      const [b, a] = [median(bests[0]), median(bests[1])];
      const change = ((a / b - 1) * 100).toFixed(1);
      const line = `| ${isa} | ${name} | ${b.toFixed(3)} | ${a.toFixed(3)} | ${change > 0 ? '+' : ''}${change} % |`;
      console.log(line);
      rows.push(line);
    }
  }
  const lines = [
    `## ${new Date().toISOString().slice(0, 10)} ${before} vs ${after} in cache ${isas.join(' ')}`,
    '',
    `* One thread, inputs in cache, each call's CPU time; best of ${o.reps} interleaved calls per side, median of ${o.runs} runs (bench/compare_incache.mjs)`,
    '',
    '| ISA | op and shape | before ms | after ms | change |',
    '| --- | --- | ---: | ---: | ---: |',
    ...rows,
  ];
  mkdirSync(o.out, { recursive: true });
  const file = join(o.out, 'compare.md');
  addSection(file, 'Before/after comparisons (bench:compare), newest first', lines.join('\n'));
  console.log(`\nadded to ${file}`);
}

main().catch((e) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(2);
});
