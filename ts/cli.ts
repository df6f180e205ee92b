#!/usr/bin/env node
/**
 * The `gear-rl` command line.
 *
 * ```
 * gear-rl visualize <batch.json> -o report.html [--metric divergence|entropy|weight] [--title T]
 *                   [--max-rows N] [--recompute]
 * ```
 * `batch.json` is the saved-batch format written by `saveBatch` (`gear-rl/batch` v1). Without a stored
 * result, or with `--recompute`, the report runs `gear` with the file's options.
 *
 * Every failure is one line on stderr, `gear-rl: <code>: <message>`, and an exit status: 1 for a
 * `GearError` (bad arguments, an unreadable or malformed batch, an unwritable output), 2 for a missing
 * command (after the usage text), 70 for anything unexpected.
 *
 * @module
 */
import { GearError } from './core/errors.js';
import type { ReportMetric } from './gear/visualize.js';

const USAGE = `usage: gear-rl visualize <batch.json> -o <report.html> [options]

Writes a self-contained HTML report of a saved GEAR batch (format 'gear-rl/batch', see saveBatch).

options:
  -o, --out <file>        output HTML file (required)
  --metric <m>            initial colouring: divergence (default), entropy or weight
  --title <text>          page title
  --max-rows <n>          render at most n rows (default 500)
  --recompute             run gear() with the file's options even if it stores a result
  -h, --help              show this help
`;

function parse(argv: string[]) {
  const out: { cmd?: string; input?: string; out?: string; metric?: string; title?: string; maxRows?: number; recompute: boolean; help: boolean } =
    { recompute: false, help: false };
  const need = (i: number, flag: string) => {
    if (i >= argv.length) throw new GearError('ERR_OPTION', `${flag}: expected a value, got nothing`);
    return argv[i]!;
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '-h' || a === '--help') out.help = true;
    else if (a === '-o' || a === '--out') out.out = need(++i, a);
    else if (a === '--metric') out.metric = need(++i, a);
    else if (a === '--title') out.title = need(++i, a);
    else if (a === '--max-rows') {
      const s = need(++i, a);
      out.maxRows = Number(s);
      if (!Number.isInteger(out.maxRows) || out.maxRows < 1) throw new GearError('ERR_OPTION', `--max-rows: expected an integer >= 1, got ${JSON.stringify(s)}`);
    } else if (a === '--recompute') out.recompute = true;
    else if (a.startsWith('-')) throw new GearError('ERR_OPTION', `option: expected one of -o, --metric, --title, --max-rows, --recompute, got ${JSON.stringify(a)}`);
    else if (out.cmd === undefined) out.cmd = a;
    else if (out.input === undefined) out.input = a;
    else throw new GearError('ERR_OPTION', `argument: expected a single batch file, got an extra ${JSON.stringify(a)}`);
  }
  return out;
}

async function main(argv: string[]): Promise<number> {
  const a = parse(argv);
  if (a.help || a.cmd === undefined) {
    process.stdout.write(USAGE);
    return a.help ? 0 : 2;
  }
  if (a.cmd !== 'visualize') throw new GearError('ERR_OPTION', `command: expected 'visualize', got ${JSON.stringify(a.cmd)}`);
  if (a.input === undefined) throw new GearError('ERR_OPTION', 'batch file: expected a path, got nothing');
  if (a.out === undefined) throw new GearError('ERR_OPTION', '-o: expected an output file, got nothing');
  // Loaded here rather than imported at the top: the native addon loads with them, and a failure to
  // load it must reach the one-line error below (and --help must work without it).
  const [{ gear }, { loadBatch, writeReport }] = await Promise.all([import('./gear/gear.js'), import('./gear/visualize.js')]);
  const batch = loadBatch(a.input);
  if (a.recompute || batch.result === undefined) {
    const { tokens: _t, rowLabels: _l, result: _r, meta: _m, ...input } = batch;
    batch.result = gear(input);
  }
  writeReport(a.out, batch, {
    ...(a.title !== undefined ? { title: a.title } : {}),
    ...(a.metric !== undefined ? { metric: a.metric as ReportMetric } : {}),
    ...(a.maxRows !== undefined ? { maxRows: a.maxRows } : {}),
  });
  const d = batch.result.diagnostics;
  process.stdout.write(`wrote ${a.out}: ${batch.offsets.length - 1} rows, ${d.segments} segments, ${d.peaks} peaks\n`);
  return 0;
}

/** One line, whatever the message holds (an `fs` message repeats the path, which may contain newlines). */
const oneLine = (s: string) => s.replace(/\s*[\r\n\u2028\u2029]+\s*/g, ' ');

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (e) {
  if (e instanceof GearError) {
    process.stderr.write(`gear-rl: ${e.code}: ${oneLine(e.message)}\n`);
    process.exitCode = 1;
  } else {
    const err = e instanceof Error ? e : new Error(String(e));
    process.stderr.write(`gear-rl: internal error: ${oneLine(`${err.name}: ${err.message}`)}\n`);
    process.exitCode = 70;
  }
}
