/**
 * Credit measurement without training, on an environment whose credit is known token by token (the
 * answer chain): the questions the GEAR paper's referees asked, answered on batches sampled from one
 * checkpoint.
 *
 * Per batch (tasks × G rollouts of the checkpoint), with the true per-token advantage A* of the
 * checkpoint's own policy (Monte Carlo, oracle.ts) and each token's label:
 *
 * * for each teacher view (the same weights reading the answer, the full reference solution, or
 *   something privileged but irrelevant): the AUROC of the divergence D for the departure tokens, over
 *   every agent token and among decision tokens only, and the same for the sampled-token log-ratio and
 *   for the log-ratio anchor signal `s = max(0, −logratio)` GEAR reads with `anchorSignal: 'logratio'`;
 * * for GRPO, GiGPO, GEAR with each teacher and every control: the cosine between the method's
 *   logit-space gradient `Σ_t Â_t (e_{y_t} − p_t)` and the oracle's `Σ_t A*_t (e_{y_t} − p_t)` (the
 *   logits of each position are their own coordinates, so the cosine weighs token t by
 *   `‖e_{y_t} − p_t‖²`: tokens sampled with p ≈ 1 cannot inflate it), and where the gradient-weighted
 *   credit `|Â|·(1 − p)` sits by label;
 * * for the methods that place anchors: anchor precision and recall at the departure (an anchor inside
 *   the departure's decisive unit counts), and the share of the doomed continuation inside segments
 *   (next to the share of on-track tokens inside segments);
 * * a sweep of GEAR's spike threshold `peakZ` and its extension threshold `entropyQuantile`, with each
 *   anchor signal.
 *
 * Every figure is then summarised over batches with a percentile bootstrap interval.
 *
 * @module
 */
import * as rl from 'gear-rl';
import { Rng, deriveSeed } from '../env/rng.js';
import type { EnvTask } from '../env/types.js';
import { Policy, type Context, type RowSpec } from '../model/policy.js';
import { auroc, bootstrapMean, weightedCosine, type BootstrapMean } from '../report/stats.js';
import { STRONG_FAMILY, advantages as methodAdvantages } from './methods.js';
import { LABEL, LABEL_NAMES, trueAdvantages, type KnownCreditEnv, type LabelName, type SequenceModel } from './oracle.js';
import { collect, pack, type PackedBatch } from './rollout.js';
import { EVAL_SEED_BASE, policyConfig } from './train.js';

/** Settings of one measurement. */
export interface MeasureConfig {
  /** Batches sampled from the checkpoint. */
  batches: number;
  /** Tasks per batch. */
  tasks: number;
  /** Rollouts per task (the group size G). */
  groupSize: number;
  /** Monte Carlo rollouts per prefix for the true advantages. */
  rollouts: number;
  /** Seed of the tasks, the sampling and the Monte Carlo rollouts. */
  seed: number;
  /** GEAR's thresholds swept (answer teacher). */
  sweep: { peakZ: number[]; entropyQuantile: number[] };
  /** Bootstrap resamples of the summaries. */
  bootstrap: number;
}

/** The credit estimators compared, in display order, with their labels. */
export const CREDIT_METHODS = {
  grpo: 'GRPO',
  gigpo: 'GiGPO',
  'gear-answer': 'GEAR, answer teacher',
  'gear-solution': 'GEAR, solution teacher',
  'gear-irrelevant': 'GEAR, irrelevant teacher',
  shuffled: 'GEAR, divergence shuffled in rows',
  'random-anchors': 'GEAR, random_anchors',
  'fixed-length': 'GEAR, fixed_length',
  'token-only': 'GEAR, token_only',
  oracle: 'oracle weights',
  'oracle-strong': 'oracle weights (α 3, raw)',
  'gear-strong': 'GEAR (α 3, raw)',
  'gear-strong-shuffled': 'GEAR (α 3, raw), shuffled',
  'gear-lr-answer': 'GEAR log-ratio, answer teacher',
  'gear-lr-solution': 'GEAR log-ratio, solution teacher',
  'gear-lr-irrelevant': 'GEAR log-ratio, irrelevant teacher',
  'gear-lr-shuffled': 'GEAR log-ratio, shuffled in rows',
  'gear-lr-strong': 'GEAR log-ratio (α 3, raw)',
  'gear-lr-strong-shuffled': 'GEAR log-ratio (α 3, raw), shuffled',
} as const;
/** A key of {@link CREDIT_METHODS}. */
export type CreditMethod = keyof typeof CREDIT_METHODS;

/** The labels of agent tokens (every label but `observation`). */
export const AGENT_LABELS = LABEL_NAMES.slice(1) as readonly LabelName[];

/** Where anchors and segments fall, for one method and batch. */
export interface AnchorMetrics {
  /** Anchors inside a departure's decisive unit / all anchors. */
  precision: number;
  /** Departures whose decisive unit holds an anchor / all departures. */
  recall: number;
  /** Doomed tokens inside a segment / doomed tokens. */
  doomedInSegments: number;
  /** On-track tokens (before the departure) inside a segment / on-track tokens. */
  onTrackInSegments: number;
  /** Anchors per episode. */
  anchorsPerRow: number;
  /** Mean segment length. */
  segmentLength: number;
}

/** A method's figures on one batch. */
export interface MethodCredit {
  /** Cosine of its logit-space gradient with the oracle's. */
  cosine: number;
  /** Share of the batch's `|Â|·(1 − p)` per label. */
  shares: Record<LabelName, number>;
  /** Anchor figures, for the methods that place anchors. */
  anchors?: AnchorMetrics;
}

/** A teacher view's figures on one batch. */
export interface TeacherCredit {
  /** AUROC of D for departure tokens against every other agent token. */
  aurocAll: number;
  /** AUROC of D for departures at decision positions against right decisions. */
  aurocDecision: number;
  /** The same two for the sampled-token log-ratio (student minus teacher log-prob of the sampled token). */
  aurocLogratioAll: number;
  /** See {@link TeacherCredit.aurocLogratioAll}. */
  aurocLogratioDecision: number;
  /** The same two for the log-ratio anchor signal `s = max(0, −logratio)` (ties at 0 count one half). */
  aurocSignalAll: number;
  /** See {@link TeacherCredit.aurocSignalAll}. */
  aurocSignalDecision: number;
  /** Mean D per label. */
  meanDivergence: Record<LabelName, number>;
  /** Mean s per label. */
  meanSignal: Record<LabelName, number>;
}

/** Everything measured on one batch. */
export interface BatchCredit {
  /** Share of the batch's episodes that succeed. */
  success: number;
  /** Tokens per label. */
  counts: Record<LabelName, number>;
  /** Share of the oracle's own `|A*|·(1 − p)` per label. */
  truth: Record<LabelName, number>;
  /** Per teacher view. */
  teachers: Record<string, TeacherCredit>;
  /** Per credit method. */
  methods: Record<CreditMethod, MethodCredit>;
  /** The sweep, keyed `z<peakZ>/q<entropyQuantile>`. */
  sweep: Record<string, AnchorMetrics & { cosine: number }>;
  /** The same sweep with the log-ratio anchor signal. */
  sweepLogratio: Record<string, AnchorMetrics & { cosine: number }>;
}

/** A {@link SequenceModel} over the demo's policy network. */
export function policyModel(policy: Policy): SequenceModel<Context> {
  return {
    vocab: policy.cfg.vocab,
    context: () => policy.context(),
    fork: (c) => policy.fork(c),
    push: (c, x) => policy.push(c, x),
    next: (c, out) => policy.next(c, out),
  };
}

/** Per row of a logits matrix: `p` of the target and `‖e_y − p‖² = 1 − 2 p_y + Σ_j p_j²`, in float64. */
export function gradientWeights(logits: rl.Logits, targets: Int32Array): { p: Float64Array; g: Float64Array } {
  const { data, rows, vocab: V } = logits as { data: Float32Array; rows: number; vocab: number };
  const p = new Float64Array(rows), g = new Float64Array(rows);
  const e = new Float64Array(V);
  for (let r = 0; r < rows; r++) {
    let max = -Infinity;
    for (let j = 0; j < V; j++) max = Math.max(max, data[r * V + j]!);
    let s = 0;
    for (let j = 0; j < V; j++) { e[j] = Math.exp(data[r * V + j]! - max); s += e[j]!; }
    let sq = 0;
    for (let j = 0; j < V; j++) { const q = e[j]! / s; sq += q * q; }
    p[r] = e[targets[r]!]! / s;
    g[r] = 1 - 2 * p[r]! + sq;
  }
  return { p, g };
}

/** Share of `Σ |a|·w` per label over agent tokens (NaN when the total is 0). */
export function labelShares(a: ArrayLike<number>, w: ArrayLike<number>, labels: Uint8Array): Record<LabelName, number> {
  const sums = new Float64Array(LABEL_NAMES.length);
  let total = 0;
  for (let i = 0; i < a.length; i++) {
    if (labels[i] === LABEL.observation) continue;
    const x = Math.abs(a[i]!) * w[i]!;
    sums[labels[i]!]! += x;
    total += x;
  }
  return Object.fromEntries(AGENT_LABELS.map((l) => [l, total > 0 ? sums[LABEL[l]]! / total : NaN])) as Record<LabelName, number>;
}

/**
 * Anchor figures of a GEAR-style result: anchors (segment starts), segment ids, the labels and each
 * row's departure unit (`inUnit[t]` true on the tokens of a departure's decisive unit).
 */
export function anchorMetrics(anchors: ArrayLike<number>, segmentId: Int32Array, labels: Uint8Array, inUnit: Uint8Array,
  unitOf: Int32Array, departures: number, rows: number): AnchorMetrics {
  let hits = 0;
  const found = new Set<number>();
  for (let k = 0; k < anchors.length; k++) {
    const a = anchors[k]!;
    if (inUnit[a]) { hits++; found.add(unitOf[a]!); }
  }
  let doomed = 0, doomedIn = 0, onTrack = 0, onTrackIn = 0, inSeg = 0;
  for (let t = 0; t < labels.length; t++) {
    const l = labels[t]!;
    if (l === LABEL.observation) continue;
    const s = segmentId[t]! >= 0;
    if (s) inSeg++;
    if (l === LABEL.doomed) { doomed++; if (s) doomedIn++; } else if (l !== LABEL.departure) { onTrack++; if (s) onTrackIn++; }
  }
  return {
    precision: anchors.length ? hits / anchors.length : NaN,
    recall: departures ? found.size / departures : NaN,
    doomedInSegments: doomed ? doomedIn / doomed : NaN,
    onTrackInSegments: onTrack ? onTrackIn / onTrack : NaN,
    anchorsPerRow: rows ? anchors.length / rows : NaN,
    segmentLength: anchors.length ? inSeg / anchors.length : NaN,
  };
}

/** Logits of `policy` over the response tokens of a batch read after another prompt view. */
function viewLogits(env: KnownCreditEnv, policy: Policy, b: PackedBatch, view: string): rl.Logits {
  const P = env.promptLength;
  const seqs = b.trajectories.map((t, r) => [...env.prompt(t.task, view), ...Array.from(b.studentRows.seqs[r]!).slice(P)]);
  const spec: RowSpec = { seqs, from: b.studentRows.from, to: b.studentRows.to };
  const f = policy.forward(spec);
  return { data: f.logits, rows: f.rows, vocab: policy.cfg.vocab };
}

/** One credit method's output on a batch: per-token advantages, and anchors and segments where it places them. */
export interface CreditResult {
  /** Per conversation token. */
  advantages: ArrayLike<number>;
  /** Anchor token indices (segment starts). */
  anchors?: ArrayLike<number>;
  /** Per token: its segment, -1 outside segments. */
  segmentId?: Int32Array;
  /** Per token: its weight (the weighted methods). */
  weights?: Float32Array;
}

/** Every credit method's output on one batch, with GEAR's result per teacher view. */
export interface CreditAdvantages {
  /** GRPO's advantage per row. */
  row: Float64Array;
  /** GEAR (library defaults) per teacher view, with its signals. */
  gear: Record<string, rl.GearFromLogitsResult>;
  /** The answer teacher's divergence shuffled within rows (the no-location control's input). */
  shuffledDivergence: Float32Array;
  /** Per method. */
  results: Record<CreditMethod, CreditResult>;
}

/**
 * The per-token advantages of every method of {@link CREDIT_METHODS} on a packed batch of a known-credit
 * environment: GRPO, GiGPO, GEAR with each teacher view (the same weights after another prompt), the
 * controls on the answer teacher's signals, and the oracle weights on the true departure segments.
 */
export function creditAdvantages(env: KnownCreditEnv, policy: Policy, b: PackedBatch, student: rl.Logits, shuffleSeed: number): CreditAdvantages {
  const conv = b.conversation, dep = b.known!.departures;
  const row = rl.grpo({ rewards: conv.episodeRewards, groups: conv.groupIndex });
  const gear: Record<string, rl.GearFromLogitsResult> = {};
  const views = env.views ?? ['answer'];
  for (const view of views) {
    const teacher = viewLogits(env, policy, b, view);
    gear[view] = rl.gearFromLogits({ student, teacher, targets: conv.tokenIds, advantages: row, offsets: conv.offsets, mask: conv.mask });
  }
  const answer = gear[views[0]!]!;
  const sig = answer.signals;
  // The log-ratio anchor signal of a teacher view (its own log-ratio; the entropy is the student's either way).
  const lrOf = (logratio: Float32Array, options: rl.GearOptions = {}) => rl.gearAdvantages({
    advantages: row, offsets: conv.offsets, mask: conv.mask, entropy: sig.entropy, logratio, options: { ...options, anchorSignal: 'logratio' },
  });
  const shuffledLogratio = rl.shuffleWithinRows(sig.logratio, conv.offsets, { mask: conv.mask, seed: shuffleSeed });
  const withSignals = (divergence: Float32Array, options?: rl.GearOptions) => rl.gearAdvantages({
    advantages: row, offsets: conv.offsets, mask: conv.mask, divergence, entropy: sig.entropy, logratio: sig.logratio, ...(options ? { options } : {}),
  });
  const shuffledDivergence = rl.shuffleWithinRows(sig.divergence, conv.offsets, { mask: conv.mask, seed: shuffleSeed });
  const oracleOf = (strong: boolean) => rl.gearFromSegments({
    advantages: row, offsets: conv.offsets, mask: conv.mask, segments: dep, ...(strong ? STRONG_FAMILY : {}),
  });
  const results: Record<CreditMethod, CreditResult> = {
    grpo: { advantages: rl.segmentBroadcast(row, conv.offsets, conv.mask) },
    gigpo: { advantages: methodAdvantages('gigpo', { batch: b, student }).advantages },
    'gear-answer': answer,
    'gear-solution': gear.solution ?? answer,
    'gear-irrelevant': gear.irrelevant ?? answer,
    shuffled: withSignals(shuffledDivergence),
    'random-anchors': withSignals(sig.divergence, { ablation: 'random_anchors', seed: shuffleSeed }),
    'fixed-length': withSignals(sig.divergence, { ablation: 'fixed_length' }),
    'token-only': withSignals(sig.divergence, { ablation: 'token_only' }),
    oracle: { ...oracleOf(false), anchors: dep.start },
    'oracle-strong': { ...oracleOf(true), anchors: dep.start },
    'gear-strong': withSignals(sig.divergence, STRONG_FAMILY),
    'gear-strong-shuffled': withSignals(shuffledDivergence, STRONG_FAMILY),
    'gear-lr-answer': lrOf(sig.logratio),
    'gear-lr-solution': lrOf((gear.solution ?? answer).signals.logratio),
    'gear-lr-irrelevant': lrOf((gear.irrelevant ?? answer).signals.logratio),
    'gear-lr-shuffled': lrOf(shuffledLogratio),
    'gear-lr-strong': lrOf(sig.logratio, STRONG_FAMILY),
    'gear-lr-strong-shuffled': lrOf(shuffledLogratio, STRONG_FAMILY),
  };
  return { row, gear, shuffledDivergence, results };
}

/** Measures one batch (see the module comment). */
export function measureBatch(env: KnownCreditEnv, policy: Policy, b: PackedBatch, cfg: MeasureConfig, rng: Rng, shuffleSeed: number): BatchCredit {
  const conv = b.conversation, known = b.known!;
  const { labels } = known;
  const N = conv.tokens, R = conv.rows;
  const sf = policy.forward(b.studentRows);
  const student: rl.Logits = { data: sf.logits, rows: sf.rows, vocab: policy.cfg.vocab };
  const { p, g } = gradientWeights(student, conv.tokenIds);
  const onePlus = Float64Array.from(p, (x) => 1 - x);
  const truth = trueAdvantages(env, policyModel(policy), b.trajectories.map((t) => ({ task: t.task, tokens: t.turns.flatMap((u) => u.tokens) })),
    cfg.rollouts, rng).advantages;

  // Departure units: membership per token and the unit's row.
  const inUnit = new Uint8Array(N), unitOf = new Int32Array(N).fill(-1);
  const dep = known.departures;
  for (let s = 0; s < dep.start.length; s++) for (let t = dep.start[s]!; t < dep.start[s]! + dep.length[s]!; t++) { inUnit[t] = 1; unitOf[t] = s; }
  const counts = Object.fromEntries(AGENT_LABELS.map((l) => [l, 0])) as Record<LabelName, number>;
  for (const l of labels) if (l !== LABEL.observation) counts[LABEL_NAMES[l]!]++;

  const { row, gear, results } = creditAdvantages(env, policy, b, student, shuffleSeed);
  const teachers: Record<string, TeacherCredit> = {};
  const isDecision = Uint8Array.from(labels, (l, i) => {
    const r = rowOfToken(conv.offsets, i);
    return l === LABEL.decision || (l === LABEL.departure && env.kinds[i - conv.offsets[r]!] === 'decision') ? 1 : 0;
  });
  for (const view of env.views ?? ['answer']) {
    const res = gear[view]!;
    const D = res.signals.divergence, lr = res.signals.logratio;
    const pick = (keep: (i: number) => boolean, score: (i: number) => number) => {
      const s: number[] = [], y: boolean[] = [];
      for (let i = 0; i < N; i++) if (keep(i)) { s.push(score(i)); y.push(labels[i] === LABEL.departure); }
      return auroc(s, y);
    };
    const agent = (i: number) => labels[i] !== LABEL.observation;
    const dec = (i: number) => isDecision[i] === 1;
    const s = (i: number) => Math.max(0, -lr[i]!);
    const meanOf = (x: (i: number) => number) => Object.fromEntries(AGENT_LABELS.map((l) => {
      let sum = 0, c = 0;
      for (let i = 0; i < N; i++) if (labels[i] === LABEL[l]) { sum += x(i); c++; }
      return [l, c ? sum / c : NaN];
    })) as Record<LabelName, number>;
    teachers[view] = {
      aurocAll: pick(agent, (i) => D[i]!), aurocDecision: pick(dec, (i) => D[i]!),
      aurocLogratioAll: pick(agent, (i) => -lr[i]!), aurocLogratioDecision: pick(dec, (i) => -lr[i]!),
      aurocSignalAll: pick(agent, s), aurocSignalDecision: pick(dec, s),
      meanDivergence: meanOf((i) => D[i]!), meanSignal: meanOf(s),
    };
  }
  const sig = gear[(env.views ?? ['answer'])[0]!]!.signals;
  const withSignals = (options: rl.GearOptions) => rl.gearAdvantages({
    advantages: row, offsets: conv.offsets, mask: conv.mask, divergence: sig.divergence, entropy: sig.entropy, logratio: sig.logratio, options,
  });
  const methods = {} as Record<CreditMethod, MethodCredit>;
  for (const k of Object.keys(CREDIT_METHODS) as CreditMethod[]) {
    const r = results[k];
    const m: MethodCredit = { cosine: agentCosine(r.advantages, truth, g, labels), shares: labelShares(r.advantages, onePlus, labels) };
    if (r.anchors && r.segmentId && k !== 'token-only') m.anchors = anchorMetrics(r.anchors, r.segmentId, labels, inUnit, unitOf, dep.start.length, R);
    methods[k] = m;
  }
  const sweep: BatchCredit['sweep'] = {}, sweepLogratio: BatchCredit['sweepLogratio'] = {};
  for (const z of cfg.sweep.peakZ) {
    for (const q of cfg.sweep.entropyQuantile) {
      for (const [out, options] of [[sweep, {}], [sweepLogratio, { anchorSignal: 'logratio' }]] as const) {
        const r = withSignals({ peakZ: z, entropyQuantile: q, ...options });
        out[sweepKey(z, q)] = { ...anchorMetrics(r.anchors, r.segmentId, labels, inUnit, unitOf, dep.start.length, R), cosine: agentCosine(r.advantages, truth, g, labels) };
      }
    }
  }
  const wins = b.trajectories.filter((t) => t.reward === 1).length;
  return { success: wins / R, counts, truth: labelShares(truth, onePlus, labels), teachers, methods, sweep, sweepLogratio };
}

/** The sweep's key of one threshold pair. */
export function sweepKey(peakZ: number, entropyQuantile: number): string {
  return `z${peakZ}/q${entropyQuantile}`;
}

function rowOfToken(offsets: Int32Array, i: number): number {
  let lo = 0, hi = offsets.length - 2;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (offsets[mid]! <= i) lo = mid; else hi = mid - 1;
  }
  return lo;
}

/** Cosine of two per-token advantage vectors' logit-space gradients over the agent tokens (weights `‖e_y − p‖²`). */
export function agentCosine(a: ArrayLike<number>, b: ArrayLike<number>, g: ArrayLike<number>, labels: Uint8Array): number {
  const w = Float64Array.from(g, (x, i) => (labels[i] === LABEL.observation ? 0 : x));
  return weightedCosine(a, b, w);
}

/** A checkpoint's credit, measured on `cfg.batches` batches. */
export interface CreditMeasurement {
  /** Settings. */
  config: MeasureConfig;
  /** Every batch's figures. */
  batches: BatchCredit[];
}

/**
 * Samples `cfg.batches` batches of `cfg.tasks` training tasks × `cfg.groupSize` rollouts from the
 * checkpoint `params` and measures each (see the module comment).
 */
export function measureCredit(env: KnownCreditEnv, params: Float32Array[], cfg: MeasureConfig, onBatch?: (done: number) => void): CreditMeasurement {
  const policy = new Policy(policyConfig(env), params.map((x) => Float32Array.from(x)));
  const taskRng = new Rng(deriveSeed(cfg.seed, 11));
  const sampleRng = new Rng(deriveSeed(cfg.seed, 12));
  const mcRng = new Rng(deriveSeed(cfg.seed, 13));
  const batches: BatchCredit[] = [];
  for (let i = 0; i < cfg.batches; i++) {
    const tasks: EnvTask[] = [];
    for (let k = 0; k < cfg.tasks; k++) tasks.push(env.makeTask(taskRng.int(EVAL_SEED_BASE)));
    const b = pack(env, collect(env, policy, tasks, cfg.groupSize, sampleRng));
    batches.push(measureBatch(env, policy, b, cfg, mcRng, deriveSeed(cfg.seed, 14, i)));
    onBatch?.(i + 1);
  }
  return { config: cfg, batches };
}

/** Bootstrap summary of one per-batch figure. */
export function summarise(m: CreditMeasurement, get: (b: BatchCredit) => number | undefined, seed = 1): BootstrapMean {
  return bootstrapMean(m.batches.map((b) => get(b) ?? NaN), { resamples: m.config.bootstrap, seed });
}
