/**
 * The GEAR report renderer: fills the report page (`page.html`, with `page.css` and `page.js`, embedded
 * at build time in `assets.generated.ts`) with a batch's escaped values and its JSON data block.
 *
 * @module
 */
import { fail } from '../../core/errors.js';
import * as v from '../../core/validate.js';
import { gear, resolveGearOptions } from '../gear.js';
import type { GearDiagnostics } from '../gear.js';
import { REPORT_TEMPLATE } from './assets.generated.js';
import type { ReportSlot } from './assets.generated.js';
import { checkPath, checkRecord, writeTextFile } from './format.js';
import type { GearBatchRecord } from './format.js';

/** Which per-token value colours the tokens. */
export type ReportMetric = 'divergence' | 'entropy' | 'weight';

/** Options of {@link renderReport}. */
export interface ReportOptions {
  /** Page title (default "GEAR batch report"). */
  title?: string;
  /** Initial colouring (default `'divergence'`); the page has a switch for the others. */
  metric?: ReportMetric;
  /** Render at most this many rows (default 500); the header says how many were left out. */
  maxRows?: number;
}

/**
 * The colour scales of the report, low → mid → high as RGB triples. Divergence and entropy map
 * `[0, batch max]`; the weight scale is diverging around 1 over `[weightMin, weightMax]`.
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
 * row shows its tokens coloured by divergence, entropy or final weight (switchable), segments bracketed,
 * anchors marked with a triangle, masked tokens hatched grey, the advantage sign as a coloured badge, and
 * a tooltip with every value; the header lists the diagnostics and thresholds. When `b.result` is absent
 * it is computed with `gear(b)`.
 *
 * @param batch the batch (inputs of `gear`, optional result, token texts, labels, metadata)
 * @param opts title, initial metric, row limit
 * @returns the HTML document
 */
export function renderReport(batch: GearBatchRecord, opts: ReportOptions = {}): string {
  v.knownKeys(opts, 'opts', ['title', 'metric', 'maxRows']);
  const { title: title0, metric: metric0, maxRows: maxRows0 } = opts;
  const metric = v.enumOpt(metric0, 'opts.metric', ['divergence', 'entropy', 'weight'] as const, 'divergence');
  const maxRows = v.numOpt(maxRows0, 'opts.maxRows', 500, { min: 1, int: true, max: 2 ** 31 - 1 });
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
  const shown = Math.min(rows, maxRows);
  const data = {
    metric, rows: shown, totalRows: rows,
    offsets: Array.from(b.offsets.subarray(0, shown + 1)),
    mask: b.mask ? Array.from(b.mask.subarray(0, b.offsets[shown])) : null,
    adv: Array.from(b.advantages as ArrayLike<number>).slice(0, shown),
    d: D.slice(0, b.offsets[shown]), h: H.slice(0, b.offsets[shown]),
    w: Array.from(res.weights.subarray(0, b.offsets[shown])),
    a: Array.from(res.advantages.subarray(0, b.offsets[shown])),
    seg: Array.from(res.segmentId.subarray(0, b.offsets[shown])),
    anchors: Array.from(res.anchors),
    tokens: b.tokens ? b.tokens.slice(0, b.offsets[shown]) : null,
    labels: b.rowLabels ? b.rowLabels.slice(0, shown) : null,
    domain: { divergence: [0, dMax], entropy: [0, hMax], weight: [wMin, wMax] },
    scales: REPORT_SCALES,
  };
  const dg = res.diagnostics;
  const f = (x: number, d = 4) => (Number.isInteger(x) ? String(x) : x.toPrecision(d));
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
  const nonDefault = Object.entries(b.options ?? {}).map(([k, x]) => `${k}=${String(x)}`).join(', ');
  const meta = Object.entries(b.meta ?? {}).map(([k, x]) => `<span class="meta"><b>${esc(k)}</b> ${esc(String(x))}</span>`).join(' ');
  return fill({
    title: esc(title),
    options: nonDefault ? esc(nonDefault) : 'defaults',
    meta,
    notice: shown < rows ? `<p class="warn">Showing the first ${esc(String(shown))} of ${esc(String(rows))} rows.</p>` : '',
    diagnostics: diagRows.map(([k, x]) => `<tr><th>${esc(k)}</th><td>${esc(x)}</td></tr>`).join(''),
    quantiles: `${qrow('D (capped)', dg.klQuantiles)}${qrow('H', dg.entropyQuantiles)}`,
    data: jsonForScript(data),
  });
}

/**
 * Renders {@link renderReport} and writes it to a file. Throws `GearError` `ERR_DTYPE` when `path` is not
 * a non-empty string and `ERR_OPTION` when it cannot be written (a directory, a missing folder).
 *
 * @param path output HTML file
 * @param b the batch
 * @param opts report options
 */
export function writeReport(path: string, b: GearBatchRecord, opts: ReportOptions = {}): void {
  checkPath(path, 'report file');
  writeTextFile(path, renderReport(b, opts), 'report file');
}
