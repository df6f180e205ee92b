/**
 * The saved-batch JSON format (`gear-rl/batch` v1) of the GEAR report: its types, the conversion to and
 * from JSON objects, the file reader and writer, and the checks that refuse a malformed or hostile file
 * with a coded {@link GearError} before anything is rendered.
 *
 * @module
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { GearError, fail } from '../../core/errors.js';
import * as v from '../../core/validate.js';
import type { GearDiagnostics, GearInput, GearResult } from '../gear.js';
import { type GearOptions, resolveGearOptions } from '../options.js';

/**
 * Format tag of a saved batch.
 *
 * @category GEAR
 */
export const SAVED_BATCH_FORMAT = 'gear-rl/batch';
/**
 * Version of the saved-batch format written by {@link saveBatch}.
 *
 * @category GEAR
 */
export const SAVED_BATCH_VERSION = 1;

/**
 * A JSON number, or `"Infinity"`, `"-Infinity"`, `"NaN"` for the values JSON cannot hold.
 *
 * @category GEAR
 */
export type JsonNumber = number | 'Infinity' | '-Infinity' | 'NaN';

/**
 * The saved-batch JSON format (`gear-rl/batch`, version 1) read by `gear-rl visualize`. Arrays are plain
 * JSON arrays; per-token arrays have length N = `offsets[R]`, per-row arrays length R. Non-finite numbers
 * are written as the strings `"Infinity"`, `"-Infinity"`, `"NaN"`.
 *
 * @category GEAR
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
  /** Optional stored result of {@link gear-rl!gear}; recomputed from the inputs when absent. */
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

/**
 * What {@link saveBatch} and {@link renderReport} take: the inputs of {@link gear-rl!gear} plus display extras.
 *
 * @category GEAR
 */
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
 * Throws `GearError` `ERR_DTYPE` naming the first bad field.
 *
 * @param d the diagnostics to check
 * @param what the name used in the error message
 * @returns `d`, typed
 * @internal
 */
export function checkDiagnostics(d: unknown, what: string): GearDiagnostics {
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

/** A numeric array (plain or typed, not a Proxy) of `len` elements, when given. */
function nums(x: unknown, what: string, len?: number): ArrayLike<number> {
  return v.numArray(x, what, len);
}

/** An array of `len` strings (`ERR_SHAPE` otherwise, as the report has always answered). */
function strings(x: unknown, what: string, len: number): string[] {
  if (!Array.isArray(x) || x.length !== len || x.some((s) => typeof s !== 'string')) fail('ERR_SHAPE', what, `${len} strings`, x);
  return x;
}

/** A plain object's own fields, each read once, in a new object; anything else as it is. */
function readObject(x: unknown): unknown {
  if (typeof x !== 'object' || x === null || Array.isArray(x) || ArrayBuffer.isView(x)) return x;
  return { ...x };
}

/** Diagnostics read once, with their three nested objects. */
function readDiagnostics(d: unknown): unknown {
  const o = readObject(d);
  if (typeof o !== 'object' || o === null || Array.isArray(o)) return o;
  const r = o as Record<string, unknown>;
  for (const k of ['thresholds', 'klQuantiles', 'entropyQuantiles']) if (k in r) r[k] = readObject(r[k]);
  return r;
}

/**
 * The fields of a batch record or a saved batch, each field and element read once into plain copies
 * (typed arrays kept as they are): the getters of an object built in code run here, before anything is
 * checked, so none can detach, shrink or change an array that already passed its check.
 */
function readBatch(b: object): Record<string, unknown> {
  const rec = { ...b } as Record<string, unknown>;
  for (const k of Object.keys(rec)) rec[k] = v.readList(rec[k]);
  if (rec.options !== undefined) rec.options = readObject(rec.options);
  if (rec.meta !== undefined) rec.meta = readObject(rec.meta);
  if (rec.result !== undefined) {
    const r = readObject(rec.result);
    if (typeof r === 'object' && r !== null && !Array.isArray(r)) {
      const res = r as Record<string, unknown>;
      for (const k of ['advantages', 'weights', 'segmentId', 'anchors']) res[k] = v.readList(res[k]);
      res.diagnostics = readDiagnostics(res.diagnostics);
    }
    rec.result = r;
  }
  return rec;
}

/**
 * Checks a batch record before it is converted or rendered: an object whose arrays agree in length
 * (checked in the order, and with the codes, of `gear`), string tokens / row labels, valid options,
 * metadata of strings, numbers and booleans, and a result of typed arrays with valid diagnostics.
 * Returns a plain copy: every field and element is read once before anything is checked (see
 * `readBatch`), so what was checked is what the caller converts or renders.
 *
 * @internal
 */
export function checkRecord(b: unknown, what = 'batch'): GearBatchRecord {
  if (typeof b !== 'object' || b === null || Array.isArray(b)) fail('ERR_DTYPE', what, 'an object', b);
  const rec = readBatch(b) as unknown as GearBatchRecord;
  const n = nums(rec.divergence, 'divergence').length;
  const rows = v.offsets(rec.offsets, 'offsets', n);
  nums(rec.entropy, 'entropy', n);
  nums(rec.advantages, 'advantages', rows);
  v.optMaskShape(rec.mask, 'mask', n);
  if (rec.logratio !== undefined) nums(rec.logratio, 'logratio', n);
  if (rec.tokens !== undefined) strings(rec.tokens, 'tokens', n);
  if (rec.rowLabels !== undefined) strings(rec.rowLabels, 'rowLabels', rows);
  resolveGearOptions(rec.options);
  if (rec.meta !== undefined) rec.meta = metaOf(rec.meta, `${what}.meta`);
  if (rec.result !== undefined) {
    const r = rec.result as unknown;
    if (typeof r !== 'object' || r === null || Array.isArray(r)) fail('ERR_DTYPE', 'result', 'an object', r);
    const res = { ...r } as GearResult;
    for (const k of ['advantages', 'weights', 'segmentId'] as const) {
      const x = res[k] as unknown;
      if (!v.isTypedArray(x) || x.length !== n) fail('ERR_SHAPE', `result.${k}.length`, String(n), v.isTypedArray(x) ? x.length : x);
      v.attached(x, `result.${k}`);
    }
    if (!(Array.isArray(res.anchors) || v.isTypedArray(res.anchors))) fail('ERR_DTYPE', 'result.anchors', 'an array of token indices', res.anchors);
    nums(res.anchors, 'result.anchors');
    checkDiagnostics(res.diagnostics, 'result.diagnostics');
    rec.result = res;
  }
  return rec;
}

/**
 * Converts a batch record to the saved-batch JSON object (pure; see {@link SavedBatch}).
 *
 * @param batch the inputs of `gear`, optional display extras and an optional result
 * @returns the JSON-ready object
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 * import { toSavedBatch } from 'gear-rl/report';
 *
 * const input = {                                                      // what gear() takes
 *   advantages: [1, -0.5], offsets: Int32Array.of(0, 4, 7),             // two rows, 7 tokens
 *   divergence: Float32Array.of(0.01, 3.5, 0.02, 0.01, 0.2, 0, 4),
 *   entropy: Float32Array.of(0.3, 2, 0.1, 0.1, 1.5, 0, 0.2),
 * };
 * const batch = { ...input, tokens: ['Let', ' x', ' =', ' 3', 'So', ' 4', '.'], rowLabels: ['reward 1', 'reward 0'] };
 * const json = toSavedBatch({ ...batch, result: rl.gear(input) });
 * console.log(json.format, json.version, json.divergence); // 'gear-rl/batch' 1 [plain numbers]
 * console.log(JSON.stringify(json).length);
 * ```
 * @category GEAR
 */
export function toSavedBatch(batch: GearBatchRecord): SavedBatch {
  const b = checkRecord(batch);
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
 * Writes a batch as saved-batch JSON (`gear-rl/batch` v1) — the file `gear-rl visualize` reads. Throws
 * `GearError` `ERR_DTYPE` when `path` is not a non-empty string and `ERR_OPTION` when it cannot be written.
 *
 * @param path output file
 * @param b the inputs of `gear`, optional token texts / row labels / metadata, and optionally its result
 *
 * @example
 * ```ts
 * import { tmpdir } from 'node:os';
 * import { join } from 'node:path';
 * import * as rl from 'gear-rl';
 * import { saveBatch } from 'gear-rl/report';
 *
 * const input = {                                                      // what gear() takes
 *   advantages: [1, -0.5], offsets: Int32Array.of(0, 4, 7),             // two rows, 7 tokens
 *   divergence: Float32Array.of(0.01, 3.5, 0.02, 0.01, 0.2, 0, 4),
 *   entropy: Float32Array.of(0.3, 2, 0.1, 0.1, 1.5, 0, 0.2),
 * };
 * const batch = { ...input, tokens: ['Let', ' x', ' =', ' 3', 'So', ' 4', '.'], rowLabels: ['reward 1', 'reward 0'] };
 * const file = join(tmpdir(), 'gear-batch.json');
 * saveBatch(file, { ...batch, result: rl.gear(input), meta: { step: 120 } });
 * console.log(`npx gear-rl visualize ${file} --out report.html`); // the report from the command line
 * ```
 * @category GEAR
 */
export function saveBatch(path: string, b: GearBatchRecord): void {
  writeTextFile(path, JSON.stringify(toSavedBatch(b)), 'batch file');
}

/**
 * Parses and validates a saved-batch object back into a {@link GearBatchRecord} with typed arrays.
 * Throws `GearError` (`ERR_OPTION` on a wrong format tag, `ERR_SHAPE` / `ERR_DTYPE` / `ERR_OFFSETS` on
 * inconsistent arrays), naming the field and the value, also for a value its type cannot hold: a mask
 * entry other than 0 and 1 (`ERR_OPTION`), an offset, anchor or segment id that is not an integer int32
 * holds, a finite number beyond float32, metadata other than an object of strings, numbers and booleans.
 *
 * @param obj the parsed JSON
 * @returns the record (its `result` is present only if the file stored one)
 *
 * @example
 * ```ts
 * import { fromSavedBatch, toSavedBatch } from 'gear-rl/report';
 *
 * const input = {                                                      // what gear() takes
 *   advantages: [1, -0.5], offsets: Int32Array.of(0, 4, 7),             // two rows, 7 tokens
 *   divergence: Float32Array.of(0.01, 3.5, 0.02, 0.01, 0.2, 0, 4),
 *   entropy: Float32Array.of(0.3, 2, 0.1, 0.1, 1.5, 0, 0.2),
 * };
 * const batch = { ...input, tokens: ['Let', ' x', ' =', ' 3', 'So', ' 4', '.'], rowLabels: ['reward 1', 'reward 0'] };
 * const text = JSON.stringify(toSavedBatch(batch));  // e.g. sent over the network
 * const back = fromSavedBatch(JSON.parse(text));
 * console.log(back.divergence, back.tokens);            // typed arrays again
 * ```
 * @category GEAR
 */
export function fromSavedBatch(obj: unknown): GearBatchRecord {
  if (typeof obj !== 'object' || obj === null) fail('ERR_DTYPE', 'batch', 'an object', obj);
  // A parsed file has no getters; an object built in code may: every field is read once first.
  const s = readBatch(obj) as Partial<SavedBatch>;
  if (s.format !== SAVED_BATCH_FORMAT) fail('ERR_OPTION', 'batch.format', `'${SAVED_BATCH_FORMAT}'`, s.format);
  if (s.version !== SAVED_BATCH_VERSION) fail('ERR_OPTION', 'batch.version', String(SAVED_BATCH_VERSION), s.version);
  v.knownKeys(s, 'batch', ['format', 'version', 'offsets', 'mask', 'advantages', 'divergence', 'entropy', 'logratio',
    'tokens', 'rowLabels', 'options', 'result', 'meta']);
  // Each value is checked against the type it is stored in before it is converted: an offset or an
  // index that int32 cannot hold, a fraction, a mask value other than 0 and 1 or a finite number beyond
  // float32 would otherwise load as another value.
  const offsets = int32s(s.offsets, 'batch.offsets', 'ERR_OFFSETS');
  const divergence = float32s(s.divergence, 'batch.divergence');
  const n = divergence.length;
  const rows = v.offsets(offsets, 'batch.offsets', n);
  const rec: GearBatchRecord = {
    offsets,
    advantages: Float64Array.from(decArr(s.advantages, 'batch.advantages')),
    divergence,
    entropy: float32s(s.entropy, 'batch.entropy'),
  };
  if (rec.advantages.length !== rows) fail('ERR_SHAPE', 'batch.advantages.length', String(rows), rec.advantages.length);
  if (rec.entropy.length !== n) fail('ERR_SHAPE', 'batch.entropy.length', String(n), rec.entropy.length);
  if (s.mask !== undefined) {
    const m = v.numArray(s.mask, 'batch.mask', n);
    for (let t = 0; t < n; t++) if (m[t] !== 0 && m[t] !== 1) fail('ERR_OPTION', `batch.mask[${t}]`, '0 or 1', m[t]);
    rec.mask = Uint8Array.from(m);
  }
  if (s.logratio !== undefined) {
    rec.logratio = float32s(s.logratio, 'batch.logratio');
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
  if (s.options !== undefined) {
    if (typeof s.options !== 'object' || s.options === null || Array.isArray(s.options)) fail('ERR_DTYPE', 'batch.options', 'an object of GEAR options', s.options);
    resolveGearOptions(s.options);
    rec.options = s.options;
  }
  if (s.meta !== undefined) rec.meta = metaOf(s.meta, 'batch.meta');
  if (s.result !== undefined) {
    if (typeof s.result !== 'object' || s.result === null || Array.isArray(s.result)) fail('ERR_DTYPE', 'batch.result', 'an object', s.result);
    const r = s.result;
    const res: GearResult = {
      advantages: float32s(r.advantages, 'batch.result.advantages'),
      weights: float32s(r.weights, 'batch.result.weights'),
      segmentId: int32s(r.segmentId, 'batch.result.segmentId', 'ERR_SHAPE'),
      anchors: int32s(r.anchors, 'batch.result.anchors', 'ERR_SHAPE'),
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
 * A saved list of integers as an Int32Array: each value an integer (`ERR_DTYPE`) that int32 holds
 * (`rangeCode` otherwise), checked before it is converted.
 */
function int32s(x: unknown, what: string, rangeCode: 'ERR_OFFSETS' | 'ERR_SHAPE'): Int32Array {
  const a = v.numArray(x, what);
  const out = new Int32Array(a.length);
  for (let i = 0; i < a.length; i++) {
    const y = a[i]!;
    if (!Number.isInteger(y)) fail('ERR_DTYPE', `${what}[${i}]`, 'an integer', y);
    if (y < -(2 ** 31) || y >= 2 ** 31) fail(rangeCode, `${what}[${i}]`, 'an integer int32 holds (from -2^31 to 2^31 - 1)', y);
    out[i] = y;
  }
  return out;
}

/** A saved list of JSON numbers as a Float32Array: a finite value beyond float32's range is refused (it would load as ±Infinity). */
function float32s(x: unknown, what: string): Float32Array {
  const a = decArr(x, what);
  for (let i = 0; i < a.length; i++) {
    if (Number.isFinite(a[i]) && !Number.isFinite(Math.fround(a[i]!))) {
      fail('ERR_DTYPE', `${what}[${i}]`, 'a number float32 holds (|x| <= 3.4028234663852886e38), or "Infinity" / "-Infinity" / "NaN"', a[i]);
    }
  }
  return Float32Array.from(a);
}

/** Metadata: an object of strings, numbers and booleans (`ERR_DTYPE` naming the field otherwise), as a plain copy. */
function metaOf(m: unknown, what: string): Record<string, string | number | boolean> {
  if (typeof m !== 'object' || m === null || Array.isArray(m)) fail('ERR_DTYPE', what, 'an object', m);
  const meta: Record<string, string | number | boolean> = {};
  for (const [k, x] of Object.entries(m)) {
    if (typeof x !== 'string' && typeof x !== 'number' && typeof x !== 'boolean') fail('ERR_DTYPE', `${what}.${k}`, 'a string, number or boolean', x);
    meta[k] = x;
  }
  return meta;
}

/**
 * Reads a saved-batch JSON file (see {@link SavedBatch}). Throws `GearError` `ERR_DTYPE` when `path` is
 * not a non-empty string, `ERR_OPTION` when the file cannot be read or is not JSON, and the codes of
 * {@link fromSavedBatch} on its content.
 *
 * @param path the file
 * @returns the record with typed arrays
 *
 * @example
 * ```ts
 * import { tmpdir } from 'node:os';
 * import { join } from 'node:path';
 * import { loadBatch, saveBatch } from 'gear-rl/report';
 *
 * const input = {                                                      // what gear() takes
 *   advantages: [1, -0.5], offsets: Int32Array.of(0, 4, 7),             // two rows, 7 tokens
 *   divergence: Float32Array.of(0.01, 3.5, 0.02, 0.01, 0.2, 0, 4),
 *   entropy: Float32Array.of(0.3, 2, 0.1, 0.1, 1.5, 0, 0.2),
 * };
 * const batch = { ...input, tokens: ['Let', ' x', ' =', ' 3', 'So', ' 4', '.'], rowLabels: ['reward 1', 'reward 0'] };
 * const file = join(tmpdir(), 'gear-batch-load.json');
 * saveBatch(file, batch);
 * const back = loadBatch(file);
 * console.log(back.offsets, back.result);  // Int32Array [0, 4, 7], undefined: no result was stored
 * ```
 * @category GEAR
 */
export function loadBatch(path: string): GearBatchRecord {
  checkPath(path, 'batch file');
  let obj: unknown;
  try {
    obj = JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    throw new GearError('ERR_OPTION', `batch file ${JSON.stringify(path)}: expected readable JSON, got ${(e as Error).message}`);
  }
  return fromSavedBatch(obj);
}

/**
 * Requires a file path as a non-empty string: `fs` takes a number as a file descriptor, so `loadBatch(0)`
 * would read stdin and `saveBatch(1, ...)` would write to stdout.
 *
 * @param path the value given as a path
 * @param what the name used in the error message
 * @internal
 */
export function checkPath(path: unknown, what: string): asserts path is string {
  if (typeof path !== 'string' || path === '') fail('ERR_DTYPE', what, 'a file path (a non-empty string)', path);
}

/**
 * Writes `text` to the file at `path`, turning a failed write (a directory, a missing folder, no
 * permission) into a coded `GearError` (`ERR_OPTION`) instead of a raw `fs` error.
 *
 * @param path the output file
 * @param text what to write
 * @param what the name used in the error message
 * @internal
 */
export function writeTextFile(path: unknown, text: string, what: string): void {
  checkPath(path, what);
  try {
    writeFileSync(path, text);
  } catch (e) {
    throw new GearError('ERR_OPTION', `${what} ${JSON.stringify(path)}: expected a writable file path, got ${(e as Error).message}`);
  }
}
