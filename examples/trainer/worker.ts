/**
 * Worker-thread entry of the demo's job pool: receives `{ id, job }`, posts `{ id, step }` after every
 * unit of work and `{ id, done }` (or `{ id, error }`) at the end.
 *
 * @module
 */
import { parentPort } from 'node:worker_threads';
import { runAnyJob, type Job } from './jobs.js';

const port = parentPort;
if (!port) throw new Error('worker.ts runs as a worker thread');
port.on('message', (m: { id: number; job: Job }) => {
  try {
    const done = runAnyJob(m.job, () => port.postMessage({ id: m.id, step: 1 }));
    port.postMessage({ id: m.id, done });
  } catch (e) {
    port.postMessage({ id: m.id, error: (e as Error).stack ?? String(e) });
  }
});
