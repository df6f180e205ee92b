/**
 * gear-rl demo: trains a small policy by critic-free RL on a multi-turn tool-use task and compares
 * GRPO, GiGPO and GEAR (and, in the full run, Dr.GRPO and RLOO) over several seeds.
 *
 *     npm run demo                 # full comparison (5 methods x 5 seeds)
 *     npm run demo -- --quick      # 3 methods x 3 seeds, short runs (what the tests run)
 *
 * Options: --out <dir> (default demo-output), --seeds <n>, --steps <n>, --methods grpo,gigpo,gear,...,
 * --lr <x>, --tasks <n> (tasks per step), --group-size <n> (rollouts per task), --eps <x> (noise of the
 * warm-start demonstrator), --gear '<json>' (GEAR options, e.g. '{"ablation":"token_only"}').
 *
 * Writes to the output directory: results.json (settings, warm-start, every step's metrics of every
 * run, summary), learning-curves.svg, gear-batch.json (one GEAR batch in the visualiser's format:
 * `npx gear-rl visualize gear-batch.json -o report.html`) and gear-report.html.
 *
 * @module
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as rl from 'gear-rl';
import { LOCKERS, MAX_TURNS, VOCAB } from './env/lockers.js';
import { METHODS, METHOD_LABEL, type Method } from './trainer/methods.js';
import { POLICY, evaluateOutcomes, train, warmStart, type RunConfig, type RunResult, type WarmStartConfig } from './trainer/train.js';
import { tokenTexts, type PackedBatch } from './trainer/rollout.js';
import type { AdvantageResult } from './trainer/methods.js';
import { Progress, learningCurveSvg, meanStd, pm, table } from './report/report.js';

const COLORS: Record<Method, string> = { grpo: '#1f77b4', gigpo: '#2ca02c', gear: '#d62728', drgrpo: '#9467bd', rloo: '#ff7f0e' };

interface Cli {
  quick: boolean; out: string; seeds?: number; steps?: number; methods?: Method[];
  lr?: number; groupSize?: number; tasks?: number; eps?: number; gear?: rl.GearOptions;
}

function parseArgs(argv: string[]): Cli {
  const cli: Cli = { quick: false, out: 'demo-output' };
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
    else if (a === '--out') cli.out = val();
    else if (a === '--seeds') cli.seeds = int(val());
    else if (a === '--steps') cli.steps = int(val());
    else if (a === '--group-size') cli.groupSize = int(val());
    else if (a === '--gear') {
      const x = val();
      let o: unknown;
      try { o = JSON.parse(x); } catch { throw new Error(`--gear: expected a JSON object of GEAR options, got ${x}`); }
      if (typeof o !== 'object' || o === null || Array.isArray(o)) throw new Error(`--gear: expected a JSON object of GEAR options, got ${x}`);
      rl.resolveGearOptions(o as rl.GearOptions); // validates names and ranges now, not after the warm-start
      cli.gear = o as rl.GearOptions;
    }
    else if (a === '--tasks') cli.tasks = int(val());
    else if (a === '--lr' || a === '--eps') {
      const x = Number(val());
      if (!(x > 0 && x < 1)) throw new Error(`${a}: expected a number in (0, 1)`);
      if (a === '--lr') cli.lr = x; else cli.eps = x;
    }
    else if (a === '--methods') {
      cli.methods = val().split(',').map((m) => {
        if (!(METHODS as readonly string[]).includes(m)) throw new Error(`--methods: expected some of ${METHODS.join(',')}, got ${m}`);
        return m as Method;
      });
    } else if (a === '--help' || a === '-h') {
      process.stdout.write('usage: demo [--quick] [--out dir] [--seeds n] [--steps n] [--methods grpo,gigpo,gear,drgrpo,rloo]\n' +
        '            [--lr x] [--tasks n] [--group-size n] [--eps x (warm-start demonstrator noise)]\n' +
        '            [--gear \'{"alpha":2,"signMode":"negative_only",...}\' (GEAR options)]\n');
      process.exit(0);
    } else throw new Error(`unknown option ${a} (try --help)`);
  }
  return cli;
}

function main(): void {
  let cli: Cli;
  try {
    cli = parseArgs(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`demo: ${(e as Error).message}\n`);
    process.exit(2);
  }
  const t0 = performance.now();
  const methods = cli.methods ?? (cli.quick ? (['grpo', 'gigpo', 'gear'] as Method[]) : [...METHODS]);
  const seeds = cli.seeds ?? (cli.quick ? 3 : 5);
  const warm: WarmStartConfig = { steps: cli.quick ? 160 : 240, batch: 64, eps: cli.eps ?? 0.2, lr: 0.06, seed: 12345 };
  const base: Omit<RunConfig, 'method' | 'seed'> = {
    steps: cli.steps ?? (cli.quick ? 16 : 40), tasksPerStep: cli.tasks ?? 8, groupSize: cli.groupSize ?? 8, updatesPerBatch: 2,
    lr: cli.lr ?? 0.01, maxGradNorm: 1.0, clip: 0.2, evalEvery: cli.quick ? 4 : 5, evalEpisodes: cli.quick ? 200 : 400,
    ...(cli.gear ? { gearOptions: cli.gear } : {}),
  };
  mkdirSync(cli.out, { recursive: true });
  const b = rl.backend();
  process.stderr.write(`gear-rl demo${cli.quick ? ' (quick)' : ''}: locker search (${LOCKERS} lockers, ${MAX_TURNS} turns, vocab ${VOCAB.length}); ` +
    `policy MLP ${POLICY.hidden1}x${POLICY.hidden2}; backend ${b.variant}/${b.isa}, ${b.threads} threads\n`);

  // 1. Supervised warm-start: the checkpoint every method starts from.
  const wp = new Progress('warm-start', warm.steps);
  const ws = warmStart(warm, (s, loss) => { if (s % 8 === 7) wp.update(s + 1, `nll ${loss.toFixed(3)}`); });
  const warmOutcomes = evaluateOutcomes(ws.policy, base.evalEpisodes);
  const warmSuccess = warmOutcomes.win / base.evalEpisodes;
  wp.done(`nll ${ws.loss.toFixed(3)}, held-out success ${warmSuccess.toFixed(3)}`);
  const init = ws.policy.snapshot();

  // 2. RL runs: every method x seed from the same checkpoint and the same task streams per seed.
  const runs: (RunResult & { method: Method; seed: number })[] = [];
  let gearBatch: { batch: PackedBatch; adv: AdvantageResult } | undefined;
  for (const method of methods) {
    for (let seed = 1; seed <= seeds; seed++) {
      const p = new Progress(`${METHOD_LABEL[method]} seed ${seed}`, base.steps);
      let lastEval = NaN;
      const res = train(init, { ...base, method, seed }, {
        onStep: (l) => {
          if (l.evalSuccess !== undefined) lastEval = l.evalSuccess;
          p.update(l.step + 1, `reward ${l.trainReward.toFixed(2)} success ${lastEval.toFixed(2)}`);
        },
        onFirstBatch: (batch, adv) => { if (method === 'gear' && seed === 1) gearBatch = { batch, adv }; },
      });
      p.done(`held-out success ${res.curve[0]!.success.toFixed(3)} -> ${res.curve[res.curve.length - 1]!.success.toFixed(3)}, AUC ${res.auc.toFixed(3)}`);
      runs.push({ ...res, method, seed });
    }
  }

  // 3. Table.
  const rows = [['method', 'success (end)', 'gain vs warm-start', 'AUC', 'AUC - GRPO (paired)', 'answer credit', 'wall s/run']];
  const bySeed = (m: Method) => runs.filter((r) => r.method === m).sort((x, y) => x.seed - y.seed);
  const summary = methods.map((m) => {
    const rs = bySeed(m);
    // Same seed = same task stream, so the per-seed AUC difference to GRPO is a paired comparison.
    const ref = methods.includes('grpo') ? bySeed('grpo') : undefined;
    const paired = ref && m !== 'grpo' ? rs.map((r, i) => r.auc - ref[i]!.auc) : undefined;
    const fin = rs.map((r) => r.curve[r.curve.length - 1]!.success);
    const auc = rs.map((r) => r.auc);
    const secs = rs.map((r) => r.seconds);
    const credit = rs.map((r) => meanStd(r.log.map((l) => l.answerCreditShare)).mean);
    const signed = (xs: number[]) => { const { mean, std } = meanStd(xs); return `${mean >= 0 ? '+' : '-'}${Math.abs(mean).toFixed(3)} ± ${std.toFixed(3)}`; };
    rows.push([METHOD_LABEL[m], pm(fin), pm(fin.map((f) => f - warmSuccess)), pm(auc), paired ? signed(paired) : '-',
      pm(credit), meanStd(secs).mean.toFixed(1)]);
    return {
      method: m, label: METHOD_LABEL[m], seeds: rs.length, finalSuccess: meanStd(fin), gain: meanStd(fin.map((f) => f - warmSuccess)),
      auc: meanStd(auc), aucMinusGrpo: paired ? meanStd(paired) : null, answerCreditShare: meanStd(credit), secondsPerRun: meanStd(secs).mean,
    };
  });
  // How held-out episodes end: which mistakes training removed.
  const kinds = ['win', 'wrong_answer', 'guess', 'out_of_turns'] as const;
  const share = (o: Record<(typeof kinds)[number], number>) => kinds.map((k) => (o[k] / base.evalEpisodes).toFixed(3));
  const endRows = [['checkpoint', ...kinds], ['warm-start', ...share(warmOutcomes)]];
  for (const m of methods) {
    const rs = runs.filter((r) => r.method === m);
    const sum = Object.fromEntries(kinds.map((k) => [k, rs.reduce((a, r) => a + r.finalOutcomes[k], 0) / rs.length])) as Record<(typeof kinds)[number], number>;
    endRows.push([`${METHOD_LABEL[m]} (end)`, ...share(sum)]);
  }
  const total = (performance.now() - t0) / 1000;
  const text = [
    `Held-out success rate (one sampled episode on each of ${base.evalEpisodes} held-out tasks), mean ± std over ${seeds} seeds;`,
    `warm-start checkpoint: ${warmSuccess.toFixed(3)}; ${base.steps} RL steps of ${base.tasksPerStep} tasks x ${base.groupSize} rollouts.`,
    'AUC - GRPO (paired) = per-seed difference to GRPO trained on the same task stream, mean ± std over seeds;',
    'answer credit = share of the total |advantage| of a batch on the answer locker tokens, mean over steps.',
    '',
    table(rows),
    '',
    'How held-out episodes end (share; wrong_answer = named a wrong locker after seeing the key,',
    'guess = answered wrongly without having seen it, out_of_turns = never answered), mean over seeds:',
    '',
    table(endRows),
    '',
    `total wall time ${total.toFixed(1)} s`,
  ].join('\n');
  process.stdout.write(`\n${text}\n`);

  // 4. Files.
  const steps = runs[0]!.curve.map((c) => c.step);
  const svg = learningCurveSvg(methods.map((m) => ({
    label: METHOD_LABEL[m], color: COLORS[m], steps,
    perSeed: runs.filter((r) => r.method === m).map((r) => r.curve.map((c) => c.success)),
  })), `Locker search: held-out success vs RL step (${seeds} seeds)`);
  writeFileSync(join(cli.out, 'learning-curves.svg'), svg);
  writeFileSync(join(cli.out, 'summary.txt'), text + '\n');
  writeFileSync(join(cli.out, 'results.json'), JSON.stringify({
    format: 'gear-rl-demo', version: 1, quick: cli.quick, argv: process.argv.slice(2),
    environment: { name: 'locker-search', lockers: LOCKERS, maxTurns: MAX_TURNS, vocab: [...VOCAB] },
    policy: POLICY, backend: b,
    warmStart: { config: warm, nll: ws.loss, heldOutSuccess: warmSuccess, heldOutOutcomes: warmOutcomes },
    rl: base, summary,
    runs: runs.map((r) => ({ method: r.method, seed: r.seed, curve: r.curve, auc: r.auc, seconds: r.seconds, finalOutcomes: r.finalOutcomes, log: r.log })),
    totalSeconds: total,
  }, null, 1));

  // 5. GEAR token visualiser for the first GEAR batch (the library's saved-batch format and HTML report).
  if (gearBatch?.adv.gear) {
    const { batch, adv } = gearBatch;
    const record: rl.GearBatchRecord = {
      ...adv.gear!.input, result: adv.gear!.result, tokens: tokenTexts(batch),
      rowLabels: batch.trajectories.map((t) => `task ${t.group} · key in L${t.task.answer + 1} · not L${t.task.clue + 1} · reward ${t.reward}`),
      ...(cli.gear ? { options: cli.gear } : {}),
      meta: { run: 'GEAR seed 1', step: 0, environment: 'locker-search' },
    };
    rl.saveBatch(join(cli.out, 'gear-batch.json'), record);
    rl.writeReport(join(cli.out, 'gear-report.html'), record);
  }
  process.stderr.write(`wrote ${['results.json', 'learning-curves.svg', 'summary.txt', 'gear-batch.json', 'gear-report.html'].map((f) => join(cli.out, f)).join(', ')}\n`);
}

main();
