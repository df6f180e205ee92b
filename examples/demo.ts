/**
 * gear-rl demo: trains a small policy by critic-free RL on a multi-turn token task and compares
 * advantage methods over paired seeds — learning, the paired difference to GRPO, credit fidelity (where
 * each method puts its advantage mass, measured against the environment's knowledge of every decision)
 * and per-step diagnostics. On the answer chain (the default task, whose credit is known token by token)
 * it first measures credit without training at three warm-start levels, against the true per-token
 * advantage, and applies the declared decision rule to the learning comparison.
 * `examples/usage.txt` lists the options (`--help`).
 *
 *     npm run demo                 # answer chain: credit measurement, then GRPO, GiGPO, GEAR (D and log-ratio) and controls x 8 seeds
 *     npm run demo -- --env maze   # the trapdoor maze
 *     npm run demo -- --quick      # locker search smoke test (under a minute)
 *
 * @module
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as rl from 'gear-rl';
import { resolveGearOptions } from 'gear-rl/diagnostics';
import { type GearBatchRecord, saveBatch, writeReport } from 'gear-rl/report';
import { DEFAULT_ENV, ENVIRONMENTS } from './env/index.js';
import type { Environment } from './env/types.js';
import { Policy } from './model/policy.js';
import { anchorRows, levelRows, methodRows, sweepRows, teacherLevelRows, teacherRows, type CreditLevel } from './report/credit_tables.js';
import { decide, type DecisionOutcome } from './report/decision.js';
import { DASHES, OKABE_ITO, Progress, demoSvg, isInteractive, table, type MethodSeries } from './report/report.js';
import { meanSe, paired, signedPm, type Paired } from './report/stats.js';
import { readWarm, warmKey, writeWarm, type WarmEntry } from './trainer/cache.js';
import type { JobResult, TrainJob } from './trainer/jobs.js';
import { summarise, type CreditMeasurement, type CreditMethod, type MeasureConfig } from './trainer/measure.js';
import { METHODS, METHOD_LABEL, teacherOf, type Method } from './trainer/methods.js';
import { hasKnownCredit } from './trainer/oracle.js';
import { Pool } from './trainer/pool.js';
import { policyConfig, type RunConfig, type RunResult, type WarmStartConfig } from './trainer/train.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '..');

/** The demo's options (the command line, parsed). */
export interface Cli {
  env?: string; quick: boolean; out: string; seeds?: number; steps?: number; methods?: Method[]; lr?: number; groupSize?: number;
  tasks?: number; eps?: number; warmSteps?: number; evalEpisodes?: number; gear?: rl.GearOptions; jobs?: number;
  cacheDir: string; cache: boolean;
  /** Credit measurement: skip it, its warm-start levels (demonstrator noise), batches per level and Monte Carlo rollouts per prefix. */
  credit: boolean; levels?: number[]; batches?: number; rollouts?: number;
  /** Threshold sweep of the measurement (default: a small one). */
  sweep?: MeasureConfig['sweep'];
  /** Evaluate every this many RL steps (default 5; quick 4). */
  evalEvery?: number;
}

/** Per-environment defaults (the settings measured in the design notes). */
export interface EnvDefaults {
  warm: WarmStartConfig; steps: number; lr: number; methods: Method[];
  /** Paired seeds, held-out tasks per evaluation (defaults 10, 400). */
  seeds?: number; evalEpisodes?: number;
  /** Credit measurement levels (demonstrator noise of the warm-starts), for environments with known credit. */
  levels?: number[];
}
// The answer chain's RL learning rate is 0.005: at 0.01 one GRPO seed in eight collapsed to malformed
// answers within a few steps (no reward left to learn from), none at 0.005, which also learned faster.
export const ENV_DEFAULTS: Record<string, EnvDefaults> = {
  'answer-chain': {
    warm: { steps: 1200, batch: 64, eps: 0.35, lr: 0.03, seed: 12345 }, steps: 40, lr: 0.005, seeds: 8, evalEpisodes: 200,
    methods: ['grpo', 'gigpo', 'gear-frozen', 'gear-shuffled', 'gear-lr-frozen', 'oracle'], levels: [0.5, 0.35, 0.2],
  },
  maze: { warm: { steps: 1200, batch: 64, eps: 0.35, lr: 0.03, seed: 12345 }, steps: 60, lr: 0.01, methods: ['grpo', 'gigpo', 'gear', 'gear-frozen'] },
  'maze-filler': { warm: { steps: 1500, batch: 64, eps: 0.35, lr: 0.03, seed: 12345 }, steps: 60, lr: 0.005, methods: ['grpo', 'gigpo', 'gear', 'gear-frozen'] },
  locker: { warm: { steps: 240, batch: 64, eps: 0.2, lr: 0.06, seed: 12345 }, steps: 40, lr: 0.01, methods: ['grpo', 'gigpo', 'gear'] },
};

function usage(): string {
  return readFileSync(join(ROOT, 'examples', 'usage.txt'), 'utf8');
}

/** Parses the command line; throws with a one-line message on a bad option. */
export function parseArgs(argv: string[]): Cli {
  const cli: Cli = { quick: false, out: 'demo-output', cacheDir: join(ROOT, 'node_modules', '.cache', 'gear-rl-demo'), cache: true, credit: true };
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
    else if (a === '--no-credit') cli.credit = false;
    else if (a === '--seeds') cli.seeds = int(val());
    else if (a === '--steps') cli.steps = int(val());
    else if (a === '--group-size') cli.groupSize = int(val());
    else if (a === '--tasks') cli.tasks = int(val());
    else if (a === '--warm-steps') cli.warmSteps = int(val());
    else if (a === '--eval-episodes') cli.evalEpisodes = int(val());
    else if (a === '--jobs') cli.jobs = int(val());
    else if (a === '--batches') cli.batches = int(val());
    else if (a === '--rollouts') cli.rollouts = int(val());
    else if (a === '--levels') {
      const x = val();
      const ls = x.split(',').map(Number);
      if (!ls.length || ls.some((e) => !(e > 0 && e < 1))) throw new Error(`--levels: expected numbers in (0, 1) separated by commas, got ${x}`);
      cli.levels = ls;
    } else if (a === '--gear') {
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

/** A level of the credit measurement, with its warm-start. */
export interface DemoCreditLevel extends CreditLevel {
  /** The warm-start's settings. */
  warm: WarmStartConfig;
  /** Its cache key. */
  key: string;
  /** Its held-out success with the privileged prompt. */
  teacherSuccess: number;
}

/** What a demo run produced. */
export interface DemoOutcome {
  /** The environment. */
  env: Environment;
  /** The printed summary (every table). */
  text: string;
  /** The JSON log written to `results.json`. */
  results: Record<string, unknown>;
  /** The credit measurement per warm-start level (environments with known credit). */
  credit: DemoCreditLevel[];
  /** The declared decision rules' outcome (when their arms ran). */
  decision?: DecisionOutcome;
  /** Every run. */
  runs: Run[];
  /** The learning warm-start. */
  warm: WarmEntry & { config: WarmStartConfig; success: number; cached: boolean; key: string };
  /** Paired differences to GRPO. */
  pairs: { method: Method; auc: Paired; end: Paired }[];
  /** Wall and CPU seconds. */
  seconds: number;
  cpuSeconds: number;
  /** RL settings. */
  rlConfig: Omit<RunConfig, 'method' | 'seed'>;
  /** Methods and seeds. */
  methods: Method[];
  seeds: number;
  /** The printed tables as rows (first = header): learning, credit fidelity, diagnostics, how episodes end. */
  tables: { learning: string[][]; fidelity: string[][]; diagnostics: string[][]; outcomes: string[][] };
}

/**
 * The other credit levels continue the learning warm-start for a few hundred steps with a noisier or a
 * cleaner demonstrator: a lower or higher success rate, with the teachers' reading of the privileged
 * prompt kept (a fresh warm-start per level would cost its full length each).
 */
export const LEVEL_CONTINUATION = { steps: 300, lr: 0.01 };

/** Runs the demo with `cli`'s options: warm-starts, credit measurement, RL runs, tables and files. */
export async function runDemo(cli: Cli): Promise<DemoOutcome> {
  const t0 = performance.now();
  const envName = cli.env ?? (cli.quick ? 'locker' : DEFAULT_ENV);
  const env: Environment = ENVIRONMENTS[envName]!();
  const d = ENV_DEFAULTS[envName]!;
  const methods = cli.methods ?? d.methods;
  const seeds = cli.seeds ?? (cli.quick ? 3 : d.seeds ?? 10);
  const warm: WarmStartConfig = {
    ...d.warm, steps: cli.warmSteps ?? (cli.quick && envName === 'locker' ? 160 : d.warm.steps), ...(cli.eps ? { eps: cli.eps } : {}),
  };
  const evalEpisodes = cli.evalEpisodes ?? (cli.quick ? 200 : d.evalEpisodes ?? 400);
  const base: Omit<RunConfig, 'method' | 'seed'> = {
    steps: cli.steps ?? (cli.quick ? 16 : d.steps), tasksPerStep: cli.tasks ?? 8, groupSize: cli.groupSize ?? 8, updatesPerBatch: 2,
    lr: cli.lr ?? d.lr, maxGradNorm: 1.0, clip: 0.2, evalEvery: cli.evalEvery ?? (cli.quick ? 4 : 5), evalEpisodes,
    teacherEvalEpisodes: Math.max(1, Math.round(evalEpisodes / 2)), emaDecay: 0.95,
    ...(cli.gear ? { gearOptions: cli.gear } : {}),
  };
  const known = hasKnownCredit(env) && cli.credit;
  const levels = known ? cli.levels ?? d.levels ?? [warm.eps] : [];
  const measure: MeasureConfig = {
    batches: cli.batches ?? 8, tasks: base.tasksPerStep, groupSize: base.groupSize, rollouts: cli.rollouts ?? 8, seed: 2024,
    sweep: cli.sweep ?? { peakZ: [1, 2, 3], entropyQuantile: [0.5, 0.8, 0.95] }, bootstrap: 2000,
  };
  const jobs = Math.max(1, Math.min(cli.jobs ?? Math.min(2, availableParallelism()), seeds * methods.length + levels.length));
  mkdirSync(cli.out, { recursive: true });
  const b = rl.backend();
  const pc = policyConfig(env);
  process.stderr.write(`gear-rl demo${cli.quick ? ' (quick)' : ''}: ${env.title}; policy MLP ${pc.hidden1}x${pc.hidden2} ` +
    `(${new Policy(pc).size} parameters); backend ${b.variant}/${b.isa}; ` +
    `${levels.length ? `credit measured at ${levels.length} warm-start levels, ` : ''}${seeds} seeds x ${methods.length} methods on ${jobs} ${jobs > 1 ? 'threads' : 'thread'}\n`);
  const pool = new Pool(jobs);
  try {
    // 1. Supervised warm-starts (cached by a hash of everything they depend on): the learning one, then
    //    the other credit levels as continuations of it.
    const entries = new Map<number, { entry: WarmEntry; cached: boolean; key: string; cfg: WarmStartConfig }>();
    const warmPhase = async (label: string, specs: { eps: number; cfg: WarmStartConfig; key: string; init?: Float32Array[] }[]) => {
      const pending: typeof specs = [];
      for (const sp of specs) {
        const hit = cli.cache ? readWarm(cli.cacheDir, env.name, sp.key) : undefined;
        if (hit) {
          entries.set(sp.eps, { entry: hit, cached: true, key: sp.key, cfg: sp.cfg });
          process.stderr.write(`${label.padEnd(16)} cached (${join(cli.cacheDir, `warm-${env.name}-${sp.key}.json`)})\n`);
        } else pending.push(sp);
      }
      if (!pending.length) return;
      const total = pending.reduce((a, p) => a + p.cfg.steps, 0);
      const wp = new Progress(label, total);
      let done = 0;
      await Promise.all(pending.map((p) => pool.run({
        kind: 'warm', env: envName, warm: p.cfg, evalEpisodes, teacherEvalEpisodes: base.teacherEvalEpisodes!, ...(p.init ? { init: p.init } : {}),
      }, () => { done += 8; wp.update(Math.min(done, total)); }).then((r) => {
        entries.set(p.eps, { entry: r, cached: false, key: p.key, cfg: p.cfg });
        if (cli.cache) {
          try { writeWarm(cli.cacheDir, env.name, p.key, r, { env: env.name, settings: env.settings, warm: p.cfg }); } catch { /* a read-only cache is only slower */ }
        }
      })));
      wp.done(pending.map((p) => `nll ${entries.get(p.eps)!.entry.nll.toFixed(3)}${pending.length > 1 ? ` (ε ${p.eps})` : ''}`).join(', '));
    };
    const mainKey = warmKey({ env: env.name, settings: env.settings, vocab: env.vocab, policy: pc, warm, evalEpisodes });
    await warmPhase('warm-start', [{ eps: warm.eps, cfg: warm, key: mainKey }]);
    const success = (e: WarmEntry) => e.outcomes[env.outcomes[0]!]! / evalEpisodes;
    const main = entries.get(warm.eps)!;
    const ws = main.entry;
    const warmSuccess = success(ws);
    process.stderr.write(`warm-start       held-out success ${warmSuccess.toFixed(3)} (student prompt), ${ws.teacherSuccess.toFixed(3)} (privileged prompt)\n`);
    const others = [...new Set(levels)].filter((e) => e !== warm.eps).map((eps) => {
      const cfg: WarmStartConfig = { ...warm, ...LEVEL_CONTINUATION, steps: Math.min(LEVEL_CONTINUATION.steps, warm.steps), eps };
      return { eps, cfg, init: ws.params, key: warmKey({ env: env.name, settings: env.settings, vocab: env.vocab, policy: pc, warm: cfg, from: mainKey, evalEpisodes }) };
    });
    if (others.length) await warmPhase('credit levels', others);

    // 2. Credit measurement (no training) at every level, and the RL runs, on the pool together.
    const total = seeds * methods.length;
    const bar = new Progress('RL runs', total * base.steps);
    const creditJobs = levels.map((eps) => {
      const e = entries.get(eps)!;
      return pool.run({ kind: 'measure', env: envName, init: e.entry.params, measure }, () => undefined).then((m) => {
        bar.clear();
        process.stderr.write(`credit           ε ${eps}: ${m.batches.length} batches measured (warm-start success ${success(e.entry).toFixed(3)})\n`);
        return { eps, success: success(e.entry), measurement: m, warm: e.cfg, key: e.key, teacherSuccess: e.entry.teacherSuccess } as DemoCreditLevel;
      });
    });
    const tty = isInteractive();
    let stepsDone = 0, runsDone = 0;
    const runs: Run[] = [];
    let gearBatch: GearBatchRecord | undefined;
    const firstGear = methods.find((m) => teacherOf(m));
    const bySeed = new Map<number, Run[]>();
    const tasks: Promise<void>[] = [];
    for (let seed = 1; seed <= seeds; seed++) {
      for (const method of methods) {
        const job: TrainJob = { env: envName, init: ws.params, cfg: { ...base, method, seed }, wantBatch: method === firstGear && seed === 1 };
        tasks.push(pool.run(job, () => { stepsDone++; bar.update(stepsDone, `${runsDone}/${total} runs`); }).then((res: JobResult) => {
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
    const credit = await Promise.all(creditJobs);
    await Promise.all(tasks);
    bar.clear();
    return report({ cli, env, methods, seeds, warm, base, ws, warmFromCache: main.cached, key: main.key, warmSuccess, evalEpisodes, credit, runs,
      gearBatch, firstGear, jobs, t0, measure });
  } finally {
    await pool.close();
  }
}

interface ReportInput {
  cli: Cli; env: Environment; methods: Method[]; seeds: number; warm: WarmStartConfig; base: Omit<RunConfig, 'method' | 'seed'>;
  ws: WarmEntry; warmFromCache: boolean; key: string; warmSuccess: number; evalEpisodes: number; credit: DemoCreditLevel[]; runs: Run[];
  gearBatch: GearBatchRecord | undefined; firstGear: Method | undefined; jobs: number; t0: number; measure: MeasureConfig;
}

/** The credit tables: across levels, then in full at the learning level. */
function creditText(env: Environment, credit: DemoCreditLevel[], learnEps: number): string[] {
  if (!credit.length) return [];
  const views = env.views ?? ['answer'];
  const at = credit.find((c) => c.eps === learnEps) ?? credit[0]!;
  const m = at.measurement;
  const cfg = m.config;
  const cos = (x: CreditMeasurement, k: CreditMethod) => summarise(x, (bb) => bb.methods[k].cosine);
  return [
    `Credit measurement without training: ${cfg.batches} batches of ${cfg.tasks} tasks x ${cfg.groupSize} rollouts per warm-start level; the true`,
    `advantage A*_t = V(prefix + y_t) - V(prefix) of each checkpoint's own policy from ${cfg.rollouts} Monte Carlo rollouts per prefix; teachers =`,
    'the same weights reading a privileged prompt. Mean over batches [95 % bootstrap interval].',
    '',
    'Cosine between each method\'s logit-space gradient sum_t A_t (e_y - p) and the oracle\'s, per warm-start level (demonstrator noise ε, held-out success):',
    '',
    table(levelRows(credit, cos)),
    '',
    'AUROC of the divergence D and of the log-ratio anchor signal s for the departure (first wrong) tokens, per level: against every other',
    'agent token, and among decision tokens only:',
    '',
    table(teacherLevelRows(credit, views)),
    '',
    `At ε ${at.eps} (held-out success ${at.success.toFixed(3)}), in full. Teachers (log-ratio = student minus teacher log-prob of the sampled token, s = max(0, log-ratio)):`,
    '',
    table(teacherRows(m, views)),
    '',
    'Methods: gradient cosine with the oracle, and where the gradient-weighted credit |A|·(1 − p) sits by token label (share of the batch\'s total):',
    '',
    table(methodRows(m)),
    '',
    'Anchors and segments (an anchor inside the departure\'s decisive unit, the departure and the subwords it forces, counts as a hit):',
    '',
    table(anchorRows(m)),
    '',
    'Threshold sensitivity of GEAR (answer teacher): spike threshold peakZ x extension threshold entropyQuantile, with D, then with s:',
    '',
    table(sweepRows(m)),
    '',
    table(sweepRows(m, 'logratio')),
    '',
  ];
}

function report(x: ReportInput): DemoOutcome {
  const { cli, env, methods, seeds, warm, base, ws, warmFromCache, warmSuccess, evalEpisodes, credit, runs, gearBatch, firstGear, jobs, t0 } = x;
  const of = (m: Method) => runs.filter((r) => r.method === m).sort((a, b) => a.seed - b.seed);
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
  const decisionArms = methods.includes('gear-frozen') && methods.includes('gear-shuffled');
  const decision = decisionArms || methods.includes('oracle')
    ? decide((m) => (methods.includes(m as Method) ? of(m as Method).map((r) => r.auc) : undefined), (m) => METHOD_LABEL[m as Method] ?? m)
    : undefined;

  const fidRows = [['method', 'wrong decisive (signed)', 'right decisive (signed)', 'neutral |A| share', 'ρ(|A|, decisive)',
    'wrong |A|(1-p) (signed)', 'right |A|(1-p) (signed)', 'neutral |A|(1-p) share']];
  const fidelity = new Map<Method, Record<'wrong' | 'right' | 'neutral' | 'spearman' | 'gradWrong' | 'gradRight' | 'gradNeutral', number[]>>();
  for (const m of methods) {
    const rs = of(m);
    const get = (k: keyof RunResult['log'][number]['fidelity']) => rs.map((r) => stepMean(r, (l) => l.fidelity[k]));
    const f = {
      wrong: get('wrong'), right: get('right'), neutral: get('neutral'), spearman: get('spearman'),
      gradWrong: get('gradWrong'), gradRight: get('gradRight'), gradNeutral: get('gradNeutral'),
    };
    fidelity.set(m, f);
    fidRows.push([METHOD_LABEL[m], spm(f.wrong), spm(f.right), pmSe(f.neutral), spm(f.spearman), spm(f.gradWrong), spm(f.gradRight), pmSe(f.gradNeutral)]);
  }

  const diagRows = [['method', 'zero-var groups', 'anchor rows >1', '... differing returns', 'spikes/episode', 'spikes on decisive', 'segment length', 'weight range', 'teacher success 0 → end']];
  for (const m of methods) {
    const rs = of(m);
    const isGear = teacherOf(m) !== undefined;
    const weighted = isGear || m.startsWith('oracle');
    const g = (k: string) => rs.map((r) => stepMean(r, (l) => l.advMetrics[k]));
    const wmin = Math.min(...rs.flatMap((r) => r.log.map((l) => l.advMetrics.weightMin ?? Infinity)));
    const wmax = Math.max(...rs.flatMap((r) => r.log.map((l) => l.advMetrics.weightMax ?? -Infinity)));
    diagRows.push([METHOD_LABEL[m], pmSe(rs.map((r) => stepMean(r, (l) => l.zeroVarianceGroups))),
      pmSe(rs.map((r) => stepMean(r, (l) => l.anchorGrouped))), pmSe(rs.map((r) => stepMean(r, (l) => l.anchorInformative))),
      isGear ? pmSe(g('spikesPerEpisode'), 2) : '-', isGear ? pmSe(g('spikeDecisiveShare')) : '-',
      isGear ? pmSe(rs.map((r) => stepMean(r, (l) => (l.advMetrics.segments ? l.advMetrics.meanSegmentLength : NaN))), 2) : '-',
      weighted && Number.isFinite(wmin) ? `${wmin.toFixed(2)}–${wmax.toFixed(2)}` : '-',
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
    '',
    ...creditText(env, credit, warm.eps),
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
    ...(decision ? [
      'Decision rule, declared before the run: GEAR (frozen answer teacher) helps only if its AUC beats GRPO\'s by more than 2 se AND beats its',
      'shuffled-divergence control\'s by more than 2 se; oracle weights (the same family on the true departure segments) are the ceiling check;',
      'if they tie, the second hypothesis is a stronger family (α 3, no per-row normalisation). H3: GEAR with the log-ratio anchor signal',
      '(anchorSignal \'logratio\') helps only if it beats GRPO and its own shuffled control by more than 2 se each, is better than D only if it',
      'beats GEAR with D by more than 2 se, and is recommended only if both (read when its arms run: npm run study runs them all).',
      '',
      ...decision.lines,
      '',
    ] : []),
    'Credit fidelity (mean over steps, then mean ± se over seeds): signed advantage mass on wrong decisive tokens (should be < 0) and on right',
    'decisive tokens (should be > 0), |advantage| mass on neutral tokens, each over the batch\'s total |advantage|; ρ = Spearman correlation',
    'between |advantage| and decisiveness over the agent tokens; then the same three shares weighted by the gradient a token can take,',
    '|A|·(1 − p) with p the probability of the sampled token.',
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

  // Files.
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
  writeFileSync(join(cli.out, 'learning-curves.svg'), demoSvg(series, `${env.name}: ${seeds} paired seeds`));
  writeFileSync(join(cli.out, 'summary.txt'), `${text}\n`);
  const written = ['summary.txt', 'results.json', 'learning-curves.svg'];
  if (gearBatch) {
    saveBatch(join(cli.out, 'gear-batch.json'), gearBatch);
    writeReport(join(cli.out, 'gear-report.html'), gearBatch, { title: `GEAR batch: ${env.title}, ${METHOD_LABEL[firstGear!]} seed 1, step 0` });
    written.push('gear-batch.json', 'gear-report.html');
  }
  const b = rl.backend();
  const results: Record<string, unknown> = {
    format: 'gear-rl-demo', version: 3, quick: cli.quick, argv: process.argv.slice(2),
    environment: { name: env.name, title: env.title, settings: env.settings, vocab: env.vocab, outcomes: env.outcomes, views: env.views },
    policy: policyConfig(env), backend: b, jobs,
    warmStart: { config: warm, nll: ws.nll, heldOutSuccess: warmSuccess, heldOutOutcomes: ws.outcomes, teacherSuccess: ws.teacherSuccess, cached: warmFromCache, key: x.key },
    credit: credit.map((c) => ({ eps: c.eps, success: c.success, teacherSuccess: c.teacherSuccess, warm: c.warm, key: c.key, measurement: c.measurement })),
    rl: base, methods, seeds,
    paired: pairs.map((p) => ({ method: p.method, auc: p.auc, endSuccess: p.end })),
    ...(decision ? { decision } : {}),
    fidelity: Object.fromEntries([...fidelity].map(([m, f]) => [m, f])),
    runs: runs.sort((a, c) => a.seed - c.seed || methods.indexOf(a.method) - methods.indexOf(c.method))
      .map((r) => ({ method: r.method, seed: r.seed, curve: r.curve, auc: r.auc, seconds: r.seconds, finalOutcomes: r.finalOutcomes, log: r.log })),
    totalSeconds, cpuSeconds,
  };
  writeFileSync(join(cli.out, 'results.json'), JSON.stringify(results, (_k, v) => (typeof v === 'number' && !Number.isFinite(v) ? null : v), 1));
  process.stderr.write(`wrote ${written.map((f) => join(cli.out, f)).join(', ')}\n`);
  return {
    env, text, results, credit, ...(decision ? { decision } : {}), runs,
    warm: { ...ws, config: warm, success: warmSuccess, cached: warmFromCache, key: x.key }, pairs, seconds: totalSeconds, cpuSeconds,
    rlConfig: base, methods, seeds, tables: { learning: learnRows, fidelity: fidRows, diagnostics: diagRows, outcomes: endRows },
  };
}

async function main(): Promise<void> {
  let cli: Cli;
  try {
    cli = parseArgs(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`demo: ${(e as Error).message}\n`);
    process.exit(2);
  }
  await runDemo(cli);
}

// Run as a script (`node dist-examples/demo.js`, or through the launcher, which imports it), not when the study imports runDemo.
const entry = process.argv[1] ? resolve(process.argv[1]) : '';
if (entry === fileURLToPath(import.meta.url) || entry.endsWith(join('examples', 'run-demo.mjs'))) {
  main().catch((e) => {
    process.stderr.write(`demo: ${(e as Error).stack ?? e}\n`);
    process.exit(1);
  });
}
