/**
 * The answer-chain study (`npm run study`): the main job's experiment at full size. Credit measured
 * without training at three warm-start levels (32 batches each, 32 Monte Carlo rollouts per prefix, the
 * full threshold sweep), then the learning comparison with every arm of the declared decision rules
 * (H1: GEAR against GRPO and against its shuffled control; the oracle ceiling; H2: the stronger family;
 * H3: GEAR with the log-ratio anchor signal against GRPO, its shuffled control and GEAR with D, for the
 * frozen and the self teacher and in the stronger family), GiGPO and GEAR with the self teacher, over 32
 * paired seeds. Writes a Markdown report and the raw results as JSON.
 *
 * @module
 */
import { levelRows, mdTable, teacherLevelRows, teacherRows, methodRows, anchorRows, sweepRows } from '../report/credit_tables.js';
import { DECISION_SE } from '../report/decision.js';
import { runDemo, type Cli, type DemoOutcome } from '../demo.js';
import { summarise, type CreditMeasurement, type CreditMethod } from '../trainer/measure.js';
import type { Method } from '../trainer/methods.js';

/** The arms of the study, in display order. */
export const CHAIN_STUDY_METHODS: Method[] = ['grpo', 'gigpo', 'gear-frozen', 'gear-shuffled', 'oracle', 'oracle-strong', 'gear-strong', 'gear-strong-shuffled', 'gear',
  'gear-lr-frozen', 'gear-lr-shuffled', 'gear-lr', 'gear-lr-self-shuffled', 'gear-lr-strong', 'gear-lr-strong-shuffled'];

/** Settings of the answer-chain study (`quick`: a smoke test of the same code path). */
export function chainStudyCli(opts: { quick?: boolean; seeds?: number; steps?: number; workers?: number; out: string; cacheDir?: string }): Cli {
  const quick = opts.quick ?? false;
  return {
    env: 'answer-chain', quick: false, out: opts.out, cache: true, credit: true,
    cacheDir: opts.cacheDir ?? parseArgsCacheDir(),
    seeds: opts.seeds ?? (quick ? 2 : 32), steps: opts.steps ?? (quick ? 2 : 60), methods: CHAIN_STUDY_METHODS,
    evalEpisodes: quick ? 20 : 400, evalEvery: quick ? 1 : 10, batches: quick ? 1 : 32, rollouts: quick ? 2 : 32,
    sweep: quick ? { peakZ: [2], entropyQuantile: [0.8] } : { peakZ: [1, 1.5, 2, 2.5, 3], entropyQuantile: [0.5, 0.8, 0.95] },
    ...(quick ? { warmSteps: 40, tasks: 2, groupSize: 4 } : {}),
    ...(opts.workers ? { jobs: opts.workers } : {}),
  };
}

function parseArgsCacheDir(): string {
  // The demo's default cache (node_modules/.cache/gear-rl-demo): the study reuses the main job's warm-starts.
  return new URL('../../node_modules/.cache/gear-rl-demo', import.meta.url).pathname;
}

/** Runs the study. */
export async function runChainStudy(cli: Cli): Promise<DemoOutcome> {
  return runDemo(cli);
}

/** The study's Markdown report. */
export function chainStudyReport(o: DemoOutcome, command: string, machine: string): string {
  const rlc = o.rlConfig;
  const levels = o.credit;
  const mid = levels.find((l) => l.eps === o.warm.config.eps) ?? levels[0]!;
  const m = mid.measurement;
  const views = o.env.views ?? ['answer'];
  const cos = (x: CreditMeasurement, k: CreditMethod) => summarise(x, (b) => b.methods[k].cosine);
  const d = o.decision;
  const lines = [
    '# GEAR on the answer chain: credit against the true advantage, and learning with a declared decision rule', '',
    `Command: \`${command}\``, '',
    `Machine: ${machine}; ${o.seconds.toFixed(0)} s of wall time, ${o.cpuSeconds.toFixed(0)} s of CPU time. Every number below is deterministic for the seeds.`, '',
    `Task: ${o.env.title}. Outcome-only reward; each digit is a decision subword followed by subwords the grammar forces; two free filler words`,
    'precede each digit. Teachers: the same weights reading a privileged prompt that shows the answer (GEAR\'s teacher), the full reference',
    'solution (the answer and one reference response\'s filler words: OPSD\'s teacher), or only those filler words (privileged, irrelevant to the reward).', '',
    `Warm-start: ${o.warm.config.steps} steps of ${o.warm.config.batch} demonstrations (demonstrator noise ${o.warm.config.eps}), held-out success ` +
      `${o.warm.success.toFixed(3)} with the student's prompt, ${o.warm.teacherSuccess.toFixed(3)} with the answer. Other credit levels: ` +
      levels.filter((l) => l !== mid).map((l) => `noise ${l.eps} (${l.warm.steps} more steps from it, success ${l.success.toFixed(3)})`).join(', ') + '.', '',
    '## Decision rule (declared in code before the run: `examples/report/decision.ts`)', '',
    `* **H1.** GEAR (answer teacher, frozen at the warm-start) helps only if its AUC beats GRPO's by more than ${DECISION_SE} standard errors **and**`,
    `  beats its shuffled-divergence control's (the same divergence values permuted within each row) by more than ${DECISION_SE} se, paired over seeds.`,
    '* **Ceiling.** Oracle weights (the same weight family, 1 + α on the true departure segment, mean one per row) against GRPO.',
    '* **H2**, read if the ceiling ties: the stronger family (α = 3, no per-row normalisation): oracle weights of that family against GRPO,',
    '  and GEAR of that family against GRPO and against its own shuffled control. Its arms run in every study, whatever H1 shows.',
    `* **H3**, the log-ratio anchor signal (\`anchorSignal: 'logratio'\`, s = max(0, ℓ_student − ℓ_teacher) of the sampled token), per teacher`,
    `  (frozen answer teacher, the primary test; self teacher): it helps only if its AUC beats GRPO's and its own shuffled control's (the`,
    `  log-ratio values permuted within each row) by more than ${DECISION_SE} se each; it is better than D only if it beats GEAR with D (same teacher)`,
    `  by more than ${DECISION_SE} se; it is recommended for a teacher only if both hold. The same tests in H2's stronger family are reported.`, '',
    '## Credit without training', '',
    `${m.config.batches} batches of ${m.config.tasks} tasks × ${m.config.groupSize} rollouts per level; true advantage A*_t = V(prefix + y_t) − V(prefix) of the`,
    `checkpoint's own policy, ${m.config.rollouts} conditional Monte Carlo rollouts per prefix. Mean over batches [95 % percentile bootstrap interval over batches].`, '',
    'Cosine between each method\'s logit-space gradient Σ_t Â_t (e_{y_t} − p_t) and the oracle\'s Σ_t A*_t (e_{y_t} − p_t):', '',
    mdTable(levelRows(levels, cos)), '',
    'AUROC of the divergence D and of the log-ratio anchor signal s for the departure tokens (the first token after which success is impossible),',
    'against every other agent token and among decision tokens only (departures at a decision against right decisions):', '',
    mdTable(teacherLevelRows(levels, views)), '',
    `### At noise ${mid.eps} (held-out success ${mid.success.toFixed(3)})`, '',
    'Teachers (log-ratio: the student\'s minus the teacher\'s log-prob of the sampled token; s = max(0, log-ratio); mean D and mean s per label):', '',
    mdTable(teacherRows(m, views)), '',
    'Where each method puts the gradient-weighted credit |Â|·(1 − p) (share of the batch total, by token label), and its gradient cosine:', '',
    mdTable(methodRows(m)), '',
    'Anchors and segments (an anchor inside the departure\'s decisive unit, the departure and the subwords it forces, is a hit):', '',
    mdTable(anchorRows(m)), '',
    'Threshold sensitivity of GEAR (answer teacher): spike threshold `peakZ` × extension threshold `entropyQuantile`, with the divergence D:', '',
    mdTable(sweepRows(m)), '',
    'The same with the log-ratio anchor signal s:', '',
    mdTable(sweepRows(m, 'logratio')), '',
    '## Learning', '',
    `${rlc.steps} RL steps × ${rlc.tasksPerStep} tasks × ${rlc.groupSize} rollouts from the warm-start, AdamW lr ${rlc.lr}, PPO clip ${rlc.clip}, token-mean; held-out`,
    `success on ${rlc.evalEpisodes} tasks every ${rlc.evalEvery} steps; AUC = trapezoid mean of the curve; ${o.seeds} paired seeds (same tasks and sampling`,
    'streams per seed for every method). Mean ± se over seeds; Δ = paired difference to GRPO.', '',
    mdTable(o.tables.learning), '',
    ...(d ? ['### Decision', '', ...d.lines.map((l) => `* ${l}`), ''] : []),
    'Credit fidelity during training (mean over steps, mean ± se over seeds; decisive = the departure (wrong) and right decisions):', '',
    mdTable(o.tables.fidelity), '',
    'Diagnostics:', '',
    mdTable(o.tables.diagnostics), '',
    'How held-out episodes end (share, mean over seeds):', '',
    mdTable(o.tables.outcomes), '',
  ];
  return lines.join('\n');
}
