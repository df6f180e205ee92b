/**
 * Credit measurement without training on any environment, with the ground truth every environment
 * gives: the credit role of each sampled token (wrong decisive, right decisive, neutral: a trap door or a
 * known wall in the maze, the wrong locker, a right exit). It has no true per-token advantage (the
 * answer chain's oracle), so it asks what can be asked of roles alone, for GEAR's two anchor signals
 * (the divergence D and the log-ratio signal s = max(0, −logratio)):
 *
 * * how well each signal singles out the wrong decisive tokens: AUROC against every other agent token,
 *   and among decisive tokens only (wrong against right);
 * * where each method puts its credit: the signed advantage share on wrong and on right decisive tokens,
 *   and the gradient-weighted shares (`creditFidelity`), for GRPO, GiGPO, GEAR with each signal and their
 *   shuffled controls (each signal's values permuted within rows);
 * * anchors: the share of anchors on wrong decisive tokens (precision), the share of wrong decisive
 *   tokens that hold an anchor (recall), and a sweep of `peakZ` × `entropyQuantile` with each signal.
 *
 * The teacher is the checkpoint itself reading the privileged prompt (the frozen teacher at step 0).
 * Figures are per batch, summarised over batches with a percentile bootstrap interval.
 *
 * @module
 */
import * as rl from 'gear-rl';
import { Rng, deriveSeed } from '../env/rng.js';
import type { EnvTask, Environment } from '../env/types.js';
import { Policy } from '../model/policy.js';
import { ci, mdTable } from '../report/credit_tables.js';
import { auroc, bootstrapMean, type BootstrapMean } from '../report/stats.js';
import { creditFidelity, type CreditFidelity } from './credit.js';
import { advantages as methodAdvantages } from './methods.js';
import { collect, pack } from './rollout.js';
import { EVAL_SEED_BASE, policyConfig } from './train.js';

/** Settings of a role-credit measurement. */
export interface RoleCreditConfig {
  /** Batches sampled from the checkpoint. */
  batches: number;
  /** Tasks per batch. */
  tasks: number;
  /** Rollouts per task. */
  groupSize: number;
  /** Seed of the tasks, the sampling and the shuffles. */
  seed: number;
  /** The thresholds swept, with each signal. */
  sweep: { peakZ: number[]; entropyQuantile: number[] };
  /** Bootstrap resamples of the summaries. */
  bootstrap: number;
}

/** The methods compared, in display order, with their labels. */
export const ROLE_METHODS = {
  grpo: 'GRPO',
  gigpo: 'GiGPO',
  'gear-d': 'GEAR, D',
  'gear-d-shuffled': 'GEAR, D shuffled in rows',
  'gear-s': 'GEAR, log-ratio s',
  'gear-s-shuffled': 'GEAR, s shuffled in rows',
} as const;
/** A key of {@link ROLE_METHODS}. */
export type RoleMethod = keyof typeof ROLE_METHODS;

/** Anchors against roles. */
export interface RoleAnchors {
  /** Anchors per episode. */
  perEpisode: number;
  /** Anchors on wrong decisive tokens / anchors. */
  precision: number;
  /** Wrong decisive tokens holding an anchor / wrong decisive tokens. */
  recall: number;
  /** Mean segment length (tokens in segments / segments). */
  segmentLength: number;
}

/** One batch's figures. */
export interface RoleBatchCredit {
  /** Share of episodes that succeed. */
  success: number;
  /** Agent tokens per role. */
  counts: { wrong: number; right: number; neutral: number };
  /** Per signal: AUROC for wrong decisive tokens (against every other agent token; among decisive tokens), mean value per role. */
  signals: Record<'D' | 's', { aurocAll: number; aurocDecisive: number; mean: { wrong: number; right: number; neutral: number } }>;
  /** Per method: credit fidelity, and anchors for the GEAR methods. */
  methods: Record<RoleMethod, { fidelity: CreditFidelity; anchors?: RoleAnchors }>;
  /** The sweep with each signal, keyed `z<peakZ>/q<entropyQuantile>`. */
  sweep: Record<'D' | 's', Record<string, RoleAnchors>>;
}

/** A checkpoint's role credit. */
export interface RoleCreditMeasurement {
  /** Settings. */
  config: RoleCreditConfig;
  /** Every batch. */
  batches: RoleBatchCredit[];
}

/** Anchors of a GEAR result against the roles. */
export function roleAnchors(anchors: ArrayLike<number>, segments: number, tokensInSegments: number, roles: ArrayLike<number>,
  mask: ArrayLike<number>, episodes: number): RoleAnchors {
  let onWrong = 0, wrong = 0;
  const anchored = new Set<number>();
  for (let k = 0; k < anchors.length; k++) {
    anchored.add(anchors[k]!);
    if (roles[anchors[k]!]! < 0) onWrong++;
  }
  let found = 0;
  for (let i = 0; i < roles.length; i++) {
    if (!mask[i] || roles[i]! >= 0) continue;
    wrong++;
    if (anchored.has(i)) found++;
  }
  return {
    perEpisode: episodes ? anchors.length / episodes : NaN,
    precision: anchors.length ? onWrong / anchors.length : NaN,
    recall: wrong ? found / wrong : NaN,
    segmentLength: segments ? tokensInSegments / segments : NaN,
  };
}

const sweepKey = (z: number, q: number) => `z${z}/q${q}`;

/** Measures one checkpoint (see the module comment). */
export function measureRoleCredit(env: Environment, params: Float32Array[], cfg: RoleCreditConfig): RoleCreditMeasurement {
  const pc = policyConfig(env);
  const policy = new Policy(pc, params.map((x) => Float32Array.from(x)));
  const taskRng = new Rng(deriveSeed(cfg.seed, 21)), sampleRng = new Rng(deriveSeed(cfg.seed, 22));
  const batches: RoleBatchCredit[] = [];
  for (let bi = 0; bi < cfg.batches; bi++) {
    const tasks: EnvTask[] = [];
    for (let k = 0; k < cfg.tasks; k++) tasks.push(env.makeTask(taskRng.int(EVAL_SEED_BASE)));
    const b = pack(env, collect(env, policy, tasks, cfg.groupSize, sampleRng));
    const conv = b.conversation, roles = b.roles, mask = conv.mask, N = conv.tokens, R = conv.rows;
    const sf = policy.forward(b.studentRows), tf = policy.forward(b.teacherRows);
    const student: rl.Logits = { data: sf.logits, rows: sf.rows, vocab: pc.vocab };
    const teacher: rl.Logits = { data: tf.logits, rows: tf.rows, vocab: pc.vocab };
    const p = rl.tokenStats(student, conv.tokenIds).logprob.map(Math.exp);
    const row = rl.grpo({ rewards: conv.episodeRewards, groups: conv.groupIndex });
    const g = rl.gearFromLogits({ student, teacher, targets: conv.tokenIds, advantages: row, offsets: conv.offsets, mask });
    const D = g.signals.divergence, lr = g.signals.logratio, H = g.signals.entropy;
    const S = Float32Array.from(lr, (x) => Math.max(0, -x));
    const seed = deriveSeed(cfg.seed, 23, bi);
    const shuffle = (x: Float32Array) => rl.shuffleWithinRows(x, conv.offsets, { mask, seed });
    const withD = (divergence: Float32Array, o: rl.GearOptions = {}) =>
      rl.gearAdvantages({ advantages: row, offsets: conv.offsets, mask, divergence, entropy: H, logratio: lr, options: o });
    const withS = (logratio: Float32Array, o: rl.GearOptions = {}) =>
      rl.gearAdvantages({ advantages: row, offsets: conv.offsets, mask, entropy: H, logratio, options: { ...o, anchorSignal: 'logratio' } });
    const gear: Record<'gear-d' | 'gear-d-shuffled' | 'gear-s' | 'gear-s-shuffled', rl.GearResult> = {
      'gear-d': g, 'gear-d-shuffled': withD(shuffle(D)), 'gear-s': withS(lr), 'gear-s-shuffled': withS(shuffle(lr)),
    };
    const adv: Record<RoleMethod, ArrayLike<number>> = {
      grpo: rl.segmentBroadcast(row, conv.offsets, mask),
      gigpo: methodAdvantages('gigpo', { batch: b, student }).advantages,
      ...Object.fromEntries(Object.entries(gear).map(([k, r]) => [k, r.advantages])) as Record<keyof typeof gear, Float32Array>,
    };
    const anchorsOf = (r: rl.GearResult) => roleAnchors(r.anchors, r.diagnostics.segments, r.diagnostics.tokensInSegments, roles, mask, R);
    const methods = {} as RoleBatchCredit['methods'];
    for (const k of Object.keys(ROLE_METHODS) as RoleMethod[]) {
      methods[k] = { fidelity: creditFidelity(adv[k], roles, mask, p), ...(k in gear ? { anchors: anchorsOf(gear[k as keyof typeof gear]) } : {}) };
    }
    const signal = (x: Float32Array) => {
      const all: number[] = [], yAll: boolean[] = [], dec: number[] = [], yDec: boolean[] = [];
      const sum = { wrong: 0, right: 0, neutral: 0 }, cnt = { wrong: 0, right: 0, neutral: 0 };
      for (let i = 0; i < N; i++) {
        if (!mask[i]) continue;
        const r = roles[i]!, key = r < 0 ? 'wrong' : r > 0 ? 'right' : 'neutral';
        all.push(x[i]!); yAll.push(r < 0);
        if (r !== 0) { dec.push(x[i]!); yDec.push(r < 0); }
        sum[key] += x[i]!; cnt[key]++;
      }
      return {
        aurocAll: auroc(all, yAll), aurocDecisive: auroc(dec, yDec),
        mean: { wrong: sum.wrong / cnt.wrong, right: sum.right / cnt.right, neutral: sum.neutral / cnt.neutral },
      };
    };
    const counts = { wrong: 0, right: 0, neutral: 0 };
    for (let i = 0; i < N; i++) if (mask[i]) counts[roles[i]! < 0 ? 'wrong' : roles[i]! > 0 ? 'right' : 'neutral']++;
    const sweep: RoleBatchCredit['sweep'] = { D: {}, s: {} };
    for (const z of cfg.sweep.peakZ) {
      for (const q of cfg.sweep.entropyQuantile) {
        sweep.D[sweepKey(z, q)] = anchorsOf(withD(D, { peakZ: z, entropyQuantile: q }));
        sweep.s[sweepKey(z, q)] = anchorsOf(withS(lr, { peakZ: z, entropyQuantile: q }));
      }
    }
    const wins = b.trajectories.filter((t) => t.reward === 1).length;
    batches.push({ success: wins / R, counts, signals: { D: signal(D), s: signal(S) }, methods, sweep });
  }
  return { config: cfg, batches };
}

/** Bootstrap summary of one per-batch figure. */
export function summariseRoles(m: RoleCreditMeasurement, get: (b: RoleBatchCredit) => number | undefined): BootstrapMean {
  return bootstrapMean(m.batches.map((b) => get(b) ?? NaN), { resamples: m.config.bootstrap, seed: 1 });
}

/** The measurement's tables in Markdown: signals, methods, anchors, and the sweep with each signal. */
export function roleCreditTables(m: RoleCreditMeasurement): string[] {
  const s = (f: (b: RoleBatchCredit) => number | undefined) => summariseRoles(m, f);
  const f2 = (x: BootstrapMean) => (Number.isFinite(x.mean) ? x.mean.toFixed(2) : '-');
  const signals = [['signal', 'AUROC, all agent tokens', 'AUROC, decisive tokens', 'mean: wrong decisive', 'right decisive', 'neutral']];
  for (const k of ['D', 's'] as const) {
    signals.push([k === 'D' ? 'divergence D' : 'log-ratio signal s', ci(s((b) => b.signals[k].aurocAll)), ci(s((b) => b.signals[k].aurocDecisive)),
      f2(s((b) => b.signals[k].mean.wrong)), f2(s((b) => b.signals[k].mean.right)), f2(s((b) => b.signals[k].mean.neutral))]);
  }
  const methods = [['method', 'wrong decisive (signed)', 'right decisive (signed)', 'neutral |A| share', 'wrong |A|(1-p) (signed)',
    'right |A|(1-p) (signed)', 'neutral |A|(1-p) share']];
  for (const k of Object.keys(ROLE_METHODS) as RoleMethod[]) {
    const fd = (f: (x: CreditFidelity) => number) => ci(s((b) => f(b.methods[k].fidelity)));
    methods.push([ROLE_METHODS[k], fd((x) => x.wrong), fd((x) => x.right), fd((x) => x.neutral), fd((x) => x.gradWrong), fd((x) => x.gradRight), fd((x) => x.gradNeutral)]);
  }
  const anchorHead = ['anchors / episode', 'precision (on wrong decisive)', 'recall of wrong decisive', 'segment length'];
  const anchorCells = (get: (b: RoleBatchCredit) => RoleAnchors | undefined) => {
    const a = (f: (x: RoleAnchors) => number) => s((b) => { const x = get(b); return x ? f(x) : NaN; });
    return [f2(a((x) => x.perEpisode)), ci(a((x) => x.precision)), ci(a((x) => x.recall)), f2(a((x) => x.segmentLength))];
  };
  const anchors = [['method', ...anchorHead]];
  for (const k of ['gear-d', 'gear-d-shuffled', 'gear-s', 'gear-s-shuffled'] as const) anchors.push([ROLE_METHODS[k], ...anchorCells((b) => b.methods[k].anchors)]);
  const sweep = [['signal', 'peakZ', 'entropyQuantile', ...anchorHead]];
  for (const sig of ['D', 's'] as const) {
    for (const z of m.config.sweep.peakZ) for (const q of m.config.sweep.entropyQuantile) sweep.push([sig, String(z), String(q), ...anchorCells((b) => b.sweep[sig][sweepKey(z, q)])]);
  }
  return [
    'How each anchor signal singles out the wrong decisive tokens (AUROC; mean value per role):', '', mdTable(signals), '',
    'Where each method puts its credit (share of the batch\'s |A|, signed on decisive tokens; then weighted by the gradient a token can take, |A|·(1 − p)):', '',
    mdTable(methods), '',
    'Anchors against the roles:', '', mdTable(anchors), '',
    'Threshold sensitivity (spike threshold `peakZ` × extension threshold `entropyQuantile`), with each signal:', '', mdTable(sweep), '',
  ];
}
