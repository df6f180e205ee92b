/**
 * Tables of the credit measurement (trainer/measure.ts), as rows of strings that render as plain text
 * (`table`) or Markdown (`mdTable`): teachers, methods (gradient cosine and where the gradient-weighted
 * credit sits), anchors and segments, the threshold sweep, and the cosine across warm-start levels.
 * Every figure is the mean over batches with its 95 % percentile bootstrap interval.
 *
 * @module
 */
import { AGENT_LABELS, CREDIT_METHODS, summarise, sweepKey, type AnchorMetrics, type BatchCredit, type CreditMeasurement, type CreditMethod } from '../trainer/measure.js';
import type { BootstrapMean } from './stats.js';

/** `0.211 [0.202, 0.220]`; `-` for an undefined figure. */
export function ci(s: BootstrapMean, digits = 3): string {
  if (!Number.isFinite(s.mean)) return '-';
  return `${s.mean.toFixed(digits)} [${s.lo.toFixed(digits)}, ${s.hi.toFixed(digits)}]`;
}

/** Renders rows (first = header) as a Markdown table. */
export function mdTable(rows: string[][]): string {
  const line = (r: string[]) => `| ${r.join(' | ')} |`;
  return [line(rows[0]!), line(rows[0]!.map(() => '---')), ...rows.slice(1).map(line)].join('\n');
}

/** Teacher views: how well D and the sampled-token log-ratio single out the departure tokens. */
export function teacherRows(m: CreditMeasurement, views: readonly string[]): string[][] {
  const rows = [['teacher view', 'AUROC D, all tokens', 'AUROC D, decisions', 'AUROC log-ratio, all', 'AUROC log-ratio, decisions',
    'mean D: departure', 'right decision', 'filler', 'doomed', 'mean s: departure', 'right decision', 'filler', 'doomed']];
  for (const v of views) {
    const s = (f: (b: BatchCredit) => number) => summarise(m, (b) => f(b));
    const t = (b: BatchCredit) => b.teachers[v]!;
    rows.push([v, ci(s((b) => t(b).aurocAll)), ci(s((b) => t(b).aurocDecision)), ci(s((b) => t(b).aurocLogratioAll)),
      ci(s((b) => t(b).aurocLogratioDecision)), s((b) => t(b).meanDivergence.departure).mean.toFixed(2),
      s((b) => t(b).meanDivergence.decision).mean.toFixed(2), s((b) => t(b).meanDivergence.filler).mean.toFixed(2),
      s((b) => t(b).meanDivergence.doomed).mean.toFixed(2),
      ...(['departure', 'decision', 'filler', 'doomed'] as const).map((l) => s((b) => t(b).meanSignal?.[l] ?? NaN).mean.toFixed(2))]);
  }
  return rows;
}

/** Methods: cosine of the logit-space gradient with the oracle's, and the label shares of `|Â|·(1 − p)`. */
export function methodRows(m: CreditMeasurement, methods: readonly CreditMethod[] = Object.keys(CREDIT_METHODS) as CreditMethod[]): string[][] {
  const rows = [['method', 'cosine with the oracle gradient', ...AGENT_LABELS.map((l) => `|A|(1-p): ${l}`)]];
  rows.push(['true advantage A* (the oracle)', '1', ...AGENT_LABELS.map((l) => summarise(m, (b) => b.truth[l]).mean.toFixed(3))]);
  for (const k of methods) {
    rows.push([CREDIT_METHODS[k], ci(summarise(m, (b) => b.methods[k].cosine)),
      ...AGENT_LABELS.map((l) => summarise(m, (b) => b.methods[k].shares[l]).mean.toFixed(3))]);
  }
  return rows;
}

const ANCHOR_HEAD = ['anchors / episode', 'precision at the departure', 'recall of departures', 'doomed tokens in segments', 'on-track tokens in segments', 'segment length'];
function anchorCells(m: CreditMeasurement, get: (b: BatchCredit) => AnchorMetrics | undefined): string[] {
  const s = (f: (a: AnchorMetrics) => number) => summarise(m, (b) => { const a = get(b); return a ? f(a) : NaN; });
  return [s((a) => a.anchorsPerRow).mean.toFixed(2), ci(s((a) => a.precision)), ci(s((a) => a.recall)),
    ci(s((a) => a.doomedInSegments)), ci(s((a) => a.onTrackInSegments)), s((a) => a.segmentLength).mean.toFixed(2)];
}

/** Methods that place anchors: precision and recall at the departure, segments over the doomed continuation. */
export function anchorRows(m: CreditMeasurement): string[][] {
  const rows = [['method', ...ANCHOR_HEAD]];
  for (const k of Object.keys(CREDIT_METHODS) as CreditMethod[]) {
    if (!m.batches[0]?.methods[k].anchors) continue;
    rows.push([CREDIT_METHODS[k], ...anchorCells(m, (b) => b.methods[k].anchors)]);
  }
  return rows;
}

/** The sweep of GEAR's spike threshold and extension threshold (answer teacher), with the divergence or the log-ratio anchor signal. */
export function sweepRows(m: CreditMeasurement, signal: 'divergence' | 'logratio' = 'divergence'): string[][] {
  const rows = [['peakZ', 'entropyQuantile', ...ANCHOR_HEAD, 'cosine with the oracle gradient']];
  const sw = (b: BatchCredit) => (signal === 'logratio' ? b.sweepLogratio : b.sweep);
  for (const z of m.config.sweep.peakZ) {
    for (const q of m.config.sweep.entropyQuantile) {
      const k = sweepKey(z, q);
      rows.push([String(z), String(q), ...anchorCells(m, (b) => sw(b)?.[k]), ci(summarise(m, (b) => sw(b)?.[k]?.cosine))]);
    }
  }
  return rows;
}

/** A warm-start level of the measurement. */
export interface CreditLevel {
  /** Demonstrator noise of its warm-start. */
  eps: number;
  /** Held-out success of its checkpoint. */
  success: number;
  /** The measurement. */
  measurement: CreditMeasurement;
}

/** One figure per method (rows) and warm-start level (columns). */
export function levelRows(levels: readonly CreditLevel[], figure: (m: CreditMeasurement, k: CreditMethod) => BootstrapMean,
  methods: readonly CreditMethod[] = Object.keys(CREDIT_METHODS) as CreditMethod[]): string[][] {
  const rows = [['method', ...levels.map((l) => `ε ${l.eps} (success ${l.success.toFixed(2)})`)]];
  for (const k of methods) rows.push([CREDIT_METHODS[k], ...levels.map((l) => ci(figure(l.measurement, k)))]);
  return rows;
}

/** Teacher AUROCs per warm-start level. */
export function teacherLevelRows(levels: readonly CreditLevel[], views: readonly string[]): string[][] {
  const rows = [['teacher view: AUROC', ...levels.map((l) => `ε ${l.eps} (success ${l.success.toFixed(2)})`)]];
  for (const v of views) {
    rows.push([`${v}: D, all tokens`, ...levels.map((l) => ci(summarise(l.measurement, (b) => b.teachers[v]!.aurocAll)))]);
    rows.push([`${v}: D, decisions`, ...levels.map((l) => ci(summarise(l.measurement, (b) => b.teachers[v]!.aurocDecision)))]);
    rows.push([`${v}: s, all tokens`, ...levels.map((l) => ci(summarise(l.measurement, (b) => b.teachers[v]!.aurocSignalAll)))]);
    rows.push([`${v}: s, decisions`, ...levels.map((l) => ci(summarise(l.measurement, (b) => b.teachers[v]!.aurocSignalDecision)))]);
  }
  return rows;
}
