#!/usr/bin/env node
// Benchmark runner: `npm run bench -- [--quick] [--only a,b] [--threads N] [--no-peers] [--out DIR]`.
// Measures the machine's memory bandwidth (the floor), runs every bench/*.bench.mjs (or the ones named
// by --only) against the built package (dist/index.js), and writes bench/results/<date>-<commit>-<isa>.json
// and .md. Quick runs (small shapes, for smoke tests) go to the system temp folder unless --out is given,
// so they never mix with recorded results.
import { execSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createHarness, floorProbe, measureFloor, ROOT } from './lib/harness.mjs';
import { renderMarkdown } from './lib/report.mjs';

function parseArgs(argv) {
  const o = { quick: false, only: null, threads: 2, peers: true, out: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      const v = a.includes('=') ? a.slice(a.indexOf('=') + 1) : argv[++i];
      if (v === undefined) throw new Error(`${a}: expected a value`);
      return v;
    };
    if (a === '--quick') o.quick = true;
    else if (a === '--no-peers') o.peers = false;
    else if (a.startsWith('--only')) o.only = val().split(',').map((s) => s.trim().toLowerCase()).filter(Boolean);
    else if (a.startsWith('--threads')) {
      o.threads = Number(val());
      if (!Number.isInteger(o.threads) || o.threads < 1) throw new Error(`--threads: expected a positive integer, got ${o.threads}`);
    } else if (a.startsWith('--out')) o.out = resolve(val());
    else if (a === '--help' || a === '-h') {
      console.log('usage: node bench/run.mjs [--quick] [--only name[,name]] [--threads N] [--no-peers] [--out DIR]');
      process.exit(0);
    } else throw new Error(`unknown argument ${a}`);
  }
  return o;
}

function git(cmd, dflt) {
  try {
    return execSync(`git ${cmd}`, { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return dflt;
  }
}

function machine(rl) {
  let cpuModel = cpus()[0]?.model ?? 'unknown';
  try {
    const m = readFileSync('/proc/cpuinfo', 'utf8').match(/^model name\s*:\s*(.+)$/m);
    if (m) cpuModel = m[1].trim();
  } catch {
    /* non-Linux */
  }
  const b = rl.backend();
  return {
    cpu: cpuModel,
    cores: cpus().length,
    memGiB: +(totalmem() / 2 ** 30).toFixed(1),
    node: process.version,
    platform: `${process.platform}-${process.arch}`,
    backend: { variant: b.variant, isa: b.isa, threads: b.threads, version: b.version },
  };
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const dist = join(ROOT, 'dist', 'index.js');
  if (!existsSync(dist)) throw new Error('dist/index.js not found: run `npm run build:ts` first (npm run bench does)');
  const rl = await import(pathToFileURL(dist).href);
  rl.setNumThreads(opts.threads);

  const benchDir = join(ROOT, 'bench');
  const files = readdirSync(benchDir).filter((f) => f.endsWith('.bench.mjs')).sort();
  const benches = [];
  for (const f of files) {
    const mod = await import(pathToFileURL(join(benchDir, f)).href);
    const name = mod.name ?? f.replace(/\.bench\.mjs$/, '');
    const keys = [name.toLowerCase(), f.replace(/\.bench\.mjs$/, '').toLowerCase()];
    if (opts.only && !opts.only.some((o) => keys.includes(o))) continue;
    if (typeof mod.default !== 'function') throw new Error(`${f}: expected a default export function`);
    benches.push({ name, file: f, run: mod.default });
  }
  if (opts.only) {
    const found = new Set(benches.flatMap((b) => [b.name.toLowerCase(), b.file.replace(/\.bench\.mjs$/, '').toLowerCase()]));
    const missing = opts.only.filter((o) => !found.has(o));
    if (missing.length) throw new Error(`--only: no bench named ${missing.join(', ')} (have: ${files.join(', ')})`);
  }

  const sha = git('rev-parse --short HEAD', 'nogit');
  const dirty = git('status --porcelain --untracked-files=no', '') !== '';
  const mach = machine(rl);
  console.log(`gear-rl bench  commit ${sha}${dirty ? ' (dirty)' : ''}  ${mach.cpu}, ${mach.cores} cores, node ${mach.node}, ` +
    `${mach.backend.variant}/${mach.backend.isa}, ${opts.threads} threads${opts.quick ? ', quick' : ''}`);
  const floor = measureFloor(rl, { threads: opts.threads, quick: opts.quick });
  console.log(`floor: read ${floor.readGBs} GB/s (1 stream ${floor.read1GBs}, 2 streams ${floor.read2GBs}), ` +
    `copy (non-temporal) ${floor.copyGBs} GB/s, ${floor.threads} threads`);

  const h = createHarness({ floor, threads: opts.threads, quick: opts.quick, peers: opts.peers, probe: floorProbe(rl, opts.threads) });
  const benchResults = [];
  for (const b of benches) {
    console.log(`\n[${b.name}]`);
    h.setBench(b.name);
    const t0 = Date.now();
    let error;
    try {
      await b.run({ rl, quick: opts.quick, h });
    } catch (e) {
      error = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
      console.error(`  FAILED: ${error}`);
    }
    benchResults.push({ name: b.name, file: b.file, seconds: +((Date.now() - t0) / 1000).toFixed(1), error });
  }

  const date = new Date().toISOString().slice(0, 10);
  const outDir = opts.out ?? (opts.quick ? join(tmpdir(), 'gear-rl-bench') : join(benchDir, 'results'));
  mkdirSync(outDir, { recursive: true });
  // The ISA in the name: runs of one commit under GEAR_RL_ISA=<isa> and on the best path stay apart.
  const base = join(outDir, `${date}-${sha}-${mach.backend.isa}${opts.quick ? '-quick' : ''}`);
  const result = {
    commit: sha,
    dirty,
    date: new Date().toISOString(),
    quick: opts.quick,
    threads: opts.threads,
    machine: mach,
    floor,
    benches: benchResults,
    rows: h.rows,
  };
  // Several runs on one commit (e.g. one bench at a time) merge: rows of re-run benches are replaced.
  if (existsSync(`${base}.json`)) {
    try {
      const prev = JSON.parse(readFileSync(`${base}.json`, 'utf8'));
      const rerun = new Set(benchResults.map((b) => b.name));
      const kept = prev.rows.filter((r) => !rerun.has(r.bench)).map((r) => ({ floorOfRun: prev.floor?.readGBs, ...r }));
      const keptBenches = prev.benches.filter((b) => !rerun.has(b.name));
      if (keptBenches.length) {
        result.rows = [...kept, ...h.rows];
        result.benches = [...keptBenches, ...benchResults];
        result.earlierRuns = [...(prev.earlierRuns ?? []), { date: prev.date, floor: prev.floor, benches: keptBenches.map((b) => b.name) }];
      }
    } catch {
      /* unreadable previous file: overwrite */
    }
  }
  writeFileSync(`${base}.json`, JSON.stringify(result, null, 2) + '\n');
  writeFileSync(`${base}.md`, renderMarkdown(result));
  console.log(`\nwrote ${base}.json and .md`);
  if (benchResults.some((b) => b.error)) process.exitCode = 1;
}

main().catch((e) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(2);
});
