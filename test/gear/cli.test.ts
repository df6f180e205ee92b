// `gear-rl visualize` run from dist/ on bad input: every failure is one line on stderr with an exit
// status, never a stack trace; file paths are strings, never file descriptors; the page embedded in the
// compiled library is the one in ts/gear/report/ and renders the same from dist/ as from the sources.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { ROOT, cleanEnv, run, type Run } from '../helpers/child.js';

const CLI = join(ROOT, 'dist/cli.js');
const out = mkdtempSync(join(tmpdir(), 'gear-cli-'));

function record(): rl.GearBatchRecord {
  const rec: rl.GearBatchRecord = {
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
  const sources = ['cli', 'gear/visualize', 'gear/gear', 'gear/report/format', 'gear/report/render', 'gear/report/assets.generated'];
  const stale = sources.some((p) => !existsSync(join(ROOT, `dist/${p}.js`))
    || statSync(join(ROOT, `dist/${p}.js`)).mtimeMs < statSync(join(ROOT, `ts/${p}.ts`)).mtimeMs);
  if (stale) spawnSync('npx', ['tsc', '-p', 'tsconfig.json'], { cwd: ROOT, stdio: 'ignore' });
  expect(existsSync(CLI)).toBe(true);
});

describe('gear-rl visualize: one-line errors with an exit status', () => {
  it('an output path that is a directory or in a missing folder', () => {
    const input = batchFile('ok.json', rl.toSavedBatch(record()));
    const dir = join(out, 'a-dir');
    mkdirSync(dir, { recursive: true });
    const r = cli(['visualize', input, '-o', dir]);
    expectOneLineError(r, 1, 'ERR_OPTION');
    expect(r.stderr).toContain('report file');
    expect(statSync(dir).isDirectory()).toBe(true);
    // a newline in the path (echoed by the fs message) still gives one line
    expectOneLineError(cli(['visualize', input, '-o', join(out, 'missing\nfolder', 'r.html')]), 1, 'ERR_OPTION');
  });

  it('an input that is missing, a directory, not JSON, or not a batch', () => {
    expectOneLineError(cli(['visualize', join(out, 'missing.json'), '-o', join(out, 'x.html')]), 1, 'ERR_OPTION');
    expectOneLineError(cli(['visualize', out, '-o', join(out, 'x.html')]), 1, 'ERR_OPTION');
    expectOneLineError(cli(['visualize', batchFile('junk.json', '{"format": '), '-o', join(out, 'x.html')]), 1, 'ERR_OPTION');
    expectOneLineError(cli(['visualize', batchFile('null.json', 'null'), '-o', join(out, 'x.html')]), 1, 'ERR_DTYPE');
    expectOneLineError(cli(['visualize', batchFile('other.json', { format: 'other' }), '-o', join(out, 'x.html')]), 1, 'ERR_OPTION');
    const good = rl.toSavedBatch(record());
    expectOneLineError(cli(['visualize', batchFile('res-null.json', { ...good, result: null }), '-o', join(out, 'x.html')]), 1, 'ERR_DTYPE');
    expect(existsSync(join(out, 'x.html'))).toBe(false);
  });

  it('arrays shorter than the batch', () => {
    const good = rl.toSavedBatch(record());
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

  it('bad arguments, and an addon that does not load', () => {
    const input = batchFile('ok2.json', rl.toSavedBatch(record()));
    expectOneLineError(cli(['visualize', input, '-o']), 1, 'ERR_OPTION');
    expectOneLineError(cli(['visualize', input, '-o', join(out, 'y.html'), '--bogus']), 1, 'ERR_OPTION');
    expectOneLineError(cli(['visualize', input, '-o', join(out, 'y.html'), '--max-rows', '0']), 1, 'ERR_OPTION');
    expectOneLineError(cli(['visualize', input, '-o', join(out, 'y.html'), '--metric', 'loss']), 1, 'ERR_OPTION');
    expectOneLineError(cli(['render', input]), 1, 'ERR_OPTION');
    expectOneLineError(cli(['visualize', input, input, '-o', join(out, 'y.html')]), 1, 'ERR_OPTION');
    const none = cli([]);
    expect(none.status).toBe(2);
    expect(none.stdout).toContain('usage: gear-rl visualize');
    const env = { ...cleanEnv(), GEAR_RL_ADDON: join(out, 'no-such-addon.node') };
    expectOneLineError(cli(['visualize', input, '-o', join(out, 'y.html')], env), 1, 'ERR_NATIVE');
    const help = cli(['--help'], env);
    expect(help.status).toBe(0);
    expect(help.stdout).toContain('usage: gear-rl visualize');
  });

  it('a numeric argument is a file name, not a file descriptor', () => {
    const r = cli(['visualize', '0', '-o', join(out, 'z.html')]);
    expectOneLineError(r, 1, 'ERR_OPTION');
    expect(r.stderr).toContain('batch file "0"');
  });
});

describe('batch and report files: paths are non-empty strings', () => {
  it('loadBatch / saveBatch / writeReport refuse numbers (no stdin read, no stdout write)', () => {
    const rec = record();
    for (const p of [0, 1, 2, -1, '', null, undefined, { path: 'x' }]) {
      expectCode(() => rl.loadBatch(p as unknown as string), 'ERR_DTYPE');
      expectCode(() => rl.saveBatch(p as unknown as string, rec), 'ERR_DTYPE');
      expectCode(() => rl.writeReport(p as unknown as string, rec), 'ERR_DTYPE');
    }
  });

  it('a write that fails is a coded error', () => {
    expectCode(() => rl.writeReport(out, record()), 'ERR_OPTION');
    expectCode(() => rl.saveBatch(join(out, 'missing', 'b.json'), record()), 'ERR_OPTION');
  });
});

describe('the embedded report page', () => {
  it('matches ts/gear/report/page.{html,css,js} (scripts/bundle-assets.mjs --check)', () => {
    const r = run([process.execPath, join(ROOT, 'scripts/bundle-assets.mjs'), '--check'], cleanEnv(), 60_000);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const html = rl.renderReport(record());
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
    expect(bundle(() => {}).status).toBe(0);
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
    const input = batchFile('same.json', rl.toSavedBatch(rec));
    const opts = { title: 'same <page>', metric: 'entropy', maxRows: 1 } as const;
    const script = `import { loadBatch, renderReport } from ${JSON.stringify(pathToFileURL(join(ROOT, 'dist', 'index.js')).href)};
      process.stdout.write(renderReport(loadBatch(${JSON.stringify(input)}), ${JSON.stringify(opts)}));`;
    const r = run([process.execPath, '--input-type=module', '-e', script], cleanEnv(), 60_000);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout).toBe(rl.renderReport(rl.loadBatch(input), opts));
    expect(r.stdout).toContain('<title>same &#60;page&#62;</title>');
  });
});
