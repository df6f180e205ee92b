/**
 * Per-token advantages for each compared method, from one packed batch, with the library's estimator
 * registry (`rl.computeAdvantages`) — the same call for GRPO, RLOO, GiGPO and GEAR.
 *
 * @module
 */
import * as rl from 'gear-rl';
import { resolveGearOptions } from 'gear-rl/diagnostics';
import type { PackedBatch } from './rollout.js';

/** The methods the demo compares. */
export type Method = 'grpo' | 'gigpo' | 'gear' | 'gear-frozen' | 'gear-ema' | 'drgrpo' | 'rloo';
/** Every method, in display order. */
export const METHODS: readonly Method[] = ['grpo', 'gigpo', 'gear', 'gear-frozen', 'gear-ema', 'drgrpo', 'rloo'];
/** Display names. */
export const METHOD_LABEL: Record<Method, string> = {
  grpo: 'GRPO', gigpo: 'GiGPO', gear: 'GEAR (self)', 'gear-frozen': 'GEAR (frozen)', 'gear-ema': 'GEAR (ema)',
  drgrpo: 'Dr.GRPO', rloo: 'RLOO',
};

/**
 * GEAR's teacher: the privileged prompt read by `self` (the current weights), `frozen` (the warm-start
 * checkpoint) or `ema` (an exponential moving average of the student's weights).
 */
export type TeacherKind = 'self' | 'frozen' | 'ema';

/** The teacher of a GEAR method, `undefined` for the others. */
export function teacherOf(m: Method): TeacherKind | undefined {
  return m === 'gear' ? 'self' : m === 'gear-frozen' ? 'frozen' : m === 'gear-ema' ? 'ema' : undefined;
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
      // Rows = agent steps; anchor = the environment state each step acted from.
      const res = rl.computeAdvantages('gigpo', {
        episodeRewards: steps.episodeRewards, stepRewards: steps.stepRewards,
        trajectories: steps.trajectoryIndex, groups: steps.groupIndex, anchors: steps.anchors,
        gamma: GIGPO_GAMMA, mode: 'mean_std_norm',
      }, { offsets: steps.offsets });
      const g = res.details as rl.GigpoResult;
      // Each step's advantage covers its turn's tokens in the conversation rows (observations stay 0).
      return {
        advantages: rl.segmentBroadcast(res.rowAdvantages!, inp.batch.stepOffsets, conv.mask),
        metrics: { singletonShare: g.diagnostics.singletonShare },
      };
    }
    case 'gear':
    case 'gear-frozen':
    case 'gear-ema': {
      if (!inp.teacher) throw new Error('advantages: GEAR needs the teacher logits');
      const row = rl.grpo(outcome);
      const o = resolveGearOptions(inp.gearOptions);
      // Reverse KL(student || teacher), student entropy and both sampled-token log-probs in one pass.
      const d = rl.divergence(inp.student, inp.teacher, { kind: 'reverse_kl', targets: conv.tokenIds, klCap: o.klCap });
      const logratio = new Float32Array(d.value.length);
      for (let t = 0; t < logratio.length; t++) logratio[t] = d.teacherLogprob![t]! - d.studentLogprob![t]!;
      const input: rl.GearInput = {
        advantages: row, offsets: conv.offsets, mask: conv.mask, divergence: d.value, entropy: d.studentEntropy, logratio,
        ...(inp.gearOptions ? { options: inp.gearOptions } : {}),
      };
      const res = rl.computeAdvantages('gear', input);
      const result = res.details as rl.GearResult;
      const dg = result.diagnostics;
      return {
        advantages: res.tokenAdvantages,
        metrics: { peaks: dg.peaks, peaksPerRow: dg.peaksPerRow, segments: dg.segments, segmentTokenFraction: dg.segmentTokenFraction,
          meanSegmentLength: dg.meanSegmentLength, weightMin: dg.weightMin, weightMax: dg.weightMax, klP95: dg.klQuantiles.p95 },
        gear: { input, result },
      };
    }
  }
}
