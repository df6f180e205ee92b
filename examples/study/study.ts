/**
 * `npm run study`: the full-size studies.
 *
 * * `--task answer-chain` (default): the main job's GEAR experiment at full size (study/chain.ts):
 *   credit against the true advantage at three warm-start levels, and the learning comparison with
 *   every arm of the declared decision rules over 32 paired seeds.
 * * `--task vault`: the longer-horizon study. One warm-started GRU policy, then paired RL runs of
 *   GRPO, GiGPO and GEAR (self-teacher) on the four-phase "vault" task (key → door code → corridor →
 *   chest, about 20 decisions per episode), over many seeds, on worker threads; `--credit-only` measures
 *   where each method (GEAR with the divergence and with the log-ratio anchor signal) puts its credit at
 *   the warm start, and how each signal singles out the wrong decisions, and stops there.
 * * `--task maze`: credit without training on the demo's trapdoor maze at its warm start, against the
 *   environment's roles (wrong / right decisive tokens), for both of GEAR's anchor signals
 *   (trainer/role_credit.ts).
 *
 * Each writes a Markdown report and the raw results as JSON.
 *
 *     npm run study -- [--task answer-chain|vault|maze] [--seeds n] [--steps n] [--workers 2] [--out study-output] [--quick] [--credit-only]
 *
 * @module
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { BOXES, BUDGET, CODE_LEN, JUNCTIONS } from './env.js';
import { chainStudyCli, chainStudyReport, runChainStudy } from './chain.js';
import { ENV_DEFAULTS } from '../demo.js';
import { ENVIRONMENTS } from '../env/index.js';
import { readWarm, warmKey, writeWarm } from '../trainer/cache.js';
import { runWarmJob } from '../trainer/jobs.js';
import { measureRoleCredit, roleCreditTables, type RoleCreditConfig } from '../trainer/role_credit.js';
import { policyConfig, type WarmStartConfig } from '../trainer/train.js';
import { formatPaired, paired, type Paired } from './stats.js';
import {
  NET, STUDY_LABEL, VAULT_CATEGORIES, evaluate, trainRun, vaultCredit, vaultSignals, warmStart, type StudyMethod, type StudyRun, type StudyRunConfig, type VaultCredit,
  type VaultSignals, type WarmConfig,
} from './train.js';

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
  /** Where each method puts its credit at the warm start (no training). */
  credit?: Record<StudyMethod, VaultCredit>;
  /** Seconds. */
  seconds: number;
}

/** Runs the study (warm start here, RL runs on `config.workers` threads). */
export async function runStudy(config: StudyConfig, onRun?: (run: StudyRun, done: number, total: number) => void): Promise<StudyResult> {
  const t0 = performance.now();
  const net = warmStart(config.warm);
  const warmSuccess = evaluate(net, config.run.evalEpisodes);
  const credit = vaultCredit(net, VAULT_CREDIT_BATCHES);
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
  return { config, warmSuccess, runs, paired: pairedOut, credit, seconds: (performance.now() - t0) / 1000 };
}

/** The warm-start credit table's sample: 4 batches of 8 tasks × 8 rollouts (256 episodes). */
export const VAULT_CREDIT_BATCHES = { batches: 4, tasks: 8, groupSize: 8, seed: 99 };

/** The warm-start credit table (Markdown rows): per decision category, each method's share of |A| and of |A|·(1 − p). */
export function vaultCreditTable(credit: Record<StudyMethod, VaultCredit>, methods: readonly StudyMethod[]): string[] {
  const head = ['decision', ...methods.flatMap((m) => [`${STUDY_LABEL[m]} \\|A\\|`, `${STUDY_LABEL[m]} \\|A\\|·(1−p)`])];
  const f = (x: number) => (Number.isFinite(x) ? x.toFixed(3) : '-');
  const rows = VAULT_CATEGORIES.map((c) => [c, ...methods.flatMap((m) => [f(credit[m][c].abs), f(credit[m][c].grad)])]);
  return [`| ${head.join(' | ')} |`, `| ${head.map(() => '---').join(' | ')} |`, ...rows.map((r) => `| ${r.join(' | ')} |`)];
}

/** The `--credit-only` run: the warm start, its held-out success, its credit table and how each GEAR signal singles out the wrong decisions. */
export function vaultCreditOnly(config: StudyConfig): { warmSuccess: number; credit: Record<StudyMethod, VaultCredit>; signals: VaultSignals; seconds: number } {
  const t0 = performance.now();
  const net = warmStart(config.warm);
  return {
    warmSuccess: evaluate(net, config.run.evalEpisodes), credit: vaultCredit(net, VAULT_CREDIT_BATCHES), signals: vaultSignals(net, VAULT_CREDIT_BATCHES),
    seconds: (performance.now() - t0) / 1000,
  };
}

/** The vault's signal table (Markdown rows): AUROC of D and s for the wrong decisions, and each GEAR variant's anchors. */
export function vaultSignalTable(s: VaultSignals): string[] {
  const f = (x: number, d = 3) => (Number.isFinite(x) ? x.toFixed(d) : '-');
  return [
    '| signal | AUROC, wrong against right decisions | mean on wrong decisions | mean on right decisions |', '| --- | --- | --- | --- |',
    `| divergence D | ${f(s.signals.D.auroc)} | ${f(s.signals.D.meanWrong, 2)} | ${f(s.signals.D.meanRight, 2)} |`,
    `| log-ratio signal s | ${f(s.signals.s.auroc)} | ${f(s.signals.s.meanWrong, 2)} | ${f(s.signals.s.meanRight, 2)} |`, '',
    '| method | anchors / episode | precision (on wrong decisions) | recall of wrong decisions |', '| --- | --- | --- | --- |',
    ...(['gear', 'gear-lr'] as const).map((k) => `| ${STUDY_LABEL[k]} | ${f(s.anchors[k].perEpisode, 2)} | ${f(s.anchors[k].precision)} | ${f(s.anchors[k].recall)} |`),
  ];
}

/** The maze's role-credit settings (`quick`: a smoke test of the same code path). */
export function mazeCreditConfig(quick: boolean): { warm: WarmStartConfig; measure: RoleCreditConfig; evalEpisodes: number } {
  const d = ENV_DEFAULTS.maze!;
  return {
    warm: quick ? { ...d.warm, steps: 30 } : d.warm, evalEpisodes: quick ? 20 : d.evalEpisodes ?? 400,
    measure: {
      batches: quick ? 2 : 32, tasks: 8, groupSize: 8, seed: 2024, bootstrap: 2000,
      sweep: quick ? { peakZ: [2], entropyQuantile: [0.8] } : { peakZ: [1, 1.5, 2, 2.5, 3], entropyQuantile: [0.5, 0.8, 0.95] },
    },
  };
}

/** `--task maze`: the demo's maze warm start (from the demo's cache when it is there) and its role credit. */
export function mazeCredit(quick: boolean, cacheDir: string, onWarm?: (cached: boolean) => void) {
  const t0 = performance.now();
  const env = ENVIRONMENTS.maze!();
  const c = mazeCreditConfig(quick);
  // the demo's cache key for the same warm start, so either can reuse the other's
  const key = warmKey({ env: env.name, settings: env.settings, vocab: env.vocab, policy: policyConfig(env), warm: c.warm, evalEpisodes: c.evalEpisodes });
  let entry = readWarm(cacheDir, env.name, key);
  onWarm?.(entry !== undefined);
  if (!entry) {
    entry = runWarmJob({ kind: 'warm', env: env.name, warm: c.warm, evalEpisodes: c.evalEpisodes, teacherEvalEpisodes: Math.max(1, Math.round(c.evalEpisodes / 2)) });
    try { writeWarm(cacheDir, env.name, key, entry, { env: env.name, settings: env.settings, warm: c.warm }); } catch { /* a read-only cache is only slower */ }
  }
  const measurement = measureRoleCredit(env, entry.params, c.measure);
  return { env, config: c, warmSuccess: entry.outcomes[env.outcomes[0]!]! / c.evalEpisodes, teacherSuccess: entry.teacherSuccess, measurement,
    seconds: (performance.now() - t0) / 1000 };
}

const CREDIT_NOTE = 'Share of the batch\'s summed |A| and of its summed |A|·(1 − p) per decision category (p: the probability of the sampled action; a ' +
  'token sampled with p ≈ 1 takes almost no gradient whatever its advantage), at the warm start, before any RL step: ' +
  `${VAULT_CREDIT_BATCHES.batches} batches of ${VAULT_CREDIT_BATCHES.tasks} tasks × ${VAULT_CREDIT_BATCHES.groupSize} rollouts.`;

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
  if (r.credit) lines.push('## Credit at the warm start', '', CREDIT_NOTE, '', ...vaultCreditTable(r.credit, c.methods), '');
  return lines.join('\n');
}

interface StudyArgs {
  task: 'answer-chain' | 'vault' | 'maze'; quick: boolean; creditOnly: boolean; out: string;
  seeds?: number; steps?: number; workers?: number;
}

const USAGE = 'usage: npm run study -- [--task answer-chain|vault|maze] [--seeds n] [--steps n] [--workers 2] [--out study-output] [--quick] [--credit-only]\n' +
  '  answer-chain (default): 32 seeds, 60 steps; vault: 30 seeds, 60 steps; --credit-only (vault): the warm-start credit table alone;\n' +
  '  maze: credit without training at the demo\'s maze warm start, against the roles of its tokens\n';

function parseArgs(argv: string[]): StudyArgs {
  const args: StudyArgs = { task: 'answer-chain', quick: argv.includes('--quick'), creditOnly: false, out: 'study-output' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!, v = argv[i + 1];
    const int = () => { const n = Number(v); if (!Number.isInteger(n) || n < 1) throw new Error(`${a} expects a positive integer, got ${v}`); i++; return n; };
    if (a === '--quick') continue;
    else if (a === '--task') {
      if (v !== 'answer-chain' && v !== 'vault' && v !== 'maze') throw new Error(`--task expects answer-chain, vault or maze, got ${v}`);
      args.task = v; i++;
    } else if (a === '--credit-only') args.creditOnly = true;
    else if (a === '--seeds') args.seeds = Math.max(2, int());
    else if (a === '--steps') args.steps = int();
    else if (a === '--workers') args.workers = int();
    else if (a === '--out') { if (!v) throw new Error('--out expects a folder'); args.out = v; i++; }
    else if (a === '--help' || a === '-h') {
      process.stdout.write(USAGE);
      process.exit(0);
    } else throw new Error(`unknown option ${a} (see --help)`);
  }
  if (args.creditOnly && args.task !== 'vault') throw new Error('--credit-only applies to --task vault');
  return args;
}

async function main(): Promise<void> {
  let args: StudyArgs;
  try { args = parseArgs(process.argv.slice(2)); } catch (e) { process.stderr.write(`study: ${(e as Error).message}\n`); process.exit(2); }
  const command = `npm run study${process.argv.length > 2 ? ' -- ' + process.argv.slice(2).join(' ') : ''}`;
  const machine = `${cpus()[0]?.model ?? 'unknown CPU'}, ${cpus().length} cores, Node ${process.version}`;
  const out = args.out;
  if (args.task === 'answer-chain') {
    const o = await runChainStudy(chainStudyCli({ quick: args.quick, out, ...(args.seeds ? { seeds: args.seeds } : {}), ...(args.steps ? { steps: args.steps } : {}), ...(args.workers ? { workers: args.workers } : {}) }));
    const md = chainStudyReport(o, command, machine);
    mkdirSync(out, { recursive: true });
    writeFileSync(join(out, 'study.md'), md);
    // results.json (written by the run itself) holds every step of every run; study.json keeps what the report reads.
    writeFileSync(join(out, 'study.json'), JSON.stringify({
      ...o.results, runs: (o.results.runs as { log: unknown }[]).map(({ log: _log, ...r }) => r),
    }, (_k, x) => (typeof x === 'number' && !Number.isFinite(x) ? null : x), 1));
    process.stdout.write(`\nWrote ${join(out, 'study.md')} and study.json\n`);
    return;
  }
  if (args.task === 'maze') {
    const cacheDir = new URL('../../node_modules/.cache/gear-rl-demo', import.meta.url).pathname;
    const r = mazeCredit(args.quick, cacheDir, (cached) => process.stderr.write(`study: maze warm start ${cached ? 'from the cache' : `(${mazeCreditConfig(args.quick).warm.steps} steps)`}, then the credit measurement\n`));
    const m = r.measurement.config;
    const md = ['# Maze: credit without training, against the roles of the tokens, for both of GEAR\'s anchor signals', '',
      `Command: \`${command}\``, '',
      `Machine: ${machine}; ${r.seconds.toFixed(0)} s. Every number below is deterministic for the seeds.`, '',
      `Task: ${r.env.title}. Warm start: the demo's (${r.config.warm.steps} steps of ${r.config.warm.batch} demonstrations, demonstrator noise ${r.config.warm.eps}), ` +
        `held-out success ${r.warmSuccess.toFixed(3)} with the student's prompt, ${r.teacherSuccess.toFixed(3)} with the map. Teacher: the same checkpoint reading the map ` +
        '(the frozen teacher at step 0). Ground truth: the role the environment gives each sampled token: wrong decisive (into the warned trap, a wall already ' +
        'known, a malformed turn), right decisive (an exit), neutral (everything else). There is no true per-token advantage here (the answer chain\'s oracle), ' +
        'so no gradient cosine.', '',
      `${m.batches} batches of ${m.tasks} tasks × ${m.groupSize} rollouts; mean over batches [95 % percentile bootstrap interval over batches].`, '',
      ...roleCreditTables(r.measurement)].join('\n');
    mkdirSync(out, { recursive: true });
    writeFileSync(join(out, 'maze-credit.md'), md);
    writeFileSync(join(out, 'maze-credit.json'), JSON.stringify({ config: r.config, warmSuccess: r.warmSuccess, teacherSuccess: r.teacherSuccess, measurement: r.measurement, seconds: r.seconds },
      (_k, x) => (typeof x === 'number' && !Number.isFinite(x) ? null : x), 1));
    process.stdout.write(md + `\nWrote ${join(out, 'maze-credit.md')} and maze-credit.json\n`);
    return;
  }
  const config = studyConfig(args.quick);
  if (args.seeds) config.seeds = args.seeds;
  if (args.steps) config.run.steps = args.steps;
  if (args.workers) config.workers = args.workers;
  if (args.creditOnly) {
    const c = vaultCreditOnly(config);
    const md = ['# Vault: where each method puts its credit at the warm start', '', `Command: \`${command}\``, '',
      `Machine: ${machine}; ${c.seconds.toFixed(0)} s. Warm start: ${config.warm.steps} steps of behaviour cloning (demonstrator noise ${config.warm.eps}), ` +
      `held-out success ${c.warmSuccess.toFixed(3)}. GEAR: the self teacher, whose privileged context is the box holding the key, with the divergence D ` +
      '(GEAR (self)) and with the log-ratio anchor signal s = max(0, ℓ_student − ℓ_teacher) of the sampled token (GEAR log-ratio (self)).', '',
      CREDIT_NOTE, '', ...vaultCreditTable(c.credit, ['grpo', 'gigpo', 'gear', 'gear-lr']), '',
      'How each anchor signal singles out the wrong decisions (wrong box, digit, turn or answer, and invalid actions) among all decisions, pooled over the same ' +
      'batches, and where each GEAR variant puts its anchors:', '', ...vaultSignalTable(c.signals), ''].join('\n');
    mkdirSync(out, { recursive: true });
    writeFileSync(join(out, 'vault-credit.md'), md);
    process.stdout.write(md + `\nWrote ${join(out, 'vault-credit.md')}\n`);
    return;
  }
  process.stderr.write(`study: warm start (${config.warm.steps} steps), then ${config.seeds} seeds × ${config.methods.length} methods on ${config.workers} thread(s)\n`);
  const r = await runStudy(config, (run, done, total) => {
    process.stderr.write(`  [${done}/${total}] ${STUDY_LABEL[run.config.method]} seed ${run.config.seed}: AUC ${run.auc.toFixed(3)}, end ${run.end.toFixed(3)} (${run.seconds.toFixed(0)} s)\n`);
  });
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
