// Before/after comparison in one run: `npm run bench:compare -- --before DIR [--only a,b] [--rounds N]
// [--threads N] [--out DIR]`. DIR is another checkout of the package, built (`npm run build`), e.g. the
// previous commit: `git worktree add /tmp/before HEAD~1 && (cd /tmp/before && npm ci && npm run build)`.
//
// Both builds load into this process (their addons are separate files, so separate modules) and each
// bench runs on both, alternating which goes first, `rounds` times. A shared machine's bandwidth drifts
// by tens of percent between minutes, so the table keeps each op's best time per side: the best of
// interleaved rounds is what the code can do, and both sides saw the same drift. The table is added at
// the top of bench/results/compare.md (newest first).
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createHarness, measureFloor, ROOT } from './lib/harness.mjs';
import { commitOf, parseFlags } from './lib/cli.mjs';
import { addSection } from './lib/records.mjs';

function parseArgs(argv) {
  const o = parseFlags(argv, { rounds: 3, threads: 2, only: undefined, before: undefined, out: join(ROOT, 'bench', 'results') },
    { before: 'path', only: 'list', rounds: 'count', threads: 'count', out: 'path' },
    'usage: node bench/compare.mjs --before DIR [--only name[,name]] [--rounds N] [--threads N] [--out DIR]');
  if (o.only) o.only = o.only.map((s) => s.toLowerCase());
  return o;
}

async function loadSide(dir, label, threads) {
  const dist = join(dir, 'dist', 'index.js');
  if (!existsSync(dist)) throw new Error(`${label}: ${dist} not found (build that checkout first)`);
  const rl = await import(pathToFileURL(dist).href);
  rl.setNumThreads(threads);
  return { label, dir, commit: commitOf(dir), rl };
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const sides = [await loadSide(o.before, 'before', o.threads), await loadSide(ROOT, 'after', o.threads)];
  const isa = sides[1].rl.backend().isa;
  if (sides[0].rl.backend().isa !== isa) throw new Error(`the two builds chose different ISAs (${sides[0].rl.backend().isa}, ${isa}): set GEAR_RL_ISA`);

  const benchDir = join(ROOT, 'bench');
  const benches = [];
  for (const f of readdirSync(benchDir).filter((x) => x.endsWith('.bench.mjs')).sort()) {
    const mod = await import(pathToFileURL(join(benchDir, f)).href);
    const name = mod.name ?? f.replace(/\.bench\.mjs$/, '');
    if (o.only && !o.only.includes(name.toLowerCase()) && !o.only.includes(f.replace(/\.bench\.mjs$/, '').toLowerCase())) continue;
    benches.push({ name, run: mod.default });
  }
  if (benches.length === 0) throw new Error(`--only: no bench matched ${o.only}`);

  const floor = measureFloor(sides[1].rl, { threads: o.threads });
  console.log(`compare ${sides[0].commit} (before) vs ${sides[1].commit} (after), ${isa}, ${o.threads} threads, ` +
    `${o.rounds} rounds; floor read ${floor.readGBs} GB/s`);
  // best[key] = { before: ms, after: ms, row }
  const best = new Map();
  for (let r = 0; r < o.rounds; r++) {
    const order = r % 2 === 0 ? sides : [sides[1], sides[0]];
    for (const b of benches) {
      for (const side of order) {
        const h = createHarness({ floor, threads: o.threads, quick: false, peers: false, log: () => {} });
        h.setBench(b.name);
        await b.run({ rl: side.rl, quick: false, h });
        for (const row of h.rows) {
          if (row.peerMs !== undefined && row.ms === undefined) continue;
          const key = `${b.name}|${row.op}|${row.dtype}|${row.shape}`;
          const e = best.get(key) ?? { row, before: Infinity, after: Infinity };
          e[side.label] = Math.min(e[side.label], row.ms);
          best.set(key, e);
        }
        console.log(`  round ${r + 1} ${b.name} ${side.label} done`);
      }
    }
  }

  const lines = [
    `## ${new Date().toISOString().slice(0, 10)} ${sides[0].commit} vs ${sides[1].commit} ${isa}${o.only ? ` ${o.only.join(' ')}` : ''}`,
    '',
    `* Backend: cpu / ${isa}, ${o.threads} threads; same process, ${o.rounds} interleaved rounds, best time per side`,
    `* Floor (start of run): read ${floor.readGBs} GB/s`,
    '',
    '| bench | op | dtype | shape | before ms | after ms | change |',
    '| --- | --- | --- | --- | ---: | ---: | ---: |',
  ];
  for (const [key, e] of best) {
    const [bench] = key.split('|');
    const change = ((e.after / e.before - 1) * 100).toFixed(1);
    lines.push(`| ${bench} | ${e.row.op} | ${e.row.dtype ?? ''} | ${e.row.shape ?? ''} | ${e.before.toFixed(3)} | ${e.after.toFixed(3)} | ${change > 0 ? '+' : ''}${change} % |`);
  }
  mkdirSync(o.out, { recursive: true });
  const file = join(o.out, 'compare.md');
  addSection(file, 'Before/after comparisons (bench:compare), newest first', lines.join('\n'));
  console.log(lines.join('\n'));
  console.log(`\nadded to ${file}`);
}

main().catch((e) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(2);
});
