#!/usr/bin/env node
/**
 * The `gear-rl` command line.
 *
 * ```
 * gear-rl visualize <batch.json> --out <report.html> [--metric divergence|entropy|weight] [--title <text>]
 *                   [--max-rows <n>] [--order credit|batch] [--recompute]
 * gear-rl help [command]        gear-rl --help        gear-rl --version
 * ```
 * `batch.json` is the saved-batch format written by `saveBatch` (`gear-rl/batch` v1). Without a stored
 * result, or with `--recompute`, the report runs `gear` with the file's options. The output's folder
 * is created when missing.
 *
 * Every failure is one line on stderr, `gear-rl: <code>: <message>` (the stack only with `--debug`),
 * and an exit status: 0 success, 1 the command failed on its input (a `GearError`: an unreadable or
 * malformed batch, an unwritable output, an addon that does not load), 2 a usage error (no or an
 * unknown command, an unknown option, a missing or bad option value), 70 an unexpected internal error.
 *
 * @module
 */
import { mkdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { GearError } from './core/errors.js';
import type { ReportMetric, ReportOrder } from './report.js';

/** The exit statuses, as documented in `gear-rl help` and the README. */
const EXIT = { ok: 0, input: 1, usage: 2, internal: 70 } as const;

const EXIT_TEXT = `exit status:
  0   success
  1   the command failed on its input: unreadable or malformed batch file, unwritable output,
      native addon not loadable (the line names the GearError code)
  2   usage error: no or unknown command, unknown option, missing or bad option value
  70  unexpected internal error (run again with --debug for the stack)
`;

const HELP: Record<'main' | 'visualize' | 'help', string> = {
  main: `usage: gear-rl <command> [options]

commands:
  visualize <batch.json> --out <report.html>   write the HTML report of a saved GEAR batch
  help [command]                               show this help, or a command's

options:
  -h, --help      show help (also after a command: gear-rl visualize --help)
  -v, --version   print the version of gear-rl
  --debug         on failure, print the stack trace too

${EXIT_TEXT}`,
  visualize: `usage: gear-rl visualize <batch.json> --out <report.html> [options]

Writes a self-contained HTML report of a saved GEAR batch (format 'gear-rl/batch', written by
saveBatch). The output's folder is created when missing.

options:
  -o, --out <file>      output HTML file (required)
  --metric <name>       initial colouring: divergence (default), entropy or weight
  --title <text>        page title (default "GEAR batch report")
  --max-rows <n>        render at most n rows (default 500), the first ones in --order
  --order <order>       row order: credit (default: rows with segments first, then by credit moved)
                        or batch (the file's order)
  --recompute           run gear() with the file's options even if the file stores a result
  --debug               on failure, print the stack trace too
  -h, --help            show this help

${EXIT_TEXT}`,
  help: `usage: gear-rl help [command]

Shows the help of gear-rl, or of one command (visualize, help).
`,
};

const COMMANDS = ['visualize', 'help'] as const;
type Command = (typeof COMMANDS)[number];
const METRICS: readonly ReportMetric[] = ['divergence', 'entropy', 'weight'];
const ORDERS: readonly ReportOrder[] = ['credit', 'batch'];

/** Errors of the command line itself (exit status 2), as opposed to errors of the input (1). */
const usageErrors = new WeakSet<GearError>();
function usage(message: string): never {
  const e = new GearError('ERR_OPTION', message);
  usageErrors.add(e);
  throw e;
}

interface Args {
  cmd?: string; positional: string[]; out?: string; metric?: ReportMetric; order?: ReportOrder; title?: string; maxRows?: number;
  recompute: boolean; help: boolean; version: boolean; debug: boolean;
}

function parse(argv: string[]): Args {
  const a: Args = { positional: [], recompute: false, help: false, version: false, debug: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    // --name=value is the same as --name value
    const eq = arg.startsWith('--') ? arg.indexOf('=') : -1;
    const flag = eq > 0 ? arg.slice(0, eq) : arg;
    const value = (): string => {
      if (eq > 0) return arg.slice(eq + 1);
      if (i + 1 >= argv.length) usage(`${flag}: expected a value, got nothing`);
      return argv[++i]!;
    };
    const noValue = () => { if (eq > 0) usage(`${flag}: expected no value, got ${JSON.stringify(arg.slice(eq + 1))}`); };
    switch (flag) {
      case '-h': case '--help': noValue(); a.help = true; break;
      case '-v': case '--version': noValue(); a.version = true; break;
      case '--debug': noValue(); a.debug = true; break;
      case '--recompute': noValue(); a.recompute = true; break;
      case '-o': case '--out': a.out = value(); break;
      case '--title': a.title = value(); break;
      case '--metric': {
        const m = value();
        if (!(METRICS as readonly string[]).includes(m)) usage(`--metric: expected one of ${METRICS.join(', ')}, got ${JSON.stringify(m)}`);
        a.metric = m as ReportMetric;
        break;
      }
      case '--order': {
        const o = value();
        if (!(ORDERS as readonly string[]).includes(o)) usage(`--order: expected one of ${ORDERS.join(', ')}, got ${JSON.stringify(o)}`);
        a.order = o as ReportOrder;
        break;
      }
      case '--max-rows': {
        const s = value();
        const n = /^\d+$/.test(s) ? Number(s) : NaN;
        if (!Number.isSafeInteger(n) || n < 1 || n > 2 ** 31 - 1) usage(`--max-rows: expected an integer from 1 to 2147483647, got ${JSON.stringify(s)}`);
        a.maxRows = n;
        break;
      }
      default:
        if (arg.startsWith('-') && arg !== '-') usage(`unknown option ${JSON.stringify(flag)} (see gear-rl help${a.cmd ? ` ${a.cmd}` : ''})`);
        if (a.cmd === undefined) a.cmd = arg;
        else a.positional.push(arg);
    }
  }
  return a;
}

/** The version from the package's own package.json (one folder up from dist/ and from ts/). */
function version(): string {
  return (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}

async function visualize(a: Args): Promise<number> {
  if (a.positional.length === 0) usage('visualize: expected a batch file, got nothing (gear-rl visualize <batch.json> --out <report.html>)');
  if (a.positional.length > 1) usage(`visualize: expected one batch file, got ${a.positional.length}: ${a.positional.map((p) => JSON.stringify(p)).join(' ')}`);
  if (a.out === undefined) usage('--out: expected an output file, got nothing (gear-rl visualize <batch.json> --out <report.html>)');
  const input = a.positional[0]!;
  const out = a.out;
  // Loaded here rather than imported at the top: the native addon loads with them, and a failure to
  // load it must reach the one-line error below (and help / --version must work without it).
  const [{ gear }, { loadBatch, writeReport }] = await Promise.all([import('./gear/gear.js'), import('./report.js')]);
  const batch = loadBatch(input);
  if (a.recompute || batch.result === undefined) {
    const { tokens: _t, rowLabels: _l, result: _r, meta: _m, ...gearInput } = batch;
    batch.result = gear(gearInput);
  }
  // A missing output folder is created (after the input checked out, so a bad run leaves nothing behind).
  const folder = dirname(resolve(out));
  try {
    mkdirSync(folder, { recursive: true });
  } catch (e) {
    throw new GearError('ERR_OPTION', `--out ${JSON.stringify(out)}: expected a folder that exists or can be created, got ${(e as Error).message}`);
  }
  if (statSync(out, { throwIfNoEntry: false })?.isDirectory()) {
    throw new GearError('ERR_OPTION', `--out ${JSON.stringify(out)}: expected a file path, got a folder`);
  }
  writeReport(out, batch, {
    ...(a.title !== undefined ? { title: a.title } : {}),
    ...(a.metric !== undefined ? { metric: a.metric } : {}),
    ...(a.maxRows !== undefined ? { maxRows: a.maxRows } : {}),
    ...(a.order !== undefined ? { order: a.order } : {}),
  });
  const d = batch.result.diagnostics;
  process.stdout.write(`wrote ${out}: ${batch.offsets.length - 1} rows, ${d.segments} segments, ${d.peaks} peaks\n`);
  return EXIT.ok;
}

async function main(a: Args): Promise<number> {
  if (a.version) {
    process.stdout.write(`${version()}\n`);
    return EXIT.ok;
  }
  if (a.cmd === undefined) {
    if (a.help) {
      process.stdout.write(HELP.main);
      return EXIT.ok;
    }
    process.stderr.write(HELP.main);
    return EXIT.usage;
  }
  if (!(COMMANDS as readonly string[]).includes(a.cmd)) usage(`unknown command ${JSON.stringify(a.cmd)}: expected one of ${COMMANDS.join(', ')} (see gear-rl help)`);
  const cmd = a.cmd as Command;
  if (cmd === 'help') {
    if (a.positional.length > 1) usage(`help: expected at most one command, got ${a.positional.length}`);
    const topic = a.positional[0];
    if (topic !== undefined && !(COMMANDS as readonly string[]).includes(topic)) usage(`help: unknown command ${JSON.stringify(topic)}: expected one of ${COMMANDS.join(', ')}`);
    process.stdout.write(HELP[(topic as Command | undefined) ?? 'main']);
    return EXIT.ok;
  }
  if (a.help) {
    process.stdout.write(HELP[cmd]);
    return EXIT.ok;
  }
  return visualize(a);
}

/** One line, whatever the message holds (an `fs` message repeats the path, which may contain newlines). */
const oneLine = (s: string) => s.replace(/\s*[\r\n\u2028\u2029]+\s*/g, ' ');

const argv = process.argv.slice(2);
let debug = argv.includes('--debug');
try {
  const args = parse(argv);
  debug = args.debug;
  process.exitCode = await main(args);
} catch (e) {
  if (e instanceof GearError) {
    process.stderr.write(`gear-rl: ${e.code}: ${oneLine(e.message)}\n`);
    process.exitCode = usageErrors.has(e) ? EXIT.usage : EXIT.input;
  } else {
    const err = e instanceof Error ? e : new Error(String(e));
    process.stderr.write(`gear-rl: internal error: ${oneLine(`${err.name}: ${err.message}`)}${debug ? '' : ' (run with --debug for the stack)'}\n`);
    process.exitCode = EXIT.internal;
  }
  if (debug && e instanceof Error && e.stack) process.stderr.write(`${e.stack}\n`);
}
