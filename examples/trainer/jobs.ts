/**
 * The demo's units of work as self-contained jobs (environment by name, checkpoint, settings), so they
 * can go to worker threads: every job is seeded, so where it runs never changes its result.
 *
 * * `train` — one RL run from a checkpoint;
 * * `warm` — a supervised warm-start and its held-out evaluation;
 * * `measure` — the credit measurement of a checkpoint (environments with known credit).
 *
 * @module
 */
import type { GearBatchRecord } from 'gear-rl/report';
import { ENVIRONMENTS } from '../env/index.js';
import type { Environment } from '../env/types.js';
import { measureCredit, type CreditMeasurement, type MeasureConfig } from './measure.js';
import { teacherOf } from './methods.js';
import { hasKnownCredit } from './oracle.js';
import { tokenTexts } from './rollout.js';
import { evaluate, evaluateOutcomes, train, warmStart, type RunConfig, type RunResult, type StepLog, type WarmStartConfig } from './train.js';

/** An RL run to do. */
export interface TrainJob {
  /** Job kind (omitted: `train`). */
  kind?: 'train';
  /** Environment name (a key of `ENVIRONMENTS`). */
  env: string;
  /** The warm-start checkpoint. */
  init: Float32Array[];
  /** The run's settings. */
  cfg: RunConfig;
  /** Return the first batch of a GEAR method as a visualiser record. */
  wantBatch?: boolean;
}

/** A warm-start to compute. */
export interface WarmJob {
  /** Job kind. */
  kind: 'warm';
  /** Environment name. */
  env: string;
  /** Its settings. */
  warm: WarmStartConfig;
  /** Held-out tasks for the student's evaluation. */
  evalEpisodes: number;
  /** Held-out tasks for the privileged view's evaluation. */
  teacherEvalEpisodes: number;
  /** Continue from this checkpoint instead of fresh weights. */
  init?: Float32Array[];
}

/** A credit measurement to do. */
export interface MeasureJob {
  /** Job kind. */
  kind: 'measure';
  /** Environment name (one with known credit). */
  env: string;
  /** The checkpoint measured. */
  init: Float32Array[];
  /** Its settings. */
  measure: MeasureConfig;
}

/** Any job. */
export type Job = TrainJob | WarmJob | MeasureJob;

/** A finished RL run, with the first GEAR batch when asked for. */
export interface JobResult {
  /** The run. */
  result: RunResult;
  /** The first batch's GEAR inputs and result, in the visualiser's record format. */
  batch?: GearBatchRecord;
}

/** A finished warm-start. */
export interface WarmResult {
  /** Final supervised loss. */
  nll: number;
  /** The checkpoint. */
  params: Float32Array[];
  /** How its held-out episodes end (student prompt). */
  outcomes: Record<string, number>;
  /** Its held-out success with the privileged prompt. */
  teacherSuccess: number;
}

function envOf(name: string): Environment {
  const make = ENVIRONMENTS[name];
  if (!make) throw new Error(`runJob: unknown environment ${name}`);
  return make();
}

/** Runs an RL job in this thread (`onStep` after every step). */
export function runJob(job: TrainJob, onStep?: (log: StepLog) => void): JobResult {
  const env = envOf(job.env);
  let batch: GearBatchRecord | undefined;
  const result = train(env, job.init, job.cfg, {
    ...(onStep ? { onStep } : {}),
    onFirstBatch: (b, adv) => {
      if (!job.wantBatch || !adv.gear) return;
      const rowLabels = b.trajectories.map((t) => `task ${t.group} · ${env.describe(t.task)} · ${t.outcome} · reward ${t.reward}`);
      batch = {
        ...adv.gear.input, result: adv.gear.result, tokens: tokenTexts(env, b), rowLabels,
        meta: { environment: env.name, method: job.cfg.method, teacher: teacherOf(job.cfg.method) ?? '', seed: job.cfg.seed, step: 0 },
      };
    },
  });
  return { result, ...(batch ? { batch } : {}) };
}

/** Runs a warm-start job in this thread (`onStep(step, loss)` every 8 steps). */
export function runWarmJob(job: WarmJob, onStep?: (step: number, loss: number) => void): WarmResult {
  const env = envOf(job.env);
  const r = warmStart(env, job.warm, (s, loss) => { if (s % 8 === 7) onStep?.(s + 1, loss); }, job.init);
  return {
    nll: r.loss, params: r.policy.snapshot(), outcomes: evaluateOutcomes(env, r.policy, job.evalEpisodes),
    teacherSuccess: evaluate(env, r.policy, job.teacherEvalEpisodes, true),
  };
}

/** Runs a measurement job in this thread (`onBatch` after every batch). */
export function runMeasureJob(job: MeasureJob, onBatch?: (done: number) => void): CreditMeasurement {
  const env = envOf(job.env);
  if (!hasKnownCredit(env)) throw new Error(`runMeasureJob: ${job.env} does not know the credit of its tokens`);
  return measureCredit(env, job.init, job.measure, onBatch);
}

/** Runs any job in this thread; `onProgress` after every unit of work (step, warm-start steps, batch). */
export function runAnyJob(job: Job, onProgress?: () => void): JobResult | WarmResult | CreditMeasurement {
  if (job.kind === 'warm') return runWarmJob(job, () => onProgress?.());
  if (job.kind === 'measure') return runMeasureJob(job, () => onProgress?.());
  return runJob(job, () => onProgress?.());
}
