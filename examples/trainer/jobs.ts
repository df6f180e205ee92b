/**
 * One RL run as a self-contained job (environment by name, checkpoint, settings), so runs can go to
 * worker threads: every run is seeded, so where it runs never changes its result.
 *
 * @module
 */
import type { GearBatchRecord } from 'gear-rl/report';
import { ENVIRONMENTS } from '../env/index.js';
import { teacherOf } from './methods.js';
import { tokenTexts } from './rollout.js';
import { train, type RunConfig, type RunResult, type StepLog } from './train.js';

/** A run to do. */
export interface Job {
  /** Environment name (a key of `ENVIRONMENTS`). */
  env: string;
  /** The warm-start checkpoint. */
  init: Float32Array[];
  /** The run's settings. */
  cfg: RunConfig;
  /** Return the first batch of a GEAR method as a visualiser record. */
  wantBatch?: boolean;
}

/** A finished run, with the first GEAR batch when asked for. */
export interface JobResult {
  /** The run. */
  result: RunResult;
  /** The first batch's GEAR inputs and result, in the visualiser's record format. */
  batch?: GearBatchRecord;
}

/** Runs `job` in this thread. */
export function runJob(job: Job, onStep?: (log: StepLog) => void): JobResult {
  const make = ENVIRONMENTS[job.env];
  if (!make) throw new Error(`runJob: unknown environment ${job.env}`);
  const env = make();
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
