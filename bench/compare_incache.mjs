// Before/after of the kernels themselves: `npm run bench:compare-incache -- --before DIR [--isa a,b]
// [--runs N] [--reps N] [--out DIR]`. Inputs small enough for the caches (policyLoss 1.7 MB, sparse lists
// 16 MB / 4 MB, segmentBroadcast 5 MB), one thread, each call's CPU time (process.cpuUsage), so neither
// the memory system nor the neighbours' bandwidth enters; the best of `reps` interleaved calls per side,
// the median of `runs` such bests. Both builds load into this process (see compare.mjs); every ISA
// listed runs on both (setIsa), default: every ISA this CPU runs. The table is added at the top of
// bench/results/compare.md.
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT } from './lib/harness.mjs';
import { packedRows } from './lib/packed.mjs';
import { commitOf, parseFlags } from './lib/cli.mjs';
import { addSection } from './lib/records.mjs';
import { policyBatch } from './policy_loss.bench.mjs';
import { makeTopk } from './sparse_divergence.bench.mjs';

function parseArgs(argv) {
  const o = parseFlags(argv, { runs: 3, reps: 12, isa: undefined, before: undefined, out: join(ROOT, 'bench', 'results') },
    { before: 'path', isa: 'list', runs: 'count', reps: 'count', out: 'path' },
    'usage: node bench/compare_incache.mjs --before DIR [--isa a,b] [--runs N] [--reps N] [--out DIR]');
  return o;
}

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
    const { logprob, oldLogprob, advantages, offsets, mask, n } = policyBatch(tokens);
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
  const before = commitOf(o.before), after = commitOf(ROOT);
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
