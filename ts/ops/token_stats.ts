/**
 * Token statistics of LLM logits, computed natively in one streaming pass per row: the log-prob of the
 * sampled token, the entropy and the logsumexp of `softmax(logits / temperature)`; their gradient; and the
 * vocabulary-sharded form (tensor-parallel vocabularies).
 *
 * Semantics shared by every function here:
 * - `-Infinity` logits are masked vocabulary entries: they get probability 0 and `0 * log 0 = 0`, so a row
 *   with masked entries has a finite entropy. (verl's `entropy_from_logits` and TRL's `entropy_from_logits`
 *   return NaN on such rows; this is a deliberate difference.) A target whose logit is `-Infinity` has
 *   log-prob `-Infinity`.
 * - `NaN` or `+Infinity` logits, and rows with no finite logit, throw `ERR_NON_FINITE` naming the row.
 * - Every output is of the scaled logits `z / temperature`; gradients are with respect to `z`.
 * - On any error, output buffers are filled with NaN: nothing is left looking valid.
 * - Results are bit-identical for every thread count, batch split, and for sync vs async calls.
 *
 * @module
 */
import { GearError, fail } from '../core/errors.js';
import * as v from '../core/validate.js';
import { type AsyncOptions, asyncOp } from '../core/invoke.js';
import type { AsyncControl, AsyncOp, DeviceControl, NativeLogits, NativeTensor, NativeTensorRef } from '../core/addon_types.js';
import { type AnyLogits, type Logits, type LogitsDType, checkLogits, checkTemperature } from '../core/logits.js';
import { type Device, DeviceLogits, adoptTensor, callDevice } from '../core/device.js';

export type { AnyLogits, Logits, LogitsDType } from '../core/logits.js';

// ---- native contract: token statistics ----
// What this file calls in the addon; the `declare module` block adds it to NativeAddon (ts/core/addon_types.ts).

/** @internal */
export interface TokenStatsParams extends AsyncControl, DeviceControl {
  logits: NativeLogits;
  targets: Int32Array;
  temperature: number;
  out?: { logprob?: Float32Array | null; entropy?: Float32Array | null; logsumexp?: Float32Array | null } | null;
}
/** @internal */
export interface TokenStatsResult {
  logprob: Float32Array;
  entropy: Float32Array;
  logsumexp: Float32Array;
}
/** @internal */
export interface TokenStatsBackwardParams extends AsyncControl, DeviceControl {
  logits: NativeLogits;
  targets?: Int32Array | null;
  grad?: { logprob?: Float32Array | null; entropy?: Float32Array | null } | null;
  temperature: number;
  stats?: { logsumexp?: Float32Array | null; entropy?: Float32Array | null } | null;
  /** A host array, or a float32 device tensor of the logits' shape. */
  out?: Float32Array | NativeTensorRef | null;
  /** Write the gradient over the (float32) logits. */
  inPlace?: boolean;
}
/** @internal */
export interface TokenStatsBackwardResult {
  /**
   * dLoss/dlogits, `rows * vocab`: the host `out` (or a new array) for host results; for device logits
   * without a host `out`, a new device tensor (or the `out` / logits reference given).
   */
  gradLogits: Float32Array | NativeTensor | NativeTensorRef;
}
/** @internal */
export interface TokenStatsPartialParams extends AsyncControl, DeviceControl {
  shard: NativeLogits;
  targets: Int32Array;
  vocabStart: number;
  temperature: number;
}
/** @internal */
export interface TokenStatsPartialResult {
  max: Float64Array;
  sumExp: Float64Array;
  sumExpX: Float64Array;
  targetLogit: Float64Array;
}
/** One shard's statistics, as {@link TokenStatsPartialResult} plus where the shard lies. @internal */
export interface MergePart extends TokenStatsPartialResult {
  vocabStart: number;
  vocab: number;
}
/** @internal */
export interface MergeTokenStatsParams extends AsyncControl {
  /** Sorted by vocabStart, tiling the vocabulary. */
  parts: MergePart[];
  rows: number;
  temperature: number;
}
/** @internal */
export type MergeTokenStatsResult = TokenStatsResult;

declare module '../core/addon_types.js' {
  interface NativeAddon {
    tokenStats: AsyncOp<TokenStatsParams, TokenStatsResult>;
    tokenStatsBackward: AsyncOp<TokenStatsBackwardParams, TokenStatsBackwardResult>;
    tokenStatsPartial: AsyncOp<TokenStatsPartialParams, TokenStatsPartialResult>;
    mergeTokenStats: AsyncOp<MergeTokenStatsParams, MergeTokenStatsResult>;
  }
}
// The parameters each writes (every other array of its parameter object is read: ts/core/invoke.ts).
const tokenStatsOp = asyncOp('tokenStats', { writes: ['out'] });
const tokenStatsBackwardOp = asyncOp('tokenStatsBackward', { writes: ['out', ['logits.data', 'inPlace']] });
const tokenStatsPartialOp = asyncOp('tokenStatsPartial');
const mergeTokenStatsOp = asyncOp('mergeTokenStats');

/**
 * Per-row statistics returned by {@link tokenStats}, each a Float32Array of length `rows`.
 *
 * @category Logits kernels
 */
export interface TokenStats {
  /** `log softmax(z / T)[target]`. */
  logprob: Float32Array;
  /** `-sum_v p_v log p_v` of `softmax(z / T)`. */
  entropy: Float32Array;
  /** `logsumexp(z / T)`. */
  logsumexp: Float32Array;
}

/**
 * Options of {@link tokenStats}.
 *
 * @category Logits kernels
 */
export interface TokenStatsOptions {
  /**
   * Divides the logits first (default 1; finite and >= 1e-30).
   *
   * @defaultValue `1`
   */
  temperature?: number;
  /** Output arrays to fill instead of allocating (each a Float32Array of length `rows`). */
  out?: Partial<TokenStats>;
  /**
   * Where it runs: host arrays go to the CPU kernels unless `'cuda'` (or `'cuda:N'`) asks for the GPU
   * (they are then staged through pinned memory, which pays only when the logits are read there more
   * than once; see {@link cuda.upload}); {@link DeviceLogits} run on their device.
   */
  device?: Device;
}

/**
 * Upstream gradients of {@link tokenStatsBackward}: dLoss/dlogprob and dLoss/dentropy per row.
 *
 * @category Logits kernels
 */
export interface TokenStatsGrad {
  /** dLoss/dlogprob, length `rows` (omitted = 0). */
  logprob?: Float32Array;
  /** dLoss/dentropy, length `rows` (omitted = 0). */
  entropy?: Float32Array;
}

/**
 * Options of {@link tokenStatsBackward}.
 *
 * @category Logits kernels
 */
export interface TokenStatsBackwardOptions {
  /**
   * The forward's temperature (default 1).
   *
   * @defaultValue `1`
   */
  temperature?: number;
  /**
   * The forward's statistics: its `logsumexp` (and `entropy` when an entropy gradient is given) are
   * reused, saving one pass over each row. Without them each row's statistics are recomputed.
   */
  stats?: Pick<TokenStats, 'logsumexp'> & Partial<TokenStats>;
  /**
   * Output instead of a new array: a Float32Array of `rows * vocab`, or a float32 {@link DeviceLogits}
   * of the logits' shape (a call on the device writes it there).
   */
  out?: Float32Array | DeviceLogits;
  /**
   * Writes the gradient over the (float32) logits themselves, halving peak memory. The logits are gone
   * afterwards; if an error is raised after writing began they are filled with NaN.
   *
   * @defaultValue `false`
   */
  inPlace?: boolean;
  /** Where it runs (see {@link TokenStatsOptions.device}). */
  device?: Device;
}

/**
 * Statistics of one vocabulary shard `[vocabStart, vocabStart + vocab)` of each row, from
 * {@link tokenStatsPartial}; merge all shards with {@link mergeTokenStats}. Sums are relative to the
 * shard's largest raw logit `max`: `sumExp = sum exp((z - max)/T)`,
 * `sumExpX = sum exp((z - max)/T) * (z - max)/T`.
 *
 * @category Logits kernels
 */
export interface PartialStats {
  /** First vocabulary id of the shard. */
  vocabStart: number;
  /** Shard width. */
  vocab: number;
  /** Number of rows. */
  rows: number;
  /** Temperature the statistics were computed with. */
  temperature: number;
  /** Per row: largest raw logit of the shard (`-Infinity` for a fully masked shard row). */
  max: Float64Array;
  /** Per row: `sum exp((z - max) / T)` over the shard. */
  sumExp: Float64Array;
  /** Per row: `sum exp((z - max) / T) * (z - max) / T` over the shard. */
  sumExpX: Float64Array;
  /** Per row: the raw logit of the row's target when it falls in this shard, NaN otherwise. */
  targetLogit: Float64Array;
}

function statsArgs(logits: AnyLogits, targets: Int32Array, opts: TokenStatsOptions | undefined) {
  v.knownKeys(opts, 'options', ['temperature', 'out', 'signal', 'device']);
  const l = checkLogits(logits, 'logits');
  // Types and lengths here; the values (token ids in range) natively, in the one pass over a private copy.
  const t = v.i32(targets, 'targets', l.rows);
  const temperature = checkTemperature(opts?.temperature);
  const device = callDevice(opts?.device, l.device);
  const out = opts?.out;
  v.knownKeys(out, 'out', ['logprob', 'entropy', 'logsumexp']);
  const lp = out?.logprob === undefined ? null : v.f32(out.logprob, 'out.logprob', l.rows);
  const en = out?.entropy === undefined ? null : v.f32(out.entropy, 'out.entropy', l.rows);
  const ls = out?.logsumexp === undefined ? null : v.f32(out.logsumexp, 'out.logsumexp', l.rows);
  return { l, t, temperature, device, lp, en, ls };
}

function statsParams(a: ReturnType<typeof statsArgs>): TokenStatsParams {
  return { logits: a.l.native, targets: a.t, temperature: a.temperature, device: a.device,
    out: { logprob: a.lp, entropy: a.en, logsumexp: a.ls } };
}

/**
 * Per row: log-prob of the target, entropy and logsumexp of `softmax(logits / temperature)`, in ONE
 * streaming pass over the row (no `rows x vocab` temporary). Equals verl's `logprobs_from_logits` /
 * `entropy_from_logits` and TRL's `selective_log_softmax` / `entropy_from_logits` (float32 outputs),
 * except that rows with `-Infinity` logits get the mathematically defined entropy (`0 log 0 = 0`) where
 * the peers return NaN.
 *
 * @param logits `rows x vocab` logits (float32, bfloat16 or float16)
 * @param targets sampled token id per row, Int32Array of length `rows`, each in [0, vocab)
 * @param opts `temperature` (default 1) and optional `out` arrays
 * @returns `{ logprob, entropy, logsumexp }`, Float32Array of length `rows` each
 * @throws GearError `ERR_SHAPE`, `ERR_DTYPE`, `ERR_TARGET_RANGE`, `ERR_NON_FINITE`, `ERR_OPTION`, `ERR_BUSY`
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const logits = { data: Float32Array.from({ length: 2 * 4 }, () => Math.random()), rows: 2, vocab: 4 };
 * const targets = Int32Array.of(1, 3);
 * const { logprob, entropy, logsumexp } = rl.tokenStats(logits, targets, { temperature: 1 });
 * console.log(logprob, entropy, logsumexp); // Float32Array(2) each
 * ```
 * @category Logits kernels
 */
export function tokenStats(logits: AnyLogits, targets: Int32Array, opts?: TokenStatsOptions): TokenStats {
  return tokenStatsOp.call(statsParams(statsArgs(logits, targets, opts)));
}

/**
 * Async form of {@link tokenStats}: runs off the main thread on the addon's thread pool. Bit-identical
 * to the sync form. Aborting rejects with `ERR_ABORTED` (supplied `out` arrays are then NaN). While it
 * is pending, its `out` arrays cannot be used by another call and its inputs cannot be written by one
 * (`ERR_BUSY`).
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const logits = { data: Float32Array.from({ length: 2 * 4 }, () => Math.random()), rows: 2, vocab: 4 };
 * const targets = Int32Array.of(1, 3);
 * const stats = await rl.tokenStatsAsync(logits, targets, { signal: AbortSignal.timeout(10_000) });
 * console.log(stats.logprob);
 * ```
 * @category Logits kernels
 */
export async function tokenStatsAsync(
  logits: AnyLogits, targets: Int32Array, opts?: TokenStatsOptions & AsyncOptions,
): Promise<TokenStats> {
  return tokenStatsOp.callAsync(statsParams(statsArgs(logits, targets, opts)), opts?.signal);
}

function backwardArgs(logits: AnyLogits, targets: Int32Array | undefined, grad: TokenStatsGrad,
  opts: TokenStatsBackwardOptions | undefined) {
  v.knownKeys(opts, 'options', ['temperature', 'stats', 'out', 'inPlace', 'signal', 'device']);
  const l = checkLogits(logits, 'logits');
  if (typeof grad !== 'object' || grad === null) fail('ERR_DTYPE', 'grad', 'an object { logprob?, entropy? }', grad);
  v.knownKeys(grad, 'grad', ['logprob', 'entropy']);
  // Types and lengths here; finiteness and token ids natively, once.
  const gl = grad.logprob === undefined ? null : v.f32(grad.logprob, 'grad.logprob', l.rows);
  const ge = grad.entropy === undefined ? null : v.f32(grad.entropy, 'grad.entropy', l.rows);
  const t = gl !== null || targets !== undefined ? v.i32(targets, 'targets', l.rows) : null;
  const temperature = checkTemperature(opts?.temperature);
  const device = callDevice(opts?.device, l.device);
  const stats = opts?.stats;
  let lse: Float32Array | null = null;
  let ent: Float32Array | null = null;
  if (stats !== undefined) {
    if (typeof stats !== 'object' || stats === null) fail('ERR_DTYPE', 'stats', 'a TokenStats object', stats);
    lse = v.f32(stats.logsumexp, 'stats.logsumexp', l.rows);
    if (ge) ent = v.f32(stats.entropy, 'stats.entropy', l.rows);
  }
  const inPlace = opts?.inPlace ?? false;
  if (typeof inPlace !== 'boolean') fail('ERR_OPTION', 'inPlace', 'a boolean', inPlace);
  let out: Float32Array | null = null;
  let outTensor: DeviceLogits | null = null;
  if (inPlace) {
    if (l.dtype !== 'float32') fail('ERR_DTYPE', 'inPlace', 'float32 logits (a Float32Array)', l.data ?? l.dtype);
    if (opts?.out !== undefined) fail('ERR_OPTION', 'out', 'no out buffer with inPlace', opts.out);
  } else if (DeviceLogits.isDeviceLogits(opts?.out)) {
    outTensor = opts!.out as DeviceLogits;
    if (outTensor.dtype !== 'float32') fail('ERR_DTYPE', 'out.dtype', "'float32'", outTensor.dtype);
    if (outTensor.rows !== l.rows || outTensor.vocab !== l.vocab) {
      fail('ERR_SHAPE', 'out', `a ${l.rows} x ${l.vocab} device tensor`, `${outTensor.rows} x ${outTensor.vocab}`);
    }
    if (outTensor === l.tensor) fail('ERR_OPTION', 'out', 'a tensor other than the logits (use inPlace)', String(outTensor));
  } else if (opts?.out !== undefined) {
    out = v.f32(opts.out, 'out', l.rows * l.vocab);
    if (l.data !== null && out.buffer === l.data.buffer) fail('ERR_OPTION', 'out', 'a buffer other than the logits (use inPlace)', out);
  }
  return { l, t, gl, ge, temperature, device, lse, ent, inPlace, out, outTensor };
}

function backwardParams(a: ReturnType<typeof backwardArgs>): TokenStatsBackwardParams {
  return { logits: a.l.native, targets: a.t, grad: { logprob: a.gl, entropy: a.ge },
    temperature: a.temperature, device: a.device, stats: { logsumexp: a.lse, entropy: a.ent },
    out: a.outTensor ? a.outTensor.ref('out') : a.out, inPlace: a.inPlace };
}

/** The gradient a backward returns: the host array, or the device tensor (new, `out`, or the logits in place). */
function gradResult(a: ReturnType<typeof backwardArgs>, g: TokenStatsBackwardResult['gradLogits']): Float32Array | DeviceLogits<'float32'> {
  if (g instanceof Float32Array) return g;
  if (a.outTensor) return a.outTensor as DeviceLogits<'float32'>;
  if (a.inPlace && a.l.tensor) return a.l.tensor as DeviceLogits<'float32'>;
  return adoptTensor<'float32'>(g as NativeTensor);
}

/**
 * Gradient of `L = sum_r grad.logprob[r] * logprob[r] + grad.entropy[r] * entropy[r]` with respect to
 * the (unscaled) logits, in one streaming pass (one exp per logit, non-temporal stores):
 * `dL/dz_v = (grad.logprob * (1[v = target] - p_v) - grad.entropy * p_v (log p_v + H)) / T`.
 * Masked (`-Infinity`) entries get 0 (a masked target still gets `grad.logprob / T`).
 *
 * @param logits the forward's logits
 * @param targets the forward's targets (required with `grad.logprob`)
 * @param grad dLoss/dlogprob and/or dLoss/dentropy per row (finite)
 * @param opts `temperature`, the forward's `stats`, `out`, `inPlace`
 * @returns dLoss/dlogits, Float32Array of `rows * vocab` (the logits' own array when `inPlace`)
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const logits = { data: Float32Array.from({ length: 2 * 4 }, () => Math.random()), rows: 2, vocab: 4 };
 * const targets = Int32Array.of(1, 3);
 * const stats = rl.tokenStats(logits, targets);
 * // L = sum(logprob) - 0.01 * sum(entropy)
 * const grad = { logprob: new Float32Array(2).fill(1), entropy: new Float32Array(2).fill(-0.01) };
 * const dlogits = rl.tokenStatsBackward(logits, targets, grad, { stats });
 * console.log(dlogits.length); // 8 = rows * vocab
 * ```
 * @category Logits kernels
 */
export function tokenStatsBackward(logits: AnyLogits, targets: Int32Array | undefined, grad: TokenStatsGrad,
  opts: TokenStatsBackwardOptions & { out: DeviceLogits }): DeviceLogits<'float32'>;
export function tokenStatsBackward(logits: DeviceLogits, targets: Int32Array | undefined, grad: TokenStatsGrad,
  opts: TokenStatsBackwardOptions & { out: Float32Array }): Float32Array;
export function tokenStatsBackward(logits: DeviceLogits, targets: Int32Array | undefined, grad: TokenStatsGrad,
  opts?: TokenStatsBackwardOptions & { out?: undefined }): DeviceLogits<'float32'>;
export function tokenStatsBackward(logits: Logits, targets: Int32Array | undefined, grad: TokenStatsGrad,
  opts?: TokenStatsBackwardOptions & { out?: Float32Array }): Float32Array;
export function tokenStatsBackward(logits: AnyLogits, targets: Int32Array | undefined, grad: TokenStatsGrad,
  opts?: TokenStatsBackwardOptions): Float32Array | DeviceLogits<'float32'>;
export function tokenStatsBackward(logits: AnyLogits, targets: Int32Array | undefined, grad: TokenStatsGrad,
  opts?: TokenStatsBackwardOptions): Float32Array | DeviceLogits<'float32'> {
  const a = backwardArgs(logits, targets, grad, opts);
  return gradResult(a, tokenStatsBackwardOp.call(backwardParams(a)).gradLogits);
}

/**
 * Async form of {@link tokenStatsBackward} (abortable; `ERR_BUSY` rules as {@link tokenStatsAsync}).
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const logits = { data: Float32Array.from({ length: 2 * 4 }, () => Math.random()), rows: 2, vocab: 4 };
 * const targets = Int32Array.of(1, 3);
 * const dlogits = await rl.tokenStatsBackwardAsync(logits, targets, { logprob: Float32Array.of(1, 1) });
 * console.log(dlogits);
 * ```
 * @category Logits kernels
 */
export async function tokenStatsBackwardAsync(logits: AnyLogits, targets: Int32Array | undefined, grad: TokenStatsGrad,
  opts: TokenStatsBackwardOptions & AsyncOptions & { out: DeviceLogits }): Promise<DeviceLogits<'float32'>>;
export async function tokenStatsBackwardAsync(logits: DeviceLogits, targets: Int32Array | undefined, grad: TokenStatsGrad,
  opts: TokenStatsBackwardOptions & AsyncOptions & { out: Float32Array }): Promise<Float32Array>;
export async function tokenStatsBackwardAsync(logits: DeviceLogits, targets: Int32Array | undefined, grad: TokenStatsGrad,
  opts?: TokenStatsBackwardOptions & AsyncOptions & { out?: undefined }): Promise<DeviceLogits<'float32'>>;
export async function tokenStatsBackwardAsync(logits: Logits, targets: Int32Array | undefined, grad: TokenStatsGrad,
  opts?: TokenStatsBackwardOptions & AsyncOptions & { out?: Float32Array }): Promise<Float32Array>;
export async function tokenStatsBackwardAsync(logits: AnyLogits, targets: Int32Array | undefined, grad: TokenStatsGrad,
  opts?: TokenStatsBackwardOptions & AsyncOptions): Promise<Float32Array | DeviceLogits<'float32'>>;
export async function tokenStatsBackwardAsync(logits: AnyLogits, targets: Int32Array | undefined, grad: TokenStatsGrad,
  opts?: TokenStatsBackwardOptions & AsyncOptions): Promise<Float32Array | DeviceLogits<'float32'>> {
  const a = backwardArgs(logits, targets, grad, opts);
  return gradResult(a, (await tokenStatsBackwardOp.callAsync(backwardParams(a), opts?.signal)).gradLogits);
}

/**
 * Options of {@link tokenStatsPartial}.
 *
 * @category Logits kernels
 */
export interface TokenStatsPartialOptions {
  /** Vocabulary id of the shard's first column (integer >= 0). */
  vocabStart: number;
  /**
   * Temperature (default 1); every shard of a row must use the same.
   *
   * @defaultValue `1`
   */
  temperature?: number;
  /** Where it runs (see {@link TokenStatsOptions.device}). */
  device?: Device;
}

function partialArgs(shard: AnyLogits, targets: Int32Array, opts: TokenStatsPartialOptions) {
  if (typeof opts !== 'object' || opts === null) fail('ERR_OPTION', 'options', 'an object with vocabStart', opts);
  v.knownKeys(opts, 'options', ['vocabStart', 'temperature', 'signal', 'device']);
  const l = checkLogits(shard, 'shard');
  const vocabStart = v.numOpt(opts.vocabStart, 'vocabStart', NaN, { min: 0, max: 2 ** 31 - 1, int: true });
  if (Number.isNaN(vocabStart)) fail('ERR_OPTION', 'vocabStart', 'an integer >= 0', opts.vocabStart);
  const t = v.i32(targets, 'targets', l.rows);  // ids >= 0: checked natively
  return { l, t, vocabStart, temperature: checkTemperature(opts.temperature), device: callDevice(opts.device, l.device) };
}

function partialParams(a: ReturnType<typeof partialArgs>): TokenStatsPartialParams {
  return { shard: a.l.native, targets: a.t, vocabStart: a.vocabStart, temperature: a.temperature, device: a.device };
}

function partialResult(a: ReturnType<typeof partialArgs>, r: Omit<PartialStats, 'vocabStart' | 'vocab' | 'rows' | 'temperature'>): PartialStats {
  return { vocabStart: a.vocabStart, vocab: a.l.vocab, rows: a.l.rows, temperature: a.temperature, ...r };
}

/**
 * Statistics of one vocabulary shard of each row (tensor-parallel vocabulary, or rows too wide for one
 * call). `targets` are ids in the FULL vocabulary; a row's target contributes only to the shard that
 * holds it. Merge every shard with {@link mergeTokenStats}.
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * // one row of 6 logits split into two vocabulary shards of 3
 * const full = Float32Array.of(0.1, 2, -1, 0.5, 3, 0);
 * const targets = Int32Array.of(4); // an id in the full vocabulary
 * const a = rl.tokenStatsPartial({ data: full.subarray(0, 3), rows: 1, vocab: 3 }, targets, { vocabStart: 0 });
 * const b = rl.tokenStatsPartial({ data: full.subarray(3), rows: 1, vocab: 3 }, targets, { vocabStart: 3 });
 * const merged = rl.mergeTokenStats([a, b]);
 * console.log(merged.logprob, rl.tokenStats({ data: full, rows: 1, vocab: 6 }, targets).logprob); // equal up to rounding
 * ```
 * @category Logits kernels
 */
export function tokenStatsPartial(shard: AnyLogits, targets: Int32Array, opts: TokenStatsPartialOptions): PartialStats {
  const a = partialArgs(shard, targets, opts);
  return partialResult(a, tokenStatsPartialOp.call(partialParams(a)));
}

/**
 * Async form of {@link tokenStatsPartial}.
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const targets = Int32Array.of(1);
 * const shard = { data: Float32Array.of(0.1, 2, -1), rows: 1, vocab: 3 };
 * const part = await rl.tokenStatsPartialAsync(shard, targets, { vocabStart: 0 });
 * console.log(rl.mergeTokenStats([part]).logprob);
 * ```
 * @category Logits kernels
 */
export async function tokenStatsPartialAsync(shard: AnyLogits, targets: Int32Array,
  opts: TokenStatsPartialOptions & AsyncOptions): Promise<PartialStats> {
  const a = partialArgs(shard, targets, opts);
  return partialResult(a, await tokenStatsPartialOp.callAsync(partialParams(a), opts.signal));
}

function mergeArgs(parts: PartialStats[]) {
  if (!Array.isArray(parts) || parts.length === 0) fail('ERR_SHAPE', 'parts', 'a non-empty array of PartialStats', parts);
  v.list(parts, 'parts', 'a non-empty array of PartialStats');
  // Each part's fields are read once, into a snapshot: getters cannot hand the checks and the kernel
  // different values, and the sort below compares checked numbers only.
  // Indexed reads of a length read once: a getter that shortens the list leaves holes, refused below,
  // instead of a TypeError from Array.prototype.map.
  const n = parts.length;
  const snap: PartialStats[] = [];
  for (let i = 0; i < n; i++) snap.push(readPart(parts[i], i));
  function readPart(p: unknown, i: number): PartialStats {
    if (typeof p !== 'object' || p === null) fail('ERR_DTYPE', `parts[${i}]`, 'a PartialStats object', p);
    const { vocabStart, vocab, rows, temperature, max, sumExp, sumExpX, targetLogit } = p as PartialStats;
    if (!Number.isSafeInteger(vocabStart) || vocabStart < 0) fail('ERR_SHAPE', `parts[${i}].vocabStart`, 'an integer >= 0', vocabStart);
    if (!Number.isSafeInteger(vocab) || vocab < 1) fail('ERR_SHAPE', `parts[${i}].vocab`, 'an integer >= 1', vocab);
    if (!Number.isSafeInteger(rows) || rows < 0) fail('ERR_SHAPE', `parts[${i}].rows`, 'an integer >= 0', rows);
    if (typeof temperature !== 'number') fail('ERR_OPTION', `parts[${i}].temperature`, 'a number', temperature);
    return { vocabStart, vocab, rows, temperature, max, sumExp, sumExpX, targetLogit };
  }
  const first = snap[0]!;
  const sorted = [...snap].sort((x, y) => x.vocabStart - y.vocabStart);
  let next = 0;
  sorted.forEach((p, i) => {
    if (p.rows !== first.rows) fail('ERR_SHAPE', `parts[${i}].rows`, `the same row count ${first.rows}`, p.rows);
    if (!Object.is(p.temperature, first.temperature)) {
      fail('ERR_OPTION', `parts[${i}].temperature`, `the same temperature ${first.temperature}`, p.temperature);
    }
    if (p.vocabStart !== next) {
      fail('ERR_SHAPE', `shard starting at ${p.vocabStart}`, `vocabStart ${next} (shards must tile [0, V) without gaps or overlaps)`, p.vocabStart);
    }
    next += p.vocab;
    for (const k of ['max', 'sumExp', 'sumExpX', 'targetLogit'] as const) v.f64(p[k], `parts[${i}].${k}`, first.rows);
  });
  return { sorted, rows: first.rows, temperature: first.temperature };
}


/**
 * Merges the shard statistics of {@link tokenStatsPartial} (any order; they must tile the vocabulary)
 * into the statistics of the whole rows: exact log-sum-exp rules in float64, equal to {@link tokenStats}
 * on the unsharded logits up to rounding. Each row's target must lie in exactly one shard
 * (`ERR_TARGET_RANGE` otherwise).
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const targets = Int32Array.of(0, 5);
 * const left = { data: Float32Array.of(1, 2, 3, 4, 5, 6), rows: 2, vocab: 3 };  // ids 0..2
 * const right = { data: Float32Array.of(0, 0, 1, 1, 2, 2), rows: 2, vocab: 3 }; // ids 3..5
 * const parts = [
 *   rl.tokenStatsPartial(right, targets, { vocabStart: 3 }),
 *   rl.tokenStatsPartial(left, targets, { vocabStart: 0 }),
 * ];
 * const { logprob, entropy } = rl.mergeTokenStats(parts); // shards in any order
 * console.log(logprob, entropy);
 * ```
 * @category Logits kernels
 */
export function mergeTokenStats(parts: PartialStats[]): TokenStats {
  const a = mergeArgs(parts);
  return mergeTokenStatsOp.call({ parts: a.sorted, rows: a.rows, temperature: a.temperature });
}

/**
 * Async form of {@link mergeTokenStats}.
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const targets = Int32Array.of(2);
 * const part = rl.tokenStatsPartial({ data: Float32Array.of(1, 2, 3), rows: 1, vocab: 3 }, targets, { vocabStart: 0 });
 * const stats = await rl.mergeTokenStatsAsync([part]);
 * console.log(stats.logsumexp);
 * ```
 * @category Logits kernels
 */
export async function mergeTokenStatsAsync(parts: PartialStats[], opts?: AsyncOptions): Promise<TokenStats> {
  const a = mergeArgs(parts);
  return mergeTokenStatsOp.callAsync({ parts: a.sorted, rows: a.rows, temperature: a.temperature }, opts?.signal);
}
