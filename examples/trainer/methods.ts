/**
 * Per-token advantages for each compared method, from one packed batch, with the library's estimators.
 *
 * @module
 */
import * as rl from 'gear-rl';
import type { PackedBatch } from './rollout.js';

/** The methods the demo compares. */
export type Method = 'grpo' | 'gigpo' | 'gear' | 'drgrpo' | 'rloo';
/** Every method, in display order. */
export const METHODS: readonly Method[] = ['grpo', 'gigpo', 'gear', 'drgrpo', 'rloo'];
/** Display names. */
export const METHOD_LABEL: Record<Method, string> = {
  grpo: 'GRPO', gigpo: 'GiGPO', gear: 'GEAR', drgrpo: 'Dr.GRPO', rloo: 'RLOO',
};

/** Logits of the rollout policy (student) and, for GEAR, of the ground-truth-conditioned teacher. */
export interface AdvantageInputs {
  /** The packed batch. */
  batch: PackedBatch;
  /** Student logits over the conversation tokens (the rollout policy's forward pass). */
  student: rl.Logits;
  /** Teacher logits over the same tokens (same weights, ground truth in context); needed by GEAR. */
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
  /** GEAR only: its inputs and result, for the token visualiser. */
  gear?: { input: rl.GearInput; result: rl.GearResult };
}

/** GiGPO's discount over steps (verl-agent's example scripts use 0.95). */
export const GIGPO_GAMMA = 0.95;

/** Computes per-token advantages of `method` for the batch. */
export function advantages(method: Method, inp: AdvantageInputs): AdvantageResult {
  const { conversation: conv, steps } = inp.batch;
  const outcome = { rewards: conv.episodeRewards, groups: conv.groupIndex };
  switch (method) {
    case 'grpo':
    case 'drgrpo':
    case 'rloo': {
      const row = method === 'rloo' ? rl.rloo(outcome) : rl.grpo({ ...outcome, scale: method === 'drgrpo' ? 'none' : 'group' });
      return { advantages: rl.segmentBroadcast(row, conv.offsets, conv.mask), metrics: {} };
    }
    case 'gigpo': {
      // Rows = agent steps; anchor = the environment state each step acted from.
      const res = rl.gigpo({
        episodeRewards: steps.episodeRewards, stepRewards: steps.stepRewards,
        trajectories: steps.trajectoryIndex, groups: steps.groupIndex, anchors: steps.anchors,
        gamma: GIGPO_GAMMA, mode: 'mean_std_norm',
      });
      // Each step's advantage covers its turn's tokens in the conversation rows (observations stay 0).
      return {
        advantages: rl.segmentBroadcast(res.advantages, inp.batch.stepOffsets, conv.mask),
        metrics: { singletonShare: res.diagnostics.singletonShare },
      };
    }
    case 'gear': {
      if (!inp.teacher) throw new Error('advantages: GEAR needs the teacher logits');
      const row = rl.grpo(outcome);
      // Divergence, entropy and teacher-minus-student log-ratio from both logits, then the reweighting.
      const res = rl.gearFromLogits({
        student: inp.student, teacher: inp.teacher, targets: conv.tokenIds,
        advantages: row, offsets: conv.offsets, mask: conv.mask,
        ...(inp.gearOptions ? { options: inp.gearOptions } : {}),
      });
      // The signals it computed, as a GEAR input the token visualiser can show.
      const input: rl.GearInput = {
        advantages: row, offsets: conv.offsets, mask: conv.mask,
        divergence: res.signals.divergence, entropy: res.signals.entropy, logratio: res.signals.logratio,
        ...(inp.gearOptions ? { options: inp.gearOptions } : {}),
      };
      const d = res.diagnostics;
      return {
        advantages: res.advantages,
        metrics: { peaks: d.peaks, segments: d.segments, segmentTokenFraction: d.segmentTokenFraction,
          meanSegmentLength: d.meanSegmentLength, weightMin: d.weightMin, weightMax: d.weightMax, klP95: d.klQuantiles.p95 },
        gear: { input, result: res },
      };
    }
  }
}
