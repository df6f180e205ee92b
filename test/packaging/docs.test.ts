// `npm run docs` must build the API reference without a single warning (typedoc.json sets
// treatWarningsAsErrors): every exported symbol documented, no links to unexported names. The built site
// (typedoc.json's own options, written to a temporary folder instead of docs/api) is then opened in
// headless Chromium: the sidebar lists the package and each subpath of package.json's `exports` (one
// typedoc entry point each), each grouped by the categories of typedoc.json, functions before
// interfaces in each category, and a function page shows its example.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, extname, join, normalize, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const config = JSON.parse(readFileSync(join(ROOT, 'typedoc.json'), 'utf8')) as { out: string; categoryOrder: string[]; entryPoints: string[] };
const PKG = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { name: string; exports: Record<string, unknown>; scripts: Record<string, string> };
/** The module names the site shows: 'gear-rl' and one per subpath of `exports` ('gear-rl/diagnostics', ...). */
const MODULES = Object.keys(PKG.exports).filter((k) => k !== './package.json').map((k) => (k === '.' ? PKG.name : `${PKG.name}/${k.slice(2)}`));
/** The categories the sources use, in sidebar order ('*' and the catch-all 'Other' are not categories). */
const CATEGORIES = config.categoryOrder.filter((c) => c !== '*' && c !== 'Other');

const out = mkdtempSync(join(tmpdir(), 'gear-api-docs-'));
let log = '';
let status: number | null = null;
let browser: Browser;
let server: Server;
let base = '';

const TYPES: Record<string, string> = {
  '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.svg': 'image/svg+xml', '.json': 'application/json',
};

/** Serves the built site over http (file: pages cannot load typedoc's SVG icon sprite). */
function serve(dir: string): Promise<string> {
  server = createServer((req, res) => {
    // the browser asks for a favicon on its own; the site has none
    if (req.url === '/favicon.ico') {
      res.writeHead(204).end();
      return;
    }
    const path = normalize(join(dir, decodeURIComponent(new URL(req.url!, 'http://x').pathname)));
    const file = path.startsWith(dir + sep) && existsSync(path) && statSync(path).isDirectory() ? join(path, 'index.html') : path;
    if (!file.startsWith(dir + sep) || !existsSync(file)) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' }).end(readFileSync(file));
  });
  return new Promise((ok) => server.listen(0, '127.0.0.1', () => ok(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)));
}

beforeAll(async () => {
  const r = spawnSync('npx', ['typedoc', '--out', out], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' } });
  log = `${r.stdout}\n${r.stderr}`;
  status = r.status;
  base = await serve(out);
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', '--no-first-run'],
  });
}, 300_000);

afterAll(async () => {
  await browser?.close();
  server?.close();
  rmSync(out, { recursive: true, force: true });
});

/** Opens a page of the site and waits for typedoc's fade-in (the body is hidden until app.showPage). */
async function open(path: string, problems: string[]): Promise<Page> {
  const page = await browser.newPage();
  page.on('pageerror', (e) => problems.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`${m.text()} ${m.location().url}`); });
  page.on('request', (r) => { if (!r.url().startsWith(`${base}/`)) problems.push(`network: ${r.url()}`); });
  page.on('response', (r) => { if (r.status() >= 400) problems.push(`${r.status()}: ${r.url()}`); });
  await page.goto(`${base}/${path}`);
  await page.locator('body').waitFor({ state: 'visible' });
  return page;
}

describe('API reference', () => {
  it('typedoc builds every entry point (ts/index.ts and a module per subpath) with no warnings, into docs/api by default', () => {
    expect(log, log).not.toMatch(/\[warning\]|\[error\]/);
    expect(status, log).toBe(0);
    expect(config.out).toBe('docs/api');
    expect(PKG.scripts.docs).toBe('typedoc');
    expect(config.entryPoints).toEqual(MODULES.map((m) => (m === PKG.name ? 'ts/index.ts' : `ts/${m.slice(PKG.name.length + 1)}.ts`)));
  });

  it('the sidebar lists the package and its subpaths, each by category in order, functions first within each', async () => {
    const problems: string[] = [];
    const page = await open('index.html', problems);
    const nav = page.locator('#tsd-nav-container');
    // typedoc fills the sidebar from assets/navigation.js after load
    await nav.locator('details').first().waitFor();
    const modules = await nav.evaluate((el) => [...el.querySelectorAll(':scope > li > details > summary')].map((s) => s.textContent!.trim()));
    expect([...modules].sort()).toEqual([...MODULES].sort());
    const categoriesOf = (module: string) => nav.evaluate((el, m) => {
      const mod = [...el.querySelectorAll(':scope > li > details')].find((d) => d.querySelector('summary')!.textContent!.trim() === m)!;
      return [...mod.querySelectorAll(':scope > div > ul > li > details > summary')].map((s) => s.textContent!.trim());
    }, module);
    for (const m of MODULES.filter((x) => x !== PKG.name)) {
      const cats = await categoriesOf(m);
      expect(cats.length, m).toBeGreaterThan(0);
      expect.soft(cats.filter((c) => !CATEGORIES.includes(c)), `${m}: categories outside typedoc.json`).toEqual([]);
    }
    const top = await categoriesOf(PKG.name);
    // an export without a @category lands in 'Other' (doc_examples.test.ts names it)
    expect.soft(top.filter((c) => !CATEGORIES.includes(c)), 'categories outside typedoc.json').toEqual([]);
    expect(top.filter((c) => CATEGORIES.includes(c))).toEqual(CATEGORIES.filter((c) => top.includes(c)));
    for (const c of ['Logits kernels', 'Segment ops', 'Rollout', 'Advantages', 'GEAR', 'Losses', 'Optimizers', 'Registry', 'Backend', 'Errors']) {
      expect(top, c).toContain(c);
    }
    for (const name of ['Logits kernels', 'Advantages', 'Optimizers']) {
      const kinds = await nav.evaluate((el, [m, n]) => {
        const mod = [...el.querySelectorAll(':scope > li > details')].find((d) => d.querySelector('summary')!.textContent!.trim() === m)!;
        const cat = [...mod.querySelectorAll(':scope > div > ul > li > details')].find((d) => d.querySelector('summary')!.textContent!.trim() === n)!;
        return [...cat.querySelectorAll(':scope > div > ul > li > a')].map((a) => a.getAttribute('href')!.replace(/^\.\//, '').split('/')[0]!);
      }, [PKG.name, name] as const);
      expect(kinds.length, name).toBeGreaterThan(3);
      // functions/ pages first, then classes, then interfaces and types
      const order = ['functions', 'classes', 'variables', 'interfaces', 'types'];
      const ranks = kinds.map((k) => order.indexOf(k));
      expect(ranks.every((r) => r >= 0), `${name}: ${kinds.join(', ')}`).toBe(true);
      expect(ranks, name).toEqual([...ranks].sort((a, b) => a - b));
      expect(kinds[0], name).toBe('functions');
    }
    expect(problems).toEqual([]);
    await page.close();
    // the package's module page groups the same way
    const index = await open(`modules/${PKG.name}.html`, problems);
    const sections = await index.locator('details.tsd-member-group > summary').evaluateAll((els) => els.map((e) => e.getAttribute('data-key')!.replace(/^section-/, '')));
    expect(sections).toEqual(top);
    expect(problems).toEqual([]);
    await index.close();
  });

  it('a function page shows its runnable example, documented once per overload set', async () => {
    const problems: string[] = [];
    const page = await open(`functions/${PKG.name}.segmentReduce.html`, problems);
    const example = page.locator('.tsd-tag-example pre code');
    expect(await example.count()).toBe(1);
    const code = await example.textContent();
    expect(code).toContain("import * as rl from 'gear-rl'");
    expect(code).toContain('rl.segmentReduce(');
    expect(await page.locator('.tsd-breadcrumb, .tsd-page-title').first().isVisible()).toBe(true);
    await page.close();

    const loss = await open(`functions/${PKG.name}.policyLoss.html`, problems);
    const body = await loss.locator('.col-content').textContent();
    expect(body!.split('Policy-gradient loss with its gradient').length - 1).toBe(1);
    expect(await loss.locator('.tsd-tag-example pre code').count()).toBe(1);
    expect(await loss.locator('.tsd-signature').count()).toBeGreaterThanOrEqual(3);
    await loss.close();

    // an options interface shows each option's default
    const args = await open(`interfaces/${PKG.name}.GrpoArgs.html`, problems);
    const epsilon = args.locator('section.tsd-member', { has: args.locator('h3#epsilon') });
    expect(await epsilon.locator('.tsd-tag-defaultValue').textContent()).toContain('1e-6');
    expect(problems).toEqual([]);
    await args.close();
  });
});
