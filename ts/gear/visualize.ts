/**
 * Token-level visualiser of GEAR-proposed reweighting: a saved-batch JSON format, helpers that write and
 * read it, and a self-contained HTML report (inline CSS, JS and SVG; no network assets) that colours each
 * trajectory's tokens by divergence, entropy (log scales, linear near 0) or final weight, with a legend;
 * marks segments and anchors; puts the rows with segments first, then the rows by credit moved; and
 * shows the advantage sign, a summary (segments per row, share of the advantage mass moved) and the
 * per-batch diagnostics.
 *
 * The parts live in `./report/`: `format.ts` (the batch format and its checks), `render.ts` (the
 * renderer) and the page itself as `page.html`, `page.css` and `page.js`, embedded at build time by
 * `scripts/bundle-assets.mjs`.
 *
 * @module
 */
export {
  SAVED_BATCH_FORMAT, SAVED_BATCH_VERSION, toSavedBatch, fromSavedBatch, saveBatch, loadBatch,
} from './report/format.js';
export type { JsonNumber, SavedBatch, GearBatchRecord } from './report/format.js';
export { REPORT_SCALES, renderReport, writeReport } from './report/render.js';
export type { ReportMetric, ReportOptions, ReportOrder } from './report/render.js';
