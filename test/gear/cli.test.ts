// The `gear-rl` command line run from dist/: every failure is one line on stderr with its documented
// exit status (1 input, 2 usage), the stack only with --debug; help, --help, help <command> and
// --version; option names in messages are the command line's own; file paths are strings, never file
// descriptors; the page embedded in the compiled library is the one in ts/gear/report/ and renders the
// same from dist/ as from the sources.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import * as report from '../../ts/report.js';
import { ROOT, cleanEnv, run, type Run } from '../helpers/child.js';

const CLI = join(ROOT, 'dist/cli.js');
const out = mkdtempSync(join(tmpdir(), 'gear-cli-'));

function record(): report.GearBatchRecord {
  const rec: report.GearBatchRecord = {
    advantages: [1, -0.5], offsets: Int32Array.of(0, 4, 7),
    mask: Uint8Array.of(1, 1, 1, 1, 1, 0, 1),
    divergence: Float32Array.of(0.01, 3.5, 0.02, 0.01, 0.2, 0, 4),
    entropy: Float32Array.of(0.3, 2, 0.1, 0.1, 1.5, 0, 0.2),
    tokens: ['a', 'b', 'c', 'd', 'e', 'f', 'g'], rowLabels: ['r0', 'r1'],
  };
  const { tokens: _t, rowLabels: _l, ...input } = rec;
  rec.result = rl.gear(input);
  return rec;
}

/** Writes `obj` as a batch file and returns its path. */
function batchFile(name: string, obj: unknown): string {
  const p = join(out, name);
  writeFileSync(p, typeof obj === 'string' ? obj : JSON.stringify(obj));
  return p;
}

const cli = (args: string[], env: NodeJS.ProcessEnv = cleanEnv()): Run => run([process.execPath, CLI, ...args], env, 60_000);

/** A run that succeeded; on failure the message carries what the child printed (status alone says little). */
function expectOk(r: Run): void {
  expect(r.status, `status ${r.status} signal ${r.signal}\nstdout: ${r.stdout.slice(-2000)}\nstderr: ${r.stderr.slice(-4000)}`).toBe(0);
}

/** A failure as the CLI must report it: the status, and one `gear-rl: CODE: ...` line on stderr. */
function expectOneLineError(r: Run, status: number, code: string): void {
  expect(r.signal).toBe(null);
  expect(r.status).toBe(status);
  const lines = r.stderr.split('\n');
  expect(lines).toHaveLength(2); // the line and its newline
  expect(lines[1]).toBe('');
  expect(lines[0]).toMatch(new RegExp(`^gear-rl: ${code}: `));
  expect(r.stderr).not.toMatch(/^\s+at /m);
}

function expectCode(f: () => unknown, code: string): void {
  let err: unknown;
  try { f(); } catch (e) { err = e; }
  expect(err).toBeInstanceOf(rl.GearError);
  expect((err as rl.GearError).code).toBe(code);
}

beforeAll(() => {
  // Compile when dist/ is older than a source this file runs (same rule as visualize.test.ts).
  const sources = ['cli', 'report', 'gear/gear', 'gear/report/format', 'gear/report/render', 'gear/report/assets.generated'];
  const stale = sources.some((p) => !existsSync(join(ROOT, `dist/${p}.js`))
    || statSync(join(ROOT, `dist/${p}.js`)).mtimeMs < statSync(join(ROOT, `ts/${p}.ts`)).mtimeMs);
  if (stale) spawnSync('npx', ['tsc', '-p', 'tsconfig.json'], { cwd: ROOT, stdio: 'ignore' });
  expect(existsSync(CLI)).toBe(true);
});

describe('gear-rl visualize: one-line errors with an exit status', () => {
  it('an output path that is a folder, or under a file, is an input error (1); a missing folder is created', () => {
    const input = batchFile('ok.json', report.toSavedBatch(record()));
    const dir = join(out, 'a-dir');
    mkdirSync(dir, { recursive: true });
    const r = cli(['visualize', input, '-o', dir]);
    expectOneLineError(r, 1, 'ERR_OPTION');
    expect(r.stderr).toContain('--out');
    expect(statSync(dir).isDirectory()).toBe(true);
    // a folder that cannot be created (a file is in the way), with a newline in the path (echoed by
    // the fs message): still one line
    expectOneLineError(cli(['visualize', input, '-o', join(input, 'sub\nfolder', 'r.html')]), 1, 'ERR_OPTION');
    // missing folders are created
    const deep = join(out, 'new', 'deeper', 'r.html');
    const ok = cli(['visualize', input, '--out', deep]);
    expect(ok.status, ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(/^wrote .*: 2 rows, \d+ segments, \d+ peaks\n$/);
    expect(readFileSync(deep, 'utf8')).toMatch(/^<!DOCTYPE html>/);
    // a bad input writes nothing, and creates no folder
    expectOneLineError(cli(['visualize', join(out, 'missing.json'), '-o', join(out, 'never', 'r.html')]), 1, 'ERR_OPTION');
    expect(existsSync(join(out, 'never'))).toBe(false);
  });

  it('an input that is missing, a directory, not JSON, or not a batch', () => {
    expectOneLineError(cli(['visualize', join(out, 'missing.json'), '-o', join(out, 'x.html')]), 1, 'ERR_OPTION');
    expectOneLineError(cli(['visualize', out, '-o', join(out, 'x.html')]), 1, 'ERR_OPTION');
    expectOneLineError(cli(['visualize', batchFile('junk.json', '{"format": '), '-o', join(out, 'x.html')]), 1, 'ERR_OPTION');
    expectOneLineError(cli(['visualize', batchFile('null.json', 'null'), '-o', join(out, 'x.html')]), 1, 'ERR_DTYPE');
    expectOneLineError(cli(['visualize', batchFile('other.json', { format: 'other' }), '-o', join(out, 'x.html')]), 1, 'ERR_OPTION');
    const good = report.toSavedBatch(record());
    expectOneLineError(cli(['visualize', batchFile('res-null.json', { ...good, result: null }), '-o', join(out, 'x.html')]), 1, 'ERR_DTYPE');
    expect(existsSync(join(out, 'x.html'))).toBe(false);
  });

  it('arrays shorter than the batch', () => {
    const good = report.toSavedBatch(record());
    const bad: Record<string, unknown> = {
      entropy: { ...good, entropy: good.entropy.slice(1) },
      advantages: { ...good, advantages: good.advantages.slice(1) },
      tokens: { ...good, tokens: good.tokens!.slice(1) },
      rowLabels: { ...good, rowLabels: good.rowLabels!.slice(1) },
      weights: { ...good, result: { ...good.result!, weights: good.result!.weights.slice(1) } },
      segmentId: { ...good, result: { ...good.result!, segmentId: good.result!.segmentId.slice(1) } },
    };
    for (const [k, obj] of Object.entries(bad)) {
      const r = cli(['visualize', batchFile(`short-${k}.json`, obj), '-o', join(out, `short-${k}.html`)]);
      expectOneLineError(r, 1, 'ERR_SHAPE');
      expect(existsSync(join(out, `short-${k}.html`))).toBe(false);
    }
  });

  it('values the saved types cannot hold: exit 1 with one line naming the field and the value, and no report', () => {
    const good = report.toSavedBatch(record());
    const bad: [string, unknown, string, string][] = [
      ['mask', { ...good, mask: [257, 0.5, 256, 1, 1, 0, 1] }, 'ERR_OPTION', 'batch.mask[0]: expected 0 or 1, got 257'],
      ['offsets', { ...good, offsets: [0, 2 ** 32 + 4, 7] }, 'ERR_OFFSETS', 'batch.offsets[1]: expected an integer int32 holds'],
      ['anchor', { ...good, result: { ...good.result!, anchors: [1.9] } }, 'ERR_DTYPE', 'batch.result.anchors[0]: expected an integer, got 1.9'],
      ['meta', { ...good, meta: 42 }, 'ERR_DTYPE', 'batch.meta: expected an object, got 42'],
    ];
    for (const [k, obj, code, message] of bad) {
      const html = join(out, `type-${k}.html`);
      const r = cli(['visualize', batchFile(`type-${k}.json`, obj), '-o', html]);
      expectOneLineError(r, 1, code);
      expect(r.stderr).toContain(message);
      expect(existsSync(html)).toBe(false);
    }
  });

  it('usage errors exit 2 with one line naming the command-line option (never an API name)', () => {
    const input = batchFile('ok2.json', report.toSavedBatch(record()));
    const y = join(out, 'y.html');
    const cases: [string[], RegExp][] = [
      [['visualize', input, '-o'], /-o: expected a value/],
      [['visualize', input, '-o', y, '--bogus'], /unknown option "--bogus" \(see gear-rl help visualize\)/],
      [['visualize', input, '-o', y, '--max-rows', '0'], /--max-rows: expected an integer/],
      [['visualize', input, '-o', y, '--max-rows', '2.5'], /--max-rows: expected an integer/],
      [['visualize', input, '-o', y, '--max-rows=1e3'], /--max-rows: expected an integer/],
      [['visualize', input, '-o', y, '--metric', 'loss'], /--metric: expected one of divergence, entropy, weight, got "loss"/],
      [['visualize', input, '-o', y, '--recompute=yes'], /--recompute: expected no value/],
      [['visualize', input, '-o', y, '--order', 'random'], /--order: expected one of credit, batch, got "random"/],
      [['visualize', input], /--out: expected an output file/],
      [['visualize', '-o', y], /visualize: expected a batch file/],
      [['visualize', input, input, '-o', y], /visualize: expected one batch file, got 2/],
      [['render', input], /unknown command "render": expected one of visualize, help/],
      [['help', 'render'], /help: unknown command "render"/],
    ];
    for (const [args, msg] of cases) {
      const r = cli(args);
      expectOneLineError(r, 2, 'ERR_OPTION');
      expect(r.stderr, args.join(' ')).toMatch(msg);
      expect(r.stderr, args.join(' ')).not.toMatch(/opts\.|maxRows|\bmetric\b(?!:)/);
    }
    expect(existsSync(y)).toBe(false);
    // the same run with --name=value and --name value
    const a = cli(['visualize', input, '--out=' + join(out, 'eq.html'), '--metric=entropy', '--max-rows=1', '--title=t']);
    expect(a.status, a.stderr).toBe(0);
    expect(readFileSync(join(out, 'eq.html'), 'utf8')).toContain('"metric":"entropy"');
    // --order batch keeps the file's row order; the default puts rows with segments first
    const rowIds = (f: string) => JSON.parse(readFileSync(f, 'utf8').match(/<script type="application\/json" id="gear-data">(.*?)<\/script>/s)![1]!).rowIds;
    // row 0 flat, row 1 with one divergence spike
    const rec: report.GearBatchRecord = { advantages: [1, 1], offsets: Int32Array.of(0, 6, 12),
      divergence: Float32Array.of(0.01, 0.02, 0.01, 0.02, 0.01, 0.02, 0.01, 0.02, 6, 0.3, 0.2, 0.01),
      entropy: Float32Array.of(0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.2, 2.2, 0.1, 0.1, 0.1) };
    rec.result = rl.gear(rec);
    const segs = (r: number) => Array.from(rec.result!.segmentId.subarray(rec.offsets[r]!, rec.offsets[r + 1]!)).some((x) => x >= 0);
    expect([segs(0), segs(1)]).toEqual([false, true]);
    const input2 = batchFile('ok2b.json', report.toSavedBatch(rec));
    expectOk(cli(['visualize', input2, '-o', join(out, 'batch-order.html'), '--order', 'batch']));
    expect(rowIds(join(out, 'batch-order.html'))).toEqual([0, 1]);
    expectOk(cli(['visualize', input2, '-o', join(out, 'credit-order.html')]));
    expect(rowIds(join(out, 'credit-order.html'))).toEqual([1, 0]);
  });

  it('an addon that does not load is an input error (1); help and --version work without it', () => {
    const input = batchFile('ok3.json', report.toSavedBatch(record()));
    const env = { ...cleanEnv(), GEAR_RL_ADDON: join(out, 'no-such-addon.node') };
    expectOneLineError(cli(['visualize', input, '-o', join(out, 'y.html')], env), 1, 'ERR_NATIVE');
    const help = cli(['--help'], env);
    expectOk(help);
    expect(help.stdout).toContain('usage: gear-rl <command>');
    expectOk(cli(['--version'], env));
  });

  it('--debug adds the stack trace to the one line', () => {
    const r = cli(['visualize', join(out, 'missing.json'), '-o', join(out, 'x.html'), '--debug']);
    expect(r.status).toBe(1);
    const lines = r.stderr.trim().split('\n');
    expect(lines[0]).toMatch(/^gear-rl: ERR_OPTION: batch file /);
    expect(lines[1]).toMatch(/^GearError: /);
    expect(r.stderr).toMatch(/^\s+at /m);
  });

  it('a numeric argument is a file name, not a file descriptor', () => {
    const r = cli(['visualize', '0', '-o', join(out, 'z.html')]);
    expectOneLineError(r, 1, 'ERR_OPTION');
    expect(r.stderr).toContain('batch file "0"');
  });
});

describe('gear-rl help and --version', () => {
  it('--version and -v print the package version', () => {
    const version = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
    for (const flag of ['--version', '-v']) {
      const r = cli([flag]);
      expectOk(r);
      expect(r.stdout).toBe(`${version}\n`);
      expect(r.stderr).toBe('');
    }
  });

  it('help, --help, -h, help <command> and <command> --help; no command is a usage error', () => {
    const main = cli(['help']);
    expectOk(main);
    expect(main.stdout).toContain('usage: gear-rl <command> [options]');
    for (const line of ['visualize <batch.json> --out <report.html>', '-v, --version', '--debug', '0   success',
      '1   the command failed on its input', '2   usage error', '70  unexpected internal error']) expect(main.stdout).toContain(line);
    expect(cli(['--help']).stdout).toBe(main.stdout);
    expect(cli(['-h']).stdout).toBe(main.stdout);
    const vis = cli(['help', 'visualize']);
    expectOk(vis);
    expect(vis.stdout).toContain('usage: gear-rl visualize <batch.json> --out <report.html> [options]');
    for (const opt of ['-o, --out <file>', '--metric <name>', '--title <text>', '--max-rows <n>', '--order <order>', '--recompute']) expect(vis.stdout).toContain(opt);
    // every option of the command's help is kebab-case
    for (const m of vis.stdout.matchAll(/--([A-Za-z-]+)/g)) expect(m[1]).toMatch(/^[a-z]+(-[a-z]+)*$/);
    expect(cli(['visualize', '--help']).stdout).toBe(vis.stdout);
    expect(cli(['help', 'help']).stdout).toContain('usage: gear-rl help [command]');
    const none = cli([]);
    expect(none.status).toBe(2);
    expect(none.stdout).toBe('');
    expect(none.stderr).toBe(main.stdout);
  });

  it('the README documents the same exit statuses', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Command line'));
    for (const s of ['| 0 |', '| 1 |', '| 2 |', '| 70 |', 'gear-rl help', 'gear-rl --version', '--debug']) expect(section).toContain(s);
  });
});

describe('batch and report files: paths are non-empty strings', () => {
  it('loadBatch / saveBatch / writeReport refuse numbers (no stdin read, no stdout write)', () => {
    const rec = record();
    for (const p of [0, 1, 2, -1, '', null, undefined, { path: 'x' }]) {
      expectCode(() => report.loadBatch(p as unknown as string), 'ERR_DTYPE');
      expectCode(() => report.saveBatch(p as unknown as string, rec), 'ERR_DTYPE');
      expectCode(() => report.writeReport(p as unknown as string, rec), 'ERR_DTYPE');
    }
  });

  it('a write that fails is a coded error', () => {
    expectCode(() => report.writeReport(out, record()), 'ERR_OPTION');
    expectCode(() => report.saveBatch(join(out, 'missing', 'b.json'), record()), 'ERR_OPTION');
  });
});

describe('the embedded report page', () => {
  it('matches ts/gear/report/page.{html,css,js} (scripts/bundle-assets.mjs --check)', () => {
    const r = run([process.execPath, join(ROOT, 'scripts/bundle-assets.mjs'), '--check'], cleanEnv(), 60_000);
    expect(r.stderr).toBe('');
    expectOk(r);
    const html = report.renderReport(record());
    for (const asset of ['page.css', 'page.js']) expect(html).toContain(readFileSync(join(ROOT, 'ts/gear/report', asset), 'utf8'));
    expect(html).not.toMatch(/\{\{\w+\}\}/);
  });

  it('the bundler refuses a page that is not self-contained or has no single data slot', () => {
    const bundle = (edit: (f: Record<string, string>) => void): Run => {
      const dir = mkdtempSync(join(out, 'bundle-'));
      mkdirSync(join(dir, 'scripts'));
      mkdirSync(join(dir, 'ts/gear/report'), { recursive: true });
      writeFileSync(join(dir, 'scripts/bundle-assets.mjs'), readFileSync(join(ROOT, 'scripts/bundle-assets.mjs')));
      const files: Record<string, string> = {};
      for (const f of ['page.html', 'page.css', 'page.js']) files[f] = readFileSync(join(ROOT, 'ts/gear/report', f), 'utf8');
      edit(files);
      for (const [f, text] of Object.entries(files)) writeFileSync(join(dir, 'ts/gear/report', f), text);
      return run([process.execPath, join(dir, 'scripts/bundle-assets.mjs')], cleanEnv(), 60_000);
    };
    expectOk(bundle(() => {}));
    const bad: [string, (f: Record<string, string>) => void][] = [
      ['</script', (f) => { f['page.js'] += '\nvar s="</script>";'; }],
      ['</style', (f) => { f['page.css'] += '\n/* </style> */'; }],
      ['url(', (f) => { f['page.css'] += '\nbody{background:url(https://example.com/x.png)}'; }],
      ['src=', (f) => { f['page.html'] = f['page.html'].replace('</body>', '<img src="x.png"></body>'); }],
      ['{{data}}', (f) => { f['page.html'] = f['page.html'].replace('{{data}}', ''); }],
      ['{{data}}', (f) => { f['page.html'] = f['page.html'].replace('</body>', '<p>{{data}}</p></body>'); }],
      ['{{', (f) => { f['page.html'] = f['page.html'].replace('</body>', '<p>{{ title }}</p></body>'); }],
      ['script', (f) => { f['page.html'] = f['page.html'].replace('</body>', '<script>1</script></body>'); }],
      ['page.css', (f) => { f['page.html'] = f['page.html'].replace('<link rel="stylesheet" href="page.css">', ''); }],
    ];
    for (const [what, edit] of bad) {
      const r = bundle(edit);
      expect(r.status, what).toBe(1);
      expect(r.stderr, what).toMatch(/^bundle-assets: /);
      expect(r.stderr, what).toContain(what);
    }
  });

  it('renders the same page from dist/ as from the TypeScript sources', () => {
    const rec = record();
    const input = batchFile('same.json', report.toSavedBatch(rec));
    const opts = { title: 'same <page>', metric: 'entropy', maxRows: 1 } as const;
    const script = `import { loadBatch, renderReport } from ${JSON.stringify(pathToFileURL(join(ROOT, 'dist', 'report.js')).href)};
      process.stdout.write(renderReport(loadBatch(${JSON.stringify(input)}), ${JSON.stringify(opts)}));`;
    const r = run([process.execPath, '--input-type=module', '-e', script], cleanEnv(), 60_000);
    expect(r.stderr).toBe('');
    expectOk(r);
    expect(r.stdout).toBe(report.renderReport(report.loadBatch(input), opts));
    expect(r.stdout).toContain('<title>same &#60;page&#62;</title>');
  });
});
