// The visualiser rendered in a real browser (Debian's headless Chromium through playwright-core), the
// saved-batch format round trip, and the `gear-rl visualize` CLI run from dist/.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import * as report from '../../ts/report.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const CHROMIUM = '/usr/bin/chromium';
const out = mkdtempSync(join(tmpdir(), 'gear-vis-'));

// A small batch a researcher could read: three rows, spikes, a tool-output gap, all advantage signs.
function demoBatch(): report.GearBatchRecord {
  const rows: { text: string[]; d: number[]; h: number[]; m?: number[]; A: number; label: string }[] = [
    {
      label: 'reward 1', A: 1.2,
      text: ['Let', ' x', ' =', ' 3', '.', ' Then', ' 2x', ' =', ' 7', ' so', ' x', ' =', ' 3.5', '.'],
      d: [0.02, 0.01, 0.03, 0.02, 0.01, 0.05, 0.04, 0.02, 6.5, 0.3, 0.2, 0.1, 0.4, 0.02],
      h: [0.4, 0.3, 0.1, 0.2, 0.1, 1.9, 0.2, 0.1, 2.2, 0.1, 0.1, 0.1, 0.9, 0.1],
    },
    {
      label: 'reward 0', A: -0.8,
      text: ['Call', ' search', '(', '"a"', ')', '\n', '[tool]', ' result', ' 42', '\n', 'The', ' answer', ' is', ' 41', '.', '<eos>'],
      d: [0.01, 0.02, 0.01, 0.9, 0.01, 0.0, 0, 0, 0, 0, 0.03, 0.02, 0.05, 9.0, 0.2, 0.01],
      h: [0.5, 0.6, 0.1, 1.5, 0.1, 0.2, 0, 0, 0, 0, 0.3, 0.3, 0.2, 0.1, 0.1, 0.0],
      m: [1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1],
    },
    {
      label: 'reward 0.5', A: 0,
      text: ['The', ' value', ' is', ' 12', '.'],
      d: [0.01, 0.02, 0.01, 0.02, 0.01],
      h: [0.1, 0.2, 0.3, 0.2, 0.1],
    },
  ];
  const offsets = new Int32Array(rows.length + 1);
  rows.forEach((r, i) => (offsets[i + 1] = offsets[i]! + r.text.length));
  const rec: report.GearBatchRecord = {
    advantages: rows.map((r) => r.A), offsets,
    mask: Uint8Array.from(rows.flatMap((r) => r.m ?? r.text.map(() => 1))),
    divergence: Float32Array.from(rows.flatMap((r) => r.d)),
    entropy: Float32Array.from(rows.flatMap((r) => r.h)),
    tokens: rows.flatMap((r) => r.text), rowLabels: rows.map((r) => r.label),
    options: { peakZ: 1.5 }, meta: { step: 120, run: 'demo' },
  };
  const { tokens: _t, rowLabels: _l, meta: _m, ...input } = rec;
  rec.result = rl.gear(input);
  return rec;
}

let browser: Browser;
beforeAll(async () => {
  expect(existsSync(CHROMIUM)).toBe(true);
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', '--no-first-run'],
  });
});
afterAll(async () => {
  await browser?.close();
});

const rgb = (c: readonly number[]) => `rgb(${c[0]}, ${c[1]}, ${c[2]})`;

/** Per row, in float64 here: its segment count and the credit GEAR moved, sum |A'_t - A_row| over valid tokens. */
function rowCredit(b: report.GearBatchRecord) {
  const res = b.result!;
  const A = Array.from(b.advantages as ArrayLike<number>);
  return A.map((a, r) => {
    const ids = new Set<number>();
    let moved = 0, mass = 0;
    for (let t = b.offsets[r]!; t < b.offsets[r + 1]!; t++) {
      if (res.segmentId[t]! >= 0) ids.add(res.segmentId[t]!);
      if (b.mask && b.mask[t] !== 1) continue;
      moved += Math.abs(res.advantages[t]! - a);
      mass += Math.abs(a);
    }
    return { r, segments: ids.size, moved, mass };
  });
}

/** The documented order: rows with segments first, then by credit moved (the most first), then index. */
function expectedOrder(b: report.GearBatchRecord): number[] {
  return rowCredit(b).sort((x, y) => Number(y.segments > 0) - Number(x.segments > 0) || y.moved - x.moved || x.r - y.r).map((x) => x.r);
}

/** The colour the documented log scale gives `x`: t = log(1 + x/c) / log(1 + max/c), 3-stop palette. */
function logScaleColour(scale: readonly (readonly number[])[], x: number, c: number, max: number): number[] {
  const t = Math.log1p(x / c) / Math.log1p(max / c);
  const [a, b2, u] = t <= 0.5 ? [scale[0]!, scale[1]!, 2 * t] : [scale[1]!, scale[2]!, 2 * (t - 0.5)];
  return [0, 1, 2].map((i) => Math.round(a[i]! + (b2[i]! - a[i]!) * u));
}

const median = (xs: number[]) => {
  const s = [...xs].sort((p, q) => p - q);
  return s.length % 2 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

describe('visualiser in headless Chromium', () => {
  it('renders segments, anchors, colours, masked tokens and signs with no console errors', async () => {
    const b = demoBatch();
    const res = b.result!;
    // the demo must exercise what is checked: segments in two rows, a masked gap, both signs
    expect(res.diagnostics.segments).toBeGreaterThanOrEqual(2);
    const file = join(out, 'report.html');
    report.writeReport(file, b, { title: 'demo <batch>' });
    const html = readFileSync(file, 'utf8');
    expect(html).not.toMatch(/(src|href)=["']?(https?:)?\/\//); // no network assets
    expect(html).toContain('demo &#60;batch&#62;');

    const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
    const problems: string[] = [];
    page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') problems.push(m.text()); });
    page.on('pageerror', (e) => problems.push(String(e)));
    page.on('request', (r) => { if (!r.url().startsWith('file:')) problems.push(`network: ${r.url()}`); });
    await page.goto(pathToFileURL(file).href);

    // structure
    expect(await page.locator('section.row').count()).toBe(3);
    expect(await page.locator('#rows .seg').count()).toBe(res.diagnostics.segments);
    const anchorTs = await page.locator('.tok.anchor:not(.k)').evaluateAll((els) => els.map((e) => Number((e as HTMLElement).dataset.t)));
    expect(anchorTs).toEqual(Array.from(res.anchors));
    for (let s = 0; s < res.anchors.length; s++) {
      const inSeg = await page.locator(`.seg[data-seg="${s}"] .tok`).evaluateAll((els) => els.map((e) => Number((e as HTMLElement).dataset.t)));
      const want = [];
      for (let t = 0; t < res.segmentId.length; t++) if (res.segmentId[t] === s) want.push(t);
      expect(inSeg).toEqual(want);
    }
    // rows: those with segments first, then by credit moved
    const order = expectedOrder(b);
    expect(await page.locator('section.row').evaluateAll((els) => els.map((e) => Number((e as HTMLElement).dataset.row)))).toEqual(order);
    const perRow = await page.locator('section.row').evaluateAll((els) => els.map((e) => Number((e as HTMLElement).dataset.segments)));
    const wantPerRow = order.map((r) => new Set(Array.from(res.segmentId.subarray(b.offsets[r]!, b.offsets[r + 1]!)).filter((x) => x >= 0)).size);
    expect(perRow).toEqual(wantPerRow);
    const credit = rowCredit(b);
    expect(await page.locator('.rowhead .moved').allTextContents())
      .toEqual(order.map((r) => `credit moved ${(credit[r]!.mass > 0 ? 100 * credit[r]!.moved / credit[r]!.mass : 0).toFixed(1)}%`)); // none to move: 0
    // advantage sign
    const sign = (a: number) => (a > 0 ? 'pos' : a < 0 ? 'neg' : 'zero');
    const A = Array.from(b.advantages as ArrayLike<number>);
    expect(await page.locator('section.row').evaluateAll((els) => els.map((e) => e.className))).toEqual(order.map((r) => `row ${sign(A[r]!)}`));
    const badge = ['+1.200', '\u22120.8000', '0'];
    expect(await page.locator('.rowhead .badge').allTextContents()).toEqual(order.map((r) => badge[r]));
    // the summary header: rows with segments, segments per row, share of the advantage mass moved
    const summary = await page.locator('#summary').textContent();
    const moved = credit.reduce((x, c) => x + c.moved, 0) / credit.reduce((x, c) => x + c.mass, 0);
    expect(summary).toContain(`3 rows, ${wantPerRow.filter((x) => x > 0).length} with segments`);
    const perRowText = /(\d+) segments \(([\d.]+) per row\)/.exec(summary!);
    expect(Number(perRowText?.[1])).toBe(res.diagnostics.segments);
    expect(Number(perRowText?.[2])).toBeCloseTo(res.diagnostics.segments / 3, 2);
    expect(summary).toContain(`credit moved: ${(100 * moved).toFixed(1)}% of the advantage mass`);
    expect(moved).toBeGreaterThan(0);

    // colours mapped from values: extremes of each scale on the extreme tokens
    const bg = (t: number) => page.locator(`.tok[data-t="${t}"]`).evaluate((e) => getComputedStyle(e).backgroundColor);
    const validIdx = Array.from(b.mask!, (m, t) => (m ? t : -1)).filter((t) => t >= 0);
    const argmax = (xs: ArrayLike<number>) => validIdx.reduce((a, t) => (xs[t]! > xs[a]! ? t : a), validIdx[0]!);
    const argmin = (xs: ArrayLike<number>) => validIdx.reduce((a, t) => (xs[t]! < xs[a]! ? t : a), validIdx[0]!);
    expect(await bg(argmax(b.divergence))).toBe(rgb(report.REPORT_SCALES.divergence[2]!));
    const zeroD = validIdx.find((t) => b.divergence[t] === 0)!;
    expect(await bg(zeroD)).toBe(rgb(report.REPORT_SCALES.divergence[0]!));
    // the log scale in between: the knee is the median nonzero valid D; a token near it is mid-coloured,
    // where a linear scale over [0, max] would leave it almost white
    const dValid = validIdx.map((t) => b.divergence[t]!);
    const knee = median(dValid.filter((x) => x > 0));
    const dMax = Math.max(...dValid);
    for (const t of validIdx.filter((t) => b.divergence[t]! > 0 && b.divergence[t]! < dMax)) {
      const want = logScaleColour(report.REPORT_SCALES.divergence, b.divergence[t]!, knee, dMax);
      const got = (await bg(t)).match(/\d+/g)!.map(Number);
      got.forEach((ch, i) => expect(Math.abs(ch - want[i]!), `token ${t}`).toBeLessThanOrEqual(1));
    }
    const nearKnee = validIdx.reduce((a, t) => (Math.abs(b.divergence[t]! - knee) < Math.abs(b.divergence[a]! - knee) ? t : a));
    const linearT = b.divergence[nearKnee]! / dMax;
    const logT = Math.log1p(b.divergence[nearKnee]! / knee) / Math.log1p(dMax / knee);
    expect(linearT).toBeLessThan(0.05);
    expect(logT).toBeGreaterThan(0.1);
    // the legend: the ends and the knee, and says which scale it is
    const labels = await page.locator('#legend-bar text').allTextContents();
    const near = (label: string, x: number) => Math.abs(parseFloat(label) - x) <= 0.05 * x;
    expect(labels[0]).toBe('0');
    expect(labels[labels.length - 1]).toMatch(/ nats$/);
    expect(near(labels[labels.length - 1]!, dMax), labels.join(' | ')).toBe(true);
    expect(labels.some((l) => near(l, knee)), labels.join(' | ')).toBe(true);
    const note = await page.locator('#legend-note').textContent();
    expect(note).toMatch(/^divergence D: log scale, linear below [\d.]+ \(the median nonzero value\)$/);
    expect(near(/below ([\d.]+)/.exec(note!)![1]!, knee)).toBe(true);
    // masked tokens: hatched, grey text, never coloured by a value
    const masked = await page.locator('#rows .tok.masked').evaluateAll((els) => els.map((e) => {
      const s = getComputedStyle(e);
      return { t: Number((e as HTMLElement).dataset.t), img: s.backgroundImage, color: s.color };
    }));
    expect(masked.map((m) => m.t)).toEqual([b.offsets[1]! + 6, b.offsets[1]! + 7, b.offsets[1]! + 8, b.offsets[1]! + 9]);
    for (const m of masked) {
      expect(m.img).toContain('repeating-linear-gradient');
      expect(m.color).toBe('rgb(153, 153, 153)');
    }
    // a segment token takes its anchor's weight: same colour under the weight metric
    await page.locator('input[value=weight]').check();
    expect(await page.evaluate(() => document.body.dataset.metric)).toBe('weight');
    expect(await bg(argmax(res.weights))).toBe(rgb(report.REPORT_SCALES.weight[2]!));
    expect(await bg(argmin(res.weights))).toBe(rgb(report.REPORT_SCALES.weight[0]!));
    const seg0 = Array.from(res.segmentId).flatMap((s, t) => (s === 0 ? [t] : []));
    const segColours = await Promise.all(seg0.map(bg));
    expect(new Set(segColours).size).toBe(1);
    await page.screenshot({ path: join(out, 'report-weight.png'), fullPage: true });
    await page.locator('input[value=entropy]').check();
    expect(await bg(argmax(b.entropy))).toBe(rgb(report.REPORT_SCALES.entropy[2]!));
    // legend redraws for the active metric
    expect(await page.locator('#legend-bar stop').count()).toBe(3);
    expect(await page.locator('#legend-bar stop').first().getAttribute('stop-color')).toBe(`rgb(${report.REPORT_SCALES.entropy[0]!.join(',')})`);
    // filter rows without segments
    await page.locator('#only-seg').check();
    expect(await page.locator('section.row:not(.hidden)').count()).toBe(wantPerRow.filter((x) => x > 0).length);
    await page.locator('#only-seg').uncheck();

    await page.locator('input[value=divergence]').check();
    const shot = join(out, 'report.png');
    await page.screenshot({ path: shot, fullPage: true });
    expect(statSync(shot).size).toBeGreaterThan(10_000);
    console.log(`[visualize] screenshot: ${shot}`);
    expect(problems).toEqual([]);
    await page.close();
  });

  it('renders a large random batch without errors and caps the rows shown', async () => {
    const R = 40, L = 120;
    const offsets = Int32Array.from({ length: R + 1 }, (_, i) => i * L);
    let s = 7;
    const rnd = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
    const divergence = Float32Array.from({ length: R * L }, () => (rnd() < 0.05 ? 2 + rnd() * 30 : rnd() * 0.2));
    const entropy = Float32Array.from({ length: R * L }, () => rnd() * 2);
    const file = join(out, 'large.html');
    const batch: report.GearBatchRecord = { advantages: Array.from({ length: R }, (_, i) => (i % 3) - 1), offsets, divergence, entropy };
    batch.result = rl.gear(batch);
    report.writeReport(file, batch, { maxRows: 25 });
    const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
    const problems: string[] = [];
    page.on('console', (m) => { if (m.type() === 'error') problems.push(m.text()); });
    page.on('pageerror', (e) => problems.push(String(e)));
    await page.goto(pathToFileURL(file).href);
    expect(await page.locator('section.row').count()).toBe(25);
    expect(await page.locator('.warn').textContent()).toContain('Showing 25 of 40 rows (those with segments first, then by credit moved)');
    // the 25 rows shown are the first 25 of the documented order, which is not the batch order here
    const order = expectedOrder(batch);
    expect(order.slice(0, 25)).not.toEqual(Array.from({ length: 25 }, (_, i) => i));
    expect(await page.locator('section.row').evaluateAll((els) => els.map((e) => Number((e as HTMLElement).dataset.row)))).toEqual(order.slice(0, 25));
    // the first screen shows the summary, segments and anchors
    const inView = async (sel: string) => (await page.locator(sel).evaluateAll((els) =>
      els.filter((e) => { const r = e.getBoundingClientRect(); return r.bottom > 0 && r.top < innerHeight; }).length));
    expect(await inView('#summary')).toBe(1);
    expect(await inView('#rows .seg')).toBeGreaterThan(0);
    expect(await inView('#rows .tok.anchor')).toBeGreaterThan(0);
    const shot = join(out, 'large-first-screen.png');
    await page.screenshot({ path: shot });
    expect(statSync(shot).size).toBeGreaterThan(10_000);
    console.log(`[visualize] first-screen screenshot: ${shot}`);
    // divergences above the cap (20 nats) all take the extreme colour
    const capped = await page.locator('.tok').evaluateAll((els) => els
      .filter((e) => Number((e as HTMLElement).dataset.d) >= 20).map((e) => getComputedStyle(e).backgroundColor));
    expect(capped.length).toBeGreaterThan(0);
    expect(new Set(capped)).toEqual(new Set([rgb(report.REPORT_SCALES.divergence[2]!)]));
    expect(problems).toEqual([]);
    await page.close();
  });
});

describe('saved-batch format', () => {
  it('round-trips through saveBatch / loadBatch, including non-finite values', () => {
    const b = demoBatch();
    b.divergence[0] = Infinity;
    b.logratio = Float32Array.from(b.divergence, (_, i) => (i % 2 ? -Infinity : 0.5));
    const file = join(out, 'batch.json');
    report.saveBatch(file, b);
    const raw = JSON.parse(readFileSync(file, 'utf8'));
    expect(raw.format).toBe('gear-rl/batch');
    expect(raw.version).toBe(1);
    expect(raw.divergence[0]).toBe('Infinity');
    const back = report.loadBatch(file);
    expect(Array.from(back.divergence)).toEqual(Array.from(b.divergence));
    expect(Array.from(back.logratio!)).toEqual(Array.from(b.logratio));
    expect(Array.from(back.mask!)).toEqual(Array.from(b.mask!));
    expect(Array.from(back.offsets)).toEqual(Array.from(b.offsets));
    expect(back.tokens).toEqual(b.tokens);
    expect(back.rowLabels).toEqual(b.rowLabels);
    expect(back.options).toEqual(b.options);
    expect(back.meta).toEqual(b.meta);
    expect(Array.from(back.result!.weights)).toEqual(Array.from(b.result!.weights));
    expect(Array.from(back.result!.segmentId)).toEqual(Array.from(b.result!.segmentId));
    expect(back.result!.diagnostics).toEqual(b.result!.diagnostics);
  });

  it('rejects malformed files with GearError codes', () => {
    const good = report.toSavedBatch(demoBatch());
    const code = (obj: unknown) => {
      try { report.fromSavedBatch(obj); } catch (e) { expect(e).toBeInstanceOf(rl.GearError); return (e as rl.GearError).code; }
      return 'no error';
    };
    expect(code(good)).toBe('no error');
    expect(code({ ...good, format: 'other' })).toBe('ERR_OPTION');
    expect(code({ ...good, version: 2 })).toBe('ERR_OPTION');
    expect(code({ ...good, extra: 1 })).toBe('ERR_OPTION');
    expect(code({ ...good, entropy: good.entropy.slice(1) })).toBe('ERR_SHAPE');
    expect(code({ ...good, offsets: [0, 3, 2, 35] })).toBe('ERR_OFFSETS');
    expect(code({ ...good, divergence: good.divergence.map((x, i) => (i ? x : 'big')) })).toBe('ERR_DTYPE');
    expect(code({ ...good, tokens: good.tokens!.slice(1) })).toBe('ERR_SHAPE');
    expect(code({ ...good, result: { ...good.result!, anchors: [999] } })).toBe('ERR_SHAPE');
    expect(code({ ...good, result: { ...good.result!, segmentId: good.result!.segmentId.map(() => 5) } })).toBe('ERR_SHAPE');
    expect(code({ ...good, mask: good.mask!.map(() => 2) })).toBe('ERR_OPTION');
  });

  it('refuses a value its field\'s type cannot hold, naming the field and the value, instead of converting it', () => {
    const good = report.toSavedBatch(demoBatch());
    const n = good.divergence.length;
    const err = (obj: unknown) => {
      try { report.fromSavedBatch(obj); } catch (e) { expect(e).toBeInstanceOf(rl.GearError); return `${(e as rl.GearError).code} ${(e as Error).message}`; }
      return 'no error';
    };
    const mask = (i: number, x: number) => good.mask!.map((m, t) => (t === i ? x : m));
    // mask entries are 0 or 1: 257 and 256 used to wrap to 1 and 0 in a Uint8Array, 0.5 to truncate to 0
    expect(err({ ...good, mask: mask(0, 257) })).toBe('ERR_OPTION batch.mask[0]: expected 0 or 1, got 257');
    expect(err({ ...good, mask: mask(2, 0.5) })).toBe('ERR_OPTION batch.mask[2]: expected 0 or 1, got 0.5');
    expect(err({ ...good, mask: mask(1, 256) })).toBe('ERR_OPTION batch.mask[1]: expected 0 or 1, got 256');
    // offsets and indices are int32 integers: 2^32 + o used to wrap to o, 1.9 to truncate to 1
    const last = good.offsets.length - 1;
    const offsets = good.offsets.map((o, r) => (r === 1 ? o + 2 ** 32 : o));
    expect(err({ ...good, offsets })).toBe(`ERR_OFFSETS batch.offsets[1]: expected an integer int32 holds (from -2^31 to 2^31 - 1), got ${good.offsets[1]! + 2 ** 32}`);
    expect(err({ ...good, offsets: good.offsets.map((o, r) => (r === last ? o + 0.5 : o)) })).toBe(`ERR_DTYPE batch.offsets[${last}]: expected an integer, got ${good.offsets[last]! + 0.5}`);
    const res = good.result!;
    expect(res.anchors.length).toBeGreaterThan(0);
    expect(err({ ...good, result: { ...res, anchors: [res.anchors[0]! + 0.9, ...res.anchors.slice(1)] } })).toBe(`ERR_DTYPE batch.result.anchors[0]: expected an integer, got ${res.anchors[0]! + 0.9}`);
    expect(err({ ...good, result: { ...res, anchors: [2 ** 32 + res.anchors[0]!, ...res.anchors.slice(1)] } })).toMatch(/^ERR_SHAPE batch\.result\.anchors\[0\]: expected an integer int32 holds/);
    expect(err({ ...good, result: { ...res, segmentId: res.segmentId.map((s, t) => (t === 3 ? 0.5 : s)) } })).toBe('ERR_DTYPE batch.result.segmentId[3]: expected an integer, got 0.5');
    // floats beyond float32 used to load as Infinity
    expect(err({ ...good, entropy: good.entropy.map((x, t) => (t === 1 ? 1e39 : x)) })).toMatch(/^ERR_DTYPE batch\.entropy\[1\]: expected a number float32 holds .*, got 1e\+39$/);
    expect(err({ ...good, divergence: good.divergence.map((x, t) => (t === 0 ? 'Infinity' : x)) })).toBe('no error');
    // meta an object of strings, numbers and booleans; options GEAR's options
    expect(err({ ...good, meta: 42 })).toBe('ERR_DTYPE batch.meta: expected an object, got 42');
    expect(err({ ...good, meta: [1] })).toBe('ERR_DTYPE batch.meta: expected an object, got Array(1)');
    expect(err({ ...good, meta: { step: { deep: 1 } } })).toBe('ERR_DTYPE batch.meta.step: expected a string, number or boolean, got Object');
    expect(err({ ...good, options: 'fast' })).toBe('ERR_DTYPE batch.options: expected an object of GEAR options, got "fast"');
    expect(err({ ...good, options: { alpha: -1 } })).toMatch(/^ERR_OPTION options\.alpha: /);
    expect(n).toBeGreaterThan(3);
  });
});

describe('gear-rl visualize (CLI from dist/)', () => {
  const cli = join(root, 'dist/cli.js');
  beforeAll(() => {
    // dist is compiled by the pretest script; recompile when a source is newer (running this file alone)
    const sources = ['cli', 'report', 'gear/gear', 'gear/report/format', 'gear/report/render', 'gear/report/assets.generated'];
    const stale = !existsSync(cli) || sources.some((p) => !existsSync(join(root, `dist/${p}.js`))
      || statSync(join(root, `dist/${p}.js`)).mtimeMs < statSync(join(root, `ts/${p}.ts`)).mtimeMs);
    if (stale) spawnSync('npx', ['tsc', '-p', 'tsconfig.json'], { cwd: root, stdio: 'ignore' });
    expect(existsSync(cli)).toBe(true);
  });

  it('writes the report from a saved batch (stored result and recomputed)', () => {
    const b = demoBatch();
    const input = join(out, 'cli-batch.json');
    report.saveBatch(input, b);
    const html = join(out, 'cli-report.html');
    const stdout = execFileSync(process.execPath, [cli, 'visualize', input, '-o', html, '--metric', 'weight', '--title', 'CLI run'], { encoding: 'utf8' });
    expect(stdout).toContain(`${b.result!.diagnostics.segments} segments`);
    const text = readFileSync(html, 'utf8');
    expect(text).toContain('<title>CLI run</title>');
    expect(text).toContain('"metric":"weight"');
    // without a stored result the CLI runs gear with the file's options: same segments
    const { result: _r, ...noResult } = b;
    const input2 = join(out, 'cli-batch-noresult.json');
    report.saveBatch(input2, noResult);
    const html2 = join(out, 'cli-report2.html');
    execFileSync(process.execPath, [cli, 'visualize', input2, '-o', html2], { encoding: 'utf8' });
    const seg = (s: string) => JSON.parse(s.match(/<script type="application\/json" id="gear-data">(.*?)<\/script>/s)![1]!).seg;
    expect(seg(readFileSync(html2, 'utf8'))).toEqual(seg(text));
    expect(readFileSync(cli, 'utf8').startsWith('#!/usr/bin/env node')).toBe(true);
  });

  it('fails with a GearError code and exit status 1 on bad input, 2 on bad usage; prints usage', () => {
    const bad = join(out, 'bad.json');
    writeFileSync(bad, JSON.stringify({ format: 'gear-rl/batch', version: 1, offsets: [0, 2], advantages: [1], divergence: [0, 'x'], entropy: [0, 0] }));
    const r = spawnSync(process.execPath, [cli, 'visualize', bad, '-o', join(out, 'x.html')], { encoding: 'utf8' });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('ERR_DTYPE');
    const r2 = spawnSync(process.execPath, [cli, 'visualize', bad], { encoding: 'utf8' });
    expect(r2.status).toBe(2); // a usage error: no --out
    expect(r2.stderr).toContain('ERR_OPTION');
    const r3 = spawnSync(process.execPath, [cli, 'visualize', join(out, 'missing.json'), '-o', join(out, 'y.html')], { encoding: 'utf8' });
    expect(r3.status).toBe(1);
    const help = spawnSync(process.execPath, [cli, '--help'], { encoding: 'utf8' });
    expect(help.status).toBe(0);
    expect(help.stdout).toContain('usage: gear-rl <command>');
  });
});
