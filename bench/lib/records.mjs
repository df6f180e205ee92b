// The accumulating bench records: one Markdown file per bench, `bench/results/<bench file>.md`, its runs
// newest first, each under a heading `## <date> <commit> <isa>` (so a link can name one run:
// `token_stats.md#2026-11-26-f178914-avx512`); every row of every run, with all its fields, in one CSV,
// `bench/results/history.csv`, newest first. A bench re-run on the same commit and ISA replaces that
// run's section and rows.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';

const cell = (v) => (v === undefined || v === null || v === '' ? '' : String(v).replace(/\|/g, '\\|'));

/** The heading (without `## `) of one run: date, commit and ISA (and `quick`), the anchor of the run. */
export function runKey(run) {
  return `${run.date.slice(0, 10)} ${run.commit} ${run.machine.backend.isa}${run.quick ? ' quick' : ''}`;
}

const LEGEND = [
  'GB/s = bytes the op must move (read + written) / time. % of floor = that over the read floor of the same run',
  '(or the copy floor where the row says so). % local = each repetition\'s GB/s over the higher of the read',
  'bandwidths probed just before and just after it (512 MiB, one stream per thread), the median over the',
  'repetitions: the machine\'s bandwidth drifts within minutes, so this is the steadier figure. Rows of the',
  'computeCeiling bench give the highest % of floor an op can reach on this machine (see bench/README.md).',
  'Speedup = peer ms / our ms, same run.',
];

/** The top of a bench's file. */
function header(bench) {
  return [`# ${bench}: benchmark records, newest first`, '', ...LEGEND, ''].join('\n');
}

/** One run of one bench as a Markdown section. */
export function renderSection(run, bench) {
  const m = run.machine;
  const f = run.floor;
  const rows = run.rows.filter((r) => r.bench === bench);
  const out = [`## ${runKey(run)}`, ''];
  out.push(`* Commit ${run.commit}${run.dirty ? ' (with uncommitted changes)' : ''}, ${run.date.slice(0, 19).replace('T', ' ')} UTC`);
  out.push(`* Machine: ${m.cpu}, ${m.cores} cores, ${m.memGiB} GiB, ${m.platform}, Node ${m.node}`);
  out.push(`* Backend: ${m.backend.variant} / ${m.backend.isa}, ${run.threads} threads, gear-rl ${m.backend.version}${run.quick ? ' — QUICK run (small shapes)' : ''}`);
  out.push(`* Floor (same run, ${f.threads} threads, ${Math.round(f.bytes / 2 ** 20)} MiB buffers, median of ${f.reps}): ` +
    `read ${f.readGBs} GB/s (1 stream/thread ${f.read1GBs}, 2 streams/thread ${f.read2GBs}), copy with non-temporal stores ${f.copyGBs} GB/s`);
  if (rows.some((r) => r.floorOfRun !== undefined)) {
    out.push('* Rows marked with their own floor come from an earlier run on this commit; their % of floor uses that floor.');
  }
  out.push('');
  out.push('| op | dtype | shape | ms | ns/elem | GB/s | % floor | % local | peer | peer ms | speedup | note |');
  out.push('| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- |');
  for (const x of rows) {
    const pct = x.pctFloor === undefined ? '' : `${x.pctFloor}${x.floorKind === 'copy' ? ' (copy)' : ''}`;
    const local = x.pctLocalFloor === undefined ? '' : `${x.pctLocalFloor} (${x.localFloorGBs} GB/s)`;
    const note = [x.note, x.floorOfRun !== undefined ? `floor of its run: ${x.floorOfRun} GB/s` : ''].filter(Boolean).join('; ');
    out.push(`| ${[x.op, x.dtype, x.shape, x.ms, x.nsPerElem, x.gbs, pct, local, x.peer, x.peerMs, x.speedup ? `${x.speedup}x` : '', note]
      .map(cell).join(' | ')} |`);
  }
  const failed = (run.benches ?? []).find((b) => b.name === bench && b.error);
  if (failed) out.push('', `Failed: ${failed.error}`);
  out.push('');
  return out.join('\n');
}

/** Splits a records file into its header and its sections (each starting with `## `). */
function sections(text) {
  const parts = text.split(/\n(?=## )/);
  return { head: parts[0], runs: parts.slice(1).map((s) => (s.endsWith('\n') ? s : `${s}\n`)) };
}

/** Adds one run of `bench` at the top of its file (replacing the section of the same run key). */
export function addToBenchFile(path, bench, run) {
  const section = renderSection(run, bench);
  const key = `## ${runKey(run)}\n`;
  const { runs } = existsSync(path) ? sections(readFileSync(path, 'utf8')) : { runs: [] };
  const kept = runs.filter((s) => !s.startsWith(key));
  writeFileSync(path, [header(bench), section, ...kept].join('\n').replace(/\n{3,}/g, '\n\n'));
}

/** The columns of history.csv: the run's identity, then every field a row may have. */
export const HISTORY_COLUMNS = [
  'date', 'commit', 'dirty', 'isa', 'variant', 'threads', 'quick', 'cpu', 'cores', 'platform', 'node', 'floorReadGBs', 'floorCopyGBs',
  'bench', 'op', 'dtype', 'shape', 'ms', 'nsPerElem', 'bytes', 'gbs', 'pctFloor', 'floorKind', 'pctLocalFloor', 'localFloorGBs',
  'floorOfRun', 'nsOneThread', 'peer', 'peerMs', 'speedup', 'note',
];

const csvCell = (v) => {
  if (v === undefined || v === null) return '';
  const s = String(v);
  return /[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
};

/** The CSV lines of a run's rows of the given benches. */
function historyLines(run, benches) {
  const m = run.machine;
  const id = {
    date: run.date, commit: run.commit, dirty: run.dirty, isa: m.backend.isa, variant: m.backend.variant, threads: run.threads,
    quick: run.quick, cpu: m.cpu, cores: m.cores, platform: m.platform, node: m.node, floorReadGBs: run.floor.readGBs,
    floorCopyGBs: run.floor.copyGBs,
  };
  return run.rows.filter((r) => benches.includes(r.bench)).map((r) => HISTORY_COLUMNS.map((c) => csvCell({ ...id, ...r }[c])).join(','));
}

/**
 * Adds a run's rows of `benches` at the top of history.csv, dropping the rows of the same benches, commit,
 * ISA and quickness that an earlier run on the same commit wrote.
 */
export function addToHistory(path, run, benches) {
  const headerLine = HISTORY_COLUMNS.join(',');
  const old = existsSync(path) ? readFileSync(path, 'utf8').split('\n').filter(Boolean).slice(1) : [];
  const col = (name) => HISTORY_COLUMNS.indexOf(name);
  const same = (line) => {
    const f = parseCsvLine(line);
    return f[col('commit')] === run.commit && f[col('isa')] === run.machine.backend.isa && f[col('quick')] === String(run.quick) &&
      benches.includes(f[col('bench')]);
  };
  writeFileSync(path, [headerLine, ...historyLines(run, benches), ...old.filter((l) => !same(l))].join('\n') + '\n');
}

/** The fields of one CSV line (quoted fields with doubled quotes). */
export function parseCsvLine(line) {
  const out = [];
  let i = 0;
  while (i <= line.length) {
    if (line[i] === '"') {
      let s = '';
      i++;
      while (i < line.length) {
        if (line[i] === '"' && line[i + 1] === '"') { s += '"'; i += 2; } else if (line[i] === '"') { i++; break; } else s += line[i++];
      }
      out.push(s);
      i++; // the comma
    } else {
      const j = line.indexOf(',', i);
      const end = j < 0 ? line.length : j;
      out.push(line.slice(i, end));
      i = end + 1;
    }
  }
  return out;
}

/** Adds a Markdown section (its first line a `## ` heading) at the top of a records file with the given title. */
export function addSection(path, title, section) {
  const { runs } = existsSync(path) ? sections(readFileSync(path, 'utf8')) : { runs: [] };
  const key = `${section.split('\n')[0]}\n`;
  writeFileSync(path, [`# ${title}\n`, section.endsWith('\n') ? section : `${section}\n`, ...runs.filter((s) => !s.startsWith(key))]
    .join('\n').replace(/\n{3,}/g, '\n\n'));
}
