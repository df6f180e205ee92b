#!/usr/bin/env node
// Benchmark runner: `npm run bench -- [--quick] [--only a,b] [--threads N] [--no-peers] [--out DIR]`.
// Measures the machine's memory bandwidth (the floor), runs every bench/*.bench.mjs (or the ones named
// by --only) against the built package (dist/index.js), and adds the run at the top of each bench's
// record, bench/results/<bench file>.md, and of bench/results/history.csv (see lib/records.mjs). Quick
// runs (small shapes, for smoke tests) go to the system temp folder unless --out is given, so they never
// mix with recorded results.
import { execSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createHarness, floorProbe, measureFloor, ROOT } from './lib/harness.mjs';
import { addToBenchFile, addToHistory, runKey } from './lib/records.mjs';

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

  const outDir = opts.out ?? (opts.quick ? join(tmpdir(), 'gear-rl-bench') : join(benchDir, 'results'));
  mkdirSync(outDir, { recursive: true });
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
  // The ISA in the run's key: runs of one commit under GEAR_RL_ISA=<isa> and on the best path stay apart;
  // a bench re-run on the same commit and ISA replaces its earlier section and rows.
  const records = benches.map((b) => join(outDir, `${b.file.replace(/\.bench\.mjs$/, '')}.md`));
  benches.forEach((b, i) => addToBenchFile(records[i], b.name, result));
  addToHistory(join(outDir, 'history.csv'), result, benches.map((b) => b.name));
  console.log(`\nadded run "${runKey(result)}" to ${records.join(', ')} and ${join(outDir, 'history.csv')}`);
  if (benchResults.some((b) => b.error)) process.exitCode = 1;
}

main().catch((e) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(2);
});
