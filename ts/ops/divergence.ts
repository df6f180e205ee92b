/**
 * Token-wise divergence between a student and a teacher distribution at the same positions (both
 * `softmax(logits / temperature)`), computed natively: reverse KL (the GEAR signal), forward KL and the
 * generalised Jensen-Shannon divergence, with the student's entropy, both logsumexps and both log-probs
 * of the sampled tokens from the same pass; and the gradient with respect to the student logits.
 *
 * Semantics:
 * - `-Infinity` logits are masked entries with `0 * log 0 = 0`. A divergence is `+Infinity` only for a
 *   true support mismatch: reverse KL when the teacher has `-Infinity` where the student has a finite
 *   logit, forward KL the other way round; JSD is always finite. (TRL's SDPO helpers, built on
 *   `F.kl_div(log_target=True)`, return NaN when the target side has a `-Infinity` log-prob; here such
 *   entries contribute 0 — a deliberate difference.)
 * - `NaN` / `+Infinity` logits, rows with no finite logit: `ERR_NON_FINITE` naming the row and side.
 * - Student and teacher share shape and dtype (float32, bfloat16 or float16).
 * - On any error, output buffers are filled with NaN. Results are bit-identical for every thread count,
 *   batch split, and for sync vs async calls.
 *
 * @module
 */
import { fail } from '../core/errors.js';
import * as v from '../core/validate.js';
import { type AsyncOptions, asyncOp } from '../core/invoke.js';
import type { AsyncControl, AsyncOp, DeviceControl, NativeLogits, NativeTensor, NativeTensorRef } from '../core/addon_types.js';
import { type AnyLogits, type Logits, checkKlCap, checkLogits, checkTemperature } from '../core/logits.js';
import { type Device, DeviceLogits, adoptTensor, callDevice } from '../core/device.js';

// ---- native contract: divergence ----
// What this file calls in the addon; the `declare module` block adds it to NativeAddon (ts/core/addon_types.ts).

/** 0 reverse KL, 1 forward KL, 2 JSD. @internal */
export type DivergenceKindCode = 0 | 1 | 2;
/** @internal */
interface DivergencePairParams extends AsyncControl, DeviceControl {
  student: NativeLogits;
  teacher: NativeLogits;
  kind: DivergenceKindCode;
  beta: number;
  temperature: number;
  klCap: number;
}
/** @internal */
export interface DivergenceOut {
  value?: Float32Array;
  studentEntropy?: Float32Array;
  studentLogsumexp?: Float32Array;
  teacherLogsumexp?: Float32Array;
  studentLogprob?: Float32Array;
  teacherLogprob?: Float32Array;
}
/** @internal */
export interface DivergenceParams extends DivergencePairParams {
  targets?: Int32Array | null;
  out?: DivergenceOut | null;
}
/** @internal The native result: the public {@link Divergence} as it is. */
export type DivergenceResult = Divergence;
/** @internal */
export interface DivergenceBackwardParams extends DivergencePairParams {
  grad: Float32Array;
  stats?: { value?: Float32Array | null; studentLogsumexp?: Float32Array | null; teacherLogsumexp?: Float32Array | null } | null;
  /** A host array, or a float32 device tensor of the student's shape. */
  out?: Float32Array | NativeTensorRef | null;
}
/** @internal */
export interface DivergenceBackwardResult {
  /** dLoss/dstudent, `rows * vocab`: a host array, or (device logits) a device tensor. */
  gradStudent: Float32Array | NativeTensor | NativeTensorRef;
}

declare module '../core/addon_types.js' {
  interface NativeAddon {
    divergence: AsyncOp<DivergenceParams, DivergenceResult>;
    divergenceBackward: AsyncOp<DivergenceBackwardParams, DivergenceBackwardResult>;
  }
}
// The parameters each writes (every other array of its parameter object is read: ts/core/invoke.ts).
const divergenceOp = asyncOp('divergence', { writes: ['out'] });
const divergenceBackwardOp = asyncOp('divergenceBackward', { writes: ['out'] });

/**
 * Which divergence {@link divergence} computes.
 *
 * @category Logits kernels
 */
export type DivergenceKind = 'reverse_kl' | 'forward_kl' | 'jsd';
const KINDS: readonly DivergenceKind[] = ['reverse_kl', 'forward_kl', 'jsd'];

/**
 * Per-row results of {@link divergence}, Float32Array of length `rows` each.
 *
 * @category Logits kernels
 */
export interface Divergence {
  /** `KL(p_s || p_t)`, `KL(p_t || p_s)` or `JSD(beta)` (capped at `klCap`). */
  value: Float32Array;
  /** Entropy of the student distribution. */
  studentEntropy: Float32Array;
  /** `logsumexp(student / T)`. */
  studentLogsumexp: Float32Array;
  /** `logsumexp(teacher / T)`. */
  teacherLogsumexp: Float32Array;
  /** Student log-prob of each target (only when `targets` are given). */
  studentLogprob?: Float32Array;
  /** Teacher log-prob of each target (only when `targets` are given). */
  teacherLogprob?: Float32Array;
}

/**
 * Options shared by {@link divergence} and {@link divergenceBackward}.
 *
 * @category Logits kernels
 */
export interface DivergenceCommonOptions {
  /**
   * `'reverse_kl'` (default), `'forward_kl'` or `'jsd'`.
   *
   * @defaultValue `'reverse_kl'`
   */
  kind?: DivergenceKind;
  /**
   * JSD mixture weight in [0, 1] (default 0.5), as TRL / OPSD: `M = (1 - beta) p_s + beta p_t`,
   * `JSD = beta KL(p_t || M) + (1 - beta) KL(p_s || M)`; beta = 1 is reverse KL and beta = 0 forward KL.
   *
   * @defaultValue `0.5`
   */
  beta?: number;
  /**
   * Divides both logits first (default 1).
   *
   * @defaultValue `1`
   */
  temperature?: number;
  /**
   * Caps the value at this many nats (default `Infinity`); capped rows get a zero gradient.
   *
   * @defaultValue `Infinity`
   */
  klCap?: number;
  /**
   * Where it runs: host arrays go to the CPU kernels unless `'cuda'` (or `'cuda:N'`) asks for the GPU;
   * {@link DeviceLogits} run on their device (student and teacher on the same one).
   */
  device?: Device;
}

/**
 * Options of {@link divergence}.
 *
 * @category Logits kernels
 */
export interface DivergenceOptions extends DivergenceCommonOptions {
  /** Sampled token ids (Int32Array of `rows`): adds `studentLogprob` / `teacherLogprob`. */
  targets?: Int32Array;
  /** Output arrays to fill instead of allocating. */
  out?: Partial<Divergence>;
}

/**
 * Options of {@link divergenceBackward}.
 *
 * @category Logits kernels
 */
export interface DivergenceBackwardOptions extends DivergenceCommonOptions {
  /**
   * The forward's `value`, `studentLogsumexp` and `teacherLogsumexp` (same options), reused to skip the
   * statistics pass (reverse / forward KL; JSD recomputes its mixture term).
   */
  stats?: Pick<Divergence, 'value' | 'studentLogsumexp' | 'teacherLogsumexp'>;
  /**
   * Output instead of a new array: a Float32Array of `rows * vocab`, or a float32 {@link DeviceLogits}
   * of the student's shape (a call on the device writes it there).
   */
  out?: Float32Array | DeviceLogits;
}

function commonArgs(student: AnyLogits, teacher: AnyLogits, opts: DivergenceCommonOptions | undefined) {
  const s = checkLogits(student, 'student');
  const t = checkLogits(teacher, 'teacher');
  if (s.rows !== t.rows || s.vocab !== t.vocab) {
    fail('ERR_SHAPE', 'teacher', `the student's shape ${s.rows} x ${s.vocab}`, `${t.rows} x ${t.vocab}`);
  }
  if (s.dtype !== t.dtype) fail('ERR_DTYPE', 'teacher.dtype', `the student's dtype '${s.dtype}'`, t.dtype);
  if (s.device !== t.device) {
    const where = (d: number) => (d < 0 ? 'host memory' : `a tensor on cuda:${d}`);
    fail('ERR_DEVICE', 'teacher', `${where(s.device)}, as the student is`, where(t.device));
  }
  const kind = v.enumOpt(opts?.kind, 'kind', KINDS, 'reverse_kl');
  const beta = v.numOpt(opts?.beta, 'beta', 0.5, { min: 0, max: 1 });
  const temperature = checkTemperature(opts?.temperature);
  const klCap = checkKlCap(opts?.klCap, 'klCap', Infinity);
  const device = callDevice(opts?.device, s.device);
  return { s, t, kind: KINDS.indexOf(kind) as DivergenceKindCode, beta, temperature, klCap, device };
}

/** The parameters shared by the forward and the backward, in native form. */
// The parameter objects are built as one literal each (no spread): the addon reads their properties
// through Node-API, which is several times slower on the shapes a spread leaves behind.
function divergenceParams(a: ReturnType<typeof forwardArgs>, async: boolean): DivergenceParams {
  return { student: a.s.native, teacher: a.t.native, kind: a.kind, beta: a.beta, temperature: a.temperature,
    klCap: a.klCap, device: a.device, targets: a.targets, out: a.outs, async, abort: null };
}

const OUT_KEYS = ['value', 'studentEntropy', 'studentLogsumexp', 'teacherLogsumexp', 'studentLogprob', 'teacherLogprob'] as const;

function forwardArgs(student: AnyLogits, teacher: AnyLogits, opts: DivergenceOptions | undefined) {
  v.knownKeys(opts, 'options', ['kind', 'beta', 'temperature', 'klCap', 'targets', 'out', 'signal', 'device']);
  const c = commonArgs(student, teacher, opts);
  // ids in range: checked natively, once
  const targets = opts?.targets === undefined ? null : v.i32(opts.targets, 'targets', c.s.rows);
  const out = opts?.out;
  v.knownKeys(out, 'out', OUT_KEYS);
  const outs: Partial<Divergence> = {};
  for (const k of OUT_KEYS) {
    const a = out?.[k];
    if (a === undefined) continue;
    if ((k === 'studentLogprob' || k === 'teacherLogprob') && targets === null) {
      fail('ERR_OPTION', `out.${k}`, 'targets to be given', 'no targets');
    }
    outs[k] = v.f32(a, `out.${k}`, c.s.rows);
  }
  return { ...c, targets, outs };
}

/**
 * Per row, in one pass over both arrays (JSD: two, the second from cache): the divergence between the
 * student and teacher distributions, the student's entropy and both logsumexps; with `targets`, also
 * both log-probs of the sampled token (for the sampled-token log-ratio).
 *
 * Matches TRL's SDPO `compute_full_logit_self_distillation_loss` (full vocabulary, `distillation_alpha`
 * = `beta`) on finite logits; see the module notes for `-Infinity` entries.
 *
 * @param student student logits `rows x vocab`
 * @param teacher teacher logits, same shape and dtype
 * @param opts `kind`, `beta`, `temperature`, `klCap`, `targets`, `out`
 * @returns the {@link Divergence} arrays
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const student = { data: Float32Array.from({ length: 2 * 4 }, () => Math.random()), rows: 2, vocab: 4 };
 * const teacher = { data: Float32Array.from({ length: 2 * 4 }, () => Math.random()), rows: 2, vocab: 4 };
 * const d = rl.divergence(student, teacher, { kind: 'jsd', beta: 0.5, targets: Int32Array.of(0, 2) });
 * console.log(d.value, d.studentEntropy, d.teacherLogprob);
 * ```
 * @category Logits kernels
 */
export function divergence(student: AnyLogits, teacher: AnyLogits, opts?: DivergenceOptions): Divergence {
  const a = forwardArgs(student, teacher, opts);
  return divergenceOp.call(divergenceParams(a, false));
}

/**
 * Async form of {@link divergence} (abortable; bit-identical to the sync form; `ERR_BUSY` on buffers in use).
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const student = { data: Float32Array.from({ length: 2 * 4 }, () => Math.random()), rows: 2, vocab: 4 };
 * const teacher = { data: Float32Array.from({ length: 2 * 4 }, () => Math.random()), rows: 2, vocab: 4 };
 * const d = await rl.divergenceAsync(student, teacher, { kind: 'reverse_kl' });
 * console.log(d.value); // KL(student || teacher) per row
 * ```
 * @category Logits kernels
 */
export async function divergenceAsync(student: AnyLogits, teacher: AnyLogits, opts?: DivergenceOptions & AsyncOptions): Promise<Divergence> {
  const a = forwardArgs(student, teacher, opts);
  return divergenceOp.callAsync(divergenceParams(a, true), opts?.signal);
}

function backwardArgs(student: AnyLogits, teacher: AnyLogits, grad: Float32Array, opts: DivergenceBackwardOptions | undefined) {
  v.knownKeys(opts, 'options', ['kind', 'beta', 'temperature', 'klCap', 'stats', 'out', 'signal', 'device']);
  const c = commonArgs(student, teacher, opts);
  const g = v.f32(grad, 'grad', c.s.rows);  // finite: checked natively, once
  let value: Float32Array | null = null;
  let sl: Float32Array | null = null;
  let tl: Float32Array | null = null;
  const stats = opts?.stats;
  if (stats !== undefined) {
    if (typeof stats !== 'object' || stats === null) fail('ERR_DTYPE', 'stats', 'a Divergence object', stats);
    value = v.f32(stats.value, 'stats.value', c.s.rows);
    sl = v.f32(stats.studentLogsumexp, 'stats.studentLogsumexp', c.s.rows);
    tl = v.f32(stats.teacherLogsumexp, 'stats.teacherLogsumexp', c.s.rows);
  }
  let out: Float32Array | null = null;
  let outTensor: DeviceLogits | null = null;
  if (DeviceLogits.isDeviceLogits(opts?.out)) {
    outTensor = opts!.out as DeviceLogits;
    if (outTensor.dtype !== 'float32') fail('ERR_DTYPE', 'out.dtype', "'float32'", outTensor.dtype);
    if (outTensor.rows !== c.s.rows || outTensor.vocab !== c.s.vocab) {
      fail('ERR_SHAPE', 'out', `a ${c.s.rows} x ${c.s.vocab} device tensor`, `${outTensor.rows} x ${outTensor.vocab}`);
    }
    if (outTensor === c.s.tensor || outTensor === c.t.tensor) {
      fail('ERR_OPTION', 'out', 'a tensor other than the student or teacher logits', String(outTensor));
    }
  } else if (opts?.out !== undefined) {
    out = v.f32(opts.out, 'out', c.s.rows * c.s.vocab);
    if (out.buffer === c.s.data?.buffer || out.buffer === c.t.data?.buffer) {
      fail('ERR_OPTION', 'out', 'a buffer other than the student or teacher logits', out);
    }
  }
  return { ...c, g, value, sl, tl, out, outTensor };
}

function backwardParams(a: ReturnType<typeof backwardArgs>, async: boolean): DivergenceBackwardParams {
  return { student: a.s.native, teacher: a.t.native, kind: a.kind, beta: a.beta, temperature: a.temperature,
    klCap: a.klCap, device: a.device, grad: a.g, stats: { value: a.value, studentLogsumexp: a.sl, teacherLogsumexp: a.tl },
    out: a.outTensor ? a.outTensor.ref('out') : a.out, async, abort: null };
}

/** The gradient a backward returns: the host array, or the device tensor (new, or the `out` given). */
function gradResult(a: ReturnType<typeof backwardArgs>, g: DivergenceBackwardResult['gradStudent']): Float32Array | DeviceLogits<'float32'> {
  if (g instanceof Float32Array) return g;
  if (a.outTensor) return a.outTensor as DeviceLogits<'float32'>;
  return adoptTensor<'float32'>(g as NativeTensor);
}

/**
 * Gradient of `L = sum_r grad[r] * value[r]` with respect to the student logits (the teacher gets none),
 * in one streaming pass (non-temporal stores):
 * reverse KL `p_s (log p_s - log p_t - D) / T`; forward KL `(p_s - p_t) / T`;
 * JSD `(1 - beta) p_s (log p_s - log M - KL(p_s || M)) / T`; each times `grad[r]`.
 * Rows whose divergence reached `klCap` get 0 (the cap is flat). A `+Infinity` divergence (support
 * mismatch) without a finite `klCap` throws `ERR_NON_FINITE`: its gradient is undefined.
 *
 * @param student student logits
 * @param teacher teacher logits (same shape and dtype)
 * @param grad dLoss/dvalue per row, Float32Array of `rows` (finite)
 * @param opts the forward's `kind` / `beta` / `temperature` / `klCap`, optional `stats`, `out`
 * @returns dLoss/dstudent, Float32Array of `rows * vocab`
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const student = { data: Float32Array.from({ length: 2 * 4 }, () => Math.random()), rows: 2, vocab: 4 };
 * const teacher = { data: Float32Array.from({ length: 2 * 4 }, () => Math.random()), rows: 2, vocab: 4 };
 * const opts = { kind: 'reverse_kl' as const, klCap: 10 };
 * const d = rl.divergence(student, teacher, opts);
 * // L = mean over rows of the divergence
 * const grad = new Float32Array(2).fill(1 / 2);
 * const dstudent = rl.divergenceBackward(student, teacher, grad, { ...opts, stats: d });
 * console.log(dstudent.length); // 8 = rows * vocab
 * ```
 * @category Logits kernels
 */
export function divergenceBackward(student: AnyLogits, teacher: AnyLogits, grad: Float32Array,
  opts: DivergenceBackwardOptions & { out: DeviceLogits }): DeviceLogits<'float32'>;
export function divergenceBackward(student: DeviceLogits, teacher: DeviceLogits, grad: Float32Array,
  opts: DivergenceBackwardOptions & { out: Float32Array }): Float32Array;
export function divergenceBackward(student: DeviceLogits, teacher: DeviceLogits, grad: Float32Array,
  opts?: DivergenceBackwardOptions & { out?: undefined }): DeviceLogits<'float32'>;
export function divergenceBackward(student: Logits, teacher: Logits, grad: Float32Array,
  opts?: DivergenceBackwardOptions & { out?: Float32Array }): Float32Array;
export function divergenceBackward(student: AnyLogits, teacher: AnyLogits, grad: Float32Array,
  opts?: DivergenceBackwardOptions): Float32Array | DeviceLogits<'float32'>;
export function divergenceBackward(student: AnyLogits, teacher: AnyLogits, grad: Float32Array,
  opts?: DivergenceBackwardOptions): Float32Array | DeviceLogits<'float32'> {
  const a = backwardArgs(student, teacher, grad, opts);
  return gradResult(a, divergenceBackwardOp.call(backwardParams(a, false)).gradStudent);
}

/**
 * Async form of {@link divergenceBackward}.
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const student = { data: Float32Array.from({ length: 2 * 4 }, () => Math.random()), rows: 2, vocab: 4 };
 * const teacher = { data: Float32Array.from({ length: 2 * 4 }, () => Math.random()), rows: 2, vocab: 4 };
 * const dstudent = await rl.divergenceBackwardAsync(student, teacher, Float32Array.of(1, 1), { kind: 'forward_kl' });
 * console.log(dstudent);
 * ```
 * @category Logits kernels
 */
export async function divergenceBackwardAsync(student: AnyLogits, teacher: AnyLogits, grad: Float32Array,
  opts: DivergenceBackwardOptions & AsyncOptions & { out: DeviceLogits }): Promise<DeviceLogits<'float32'>>;
export async function divergenceBackwardAsync(student: DeviceLogits, teacher: DeviceLogits, grad: Float32Array,
  opts: DivergenceBackwardOptions & AsyncOptions & { out: Float32Array }): Promise<Float32Array>;
export async function divergenceBackwardAsync(student: DeviceLogits, teacher: DeviceLogits, grad: Float32Array,
  opts?: DivergenceBackwardOptions & AsyncOptions & { out?: undefined }): Promise<DeviceLogits<'float32'>>;
export async function divergenceBackwardAsync(student: Logits, teacher: Logits, grad: Float32Array,
  opts?: DivergenceBackwardOptions & AsyncOptions & { out?: Float32Array }): Promise<Float32Array>;
export async function divergenceBackwardAsync(student: AnyLogits, teacher: AnyLogits, grad: Float32Array,
  opts?: DivergenceBackwardOptions & AsyncOptions): Promise<Float32Array | DeviceLogits<'float32'>>;
export async function divergenceBackwardAsync(student: AnyLogits, teacher: AnyLogits, grad: Float32Array,
  opts?: DivergenceBackwardOptions & AsyncOptions): Promise<Float32Array | DeviceLogits<'float32'>> {
  const a = backwardArgs(student, teacher, grad, opts);
  return gradResult(a, (await divergenceBackwardOp.callAsync(backwardParams(a, true), opts?.signal)).gradStudent);
}
