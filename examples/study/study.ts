/**
 * `npm run study`: the longer-horizon study. One warm-started GRU policy, then paired RL runs of
 * GRPO, GiGPO and GEAR (self-teacher) on the four-phase "vault" task (key → door code → corridor →
 * chest, about 20 decisions per episode), over many seeds, on worker threads. Writes a Markdown
 * report and the raw runs as JSON.
 *
 *     npm run study -- [--seeds 30] [--steps 60] [--workers 2] [--out study-output] [--quick]
 *
 * @module
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { BOXES, BUDGET, CODE_LEN, JUNCTIONS } from './env.js';
import { formatPaired, paired, type Paired } from './stats.js';
import { NET, STUDY_LABEL, evaluate, trainRun, warmStart, type StudyMethod, type StudyRun, type StudyRunConfig, type WarmConfig } from './train.js';

/** Everything a study run is defined by. */
export interface StudyConfig {
  /** Paired seeds. */
  seeds: number;
  /** Methods; the first is the baseline of the paired statistics. */
  methods: StudyMethod[];
  /** Warm start. */
  warm: WarmConfig;
  /** RL runs (the method and seed are filled per run). */
  run: Omit<StudyRunConfig, 'method' | 'seed'>;
  /** Worker threads (1: the runs share the calling thread). */
  workers: number;
}

/** The study's defaults (`--quick` shrinks them to a smoke test). */
export function studyConfig(quick = false): StudyConfig {
  return quick
    ? { seeds: 2, methods: ['grpo', 'gigpo', 'gear'], warm: { steps: 20, batch: 8, eps: 0.05, lr: 1e-2, seed: 1 },
      run: { steps: 2, tasksPerStep: 2, groupSize: 4, lr: 3e-3, evalEvery: 1, evalEpisodes: 8 }, workers: 1 }
    : { seeds: 30, methods: ['grpo', 'gigpo', 'gear'], warm: { steps: 400, batch: 32, eps: 0.05, lr: 1e-2, seed: 1 },
      run: { steps: 60, tasksPerStep: 8, groupSize: 8, lr: 3e-3, evalEvery: 10, evalEpisodes: 128 },
      workers: Math.max(1, Math.min(2, typeof availableParallelism === 'function' ? availableParallelism() : cpus().length)) };
}

/** The paired results of a study. */
export interface StudyResult {
  /** Settings. */
  config: StudyConfig;
  /** Held-out success of the warm start. */
  warmSuccess: number;
  /** Every run, per method, in seed order. */
  runs: Record<string, StudyRun[]>;
  /** Per non-baseline method: AUC and end-success differences to the baseline. */
  paired: Record<string, { auc: Paired; end: Paired }>;
  /** Seconds. */
  seconds: number;
}

/** Runs the study (warm start here, RL runs on `config.workers` threads). */
export async function runStudy(config: StudyConfig, onRun?: (run: StudyRun, done: number, total: number) => void): Promise<StudyResult> {
  const t0 = performance.now();
  const net = warmStart(config.warm);
  const warmSuccess = evaluate(net, config.run.evalEpisodes);
  const jobs: StudyRunConfig[] = [];
  for (let s = 0; s < config.seeds; s++) for (const method of config.methods) jobs.push({ ...config.run, method, seed: 1000 + s });
  const results: StudyRun[] = new Array(jobs.length);
  let next = 0, done = 0;
  const init = net.params;
  const worker = () => new Promise<void>((resolve, reject) => {
    const w = new Worker(new URL(import.meta.url), { workerData: { init } });
    const give = () => {
      if (next >= jobs.length) { void w.terminate(); resolve(); return; }
      const i = next++;
      w.once('message', (run: StudyRun) => { results[i] = run; onRun?.(run, ++done, jobs.length); give(); });
      w.postMessage(jobs[i]);
    };
    w.once('error', reject);
    give();
  });
  if (config.workers <= 1) {
    for (let i = 0; i < jobs.length; i++) { results[i] = trainRun(init, jobs[i]!); onRun?.(results[i]!, i + 1, jobs.length); }
  } else await Promise.all(Array.from({ length: Math.min(config.workers, jobs.length) }, worker));
  const runs: Record<string, StudyRun[]> = {};
  for (const m of config.methods) runs[m] = results.filter((r) => r.config.method === m).sort((a, b) => a.config.seed - b.config.seed);
  const base = runs[config.methods[0]!]!;
  const pairedOut: StudyResult['paired'] = {};
  for (const m of config.methods.slice(1)) {
    const r = runs[m]!;
    pairedOut[m] = { auc: paired(r.map((x) => x.auc), base.map((x) => x.auc)), end: paired(r.map((x) => x.end), base.map((x) => x.end)) };
  }
  return { config, warmSuccess, runs, paired: pairedOut, seconds: (performance.now() - t0) / 1000 };
}

/** The study's Markdown report. */
export function studyReport(r: StudyResult, command: string, machine: string): string {
  const c = r.config, base = c.methods[0]!;
  const mean = (xs: number[]) => xs.reduce((a, x) => a + x, 0) / xs.length;
  const lines = [
    '# Longer-horizon study: GRPO, GiGPO and GEAR on the four-phase vault task', '',
    `Command: \`${command}\``, '', `Machine: ${machine}; ${c.workers} worker thread(s); ${r.seconds.toFixed(0)} s.`, '',
    `Task: key (${BOXES} boxes) → door code (${CODE_LEN} digits, retyped from the start after a wrong one) → corridor (${JUNCTIONS} signed junctions) → chest (the code's first digit); ` +
      `budget ${BUDGET} actions, reward 1 for the right chest. Policy: embedding ${NET.embed}, GRU ${NET.hidden}, linear read-out (backward checked against finite differences). ` +
      `Warm start: ${c.warm.steps} steps of behaviour cloning (demonstrator noise ${c.warm.eps}), held-out success ${r.warmSuccess.toFixed(3)}. ` +
      `RL: ${c.run.steps} steps × ${c.run.tasksPerStep} tasks × ${c.run.groupSize} rollouts, AdamW lr ${c.run.lr}, PPO loss, token-mean; ` +
      `evaluation on ${c.run.evalEpisodes} held-out tasks every ${c.run.evalEvery} steps; ${c.seeds} paired seeds (same tasks and sampling streams per seed).`, '',
    '| method | decisions / episode | AUC | end success | AUC − GRPO (± se, t, wins/losses/level) | end − GRPO |',
    '| --- | --- | --- | --- | --- | --- |',
  ];
  for (const m of c.methods) {
    const runs = r.runs[m]!;
    const p = r.paired[m];
    lines.push(`| ${STUDY_LABEL[m]} | ${mean(runs.map((x) => x.decisions)).toFixed(1)} | ${mean(runs.map((x) => x.auc)).toFixed(3)} | ${mean(runs.map((x) => x.end)).toFixed(3)} | ` +
      `${p ? formatPaired(p.auc) : '(baseline)'} | ${p ? formatPaired(p.end) : '(baseline)'} |`);
  }
  lines.push('');
  const verdicts = c.methods.slice(1).map((m) => {
    const p = r.paired[m]!;
    const one = (name: string, x: Paired) => x.tie ? `${name}: a tie (|difference| ≤ 2 se)` : `${name}: ${x.mean > 0 ? 'ahead of' : 'behind'} ${STUDY_LABEL[base]} by more than 2 se (t ${x.t.toFixed(1)})`;
    return `* ${STUDY_LABEL[m]} — ${one('AUC', p.auc)}; ${one('end success', p.end)}.`;
  });
  lines.push('Reading (a difference within 2 standard errors of 0 is called a tie):', '', ...verdicts, '');
  return lines.join('\n');
}

function parseArgs(argv: string[]): { config: StudyConfig; out: string } {
  const quick = argv.includes('--quick');
  const config = studyConfig(quick);
  let out = 'study-output';
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!, v = argv[i + 1];
    const int = () => { const n = Number(v); if (!Number.isInteger(n) || n < 1) throw new Error(`${a} expects a positive integer, got ${v}`); i++; return n; };
    if (a === '--quick') continue;
    else if (a === '--seeds') config.seeds = Math.max(2, int());
    else if (a === '--steps') config.run.steps = int();
    else if (a === '--workers') config.workers = int();
    else if (a === '--out') { if (!v) throw new Error('--out expects a folder'); out = v; i++; }
    else if (a === '--help' || a === '-h') {
      process.stdout.write('usage: npm run study -- [--seeds 30] [--steps 60] [--workers 2] [--out study-output] [--quick]\n');
      process.exit(0);
    } else throw new Error(`unknown option ${a} (see --help)`);
  }
  return { config, out };
}

async function main(): Promise<void> {
  let args;
  try { args = parseArgs(process.argv.slice(2)); } catch (e) { process.stderr.write(`study: ${(e as Error).message}\n`); process.exit(2); }
  const { config, out } = args;
  const command = `npm run study${process.argv.length > 2 ? ' -- ' + process.argv.slice(2).join(' ') : ''}`;
  process.stderr.write(`study: warm start (${config.warm.steps} steps), then ${config.seeds} seeds × ${config.methods.length} methods on ${config.workers} thread(s)\n`);
  const r = await runStudy(config, (run, done, total) => {
    process.stderr.write(`  [${done}/${total}] ${STUDY_LABEL[run.config.method]} seed ${run.config.seed}: AUC ${run.auc.toFixed(3)}, end ${run.end.toFixed(3)} (${run.seconds.toFixed(0)} s)\n`);
  });
  const machine = `${cpus()[0]?.model ?? 'unknown CPU'}, ${cpus().length} cores, Node ${process.version}`;
  const md = studyReport(r, command, machine);
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, 'study.md'), md);
  writeFileSync(join(out, 'study.json'), JSON.stringify(r, null, 1));
  process.stdout.write(md + `\nWrote ${join(out, 'study.md')} and study.json\n`);
}

if (isMainThread) {
  // Run as a script, not when imported (the smoke test imports runStudy).
  if (process.argv[1] && fileURLToPath(import.meta.url) === resolve(process.argv[1])) void main();
} else {
  const init = (workerData as { init: Float32Array[] }).init;
  parentPort!.on('message', (cfg: StudyRunConfig) => parentPort!.postMessage(trainRun(init, cfg)));
}
