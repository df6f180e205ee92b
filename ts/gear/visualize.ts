/**
 * Token-level visualiser of GEAR-proposed reweighting: a saved-batch JSON format, helpers that write and
 * read it, and a self-contained HTML report (inline CSS, JS and SVG; no network assets) that colours each
 * trajectory's tokens by divergence, entropy or final weight, marks segments and anchors, shows the
 * advantage sign and the per-batch diagnostics.
 *
 * @module
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { GearError, fail } from '../core/errors.js';
import * as v from '../core/validate.js';
import { gear, resolveGearOptions } from './gear.js';
import type { GearDiagnostics, GearInput, GearOptions, GearResult } from './gear.js';

/** Format tag of a saved batch. */
export const SAVED_BATCH_FORMAT = 'gear-rl/batch';
/** Version of the saved-batch format written by {@link saveBatch}. */
export const SAVED_BATCH_VERSION = 1;

/** A JSON number, or `"Infinity"`, `"-Infinity"`, `"NaN"` for the values JSON cannot hold. */
export type JsonNumber = number | 'Infinity' | '-Infinity' | 'NaN';

/**
 * The saved-batch JSON format (`gear-rl/batch`, version 1) read by `gear-rl visualize`. Arrays are plain
 * JSON arrays; per-token arrays have length N = `offsets[R]`, per-row arrays length R. Non-finite numbers
 * are written as the strings `"Infinity"`, `"-Infinity"`, `"NaN"`.
 */
export interface SavedBatch {
  /** Always `'gear-rl/batch'`. */
  format: typeof SAVED_BATCH_FORMAT;
  /** Format version (1). */
  version: number;
  /** Packed-row offsets, length R+1. */
  offsets: number[];
  /** Optional 0/1 mask per token. */
  mask?: number[];
  /** Trajectory-level advantage per row. */
  advantages: JsonNumber[];
  /** Reverse KL per token. */
  divergence: JsonNumber[];
  /** Student entropy per token. */
  entropy: JsonNumber[];
  /** Optional teacher-minus-student log-prob of the sampled token. */
  logratio?: JsonNumber[];
  /** Optional decoded text of each token (length N), shown in the report. */
  tokens?: string[];
  /** Optional label of each row (length R), e.g. the prompt id or the reward. */
  rowLabels?: string[];
  /** GEAR options the result was (or is to be) computed with. */
  options?: GearOptions;
  /** Optional stored result of {@link gear}; recomputed from the inputs when absent. */
  result?: {
    /** Per-token advantages. */
    advantages: JsonNumber[];
    /** Per-token weights. */
    weights: JsonNumber[];
    /** Per-token segment ids. */
    segmentId: number[];
    /** Anchor token index per segment. */
    anchors: number[];
    /** The call's diagnostics. */
    diagnostics: GearDiagnostics;
  };
  /** Free-form metadata (step, model, run name...), shown in the report header. */
  meta?: Record<string, string | number | boolean>;
}

/** What {@link saveBatch} and {@link renderReport} take: the inputs of {@link gear} plus display extras. */
export interface GearBatchRecord extends GearInput {
  /** Decoded text of each token (length N). */
  tokens?: string[];
  /** Label of each row (length R). */
  rowLabels?: string[];
  /** The result of `gear(...)` on these inputs, if already computed. */
  result?: GearResult;
  /** Free-form metadata shown in the report header. */
  meta?: Record<string, string | number | boolean>;
}

const DIAG_NUMBERS = ['peaks', 'segments', 'tokensInSegments', 'meanSegmentLength', 'weightMin', 'weightMax', 'validTokens',
  'segmentTokenFraction', 'peaksPerRow'] as const;
const DIAG_THRESHOLDS = ['entropy', 'entropyLow', 'dRef', 'peakKl', 'fixedSegmentLength'] as const;
const DIAG_QUANTILES = ['p50', 'p90', 'p95', 'p99', 'max'] as const;

/**
 * Checks that `d` has every field of {@link GearDiagnostics} as a number (what the report prints), so
 * a hand-edited or hostile batch file is refused with a coded error instead of failing in the page.
 */
function checkDiagnostics(d: unknown, what: string): GearDiagnostics {
  const num = (o: Record<string, unknown>, k: string, w: string) => {
    if (typeof o[k] !== 'number') fail('ERR_DTYPE', `${w}.${k}`, 'a number', o[k]);
  };
  const obj = (o: unknown, w: string): Record<string, unknown> => {
    if (typeof o !== 'object' || o === null || Array.isArray(o)) fail('ERR_DTYPE', w, 'an object', o);
    return o as Record<string, unknown>;
  };
  const dg = obj(d, what);
  for (const k of DIAG_NUMBERS) num(dg, k, what);
  const th = obj(dg.thresholds, `${what}.thresholds`);
  for (const k of DIAG_THRESHOLDS) num(th, k, `${what}.thresholds`);
  for (const q of ['klQuantiles', 'entropyQuantiles'] as const) {
    const o = obj(dg[q], `${what}.${q}`);
    for (const k of DIAG_QUANTILES) num(o, k, `${what}.${q}`);
  }
  return d as GearDiagnostics;
}

const enc = (x: number): JsonNumber => (Number.isFinite(x) ? x : Number.isNaN(x) ? 'NaN' : x > 0 ? 'Infinity' : '-Infinity');
const encArr = (a: ArrayLike<number>): JsonNumber[] => Array.from(a, enc);
function dec(x: unknown, what: string): number {
  if (typeof x === 'number') return x;
  if (x === 'Infinity') return Infinity;
  if (x === '-Infinity') return -Infinity;
  if (x === 'NaN') return NaN;
  return fail('ERR_DTYPE', what, 'a number or "Infinity" / "-Infinity" / "NaN"', x);
}
function decArr(a: unknown, what: string): number[] {
  if (!Array.isArray(a)) fail('ERR_DTYPE', what, 'an array', a);
  return a.map((x, i) => dec(x, `${what}[${i}]`));
}

/**
 * Converts a batch record to the saved-batch JSON object (pure; see {@link SavedBatch}).
 *
 * @param b the inputs of `gear`, optional display extras and an optional result
 * @returns the JSON-ready object
 */
export function toSavedBatch(b: GearBatchRecord): SavedBatch {
  const s: SavedBatch = {
    format: SAVED_BATCH_FORMAT,
    version: SAVED_BATCH_VERSION,
    offsets: Array.from(b.offsets),
    advantages: encArr(b.advantages),
    divergence: encArr(b.divergence),
    entropy: encArr(b.entropy),
  };
  if (b.mask) s.mask = Array.from(b.mask);
  if (b.logratio) s.logratio = encArr(b.logratio);
  if (b.tokens) s.tokens = [...b.tokens];
  if (b.rowLabels) s.rowLabels = [...b.rowLabels];
  if (b.options) s.options = { ...b.options };
  if (b.result) {
    s.result = {
      advantages: encArr(b.result.advantages), weights: encArr(b.result.weights),
      segmentId: Array.from(b.result.segmentId), anchors: Array.from(b.result.anchors),
      diagnostics: b.result.diagnostics,
    };
  }
  if (b.meta) s.meta = { ...b.meta };
  return s;
}

/**
 * Writes a batch as saved-batch JSON (`gear-rl/batch` v1) — the file `gear-rl visualize` reads.
 *
 * @param path output file
 * @param b the inputs of `gear`, optional token texts / row labels / metadata, and optionally its result
 */
export function saveBatch(path: string, b: GearBatchRecord): void {
  writeFileSync(path, JSON.stringify(toSavedBatch(b)));
}

/**
 * Parses and validates a saved-batch object back into a {@link GearBatchRecord} with typed arrays.
 * Throws `GearError` (`ERR_OPTION` on a wrong format tag, `ERR_SHAPE` / `ERR_DTYPE` / `ERR_OFFSETS` on
 * inconsistent arrays).
 *
 * @param obj the parsed JSON
 * @returns the record (its `result` is present only if the file stored one)
 */
export function fromSavedBatch(obj: unknown): GearBatchRecord {
  if (typeof obj !== 'object' || obj === null) fail('ERR_DTYPE', 'batch', 'an object', obj);
  const s = obj as Partial<SavedBatch>;
  if (s.format !== SAVED_BATCH_FORMAT) fail('ERR_OPTION', 'batch.format', `'${SAVED_BATCH_FORMAT}'`, s.format);
  if (s.version !== SAVED_BATCH_VERSION) fail('ERR_OPTION', 'batch.version', String(SAVED_BATCH_VERSION), s.version);
  v.knownKeys(s, 'batch', ['format', 'version', 'offsets', 'mask', 'advantages', 'divergence', 'entropy', 'logratio',
    'tokens', 'rowLabels', 'options', 'result', 'meta']);
  const offsets = Int32Array.from(v.numArray(s.offsets, 'batch.offsets'));
  const divergence = Float32Array.from(decArr(s.divergence, 'batch.divergence'));
  const n = divergence.length;
  const rows = v.offsets(offsets, 'batch.offsets', n);
  const rec: GearBatchRecord = {
    offsets,
    advantages: Float64Array.from(decArr(s.advantages, 'batch.advantages')),
    divergence,
    entropy: Float32Array.from(decArr(s.entropy, 'batch.entropy')),
  };
  if (rec.advantages.length !== rows) fail('ERR_SHAPE', 'batch.advantages.length', String(rows), rec.advantages.length);
  if (rec.entropy.length !== n) fail('ERR_SHAPE', 'batch.entropy.length', String(n), rec.entropy.length);
  if (s.mask !== undefined) rec.mask = v.mask01(Uint8Array.from(v.numArray(s.mask, 'batch.mask', n)), 'batch.mask', n);
  if (s.logratio !== undefined) {
    rec.logratio = Float32Array.from(decArr(s.logratio, 'batch.logratio'));
    if (rec.logratio.length !== n) fail('ERR_SHAPE', 'batch.logratio.length', String(n), rec.logratio.length);
  }
  if (s.tokens !== undefined) {
    if (!Array.isArray(s.tokens) || s.tokens.length !== n || s.tokens.some((x) => typeof x !== 'string')) {
      fail('ERR_SHAPE', 'batch.tokens', `${n} strings`, s.tokens);
    }
    rec.tokens = s.tokens;
  }
  if (s.rowLabels !== undefined) {
    if (!Array.isArray(s.rowLabels) || s.rowLabels.length !== rows || s.rowLabels.some((x) => typeof x !== 'string')) {
      fail('ERR_SHAPE', 'batch.rowLabels', `${rows} strings`, s.rowLabels);
    }
    rec.rowLabels = s.rowLabels;
  }
  if (s.options !== undefined) rec.options = s.options;
  if (s.meta !== undefined) rec.meta = s.meta;
  if (s.result !== undefined) {
    const r = s.result;
    const res: GearResult = {
      advantages: Float32Array.from(decArr(r.advantages, 'batch.result.advantages')),
      weights: Float32Array.from(decArr(r.weights, 'batch.result.weights')),
      segmentId: Int32Array.from(v.numArray(r.segmentId, 'batch.result.segmentId')),
      anchors: Int32Array.from(v.numArray(r.anchors, 'batch.result.anchors')),
      diagnostics: checkDiagnostics(r.diagnostics, 'batch.result.diagnostics'),
    };
    for (const k of ['advantages', 'weights', 'segmentId'] as const) {
      if (res[k].length !== n) fail('ERR_SHAPE', `batch.result.${k}.length`, String(n), res[k].length);
    }
    res.anchors.forEach((a, i) => {
      if (a < 0 || a >= n) fail('ERR_SHAPE', `batch.result.anchors[${i}]`, `a token index in [0, ${n})`, a);
    });
    res.segmentId.forEach((id, t) => {
      if (id < -1 || id >= res.anchors.length) fail('ERR_SHAPE', `batch.result.segmentId[${t}]`, `-1 or a segment index < ${res.anchors.length}`, id);
    });
    rec.result = res;
  }
  return rec;
}

/**
 * Reads a saved-batch JSON file (see {@link SavedBatch}).
 *
 * @param path the file
 * @returns the record with typed arrays
 */
export function loadBatch(path: string): GearBatchRecord {
  let obj: unknown;
  try {
    obj = JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    throw new GearError('ERR_OPTION', `batch file ${JSON.stringify(path)}: expected readable JSON, got ${(e as Error).message}`);
  }
  return fromSavedBatch(obj);
}

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
 * Renders a self-contained HTML report of one batch (no network assets: inline CSS, JS and SVG). Each
 * row shows its tokens coloured by divergence, entropy or final weight (switchable), segments bracketed,
 * anchors marked with a triangle, masked tokens hatched grey, the advantage sign as a coloured badge, and
 * a tooltip with every value; the header lists the diagnostics and thresholds. When `b.result` is absent
 * it is computed with `gear(b)`.
 *
 * @param b the batch (inputs of `gear`, optional result, token texts, labels, metadata)
 * @param opts title, initial metric, row limit
 * @returns the HTML document
 */
export function renderReport(b: GearBatchRecord, opts: ReportOptions = {}): string {
  v.knownKeys(opts, 'opts', ['title', 'metric', 'maxRows']);
  const metric = v.enumOpt(opts.metric, 'opts.metric', ['divergence', 'entropy', 'weight'] as const, 'divergence');
  const maxRows = v.numOpt(opts.maxRows, 'opts.maxRows', 500, { min: 1, int: true, max: 2 ** 31 - 1 });
  const title = opts.title ?? 'GEAR batch report';
  const options = resolveGearOptions(b.options);
  const { tokens: _t, rowLabels: _l, result: _r, meta: _m, ...input } = b;
  const res = b.result ?? gear(input);
  const n = b.divergence.length;
  const rows = b.offsets.length - 1;
  // What the page indexes must match the batch: a short array would throw in the browser.
  if (b.tokens !== undefined && (!Array.isArray(b.tokens) || b.tokens.length !== n)) fail('ERR_SHAPE', 'tokens', `${n} strings`, b.tokens);
  if (b.rowLabels !== undefined && (!Array.isArray(b.rowLabels) || b.rowLabels.length !== rows)) {
    fail('ERR_SHAPE', 'rowLabels', `${rows} strings`, b.rowLabels);
  }
  for (const k of ['advantages', 'weights', 'segmentId'] as const) {
    if (!ArrayBuffer.isView(res[k]) || res[k].length !== n) fail('ERR_SHAPE', `result.${k}.length`, String(n), res[k]?.length);
  }
  checkDiagnostics(res.diagnostics, 'result.diagnostics');
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
  const json = JSON.stringify(data).replace(/</g, '\\u003c').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)}</title>
<style>${CSS}</style></head>
<body>
<header>
  <h1>${esc(title)}</h1>
  <p class="sub">GEAR-proposed reweighting (gear-rl). Options: ${nonDefault ? esc(nonDefault) : 'defaults'}. ${meta}</p>
  ${shown < rows ? `<p class="warn">Showing the first ${esc(String(shown))} of ${esc(String(rows))} rows.</p>` : ''}
</header>
<section class="panel">
  <div class="controls" role="radiogroup" aria-label="colour tokens by">
    <span>Colour by</span>
    ${(['divergence', 'entropy', 'weight'] as const).map((m) =>
      `<label><input type="radio" name="metric" value="${m}"${m === metric ? ' checked' : ''}> ${m === 'divergence' ? 'divergence D' : m === 'entropy' ? 'entropy H' : 'final weight'}</label>`).join('')}
    <label><input type="checkbox" id="only-seg"> only rows with segments</label>
  </div>
  <div class="legend">
    <svg id="legend-bar" width="260" height="34" role="img" aria-label="colour scale"></svg>
    <span class="key"><span class="tok anchor k">▲</span> anchor (departure point)</span>
    <span class="key"><span class="seg k"><span class="tok k">&nbsp;&nbsp;</span></span> segment</span>
    <span class="key"><span class="tok masked k">&nbsp;&nbsp;</span> masked (tool output / padding)</span>
    <span class="key"><span class="badge pos">+</span><span class="badge neg">−</span><span class="badge zero">0</span> advantage sign</span>
  </div>
</section>
<section class="panel diag">
  <table class="kv">${diagRows.map(([k, x]) => `<tr><th>${esc(k)}</th><td>${esc(x)}</td></tr>`).join('')}</table>
  <table class="q"><tr><th></th><th>p50</th><th>p90</th><th>p95</th><th>p99</th><th>max</th></tr>
  ${qrow('D (capped)', dg.klQuantiles)}${qrow('H', dg.entropyQuantiles)}</table>
</section>
<main id="rows"></main>
<script type="application/json" id="gear-data">${json}</script>
<script>${JS}</script>
</body></html>
`;
}

/**
 * Renders {@link renderReport} and writes it to a file.
 *
 * @param path output HTML file
 * @param b the batch
 * @param opts report options
 */
export function writeReport(path: string, b: GearBatchRecord, opts: ReportOptions = {}): void {
  writeFileSync(path, renderReport(b, opts));
}

const CSS = `
:root{--fg:#1d2433;--muted:#687086;--bg:#fbfbfd;--card:#fff;--line:#e3e6ee}
*{box-sizing:border-box}
body{margin:0;padding:20px 28px;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
h1{font-size:20px;margin:0 0 4px}
.sub{color:var(--muted);margin:0 0 8px}.meta{margin-right:10px}
.warn{color:#9a4b00}
.panel{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:10px 14px;margin-bottom:12px}
.controls{display:flex;gap:16px;align-items:center;flex-wrap:wrap;margin-bottom:8px}
.controls>span{font-weight:600}
.legend{display:flex;gap:18px;align-items:center;flex-wrap:wrap;color:var(--muted);font-size:12px}
.key{display:inline-flex;align-items:center;gap:6px}
.diag{display:flex;gap:36px;flex-wrap:wrap;align-items:flex-start;font-size:12px}
.diag table{border-collapse:collapse}.diag th{text-align:left;font-weight:500;color:var(--muted);padding:1px 10px 1px 0}
.diag td{font-variant-numeric:tabular-nums;padding:1px 10px 1px 0}
.kv tbody{display:grid;grid-template-columns:repeat(2,auto);column-gap:28px}
.row{background:var(--card);border:1px solid var(--line);border-left:5px solid #bbb;border-radius:6px;padding:8px 12px;margin-bottom:10px}
.row.pos{border-left-color:#1a9850}.row.neg{border-left-color:#d73027}
.row.hidden{display:none}
.rowhead{display:flex;gap:12px;align-items:baseline;font-size:12px;color:var(--muted);margin-bottom:6px}
.rowhead b{color:var(--fg)}
.badge{display:inline-block;min-width:20px;padding:0 6px;border-radius:9px;color:#fff;font-weight:700;text-align:center;font-size:12px}
.badge.pos{background:#1a9850}.badge.neg{background:#d73027}.badge.zero{background:#888}
.toks{font:13px/2.1 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;white-space:normal;word-break:break-all}
.tok{display:inline-block;position:relative;white-space:pre;padding:0 1px;margin:0 1px 0 0;border-radius:2px;min-width:8px;line-height:1.45}
.tok.cell{min-width:12px}
.tok.masked{background:repeating-linear-gradient(45deg,#eee,#eee 3px,#d6d6d6 3px,#d6d6d6 6px)!important;color:#999!important;font-style:italic}
.tok.anchor{outline:2px solid #111;outline-offset:-1px}
.tok.anchor::before{content:"▲";position:absolute;top:-11px;left:50%;transform:translateX(-50%);font-size:9px;color:#111;line-height:1}
.tok.k.anchor::before{content:none}
.seg{display:inline-block;border:2px solid #222;border-radius:5px;padding:1px 1px 1px 0;margin:0 3px 0 1px;line-height:1.45;background:#fff}
.seg.k{padding:1px}
`;

// Client-side renderer: builds the rows from the embedded data and recolours on the metric switch.
const JS = `
(function(){
'use strict';
var D=JSON.parse(document.getElementById('gear-data').textContent);
function lerp(a,b,t){return Math.round(a+(b-a)*t);}
function colour(metric,x){
  var s=D.scales[metric],dom=D.domain[metric],lo=dom[0],hi=dom[1],t;
  if(metric==='weight'){
    if(x>=1){t=hi>1?0.5+0.5*Math.min((x-1)/(hi-1),1):0.5;}else{t=lo<1?0.5-0.5*Math.min((1-x)/(1-lo),1):0.5;}
  }else{t=hi>lo?Math.min(Math.max((x-lo)/(hi-lo),0),1):0;}
  var a,b,u;if(t<=0.5){a=s[0];b=s[1];u=t*2;}else{a=s[1];b=s[2];u=(t-0.5)*2;}
  return [lerp(a[0],b[0],u),lerp(a[1],b[1],u),lerp(a[2],b[2],u)];
}
function fmt(x){return Math.abs(x)>=100||x===Math.round(x)?String(x):x.toPrecision(4);}
var rowsEl=document.getElementById('rows');
var toks=[];
for(var r=0;r<D.rows;r++){
  var b=D.offsets[r],e=D.offsets[r+1],A=D.adv[r];
  var nseg={},nvalid=0;
  var row=document.createElement('section');
  row.className='row '+(A>0?'pos':A<0?'neg':'zero');row.dataset.row=r;
  var head=document.createElement('div');head.className='rowhead';
  var badge=document.createElement('span');badge.className='badge '+(A>0?'pos':A<0?'neg':'zero');
  badge.textContent=(A>0?'+':A<0?'\\u2212':'')+fmt(Math.abs(A));
  var body=document.createElement('div');body.className='toks';
  var cur=null,curId=-1;
  for(var t=b;t<e;t++){
    var m=D.mask?D.mask[t]===1:true;if(m)nvalid++;
    var sp=document.createElement('span');
    var txt=D.tokens?D.tokens[t].replace(/\\n/g,'\\u21b5'):'';
    sp.className='tok'+(D.tokens?'':' cell')+(m?'':' masked');
    sp.textContent=txt===''?'\\u2009':txt;
    sp.dataset.t=t;sp.dataset.d=D.d[t];sp.dataset.h=D.h[t];sp.dataset.w=D.w[t];
    var sid=D.seg[t];
    sp.title='token '+t+(m?'':' (masked)')+'\\nD = '+fmt(D.d[t])+'\\nH = '+fmt(D.h[t])+'\\nweight = '+fmt(D.w[t])+'\\nadvantage = '+fmt(D.a[t])+(sid>=0?'\\nsegment '+sid+(D.anchors[sid]===t?' (anchor)':''):'');
    if(sid>=0){
      nseg[sid]=1;
      if(sid!==curId){cur=document.createElement('span');cur.className='seg';cur.dataset.seg=sid;body.appendChild(cur);curId=sid;}
      if(D.anchors[sid]===t)sp.classList.add('anchor');
      cur.appendChild(sp);
    }else{curId=-1;body.appendChild(sp);}
    if(m)toks.push(sp);
  }
  var ns=Object.keys(nseg).length;
  row.dataset.segments=ns;
  head.innerHTML='<b>row '+r+'</b>';
  head.appendChild(badge);
  var info=document.createElement('span');
  info.textContent=(D.labels?D.labels[r]+' \\u00b7 ':'')+(e-b)+' tokens, '+nvalid+' valid \\u00b7 '+ns+' segment'+(ns===1?'':'s');
  head.appendChild(info);
  row.appendChild(head);row.appendChild(body);rowsEl.appendChild(row);
}
function key(metric){return metric==='divergence'?'d':metric==='entropy'?'h':'w';}
function paint(metric){
  var k=key(metric);
  for(var i=0;i<toks.length;i++){
    var sp=toks[i],c=colour(metric,Number(sp.dataset[k]));
    sp.style.backgroundColor='rgb('+c[0]+','+c[1]+','+c[2]+')';
    sp.style.color=(0.299*c[0]+0.587*c[1]+0.114*c[2])<140?'#fff':'#111';
  }
  var svg=document.getElementById('legend-bar'),s=D.scales[metric],dom=D.domain[metric];
  var ns='http://www.w3.org/2000/svg';
  while(svg.firstChild)svg.removeChild(svg.firstChild);
  var defs=document.createElementNS(ns,'defs'),g=document.createElementNS(ns,'linearGradient');
  g.setAttribute('id','lg');
  for(var j=0;j<3;j++){var st=document.createElementNS(ns,'stop');st.setAttribute('offset',(j*50)+'%');st.setAttribute('stop-color','rgb('+s[j].join(',')+')');g.appendChild(st);}
  defs.appendChild(g);svg.appendChild(defs);
  var rect=document.createElementNS(ns,'rect');rect.setAttribute('x','0');rect.setAttribute('y','0');rect.setAttribute('width','260');rect.setAttribute('height','14');rect.setAttribute('fill','url(#lg)');rect.setAttribute('stroke','#ccc');svg.appendChild(rect);
  var labels=metric==='weight'?[[0,fmt(dom[0]),'start'],[130,'1','middle'],[260,fmt(dom[1]),'end']]:[[0,fmt(dom[0]),'start'],[260,fmt(dom[1])+(metric==='divergence'?' nats':''),'end']];
  for(var l=0;l<labels.length;l++){var tx=document.createElementNS(ns,'text');tx.setAttribute('x',labels[l][0]);tx.setAttribute('y','28');tx.setAttribute('font-size','11');tx.setAttribute('text-anchor',labels[l][2]);tx.setAttribute('fill','#555');tx.textContent=labels[l][1];svg.appendChild(tx);}
  document.body.dataset.metric=metric;
}
var radios=document.querySelectorAll('input[name=metric]');
for(var q=0;q<radios.length;q++)radios[q].addEventListener('change',function(ev){paint(ev.target.value);});
document.getElementById('only-seg').addEventListener('change',function(ev){
  var rs=document.querySelectorAll('.row');
  for(var i=0;i<rs.length;i++)rs[i].classList.toggle('hidden',ev.target.checked&&rs[i].dataset.segments==='0');
});
paint(D.metric);
})();
`;
