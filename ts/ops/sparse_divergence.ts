/**
 * Token-wise divergences between a student and a teacher known only through their **top-k log-probs**
 * (what an inference server returns per generated token), computed natively without any
 * vocabulary-wide row; coverage metrics; bounds on the student's entropy; the gradient with respect to
 * the student's top-k log-probs; and the sampled-token estimators k1 / k2 / k3 when only the chosen
 * token's log-prob is known.
 *
 * Layout: `SparseTopK`, what the server parsers return: per token a fixed `k` per side, `ids` (Int32Array
 * of `n * k`) and `logprobs` (Float32Array of `n * k`); a padding entry has id `-1` and log-prob
 * `-Infinity`. Each side carries its own top-k set.
 *
 * Support. Only the ids **both** sides list (the shared set C) have a probability known on both sides.
 * An id listed by one side only has, on the other side, an unknown probability that lies in that side's
 * tail; it is therefore merged, on both sides, into one tail bucket together with every unlisted id:
 * - `support: 'tail'` (default): the categories of C plus a bucket of mass `1 − Σ_C p` on each side — the
 *   finest partition of the vocabulary on which both distributions are known, so by the data-processing
 *   inequality the value is a **lower bound** of the full-vocabulary divergence (reverse KL, forward KL
 *   and JSD alike; exactly so with `tailClamp: 0`, the default clamp moves a bucket by about 1e-7). The
 *   bucket's log-mass is `log(−expm1(min(log Σ_C p, −tailClamp)))`, TRL SDPO's `add_tail_bucket` (whose
 *   clamp is `tailClamp = 1e-7`).
 * - `support: 'renormalize'`: the two distributions conditioned on C (`p / Σ_C p`), TRL's
 *   `distillation_add_tail=False`. Not a bound of the full divergence. When either side has no mass on C
 *   there is no common conditional: the value and gradient are 0 (see `shared` / `*SharedMass`).
 *
 * When the teacher's lists hold the teacher's log-probs at the student's top-k ids (TRL SDPO's
 * `compute_topk_self_distillation_loss`), C is the student's top-k and both variants reproduce TRL. With
 * `k = vocab` both equal the dense `divergence`. Kinds and the `-Infinity` conventions are the dense
 * op's (`0 log 0 = 0`, `+Infinity` only for a true support mismatch).
 *
 * Results are bit-identical for every thread count and for sync vs async calls.
 *
 * @module
 */
import { fail } from '../core/errors.js';
import * as v from '../core/validate.js';
import { type AsyncOptions, asyncOp } from '../core/invoke.js';
import type { AsyncControl, AsyncOp } from '../core/addon_types.js';
import { checkKlCap } from '../core/logits.js';
import type { DivergenceKind, DivergenceKindCode } from './divergence.js';

/**
 * Top-k alternatives per token, packed for a sparse kernel: `ids` and `logprobs` are row-major
 * `N x k`; a token with fewer than `k` alternatives is padded with id `-1` and log-prob `-Infinity`.
 * Entries keep the server's order (most likely first for every supported server).
 * @category Server ingestion
 */
export interface SparseTopK {
  /** Alternatives per token (row width); 0 when the response carried none. */
  k: number;
  /** Token ids, `N * k`, padding `-1`. */
  ids: Int32Array;
  /** Log-probs, `N * k`, padding `-Infinity`. */
  logprobs: Float32Array;
}

// ---- native contract: top-k divergence ----
// What this file calls in the addon; the `declare module` block adds it to NativeAddon (ts/core/addon_types.ts).

/** One side's top-k lists: `ids` and `logprobs` of `n * k` (padding: id -1, log-prob -Infinity). @internal */
export interface NativeSparseTopk {
  ids: Int32Array;
  logprobs: Float32Array;
  k: number;
}
/** 0 tail bucket, 1 renormalised over the shared ids. @internal */
export type SparseSupportCode = 0 | 1;
/** @internal */
interface SparseDivergenceCommonParams extends AsyncControl {
  student: NativeSparseTopk;
  teacher: NativeSparseTopk;
  n: number;
  kind: DivergenceKindCode;
  beta: number;
  support: SparseSupportCode;
  tailClamp: number;
  /** 0: unknown. */
  vocab: number;
  klCap: number;
}
/** @internal */
export interface SparseDivergenceParams extends SparseDivergenceCommonParams {
  /** Caller-owned outputs (each `n` long); absent ones are allocated. */
  out?: { [K in keyof SparseDivergence]?: SparseDivergence[K] | null } | null;
}
/** @internal The native result: the public {@link SparseDivergence} as it is. */
export type SparseDivergenceResult = SparseDivergence;
/** @internal */
export interface SparseDivergenceBackwardParams extends SparseDivergenceCommonParams {
  grad: Float32Array;
}
/** @internal */
export interface SparseDivergenceBackwardResult {
  /** dLoss/d(student top-k log-probs), `n * student.k`. */
  gradStudent: Float32Array;
}

declare module '../core/addon_types.js' {
  interface NativeAddon {
    sparseDivergence: AsyncOp<SparseDivergenceParams, SparseDivergenceResult>;
    sparseDivergenceBackward: AsyncOp<SparseDivergenceBackwardParams, SparseDivergenceBackwardResult>;
  }
}
// Both read every array of their parameter objects (ts/core/invoke.ts); the forward writes its `out` arrays.
const sparseDivergenceOp = asyncOp('sparseDivergence', { writes: ['out'] });
const sparseDivergenceBackwardOp = asyncOp('sparseDivergenceBackward');

/**
 * How the mass outside the shared ids is treated (see the module notes).
 * @category Logits kernels
 */
export type SparseSupport = 'tail' | 'renormalize';
const SUPPORTS: readonly SparseSupport[] = ['tail', 'renormalize'];
const KINDS: readonly DivergenceKind[] = ['reverse_kl', 'forward_kl', 'jsd'];

/**
 * Options of {@link sparseDivergence} and {@link sparseDivergenceBackward}.
 * @category Logits kernels
 */
export interface SparseDivergenceOptions {
  /**
   * `'reverse_kl'` (default), `'forward_kl'` or `'jsd'`, as the dense `divergence`.
   *
   * @defaultValue `'reverse_kl'`
   */
  kind?: DivergenceKind;
  /**
   * JSD mixture weight in [0, 1] (default 0.5): `M = (1 − beta) p_s + beta p_t`; 1 is reverse KL, 0 forward KL.
   *
   * @defaultValue `0.5`
   */
  beta?: number;
  /**
   * `'tail'` (default, a lower bound of the full divergence) or `'renormalize'`.
   *
   * @defaultValue `'tail'`
   */
  support?: SparseSupport;
  /**
   * Clamp of the shared log-mass, `log Σ_C p <= −tailClamp`, so the bucket keeps a mass of about `tailClamp`
   * (default 1e-7, TRL's; in [0, 1)). With 0, lists that cover all the mass leave float32-rounding-level
   * buckets, and a bucket of exactly 0 on one side only is a support mismatch (`+Infinity`).
   *
   * @defaultValue `1e-7`
   */
  tailClamp?: number;
  /**
   * Vocabulary size: ids must be below it, and the entropy upper bound becomes finite (default: unknown).
   *
   * @defaultValue unknown (ids are not bounded, the entropy upper bound is `+Infinity`)
   */
  vocab?: number;
  /**
   * Caps the value at this many nats (default `Infinity`); capped tokens get a zero gradient.
   *
   * @defaultValue `Infinity`
   */
  klCap?: number;
}

/**
 * Options of {@link sparseDivergence} (the forward): {@link SparseDivergenceOptions} plus caller-owned outputs.
 * @category Logits kernels
 */
export interface SparseDivergenceForwardOptions extends SparseDivergenceOptions {
  /**
   * Arrays to write the results into, each `n` long (a previous call's result, for one: a training loop
   * that passes it back allocates nothing per step). Fields left out are allocated. Each must have memory
   * of its own: one that shares memory with another array of the call is `ERR_SHAPE`.
   */
  out?: Partial<SparseDivergence>;
}

/**
 * Per-token results of {@link sparseDivergence} (length `n` each).
 * @category Logits kernels
 */
export interface SparseDivergence {
  /** The divergence on the shared support (capped at `klCap`). */
  value: Float32Array;
  /** Coverage: `1 − Σ` of the student's own top-k probabilities (its tail mass, >= 0). */
  studentTail: Float32Array;
  /** Coverage: the teacher's tail mass. */
  teacherTail: Float32Array;
  /** `Σ_C p_s`: the student's mass on the shared ids. */
  studentSharedMass: Float32Array;
  /** `Σ_C p_t`: the teacher's mass on the shared ids. */
  teacherSharedMass: Float32Array;
  /** `|C|`: how many ids both sides list. */
  shared: Int32Array;
  /**
   * Lower bound of the student's full entropy: `H_k + ⌊τ/m⌋ (−m log m) − r log r` with `H_k` the listed
   * entries' `−Σ p log p`, `τ` the tail mass, `m` the smallest listed probability > 0 and
   * `r = τ − ⌊τ/m⌋ m` (the tail as concentrated as the top-k allows: each unlisted id holds at most `m`).
   */
  entropyLower: Float32Array;
  /**
   * Upper bound of the student's full entropy: `H_k + τ log((V − k') / τ)` (the tail spread evenly over
   * the `V − k'` unlisted ids); `+Infinity` without `vocab`.
   */
  entropyUpper: Float32Array;
}

/**
 * Arguments of {@link sampledTokenKl}: the chosen token's log-prob on each side.
 * @category Logits kernels
 */
export interface SampledTokenKlArgs {
  /** Student log-prob of each chosen (sampled) token, finite. */
  studentLogprob: Float32Array | Float64Array;
  /** Teacher log-prob of the same token, finite, same length. */
  teacherLogprob: Float32Array | Float64Array;
}

/**
 * Result of {@link sampledTokenKl}, Float64Array per token.
 * @category Logits kernels
 */
export interface SampledTokenKl {
  /** `d = ℓ_s − ℓ_t` (unbiased for KL(student ‖ teacher) when the token is sampled from the student). */
  k1: Float64Array;
  /** `d² / 2`. */
  k2: Float64Array;
  /** `e^u − u − 1` with `u = ℓ_t − ℓ_s` (unbiased, >= 0). */
  k3: Float64Array;
}

function side(x: unknown, what: string): { s: SparseTopK; n: number } {
  if (typeof x !== 'object' || x === null) fail('ERR_DTYPE', what, 'an object { ids, logprobs, k }', x);
  v.knownKeys(x, what, ['ids', 'logprobs', 'k']);
  const o = x as SparseTopK;
  const k = v.numOpt(o.k, `${what}.k`, NaN, { min: 1, max: 2 ** 31, int: true });
  if (Number.isNaN(k)) fail('ERR_OPTION', `${what}.k`, 'an integer >= 1', o.k);
  const ids = v.i32(o.ids, `${what}.ids`);
  if (ids.length % k !== 0) fail('ERR_SHAPE', `${what}.ids.length`, `a multiple of k = ${k}`, ids.length);
  const logprobs = v.f32(o.logprobs, `${what}.logprobs`, ids.length);
  return { s: { ids, logprobs, k }, n: ids.length / k };
}

function commonArgs(student: SparseTopK, teacher: SparseTopK, opts: SparseDivergenceOptions | undefined, extra: readonly string[]) {
  v.knownKeys(opts, 'options', ['kind', 'beta', 'support', 'tailClamp', 'vocab', 'klCap', ...extra]);
  const s = side(student, 'student');
  const t = side(teacher, 'teacher');
  if (s.n !== t.n) fail('ERR_SHAPE', 'teacher', `the student's ${s.n} tokens`, `${t.n} tokens`);
  const kind = v.enumOpt(opts?.kind, 'kind', KINDS, 'reverse_kl');
  const support = v.enumOpt(opts?.support, 'support', SUPPORTS, 'tail');
  const params = {
    student: s.s as NativeSparseTopk,
    teacher: t.s as NativeSparseTopk,
    n: s.n,
    kind: KINDS.indexOf(kind) as DivergenceKindCode,
    beta: v.numOpt(opts?.beta, 'beta', 0.5, { min: 0, max: 1 }),
    support: SUPPORTS.indexOf(support) as SparseSupportCode,
    tailClamp: v.numOpt(opts?.tailClamp, 'tailClamp', 1e-7, { min: 0, max: 1, maxOpen: true }),
    vocab: v.numOpt(opts?.vocab, 'vocab', 0, { min: 1, max: 2 ** 31, int: true }),
    klCap: checkKlCap(opts?.klCap, 'klCap', Infinity),
  };
  return { params };
}

/**
 * Per token, from both sides' top-k log-probs: the divergence on the shared support (tail bucket or
 * renormalised, see the module notes), both tail masses, both shared masses, the shared count and
 * bounds on the student's entropy. Row-parallel on the addon's threads; O(k_s · k_t) per token for
 * server-sized lists (sorted matching beyond).
 *
 * Bad input: `ERR_NON_FINITE` (NaN / +Infinity log-prob), `ERR_TARGET_RANGE` (id < −1 or >= `vocab`),
 * `ERR_OPTION` (an id listed twice on one side, a padding id with a finite log-prob, a side whose
 * probabilities sum past 1.01), each naming the token and entry.
 *
 * @param student the student's top-k (the on-policy model)
 * @param teacher the teacher's top-k at the same positions (same token count)
 * @param opts `kind`, `beta`, `support`, `tailClamp`, `vocab`, `klCap`, and `out` arrays to reuse
 * @returns the {@link SparseDivergence} arrays (the `out` ones where given)
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * // one token, top-2 per side; only id 7 is listed by both
 * const student = { ids: Int32Array.of(7, 3), logprobs: Float32Array.of(Math.log(0.6), Math.log(0.3)), k: 2 };
 * const teacher = { ids: Int32Array.of(7, 9), logprobs: Float32Array.of(Math.log(0.5), Math.log(0.4)), k: 2 };
 * const d = rl.sparseDivergence(student, teacher, { kind: 'reverse_kl', vocab: 32 });
 * // categories {7, bucket}: 0.6 log(0.6/0.5) + 0.4 log(0.4/0.5) ≈ 0.0201
 * console.log(d.value[0], d.shared[0], d.studentTail[0]); // ≈ 0.0201, 1, ≈ 0.1
 * ```
 * @category Logits kernels
 */
export function sparseDivergence(student: SparseTopK, teacher: SparseTopK, opts?: SparseDivergenceForwardOptions): SparseDivergence {
  const a = commonArgs(student, teacher, opts, ['out']);
  return sparseDivergenceOp.call({ ...a.params, out: outArgs(opts?.out, a.params.n) });
}

/**
 * Async form of {@link sparseDivergence} (abortable; bit-identical to the sync form).
 *
 * @param student the student's top-k
 * @param teacher the teacher's top-k
 * @param opts as {@link sparseDivergence}, plus `signal`
 * @returns a Promise of the {@link SparseDivergence} arrays
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const student = { ids: Int32Array.of(0, 1), logprobs: Float32Array.of(Math.log(0.7), Math.log(0.2)), k: 2 };
 * const teacher = { ids: Int32Array.of(1, 0), logprobs: Float32Array.of(Math.log(0.5), Math.log(0.4)), k: 2 };
 * const d = await rl.sparseDivergenceAsync(student, teacher, { kind: 'jsd', beta: 0.5 });
 * console.log(d.value[0] >= 0); // true
 * ```
 * @category Logits kernels
 */
export async function sparseDivergenceAsync(student: SparseTopK, teacher: SparseTopK,
  opts?: SparseDivergenceForwardOptions & AsyncOptions): Promise<SparseDivergence> {
  const a = commonArgs(student, teacher, opts, ['signal', 'out']);
  return sparseDivergenceOp.callAsync({ ...a.params, out: outArgs(opts?.out, a.params.n) }, opts?.signal);
}

const OUT_KEYS = ['value', 'studentTail', 'teacherTail', 'studentSharedMass', 'teacherSharedMass', 'shared',
  'entropyLower', 'entropyUpper'] as const;

/** The forward's `out` arrays, each read once and checked (`n` long, the field's type). */
function outArgs(out: Partial<SparseDivergence> | undefined, n: number): SparseDivergenceParams['out'] {
  if (out === undefined) return null;
  v.knownKeys(out, 'out', OUT_KEYS);
  const r: NonNullable<SparseDivergenceParams['out']> = {};
  for (const k of OUT_KEYS) {
    const x = out[k];
    if (x === undefined) continue;
    if (k === 'shared') r.shared = v.i32(x, 'out.shared', n);
    else r[k] = v.f32(x, `out.${k}`, n);
  }
  return r;
}

function backwardArgs(student: SparseTopK, teacher: SparseTopK, grad: Float32Array, opts: SparseDivergenceOptions | undefined,
  extra: readonly string[]) {
  const a = commonArgs(student, teacher, opts, extra);
  const g = v.f32(grad, 'grad', a.params.n);
  v.allFinite(g, 'grad');
  return { params: { ...a.params, grad: g } };
}

/**
 * Gradient of `L = Σ_t grad[t] · value[t]` with respect to the **student's top-k log-probs** (each entry
 * an independent input; chain to logits with `d ℓ_i / d z_j = [i = j] − softmax(z)_j`, which a framework's
 * autograd does). Ids outside the shared set and padding get 0 (the tail bucket's mass is `1 − Σ_C p`,
 * so a one-sided id does not move it). Tail bucket: `∂D/∂ℓ_i = g_i − p_i · g_b / b_s`; renormalised:
 * `g_i − p̂_i Σ_j g_j`, with `g` the per-category derivative (reverse KL `p (log p − log q + 1)`, forward
 * KL `−q`, JSD `(1 − beta) p (log p − log M)`). Tokens whose value reached `klCap` get 0; a `+Infinity`
 * divergence without a finite `klCap` throws `ERR_NON_FINITE`.
 *
 * @param student the student's top-k
 * @param teacher the teacher's top-k
 * @param grad dLoss/dvalue per token, Float32Array of `n` (finite)
 * @param opts the forward's options
 * @returns dLoss/d(student.logprobs), Float32Array of `n * student.k`
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const student = { ids: Int32Array.of(4, 2), logprobs: Float32Array.of(Math.log(0.6), Math.log(0.3)), k: 2 };
 * const teacher = { ids: Int32Array.of(4, 2), logprobs: Float32Array.of(Math.log(0.3), Math.log(0.5)), k: 2 };
 * const g = rl.sparseDivergenceBackward(student, teacher, Float32Array.of(1));
 * console.log(g.length); // 2: d KL / d log p_s for ids 4 and 2
 * ```
 * @category Logits kernels
 */
export function sparseDivergenceBackward(student: SparseTopK, teacher: SparseTopK, grad: Float32Array,
  opts?: SparseDivergenceOptions): Float32Array {
  const a = backwardArgs(student, teacher, grad, opts, []);
  return sparseDivergenceBackwardOp.call(a.params).gradStudent;
}

/**
 * Async form of {@link sparseDivergenceBackward}.
 *
 * @param student the student's top-k
 * @param teacher the teacher's top-k
 * @param grad dLoss/dvalue per token
 * @param opts the forward's options, plus `signal`
 * @returns a Promise of dLoss/d(student.logprobs)
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const student = { ids: Int32Array.of(4, 2), logprobs: Float32Array.of(Math.log(0.6), Math.log(0.3)), k: 2 };
 * const teacher = { ids: Int32Array.of(2, 4), logprobs: Float32Array.of(Math.log(0.5), Math.log(0.3)), k: 2 };
 * const g = await rl.sparseDivergenceBackwardAsync(student, teacher, Float32Array.of(1), { support: 'renormalize' });
 * console.log(g.length); // 2
 * ```
 * @category Logits kernels
 */
export async function sparseDivergenceBackwardAsync(student: SparseTopK, teacher: SparseTopK, grad: Float32Array,
  opts?: SparseDivergenceOptions & AsyncOptions): Promise<Float32Array> {
  const a = backwardArgs(student, teacher, grad, opts, ['signal']);
  return (await sparseDivergenceBackwardOp.callAsync(a.params, opts?.signal)).gradStudent;
}

/**
 * The sampled-token estimators of KL(student ‖ teacher) when only the chosen token's log-prob is known
 * on each side (the token drawn from the student): k1, k2 and k3 with the definitions of
 * `klPenalty` (`logprob` = student, `refLogprob` = teacher) without any clamp (its `compat: 'trl'`).
 * Their gradients with respect to the student's log-prob are `klPenalty`'s.
 *
 * @param a the chosen token's student and teacher log-probs
 * @returns k1, k2, k3 per token
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const e = rl.sampledTokenKl({ studentLogprob: Float32Array.of(-0.5), teacherLogprob: Float32Array.of(-1.5) });
 * console.log(e.k1[0], e.k2[0], e.k3[0]); // 1, 0.5, e^-1 + 1 - 1 ≈ 0.3679
 * ```
 * @category Logits kernels
 */
export function sampledTokenKl(a: SampledTokenKlArgs): SampledTokenKl {
  if (typeof a !== 'object' || a === null) fail('ERR_OPTION', 'sampledTokenKl(a)', 'an object', a);
  v.knownKeys(a, 'sampledTokenKl(a)', ['studentLogprob', 'teacherLogprob']);
  const s = a.studentLogprob, t = a.teacherLogprob;
  if (!(s instanceof Float32Array || s instanceof Float64Array)) fail('ERR_DTYPE', 'studentLogprob', 'Float32Array or Float64Array', s);
  if (!(t instanceof Float32Array || t instanceof Float64Array)) fail('ERR_DTYPE', 'teacherLogprob', 'Float32Array or Float64Array', t);
  if (t.length !== s.length) fail('ERR_SHAPE', 'teacherLogprob.length', String(s.length), t.length);
  v.attached(s, 'studentLogprob');
  v.attached(t, 'teacherLogprob');
  v.allFinite(s, 'studentLogprob');
  v.allFinite(t, 'teacherLogprob');
  const n = s.length;
  const k1 = new Float64Array(n), k2 = new Float64Array(n), k3 = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const d = s[i]! - t[i]!;
    k1[i] = d;
    k2[i] = 0.5 * d * d;
    k3[i] = Math.expm1(-d) + d;  // e^u − 1 − u with u = −d, expm1 keeps it accurate near 0
  }
  return { k1, k2, k3 };
}
