/**
 * Per-token advantages for each compared method, from one packed batch: the outcome and step estimators
 * through the library's registry (`rl.computeAdvantages`, broadcast over the batch's own layout), GEAR
 * from the student and teacher logits in one call (`rl.gearFromLogits`), with the paper's divergence or
 * the log-ratio anchor signal (`anchorSignal: 'logratio'`), and the controls of the GEAR experiments
 * (`rl.shuffleWithinRows`, `rl.gearFromSegments`).
 *
 * @module
 */
import * as rl from 'gear-rl';
import { resolveGearOptions } from 'gear-rl/diagnostics';
import type { PackedBatch } from './rollout.js';

/** The methods the demo compares. */
export type Method = 'grpo' | 'gigpo' | 'gear' | 'gear-frozen' | 'gear-ema' | 'drgrpo' | 'rloo'
  | 'gear-shuffled' | 'oracle' | 'oracle-strong' | 'gear-strong' | 'gear-strong-shuffled'
  | 'gear-lr' | 'gear-lr-frozen' | 'gear-lr-shuffled' | 'gear-lr-self-shuffled' | 'gear-lr-strong' | 'gear-lr-strong-shuffled';
/** Every method, in display order. */
export const METHODS: readonly Method[] = ['grpo', 'gigpo', 'gear', 'gear-frozen', 'gear-ema', 'drgrpo', 'rloo',
  'gear-shuffled', 'oracle', 'oracle-strong', 'gear-strong', 'gear-strong-shuffled',
  'gear-lr', 'gear-lr-frozen', 'gear-lr-shuffled', 'gear-lr-self-shuffled', 'gear-lr-strong', 'gear-lr-strong-shuffled'];
/** Display names. */
export const METHOD_LABEL: Record<Method, string> = {
  grpo: 'GRPO', gigpo: 'GiGPO', gear: 'GEAR (self)', 'gear-frozen': 'GEAR (frozen)', 'gear-ema': 'GEAR (ema)',
  drgrpo: 'Dr.GRPO', rloo: 'RLOO', 'gear-shuffled': 'GEAR (frozen, shuffled)', oracle: 'oracle weights',
  'oracle-strong': 'oracle weights (α 3, raw)', 'gear-strong': 'GEAR (frozen, α 3, raw)',
  'gear-strong-shuffled': 'GEAR (frozen, α 3, raw, shuffled)',
  'gear-lr': 'GEAR log-ratio (self)', 'gear-lr-frozen': 'GEAR log-ratio (frozen)', 'gear-lr-shuffled': 'GEAR log-ratio (frozen, shuffled)',
  'gear-lr-self-shuffled': 'GEAR log-ratio (self, shuffled)', 'gear-lr-strong': 'GEAR log-ratio (frozen, α 3, raw)',
  'gear-lr-strong-shuffled': 'GEAR log-ratio (frozen, α 3, raw, shuffled)',
};

/**
 * The stronger weight family of the second hypothesis: a wider range (unit weights in [1, 4]) and no
 * per-row normalisation, so weighted tokens gain credit without taking it from the others.
 */
export const STRONG_FAMILY = { alpha: 3, normalize: 'none' } as const;

/** Methods whose anchor signal is shuffled within each row before GEAR reads it (the no-location control). */
const SHUFFLED: readonly Method[] = ['gear-shuffled', 'gear-strong-shuffled', 'gear-lr-shuffled', 'gear-lr-self-shuffled', 'gear-lr-strong-shuffled'];
/** Methods that use {@link STRONG_FAMILY}. */
const STRONG: readonly Method[] = ['oracle-strong', 'gear-strong', 'gear-strong-shuffled', 'gear-lr-strong', 'gear-lr-strong-shuffled'];
/** Methods whose anchor signal is the sampled-token log-ratio (`anchorSignal: 'logratio'`). */
const LOGRATIO: readonly Method[] = ['gear-lr', 'gear-lr-frozen', 'gear-lr-shuffled', 'gear-lr-self-shuffled', 'gear-lr-strong', 'gear-lr-strong-shuffled'];

/** True for the methods that read the log-ratio anchor signal. */
export function usesLogratio(m: Method): boolean {
  return LOGRATIO.includes(m);
}

/**
 * GEAR's teacher: the privileged prompt read by `self` (the current weights), `frozen` (the warm-start
 * checkpoint) or `ema` (an exponential moving average of the student's weights).
 */
export type TeacherKind = 'self' | 'frozen' | 'ema';

/** The teacher of a GEAR method, `undefined` for the others. */
export function teacherOf(m: Method): TeacherKind | undefined {
  if (m === 'gear' || m === 'gear-lr' || m === 'gear-lr-self-shuffled') return 'self';
  if (m === 'gear-frozen' || m === 'gear-shuffled' || m === 'gear-strong' || m === 'gear-strong-shuffled' ||
    m === 'gear-lr-frozen' || m === 'gear-lr-shuffled' || m === 'gear-lr-strong' || m === 'gear-lr-strong-shuffled') return 'frozen';
  return m === 'gear-ema' ? 'ema' : undefined;
}

/** Logits of the rollout policy (student) and, for GEAR, of the privileged teacher. */
export interface AdvantageInputs {
  /** The packed batch. */
  batch: PackedBatch;
  /** Student logits over the conversation tokens (the rollout policy's forward pass). */
  student: rl.Logits;
  /** Teacher logits over the same tokens (privileged prompt); needed by GEAR. */
  teacher?: rl.Logits;
  /** GEAR options (defaults: the library's GEAR-proposed defaults). */
  gearOptions?: rl.GearOptions;
  /** Seed of the within-row shuffle of the shuffled controls (vary it per batch). */
  shuffleSeed?: number;
}

/** Advantages per token plus the method's diagnostics. */
export interface AdvantageResult {
  /** Per conversation token; 0 on observation tokens. */
  advantages: Float32Array;
  /** Method-specific numbers worth logging. */
  metrics: Record<string, number>;
  /** GEAR only: its inputs and result, for the token visualiser and the spike statistics. */
  gear?: { input: rl.GearInput; result: rl.GearResult };
}

/** GiGPO's discount over steps (verl-agent's example scripts use 0.95). */
export const GIGPO_GAMMA = 0.95;

/** Computes per-token advantages of `method` for the batch. */
export function advantages(method: Method, inp: AdvantageInputs): AdvantageResult {
  const { conversation: conv, steps } = inp.batch;
  const layout = { offsets: conv.offsets, mask: conv.mask };
  const outcome = { rewards: conv.episodeRewards, groups: conv.groupIndex };
  switch (method) {
    case 'grpo':
    case 'drgrpo':
    case 'rloo': {
      const res = rl.computeAdvantages(method === 'rloo' ? 'rloo' : 'grpo', method === 'drgrpo' ? { ...outcome, scale: 'none' } : outcome, layout);
      return { advantages: res.tokenAdvantages, metrics: {} };
    }
    case 'gigpo': {
      // Rows = agent steps; anchor = the environment state each step acted from. The conversation
      // batch's step offsets put each step's advantage on its turn's tokens (observations stay 0).
      const res = rl.computeAdvantages('gigpo', {
        episodeRewards: steps.episodeRewards, stepRewards: steps.stepRewards,
        trajectories: steps.trajectoryIndex, groups: steps.groupIndex, anchors: steps.anchors,
        gamma: GIGPO_GAMMA, mode: 'mean_std_norm',
      }, { offsets: conv.stepOffsets, mask: conv.mask });
      const g = res.details as rl.GigpoResult;
      return { advantages: res.tokenAdvantages, metrics: { singletonShare: g.diagnostics.singletonShare } };
    }
    case 'oracle':
    case 'oracle-strong': {
      // GEAR's weight family on the true departure segments (failed rows only): the family's ceiling.
      const known = inp.batch.known;
      if (!known) throw new Error(`advantages: ${method} needs an environment with known credit`);
      const res = rl.gearFromSegments({
        advantages: rl.grpo(outcome), offsets: conv.offsets, mask: conv.mask, segments: known.departures,
        ...(method === 'oracle-strong' ? STRONG_FAMILY : {}),
      });
      let lo = Infinity, hi = -Infinity;
      conv.mask.forEach((m, i) => { if (m) { lo = Math.min(lo, res.weights[i]!); hi = Math.max(hi, res.weights[i]!); } });
      return { advantages: res.advantages, metrics: { segments: known.departures.start.length, weightMin: lo, weightMax: hi } };
    }
    case 'gear':
    case 'gear-frozen':
    case 'gear-ema':
    case 'gear-shuffled':
    case 'gear-strong':
    case 'gear-strong-shuffled':
    case 'gear-lr':
    case 'gear-lr-frozen':
    case 'gear-lr-shuffled':
    case 'gear-lr-self-shuffled':
    case 'gear-lr-strong':
    case 'gear-lr-strong-shuffled': {
      if (!inp.teacher) throw new Error('advantages: GEAR needs the teacher logits');
      const row = rl.grpo(outcome);
      const lr = LOGRATIO.includes(method);
      const options: rl.GearOptions = {
        ...inp.gearOptions, ...(STRONG.includes(method) ? STRONG_FAMILY : {}), ...(lr ? { anchorSignal: 'logratio' as const } : {}),
      };
      // Reverse KL(student || teacher), student entropy and the sampled-token log-ratio in one pass, then GEAR.
      const g = rl.gearFromLogits({
        student: inp.student, teacher: inp.teacher, targets: conv.tokenIds, advantages: row, offsets: conv.offsets, mask: conv.mask,
        ...(Object.keys(options).length ? { options } : {}),
      });
      let result: rl.GearResult = g;
      let divergence = g.signals.divergence, logratio = g.signals.logratio;
      if (SHUFFLED.includes(method)) {
        // the anchor signal's values permuted within each row: the same spikes at random places
        const shuffle = (x: Float32Array) => rl.shuffleWithinRows(x, conv.offsets, { mask: conv.mask, seed: inp.shuffleSeed ?? 0 });
        if (lr) logratio = shuffle(logratio); else divergence = shuffle(divergence);
        result = rl.gearAdvantages({
          advantages: row, offsets: conv.offsets, mask: conv.mask, divergence, entropy: g.signals.entropy, logratio,
          ...(Object.keys(options).length ? { options } : {}),
        });
      }
      const input: rl.GearInput = {
        advantages: row, offsets: conv.offsets, mask: conv.mask, divergence, entropy: g.signals.entropy, logratio,
        ...(Object.keys(options).length ? { options } : {}),
      };
      const dg = result.diagnostics;
      return {
        advantages: result.advantages,
        metrics: { peaks: dg.peaks, peaksPerRow: dg.peaksPerRow, segments: dg.segments, segmentTokenFraction: dg.segmentTokenFraction,
          meanSegmentLength: dg.meanSegmentLength, weightMin: dg.weightMin, weightMax: dg.weightMax, klP95: dg.klQuantiles.p95 },
        gear: { input, result },
      };
    }
  }
}
