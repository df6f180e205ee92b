// The report page (ts/gear/report/page.*) in headless Chromium: the metric switch starts on the metric
// the page was rendered with (page.js checks it from the data block), and hostile strings in every
// display field stay text.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import * as report from '../../ts/report.js';

const out = mkdtempSync(join(tmpdir(), 'gear-page-'));
const HOSTILE = '</script><img src=x onerror="document.title=\'pwned\'">{{data}}';

function record(): report.GearBatchRecord {
  const rec: report.GearBatchRecord = {
    advantages: [1, -0.5], offsets: Int32Array.of(0, 4, 7),
    divergence: Float32Array.of(0.01, 3.5, 0.02, 0.01, 0.2, 0, 4),
    entropy: Float32Array.of(0.3, 2, 0.1, 0.1, 1.5, 0, 0.2),
  };
  rec.result = rl.gear(rec);
  return { ...rec, tokens: Array.from({ length: 7 }, (_, i) => `${HOSTILE}${i}`), rowLabels: [HOSTILE, `${HOSTILE}\u2028`], meta: { [HOSTILE]: HOSTILE } };
}

let browser: Browser;
beforeAll(async () => {
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', '--no-first-run'],
  });
});
afterAll(async () => {
  await browser?.close();
});

describe('report page in headless Chromium', () => {
  for (const metric of ['divergence', 'entropy', 'weight'] as const) {
    it(`starts on the rendered metric (${metric}); hostile text stays text`, async () => {
      const file = join(out, `${metric}.html`);
      writeFileSync(file, report.renderReport(record(), { metric, title: HOSTILE }));
      const page = await browser.newPage();
      const problems: string[] = [];
      page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') problems.push(m.text()); });
      page.on('pageerror', (e) => problems.push(String(e)));
      page.on('request', (r) => { if (!r.url().startsWith('file:')) problems.push(`network: ${r.url()}`); });
      await page.goto(pathToFileURL(file).href);
      const checked = await page.locator('input[name=metric]').evaluateAll((els) => els.filter((e) => (e as HTMLInputElement).checked).map((e) => (e as HTMLInputElement).value));
      expect(checked).toEqual([metric]);
      expect(await page.evaluate(() => document.body.dataset.metric)).toBe(metric);
      expect(await page.title()).toBe(HOSTILE);
      expect(await page.locator('img').count()).toBe(0);
      expect(await page.locator('script').count()).toBe(2);
      for (let t = 0; t < 7; t++) expect(await page.locator(`#rows .tok[data-t="${t}"]`).textContent()).toBe(`${HOSTILE}${t}`);
      expect(await page.locator('#summary b').first().textContent()).toBe('2');
      expect(await page.locator('.rowhead span:not(.badge)').first().textContent()).toContain(HOSTILE);
      expect(problems).toEqual([]);
      await page.close();
    });
  }
});
