/**
 * The GEAR report renderer: fills the report page (`page.html`, with `page.css` and `page.js`, embedded
 * at build time in `assets.generated.ts`) with a batch's escaped values and its JSON data block.
 *
 * @module
 */
import { fail } from '../../core/errors.js';
import * as v from '../../core/validate.js';
import { gear } from '../gear.js';
import { resolveGearOptions } from '../options.js';
import type { GearDiagnostics, GearResult } from '../gear.js';
import { REPORT_TEMPLATE } from './assets.generated.js';
import type { ReportSlot } from './assets.generated.js';
import { checkPath, checkRecord, writeTextFile } from './format.js';
import type { GearBatchRecord } from './format.js';

/**
 * Which per-token value colours the tokens.
 *
 * @category GEAR
 */
export type ReportMetric = 'divergence' | 'entropy' | 'weight';

/**
 * Options of {@link renderReport}.
 *
 * @category GEAR
 */
export interface ReportOptions {
  /**
   * Page title (default "GEAR batch report").
   *
   * @defaultValue `'GEAR batch report'`
   */
  title?: string;
  /**
   * Initial colouring (default `'divergence'`); the page has a switch for the others.
   *
   * @defaultValue `'divergence'`
   */
  metric?: ReportMetric;
  /**
   * Render at most this many rows (default 500), the first ones in `order`; the header says how many were left out.
   *
   * @defaultValue `500`
   */
  maxRows?: number;
  /**
   * Row order (default `'credit'`): rows with segments first, then by credit moved (the most first),
   * so the first screen shows segments and anchors; `'batch'` keeps the batch's order.
   *
   * @defaultValue `'credit'`
   */
  order?: ReportOrder;
}

/**
 * Row orders of the report (see {@link ReportOptions.order}).
 *
 * @category GEAR
 */
export type ReportOrder = 'credit' | 'batch';

/**
 * The colour scales of the report, low → mid → high as RGB triples. Divergence and entropy are heavy
 * tailed (a few spikes, most tokens near 0), so they map through a log scale that is linear near 0:
 * `t = log(1 + x/c) / log(1 + max/c)` over `[0, batch max]`, with `c` the median of the batch's nonzero
 * valid values; a single spike then no longer washes out every other token. The weight scale is
 * diverging around 1, linear over `[weightMin, weightMax]`. The page's legend shows the scale in use.
 *
 * @category GEAR
 */
export const REPORT_SCALES: Readonly<Record<ReportMetric, readonly [number, number, number][]>> = Object.freeze({
  divergence: [[255, 245, 235], [253, 141, 60], [127, 39, 4]],
  entropy: [[247, 251, 255], [107, 174, 214], [8, 48, 107]],
  weight: [[33, 102, 172], [247, 247, 247], [178, 24, 43]],
});

/** The one escaping function of the report: every value interpolated into its HTML goes through it. */
const esc = (s: string) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/**
 * The page data as the content of its `<script type="application/json">` block: `<` is written as
 * `\u003c` so no string can close the element, and U+2028 / U+2029 as escapes (line terminators to
 * older JS parsers). The page's script reads it with `JSON.parse`, never as code.
 */
const jsonForScript = (data: unknown) =>
  JSON.stringify(data).replace(/</g, '\\u003c').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');

/**
 * Joins the page (see `page.html`) with a value for each of its slots. Every value is built above from
 * fixed markup and `esc`-escaped strings, or is the JSON data block; the record type makes the compiler
 * require a value for each slot the page has.
 */
function fill(values: Record<ReportSlot, string>): string {
  const { text, slots } = REPORT_TEMPLATE;
  let html = text[0]!;
  for (let i = 0; i < slots.length; i++) html += values[slots[i]!] + text[i + 1]!;
  return html;
}

/**
 * Renders a self-contained HTML report of one batch (no network assets: inline CSS, JS and SVG). Each
 * row shows its tokens coloured by divergence, entropy or final weight (switchable; see
 * {@link REPORT_SCALES}, with a legend), segments bracketed, anchors marked with a triangle, masked
 * tokens hatched grey, the advantage sign as a coloured badge, the credit GEAR moved in the row, and a
 * tooltip with every value. Rows with segments come first, then the rows by credit moved (`opts.order`).
 * The header sums up the batch (rows with segments, segments per row, share of the advantage mass
 * moved) and lists the diagnostics and thresholds. When `b.result` is absent it is computed with `gear(b)`.
 *
 * @param batch the batch (inputs of `gear`, optional result, token texts, labels, metadata)
 * @param opts title, initial metric, row limit, row order
 * @returns the HTML document
 *
 * @example
 * ```ts
 * import { renderReport } from 'gear-rl/report';
 *
 * const input = {                                                      // what gear() takes
 *   advantages: [1, -0.5], offsets: Int32Array.of(0, 4, 7),             // two rows, 7 tokens
 *   divergence: Float32Array.of(0.01, 3.5, 0.02, 0.01, 0.2, 0, 4),
 *   entropy: Float32Array.of(0.3, 2, 0.1, 0.1, 1.5, 0, 0.2),
 * };
 * const batch = { ...input, tokens: ['Let', ' x', ' =', ' 3', 'So', ' 4', '.'], rowLabels: ['reward 1', 'reward 0'] };
 * const html = renderReport(batch, { title: 'step 120', metric: 'weight', maxRows: 100 });
 * console.log(html.length); // one self-contained HTML document (gear runs when no result is given)
 * ```
 * @category GEAR
 */
export function renderReport(batch: GearBatchRecord, opts: ReportOptions = {}): string {
  v.knownKeys(opts, 'opts', ['title', 'metric', 'maxRows', 'order']);
  const { title: title0, metric: metric0, maxRows: maxRows0, order: order0 } = opts;
  const metric = v.enumOpt(metric0, 'opts.metric', ['divergence', 'entropy', 'weight'] as const, 'divergence');
  const maxRows = v.numOpt(maxRows0, 'opts.maxRows', 500, { min: 1, int: true, max: 2 ** 31 - 1 });
  const order = v.enumOpt(order0, 'opts.order', ['credit', 'batch'] as const, 'credit');
  if (title0 !== undefined && typeof title0 !== 'string') fail('ERR_OPTION', 'opts.title', 'a string', title0);
  const title = title0 ?? 'GEAR batch report';
  // What the page indexes must match the batch: a short array would throw in the browser.
  const b = checkRecord(batch);
  const options = resolveGearOptions(b.options);
  const { tokens: _t, rowLabels: _l, result: _r, meta: _m, ...input } = b;
  const res = b.result ?? gear(input);
  const n = b.divergence.length;
  const rows = b.offsets.length - 1;
  const cap = Math.fround(options.klCap);
  const valid = (t: number) => (b.mask ? b.mask[t] === 1 : true);
  const D = Array.from(b.divergence, (x) => (x <= 0 ? 0 : x > cap ? cap : x));
  const H = Array.from(b.entropy, (x) => (x <= 0 ? 0 : x));
  let dMax = 0, hMax = 0, wMin = Infinity, wMax = -Infinity;
  for (let t = 0; t < n; t++) {
    if (!valid(t)) continue;
    dMax = Math.max(dMax, D[t]!);
    hMax = Math.max(hMax, H[t]!);
    wMin = Math.min(wMin, res.weights[t]!);
    wMax = Math.max(wMax, res.weights[t]!);
  }
  if (!Number.isFinite(wMin)) { wMin = 1; wMax = 1; }
  const adv = Array.from(b.advantages as ArrayLike<number>);
  const stats = rowCredit(b.offsets, adv, res, valid);
  const movedTotal = stats.reduce((x, s) => x + s.moved, 0);
  const massTotal = stats.reduce((x, s) => x + s.mass, 0);
  const rowsWithSegments = stats.filter((s) => s.segments > 0).length;
  const ordered = order === 'batch' ? stats : [...stats].sort((x, y) =>
    (y.segments > 0 ? 1 : 0) - (x.segments > 0 ? 1 : 0) || y.moved - x.moved || x.r - y.r);
  const shownRows = ordered.slice(0, maxRows);
  const shown = shownRows.length;
  // The shown rows' tokens, concatenated in display order (each row keeps its batch token indices).
  const pick = <T>(get: (t: number) => T): T[] => shownRows.flatMap((s) => {
    const out: T[] = [];
    for (let t = b.offsets[s.r]!; t < b.offsets[s.r + 1]!; t++) out.push(get(t));
    return out;
  });
  const data = {
    metric, rows: shown, totalRows: rows,
    rowIds: shownRows.map((s) => s.r),
    starts: shownRows.map((s) => b.offsets[s.r]!),
    lengths: shownRows.map((s) => b.offsets[s.r + 1]! - b.offsets[s.r]!),
    moved: shownRows.map((s) => s.moved),
    mass: shownRows.map((s) => s.mass),
    mask: b.mask ? pick((t) => b.mask![t]!) : null,
    adv: shownRows.map((s) => adv[s.r]!),
    d: pick((t) => D[t]!), h: pick((t) => H[t]!),
    w: pick((t) => res.weights[t]!),
    a: pick((t) => res.advantages[t]!),
    seg: pick((t) => res.segmentId[t]!),
    anchors: Array.from(res.anchors),
    tokens: b.tokens ? pick((t) => b.tokens![t]!) : null,
    labels: b.rowLabels ? shownRows.map((s) => b.rowLabels![s.r]!) : null,
    domain: { divergence: [0, dMax], entropy: [0, hMax], weight: [wMin, wMax] },
    // the linear range of the log scales: the median of the nonzero valid values
    knee: { divergence: medianPositive(D, valid), entropy: medianPositive(H, valid) },
    scales: REPORT_SCALES,
  };
  const dg = res.diagnostics;
  const nonDefault = Object.entries(b.options ?? {}).map(([k, x]) => `${k}=${String(x)}`).join(', ');
  const meta = Object.entries(b.meta ?? {}).map(([k, x]) => `<span class="meta"><b>${esc(k)}</b> ${esc(String(x))}</span>`).join(' ');
  const summary = summaryHtml(rows, rowsWithSegments, dg.segments, massTotal > 0 ? movedTotal / massTotal : 0, order);
  return fill({
    title: esc(title),
    options: nonDefault ? esc(nonDefault) : 'defaults',
    meta,
    summary,
    notice: shown < rows ? `<p class="warn">Showing ${esc(String(shown))} of ${esc(String(rows))} rows (${order === 'credit' ? 'those with segments first, then by credit moved' : 'the first in batch order'}).</p>` : '',
    ...diagnosticsHtml(dg, rows),
    data: jsonForScript(data),
  });
}

/** A number as the report prints it: integers as they are, others to `d` significant digits. */
const f = (x: number, d = 4) => (Number.isInteger(x) ? String(x) : x.toPrecision(d));

/**
 * Per row: its segments, and the credit GEAR moved, sum |A'_t - A_row| over its valid tokens, next to
 * the row's advantage mass, |A_row| per valid token.
 */
function rowCredit(offsets: Int32Array, adv: number[], res: Pick<GearResult, 'segmentId' | 'advantages'>,
  valid: (t: number) => boolean): { r: number; segments: number; moved: number; mass: number }[] {
  return Array.from({ length: offsets.length - 1 }, (_, r) => {
    const ids = new Set<number>();
    let moved = 0, mass = 0;
    for (let t = offsets[r]!; t < offsets[r + 1]!; t++) {
      if (res.segmentId[t]! >= 0) ids.add(res.segmentId[t]!);
      if (!valid(t)) continue;
      moved += Math.abs(res.advantages[t]! - adv[r]!);
      mass += Math.abs(adv[r]!);
    }
    return { r, segments: ids.size, moved, mass };
  });
}

/** The page's one-line summary of the batch: rows, segments, the share of the advantage mass moved, the order. */
function summaryHtml(rows: number, rowsWithSegments: number, segments: number, movedShare: number, order: 'credit' | 'batch'): string {
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  return [
    `<span><b>${esc(String(rows))}</b> rows, <b>${esc(String(rowsWithSegments))}</b> with segments</span>`,
    `<span><b>${esc(String(segments))}</b> segments (<b>${esc(f(rows ? segments / rows : 0, 3))}</b> per row), each marked ▲ at its anchor</span>`,
    `<span title="sum over valid tokens of |A'_t - A_row|, divided by the sum of |A_row|">credit moved: <b>${esc(pct(movedShare))}</b> of the advantage mass</span>`,
    `<span>rows ${order === 'credit' ? 'with segments first, then by credit moved' : 'in batch order'}</span>`,
  ].join('');
}

/** The page's diagnostics table (counts and thresholds) and quantile rows. */
function diagnosticsHtml(dg: GearDiagnostics, rows: number): { diagnostics: string; quantiles: string } {
  const diagRows: [string, string][] = [
    ['rows', String(rows)], ['valid tokens', String(dg.validTokens)], ['peaks', String(dg.peaks)],
    ['peaks / row', f(dg.peaksPerRow)], ['segments', String(dg.segments)], ['tokens in segments', String(dg.tokensInSegments)],
    ['segment token fraction', f(dg.segmentTokenFraction)], ['mean segment length', f(dg.meanSegmentLength)],
    ['weight min', f(dg.weightMin)], ['weight max', f(dg.weightMax)],
    ['η (entropy threshold)', f(dg.thresholds.entropy)], ['η_low (settles)', f(dg.thresholds.entropyLow)],
    ['D_ref', f(dg.thresholds.dRef)], ['peak-quantile D', f(dg.thresholds.peakKl)],
  ];
  if (dg.thresholds.fixedSegmentLength) diagRows.push(['fixed segment length', String(dg.thresholds.fixedSegmentLength)]);
  const qrow = (name: string, q: GearDiagnostics['klQuantiles']) =>
    `<tr><th>${esc(name)}</th>${[q.p50, q.p90, q.p95, q.p99, q.max].map((x) => `<td>${esc(f(x))}</td>`).join('')}</tr>`;
  return {
    diagnostics: diagRows.map(([k, x]) => `<tr><th>${esc(k)}</th><td>${esc(x)}</td></tr>`).join(''),
    quantiles: `${qrow('D (capped)', dg.klQuantiles)}${qrow('H', dg.entropyQuantiles)}`,
  };
}

/** The median of the positive values of `x` at valid tokens (1 when there is none): the log scale's knee. */
function medianPositive(x: number[], valid: (t: number) => boolean): number {
  const pos = x.filter((z, t) => z > 0 && valid(t)).sort((p, q) => p - q);
  if (pos.length === 0) return 1;
  const m = pos.length >> 1;
  return pos.length % 2 ? pos[m]! : (pos[m - 1]! + pos[m]!) / 2;
}

/**
 * Renders {@link renderReport} and writes it to a file. Throws `GearError` `ERR_DTYPE` when `path` is not
 * a non-empty string and `ERR_OPTION` when it cannot be written (a directory, a missing folder).
 *
 * @param path output HTML file
 * @param b the batch
 * @param opts report options
 *
 * @example
 * ```ts
 * import { tmpdir } from 'node:os';
 * import { join } from 'node:path';
 * import * as rl from 'gear-rl';
 * import { writeReport } from 'gear-rl/report';
 *
 * const input = {                                                      // what gear() takes
 *   advantages: [1, -0.5], offsets: Int32Array.of(0, 4, 7),             // two rows, 7 tokens
 *   divergence: Float32Array.of(0.01, 3.5, 0.02, 0.01, 0.2, 0, 4),
 *   entropy: Float32Array.of(0.3, 2, 0.1, 0.1, 1.5, 0, 0.2),
 * };
 * const batch = { ...input, tokens: ['Let', ' x', ' =', ' 3', 'So', ' 4', '.'], rowLabels: ['reward 1', 'reward 0'] };
 * const file = join(tmpdir(), 'gear-report.html');
 * writeReport(file, { ...batch, result: rl.gear(input) }, { title: 'step 120' });
 * console.log(`open ${file} in a browser`);
 * ```
 * @category GEAR
 */
export function writeReport(path: string, b: GearBatchRecord, opts: ReportOptions = {}): void {
  checkPath(path, 'report file');
  writeTextFile(path, renderReport(b, opts), 'report file');
}
