/**
 * `gear-rl/report`: the token-level visualiser of GEAR-proposed reweighting. A saved-batch JSON format
 * (`saveBatch` / `loadBatch`, `toSavedBatch` / `fromSavedBatch`) and a self-contained HTML report
 * (`renderReport` / `writeReport`: inline CSS, JS and SVG, no network assets) that colours each
 * trajectory's tokens by divergence, entropy or final weight, marks segments and anchors, and shows the
 * per-batch diagnostics. The page's parts live in `ts/gear/report/`.
 *
 * ```ts
 * import { saveBatch, writeReport } from 'gear-rl/report';
 * ```
 *
 * @module gear-rl/report
 */
export {
  SAVED_BATCH_FORMAT, SAVED_BATCH_VERSION, toSavedBatch, fromSavedBatch, saveBatch, loadBatch,
} from './gear/report/format.js';
export type { JsonNumber, SavedBatch, GearBatchRecord } from './gear/report/format.js';
export { REPORT_SCALES, renderReport, writeReport } from './gear/report/render.js';
export type { ReportMetric, ReportOptions, ReportOrder } from './gear/report/render.js';
