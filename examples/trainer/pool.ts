/**
 * A pool of worker threads for the demo's jobs (or the calling thread, with one worker): jobs queue and
 * run in order of submission as workers become free. Results do not depend on the pool's size.
 *
 * @module
 */
import { Worker } from 'node:worker_threads';
import type { CreditMeasurement } from './measure.js';
import { runAnyJob, type Job, type JobResult, type MeasureJob, type TrainJob, type WarmJob, type WarmResult } from './jobs.js';

type Done = JobResult | WarmResult | CreditMeasurement;
interface Pending { onStep: () => void; resolve: (r: Done) => void; reject: (e: Error) => void }

/** Runs jobs inline (one at a time) or on worker threads. */
export class Pool {
  private readonly workers: Worker[] = [];
  private readonly idle: Worker[] = [];
  private readonly queue: (Pending & { job: Job })[] = [];
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;

  /** @param size worker threads (1 or less: jobs run in the calling thread) */
  constructor(readonly size: number) {
    if (size <= 1) return;
    for (let i = 0; i < size; i++) {
      const w = new Worker(new URL('./worker.js', import.meta.url));
      w.on('message', (m: { id: number; step?: number; done?: Done; error?: string }) => {
        const p = this.pending.get(m.id)!;
        if (m.step !== undefined) { p.onStep(); return; }
        this.pending.delete(m.id);
        this.idle.push(w);
        if (m.error !== undefined) p.reject(new Error(m.error)); else p.resolve(m.done!);
        this.pump();
      });
      w.on('error', (e) => { for (const p of this.pending.values()) p.reject(e); this.pending.clear(); });
      this.workers.push(w);
      this.idle.push(w);
    }
  }

  /** Runs an RL job. */
  run(job: TrainJob, onStep: () => void): Promise<JobResult>;
  /** Runs a warm-start job. */
  run(job: WarmJob, onStep: () => void): Promise<WarmResult>;
  /** Runs a measurement job. */
  run(job: MeasureJob, onStep: () => void): Promise<CreditMeasurement>;
  run(job: Job, onStep: () => void): Promise<Done> {
    if (this.size <= 1) {
      return new Promise((res, rej) => setImmediate(() => {
        try { res(runAnyJob(job, onStep)); } catch (e) { rej(e as Error); }
      }));
    }
    return new Promise((resolve, reject) => { this.queue.push({ job, onStep, resolve, reject }); this.pump(); });
  }

  private pump(): void {
    while (this.idle.length && this.queue.length) {
      const w = this.idle.shift()!, q = this.queue.shift()!;
      const id = this.nextId++;
      this.pending.set(id, q);
      w.postMessage({ id, job: q.job });
    }
  }

  /** Ends the workers. */
  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.terminate()));
  }
}
