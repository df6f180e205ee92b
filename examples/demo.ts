/**
 * gear-rl demo: trains a small policy by critic-free RL on a multi-turn tool-use task and compares
 * advantage methods over paired seeds — learning, the paired difference to GRPO, credit fidelity (where
 * each method puts its advantage mass, measured against the environment's knowledge of every decision)
 * and per-step diagnostics. `examples/usage.txt` lists the options (`--help`).
 *
 *     npm run demo                 # trapdoor maze: GRPO, GiGPO, GEAR (self), GEAR (frozen) x 10 seeds
 *     npm run demo -- --quick      # locker search smoke test (under a minute)
 *
 * @module
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import * as rl from 'gear-rl';
import { resolveGearOptions } from 'gear-rl/diagnostics';
import { type GearBatchRecord, saveBatch, writeReport } from 'gear-rl/report';
import { DEFAULT_ENV, ENVIRONMENTS } from './env/index.js';
import type { Environment } from './env/types.js';
import { Policy } from './model/policy.js';
import { DASHES, OKABE_ITO, Progress, demoSvg, isInteractive, table, type MethodSeries } from './report/report.js';
import { meanSe, paired, signedPm, type Paired } from './report/stats.js';
import { readWarm, warmKey, writeWarm, type WarmEntry } from './trainer/cache.js';
import { runJob, type Job, type JobResult } from './trainer/jobs.js';
import { METHODS, METHOD_LABEL, teacherOf, type Method } from './trainer/methods.js';
import { evaluate, evaluateOutcomes, policyConfig, warmStart, type RunConfig, type RunResult, type WarmStartConfig } from './trainer/train.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '..');

interface Cli {
  env?: string; quick: boolean; out: string; seeds?: number; steps?: number; methods?: Method[]; lr?: number; groupSize?: number;
  tasks?: number; eps?: number; warmSteps?: number; evalEpisodes?: number; gear?: rl.GearOptions; jobs?: number;
  cacheDir: string; cache: boolean;
}

/** Per-environment defaults (the settings measured in the design notes). */
const ENV_DEFAULTS: Record<string, { warm: WarmStartConfig; steps: number; lr: number }> = {
  maze: { warm: { steps: 1200, batch: 64, eps: 0.35, lr: 0.03, seed: 12345 }, steps: 60, lr: 0.01 },
  'maze-filler': { warm: { steps: 1500, batch: 64, eps: 0.35, lr: 0.03, seed: 12345 }, steps: 60, lr: 0.005 },
  locker: { warm: { steps: 240, batch: 64, eps: 0.2, lr: 0.06, seed: 12345 }, steps: 40, lr: 0.01 },
};

function usage(): string {
  return readFileSync(join(ROOT, 'examples', 'usage.txt'), 'utf8');
}

function parseArgs(argv: string[]): Cli {
  const cli: Cli = { quick: false, out: 'demo-output', cacheDir: join(ROOT, 'node_modules', '.cache', 'gear-rl-demo'), cache: true };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const val = () => {
      const x = argv[++i];
      if (x === undefined) throw new Error(`${a}: expected a value`);
      return x;
    };
    const int = (x: string) => {
      const n = Number(x);
      if (!Number.isInteger(n) || n < 1) throw new Error(`${a}: expected a positive integer, got ${x}`);
      return n;
    };
    if (a === '--quick') cli.quick = true;
    else if (a === '--env') {
      const x = val();
      if (!(x in ENVIRONMENTS)) throw new Error(`--env: expected one of ${Object.keys(ENVIRONMENTS).join(',')}, got ${x}`);
      cli.env = x;
    } else if (a === '--out') cli.out = val();
    else if (a === '--cache-dir') cli.cacheDir = val();
    else if (a === '--no-cache') cli.cache = false;
    else if (a === '--seeds') cli.seeds = int(val());
    else if (a === '--steps') cli.steps = int(val());
    else if (a === '--group-size') cli.groupSize = int(val());
    else if (a === '--tasks') cli.tasks = int(val());
    else if (a === '--warm-steps') cli.warmSteps = int(val());
    else if (a === '--eval-episodes') cli.evalEpisodes = int(val());
    else if (a === '--jobs') cli.jobs = int(val());
    else if (a === '--gear') {
      const x = val();
      let o: unknown;
      try { o = JSON.parse(x); } catch { throw new Error(`--gear: expected a JSON object of GEAR options, got ${x}`); }
      if (typeof o !== 'object' || o === null || Array.isArray(o)) throw new Error(`--gear: expected a JSON object of GEAR options, got ${x}`);
      resolveGearOptions(o as rl.GearOptions); // validates names and ranges now, not after the warm-start
      cli.gear = o as rl.GearOptions;
    } else if (a === '--lr' || a === '--eps') {
      const x = Number(val());
      if (!(x > 0 && x < 1)) throw new Error(`${a}: expected a number in (0, 1)`);
      if (a === '--lr') cli.lr = x; else cli.eps = x;
    } else if (a === '--methods') {
      const ms = val().split(',').map((m) => {
        if (!(METHODS as readonly string[]).includes(m)) throw new Error(`--methods: expected some of ${METHODS.join(',')}, got ${m}`);
        return m as Method;
      });
      if (new Set(ms).size !== ms.length) throw new Error('--methods: a method is listed twice');
      cli.methods = ms;
    } else if (a === '--help' || a === '-h') {
      process.stdout.write(usage());
      process.exit(0);
    } else throw new Error(`unknown option ${a} (try --help)`);
  }
  return cli;
}

/** Runs jobs inline (one job at a time) or on worker threads. */
class Pool {
  private readonly workers: Worker[] = [];
  private readonly idle: Worker[] = [];
  private readonly queue: { job: Job; onStep: () => void; resolve: (r: JobResult) => void; reject: (e: Error) => void }[] = [];
  private readonly pending = new Map<number, { onStep: () => void; resolve: (r: JobResult) => void; reject: (e: Error) => void }>();
  private nextId = 0;

  constructor(readonly size: number) {
    if (size <= 1) return;
    for (let i = 0; i < size; i++) {
      const w = new Worker(new URL('./trainer/worker.js', import.meta.url));
      w.on('message', (m: { id: number; step?: number; done?: JobResult; error?: string }) => {
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

  run(job: Job, onStep: () => void): Promise<JobResult> {
    if (this.size <= 1) {
      return new Promise((res, rej) => setImmediate(() => {
        try { res(runJob(job, onStep)); } catch (e) { rej(e as Error); }
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

  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.terminate()));
  }
}

type Run = RunResult & { method: Method; seed: number };

const f3 = (x: number) => (Number.isFinite(x) ? x.toFixed(3) : '-');
const pmSe = (xs: number[], d = 3) => {
  const ys = xs.filter(Number.isFinite);
  if (!ys.length) return '-';
  const s = meanSe(ys);
  return `${s.mean.toFixed(d)} ± ${s.se.toFixed(d)}`;
};
const spm = (xs: number[]) => {
  const ys = xs.filter(Number.isFinite);
  if (!ys.length) return '-';
  const s = meanSe(ys);
  return signedPm(s.mean, s.se);
};
/** Mean over a run's steps of a per-step value, ignoring NaN (steps where it is undefined). */
const stepMean = (r: Run, f: (l: RunResult['log'][number]) => number | undefined) => {
  const xs = r.log.map(f).filter((x): x is number => x !== undefined && Number.isFinite(x));
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN;
};
const fmtT = (p: Paired) => (Number.isFinite(p.t) ? p.t.toFixed(2) : p.t > 0 ? 'inf' : '-inf');

async function main(): Promise<void> {
  let cli: Cli;
  try {
    cli = parseArgs(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`demo: ${(e as Error).message}\n`);
    process.exit(2);
  }
  const t0 = performance.now();
  const envName = cli.env ?? (cli.quick ? 'locker' : DEFAULT_ENV);
  const env: Environment = ENVIRONMENTS[envName]!();
  const d = ENV_DEFAULTS[envName]!;
  const methods = cli.methods ?? (cli.quick ? (['grpo', 'gigpo', 'gear'] as Method[]) : (['grpo', 'gigpo', 'gear', 'gear-frozen'] as Method[]));
  const seeds = cli.seeds ?? (cli.quick ? 3 : 10);
  const warm: WarmStartConfig = {
    ...d.warm, steps: cli.warmSteps ?? (cli.quick && envName === 'locker' ? 160 : d.warm.steps), ...(cli.eps ? { eps: cli.eps } : {}),
  };
  const evalEpisodes = cli.evalEpisodes ?? (cli.quick ? 200 : 400);
  const base: Omit<RunConfig, 'method' | 'seed'> = {
    steps: cli.steps ?? (cli.quick ? 16 : d.steps), tasksPerStep: cli.tasks ?? 8, groupSize: cli.groupSize ?? 8, updatesPerBatch: 2,
    lr: cli.lr ?? d.lr, maxGradNorm: 1.0, clip: 0.2, evalEvery: cli.quick ? 4 : 5, evalEpisodes,
    teacherEvalEpisodes: Math.max(1, Math.round(evalEpisodes / 2)), emaDecay: 0.95,
    ...(cli.gear ? { gearOptions: cli.gear } : {}),
  };
  const jobs = Math.min(cli.jobs ?? Math.min(2, availableParallelism()), seeds * methods.length);
  mkdirSync(cli.out, { recursive: true });
  const b = rl.backend();
  const pc = policyConfig(env);
  process.stderr.write(`gear-rl demo${cli.quick ? ' (quick)' : ''}: ${env.title}; policy MLP ${pc.hidden1}x${pc.hidden2} ` +
    `(${new Policy(pc).size} parameters); backend ${b.variant}/${b.isa}; ${seeds} seeds x ${methods.length} methods on ${jobs} ${jobs > 1 ? 'threads' : 'thread'}\n`);

  // 1. Supervised warm-start (cached by a hash of everything it depends on): every method starts from it.
  const key = warmKey({ env: env.name, settings: env.settings, vocab: env.vocab, policy: pc, warm, evalEpisodes });
  let ws: WarmEntry | undefined = cli.cache ? readWarm(cli.cacheDir, env.name, key) : undefined;
  const warmFromCache = ws !== undefined;
  if (ws) {
    process.stderr.write(`warm-start       cached (${join(cli.cacheDir, `warm-${env.name}-${key}.json`)})\n`);
  } else {
    const wp = new Progress('warm-start', warm.steps);
    const r = warmStart(env, warm, (s, loss) => { if (s % 8 === 7) wp.update(s + 1, `nll ${loss.toFixed(3)}`); });
    ws = {
      nll: r.loss, params: r.policy.snapshot(), outcomes: evaluateOutcomes(env, r.policy, evalEpisodes),
      teacherSuccess: evaluate(env, r.policy, base.teacherEvalEpisodes!, true),
    };
    wp.done(`nll ${r.loss.toFixed(3)}`);
    if (cli.cache) {
      try { writeWarm(cli.cacheDir, env.name, key, ws, { env: env.name, settings: env.settings, warm }); } catch { /* a read-only cache is only slower */ }
    }
  }
  const warmSuccess = ws.outcomes[env.outcomes[0]!]! / evalEpisodes;
  process.stderr.write(`warm-start       held-out success ${warmSuccess.toFixed(3)} (student prompt), ${ws.teacherSuccess.toFixed(3)} (privileged prompt)\n`);

  // 2. RL runs: every method x seed from the same checkpoint; a seed fixes the task and sampling streams.
  const pool = new Pool(jobs);
  const total = seeds * methods.length;
  const bar = new Progress('RL runs', total * base.steps);
  const tty = isInteractive();
  let stepsDone = 0, runsDone = 0;
  const runs: Run[] = [];
  let gearBatch: GearBatchRecord | undefined;
  const firstGear = methods.find((m) => teacherOf(m));
  const bySeed = new Map<number, Run[]>();
  const tasks: Promise<void>[] = [];
  for (let seed = 1; seed <= seeds; seed++) {
    for (const method of methods) {
      const job: Job = { env: envName, init: ws.params, cfg: { ...base, method, seed }, wantBatch: method === firstGear && seed === 1 };
      tasks.push(pool.run(job, () => { stepsDone++; bar.update(stepsDone, `${runsDone}/${total} runs`); }).then((res) => {
        runsDone++;
        const run: Run = { ...res.result, method, seed };
        runs.push(run);
        if (res.batch) gearBatch = res.batch;
        const done = [...(bySeed.get(seed) ?? []), run];
        bySeed.set(seed, done);
        if (done.length === methods.length) {
          const parts = methods.map((m) => {
            const r = done.find((x) => x.method === m)!;
            return `${METHOD_LABEL[m]} ${r.curve[r.curve.length - 1]!.success.toFixed(3)}`;
          });
          bar.clear();
          process.stderr.write(`seed ${String(seed).padStart(2)}/${seeds}: end success ${parts.join(', ')}  [${((performance.now() - t0) / 1000).toFixed(0)} s]\n`);
          if (tty) bar.update(stepsDone, `${runsDone}/${total} runs`);
        }
      }));
    }
  }
  try {
    await Promise.all(tasks);
  } finally {
    await pool.close();
  }
  bar.clear();

  // 3. Tables.
  const of = (m: Method) => runs.filter((r) => r.method === m).sort((x, y) => x.seed - y.seed);
  const end = (r: Run) => r.curve[r.curve.length - 1]!.success;
  const hasGrpo = methods.includes('grpo');
  const grpo = hasGrpo ? of('grpo') : [];
  const learnRows = [['method', 'end success', 'AUC', 'ΔAUC vs GRPO', 't', 'ahead', 'Δend vs GRPO', 't', 'ahead', 's/run']];
  const pairs: { method: Method; auc: Paired; end: Paired }[] = [];
  for (const m of methods) {
    const rs = of(m);
    const row = [METHOD_LABEL[m], pmSe(rs.map(end)), pmSe(rs.map((r) => r.auc))];
    if (hasGrpo && m !== 'grpo') {
      const pa = paired(rs.map((r) => r.auc), grpo.map((r) => r.auc));
      const pe = paired(rs.map(end), grpo.map(end));
      pairs.push({ method: m, auc: pa, end: pe });
      row.push(signedPm(pa.mean, pa.se), fmtT(pa), `${pa.wins}/${pa.n}`, signedPm(pe.mean, pe.se), fmtT(pe), `${pe.wins}/${pe.n}`);
    } else row.push('-', '-', '-', '-', '-', '-');
    row.push(meanSe(rs.map((r) => r.seconds)).mean.toFixed(1));
    learnRows.push(row);
  }
  const verdict = (label: string, what: string, p: Paired) => `${label} − GRPO ${what} ${signedPm(p.mean, p.se)} (t ${fmtT(p)}, ahead on ${p.wins} of ${p.n} seeds): ` +
    (p.tie ? 'a tie (within 2 se).' : `${p.mean > 0 ? 'better' : 'worse'} than GRPO beyond 2 se.`);
  const tieLines = pairs.flatMap((p) => [verdict(METHOD_LABEL[p.method], 'AUC', p.auc), verdict(METHOD_LABEL[p.method], 'end success', p.end)]);
  const ties = pairs.flatMap((p) => [p.auc.tie ? `${METHOD_LABEL[p.method]} (AUC)` : [], p.end.tie ? `${METHOD_LABEL[p.method]} (end)` : []].flat());
  const nonTies = pairs.flatMap((p) => [!p.auc.tie ? `${METHOD_LABEL[p.method]} (AUC)` : [], !p.end.tie ? `${METHOD_LABEL[p.method]} (end)` : []].flat());
  const tieSentence = pairs.length === 0 ? 'No paired comparison (GRPO not run).'
    : nonTies.length === 0 ? `Every difference to GRPO is within 2 standard errors: all ties (${ties.join(', ')}).`
      : `Within 2 standard errors (ties): ${ties.length ? ties.join(', ') : 'none'}; beyond 2 se: ${nonTies.join(', ')}.`;

  const fidRows = [['method', 'wrong decisive (signed)', 'right decisive (signed)', 'neutral |A| share', 'ρ(|A|, decisive)']];
  const fidelity = new Map<Method, { wrong: number[]; right: number[]; neutral: number[]; spearman: number[] }>();
  for (const m of methods) {
    const rs = of(m);
    const f = {
      wrong: rs.map((r) => stepMean(r, (l) => l.fidelity.wrong)), right: rs.map((r) => stepMean(r, (l) => l.fidelity.right)),
      neutral: rs.map((r) => stepMean(r, (l) => l.fidelity.neutral)), spearman: rs.map((r) => stepMean(r, (l) => l.fidelity.spearman)),
    };
    fidelity.set(m, f);
    fidRows.push([METHOD_LABEL[m], spm(f.wrong), spm(f.right), pmSe(f.neutral), spm(f.spearman)]);
  }

  const diagRows = [['method', 'zero-var groups', 'anchor rows >1', '... differing returns', 'spikes/episode', 'spikes on decisive', 'segment length', 'weight range', 'teacher success 0 → end']];
  for (const m of methods) {
    const rs = of(m);
    const isGear = teacherOf(m) !== undefined;
    const g = (k: string) => rs.map((r) => stepMean(r, (l) => l.advMetrics[k]));
    const wmin = Math.min(...rs.flatMap((r) => r.log.map((l) => l.advMetrics.weightMin ?? Infinity)));
    const wmax = Math.max(...rs.flatMap((r) => r.log.map((l) => l.advMetrics.weightMax ?? -Infinity)));
    diagRows.push([METHOD_LABEL[m], pmSe(rs.map((r) => stepMean(r, (l) => l.zeroVarianceGroups))),
      pmSe(rs.map((r) => stepMean(r, (l) => l.anchorGrouped))), pmSe(rs.map((r) => stepMean(r, (l) => l.anchorInformative))),
      isGear ? pmSe(g('spikesPerEpisode'), 2) : '-', isGear ? pmSe(g('spikeDecisiveShare')) : '-',
      isGear ? pmSe(rs.map((r) => stepMean(r, (l) => (l.advMetrics.segments ? l.advMetrics.meanSegmentLength : NaN))), 2) : '-',
      isGear ? `${wmin.toFixed(2)}–${wmax.toFixed(2)}` : '-',
      isGear ? `${f3(meanSe(rs.map((r) => r.curve[0]!.teacher!)).mean)} → ${pmSe(rs.map((r) => r.curve[r.curve.length - 1]!.teacher!))}` : '-']);
  }

  const share = (o: Record<string, number>) => env.outcomes.map((k) => ((o[k] ?? 0) / evalEpisodes).toFixed(3));
  const endRows = [['checkpoint', ...env.outcomes], ['warm-start', ...share(ws.outcomes)]];
  for (const m of methods) {
    const rs = of(m);
    const sum = Object.fromEntries(env.outcomes.map((k) => [k, rs.reduce((a, r) => a + (r.finalOutcomes[k] ?? 0), 0) / rs.length]));
    endRows.push([`${METHOD_LABEL[m]} (end)`, ...share(sum)]);
  }
  const totalSeconds = (performance.now() - t0) / 1000;
  // CPU time of every thread of this process: what the run costs whatever else shares the cores.
  const cpu = process.cpuUsage();
  const cpuSeconds = (cpu.user + cpu.system) / 1e6;
  const text = [
    `Task: ${env.title}. Warm-start: ${warm.steps} steps of ${warm.batch} demonstrations (eps ${warm.eps}), held-out success ` +
      `${warmSuccess.toFixed(3)} (privileged prompt: ${ws.teacherSuccess.toFixed(3)})${warmFromCache ? ', from the cache' : ''}.`,
    `RL: ${base.steps} steps of ${base.tasksPerStep} tasks x ${base.groupSize} rollouts, lr ${base.lr}; ${seeds} seeds per method, paired ` +
      '(a seed fixes the task and sampling streams for every method).',
    `Held-out success: one sampled episode on each of ${evalEpisodes} held-out tasks, every ${base.evalEvery} steps; AUC = trapezoid mean of the curve.`,
    'Mean ± standard error over seeds; Δ = paired difference to GRPO per seed (mean ± se), t = mean / se, ahead = seeds where the method beat GRPO.',
    '',
    table(learnRows),
    '',
    ...tieLines,
    tieSentence,
    '',
    'Credit fidelity (mean over steps, then mean ± se over seeds): signed advantage mass on wrong decisive tokens (should be < 0) and on right',
    'decisive tokens (should be > 0), |advantage| mass on neutral tokens, each over the batch\'s total |advantage|; ρ = Spearman correlation',
    'between |advantage| and decisiveness over the agent tokens.',
    '',
    table(fidRows),
    '',
    'Diagnostics (mean over steps, mean ± se over seeds): zero-variance groups = share of groups whose rollouts all got the same reward;',
    'anchor rows >1 = share of step rows in GiGPO anchor groups of size > 1, and of those with differing returns; GEAR: spikes (segment',
    'departure points) per episode, share of spikes on decisive tokens, mean segment length, weight range over all steps, and the teacher\'s',
    'own held-out success with the privileged prompt at step 0 and at the end.',
    '',
    table(diagRows),
    '',
    'How held-out episodes end (share), mean over seeds:',
    '',
    table(endRows),
    '',
    `total wall time ${totalSeconds.toFixed(1)} s on ${jobs} ${jobs > 1 ? 'threads' : 'thread'}, CPU time ${cpuSeconds.toFixed(1)} s`,
  ].join('\n');
  process.stdout.write(`\n${text}\n`);

  // 4. Files.
  const steps = runs[0]!.curve.map((c) => c.step);
  const series: MethodSeries[] = methods.map((m, k) => {
    const rs = of(m);
    const f = fidelity.get(m)!;
    const ms = (xs: number[]): [number, number] => { const s = meanSe(xs.filter(Number.isFinite)); return [s.mean, s.se]; };
    return {
      label: METHOD_LABEL[m], color: OKABE_ITO[k % OKABE_ITO.length]!, dash: DASHES[k % DASHES.length]!, steps,
      perSeed: rs.map((r) => r.curve.map((c) => c.success)),
      ...(hasGrpo && m !== 'grpo' ? { diffPerSeed: rs.map((r, i) => r.curve.map((c, j) => c.success - grpo[i]!.curve[j]!.success)) } : {}),
      fidelity: { wrong: ms(f.wrong), right: ms(f.right), neutral: ms(f.neutral) },
    };
  });
  writeFileSync(join(cli.out, 'learning-curves.svg'), demoSvg(series, `${env.title}: ${seeds} paired seeds`));
  writeFileSync(join(cli.out, 'summary.txt'), `${text}\n`);
  const written = ['summary.txt', 'results.json', 'learning-curves.svg'];
  if (gearBatch) {
    saveBatch(join(cli.out, 'gear-batch.json'), gearBatch);
    writeReport(join(cli.out, 'gear-report.html'), gearBatch, { title: `GEAR batch: ${env.title}, ${METHOD_LABEL[firstGear!]} seed 1, step 0` });
    written.push('gear-batch.json', 'gear-report.html');
  }
  writeFileSync(join(cli.out, 'results.json'), JSON.stringify({
    format: 'gear-rl-demo', version: 2, quick: cli.quick, argv: process.argv.slice(2),
    environment: { name: env.name, title: env.title, settings: env.settings, vocab: env.vocab, outcomes: env.outcomes },
    policy: pc, backend: b, jobs,
    warmStart: { config: warm, nll: ws.nll, heldOutSuccess: warmSuccess, heldOutOutcomes: ws.outcomes, teacherSuccess: ws.teacherSuccess, cached: warmFromCache, key },
    rl: base, methods, seeds,
    paired: pairs.map((p) => ({ method: p.method, auc: p.auc, endSuccess: p.end })),
    fidelity: Object.fromEntries([...fidelity].map(([m, f]) => [m, f])),
    runs: runs.sort((x, y) => x.seed - y.seed || methods.indexOf(x.method) - methods.indexOf(y.method))
      .map((r) => ({ method: r.method, seed: r.seed, curve: r.curve, auc: r.auc, seconds: r.seconds, finalOutcomes: r.finalOutcomes, log: r.log })),
    totalSeconds, cpuSeconds,
  }, (_k, v) => (typeof v === 'number' && !Number.isFinite(v) ? null : v), 1));
  process.stderr.write(`wrote ${written.map((f) => join(cli.out, f)).join(', ')}\n`);
}

main().catch((e) => {
  process.stderr.write(`demo: ${(e as Error).stack ?? e}\n`);
  process.exit(1);
});
