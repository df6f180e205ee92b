/**
 * The training loops of the demo: the supervised warm-start and the critic-free RL run, both through
 * the library's public API (log-probs and their backward, advantages, the clipped policy loss,
 * gradient clipping, AdamW and a learning-rate schedule).
 *
 * @module
 */
import * as rl from 'gear-rl';
import { MAX_LEN, PROMPT_TOKENS, VOCAB, demoEpisode, makeTask, tok, type Task } from '../env/lockers.js';
import { Rng, deriveSeed } from '../env/rng.js';
import { Policy, type PolicyConfig, type RowSpec } from '../model/policy.js';
import { advantages, type AdvantageResult, type Method } from './methods.js';
import { collect, outcome, pack, playEpisode, type Outcome, type PackedBatch } from './rollout.js';

/** The demo network's shape. */
export const POLICY: PolicyConfig = { vocab: VOCAB.length, positions: MAX_LEN, hidden1: 32, hidden2: 32 };

/** Held-out evaluation tasks come from this seed range; training tasks never do. */
export const EVAL_SEED_BASE = 1_000_000_000;

/** Settings of the supervised warm-start. */
export interface WarmStartConfig {
  /** Optimizer steps. */
  steps: number;
  /** Demonstrations per step (half with the ground truth in context, half without). */
  batch: number;
  /** Demonstrator noise (see `demoTurn`). */
  eps: number;
  /** Peak learning rate (linear warmup, cosine decay). */
  lr: number;
  /** Seed of the initial weights and the demonstrations. */
  seed: number;
}

/** Logits over the rows of a forward pass, in the library's `Logits` form. */
function logitsOf(data: Float32Array, rows: number, vocab: number): rl.Logits {
  return { data, rows, vocab };
}

/** Flattens the response tokens of `spec` into target ids and a 0/1 mask of agent tokens. */
function demoRows(demos: ReturnType<typeof demoEpisode>[]): { spec: RowSpec; targets: Int32Array; mask: Uint8Array } {
  // Rows from the first response position on: the prompt is given, never predicted.
  const spec: RowSpec = { seqs: demos.map((d) => d.tokens), from: demos.map(() => PROMPT_TOKENS), to: demos.map((d) => d.tokens.length) };
  const targets: number[] = [], mask: number[] = [];
  for (const d of demos) for (let t = PROMPT_TOKENS; t < d.tokens.length; t++) { targets.push(d.tokens[t]!); mask.push(d.agentMask[t]!); }
  return { spec, targets: Int32Array.from(targets), mask: Uint8Array.from(mask) };
}

/**
 * Supervised warm-start (behaviour cloning of a noisy demonstrator): mean negative log-likelihood of
 * the demonstrated agent tokens, half of the demonstrations with the ground truth in context (the
 * teacher's view), half without. Returns the trained policy and the final loss.
 */
export function warmStart(cfg: WarmStartConfig, onStep?: (step: number, loss: number) => void): { policy: Policy; loss: number } {
  const policy = new Policy(POLICY, undefined, deriveSeed(cfg.seed, 1));
  const opt = new rl.AdamW(policy.params, { lr: cfg.lr, weightDecay: 0 });
  const schedule = rl.cosineSchedule({ peak: cfg.lr, warmupSteps: Math.round(cfg.steps * 0.05), totalSteps: cfg.steps, floor: 0.1 * cfg.lr });
  const rng = new Rng(deriveSeed(cfg.seed, 2));
  let loss = NaN;
  for (let step = 0; step < cfg.steps; step++) {
    const demos = [];
    for (let i = 0; i < cfg.batch; i++) demos.push(demoEpisode(makeTask(rng.int(EVAL_SEED_BASE)), rng, cfg.eps, i % 2 === 1));
    const { spec, targets, mask } = demoRows(demos);
    const fwd = policy.forward(spec);
    const logits = logitsOf(fwd.logits, fwd.rows, POLICY.vocab);
    const stats = rl.tokenStats(logits, targets);
    let count = 0;
    for (const m of mask) count += m;
    const gLogprob = new Float32Array(fwd.rows);
    loss = 0;
    for (let i = 0; i < fwd.rows; i++) if (mask[i]) { gLogprob[i] = -1 / count; loss -= stats.logprob[i]! / count; }
    const dlogits = rl.tokenStatsBackward(logits, targets, { logprob: gLogprob }, { stats, inPlace: true });
    policy.zeroGrad();
    policy.backward(fwd, dlogits);
    rl.clipGradNorm(policy.grads, 1.0);
    opt.lr = schedule(step);
    opt.step(policy.grads);
    onStep?.(step, loss);
  }
  return { policy, loss };
}

/** Settings of one RL run. */
export interface RunConfig {
  /** Advantage method. */
  method: Method;
  /** Run seed (task stream and token sampling; methods with the same seed see the same tasks). */
  seed: number;
  /** RL steps (one batch of rollouts each). */
  steps: number;
  /** Distinct tasks per step. */
  tasksPerStep: number;
  /** Rollouts per task (the group size G). */
  groupSize: number;
  /** Policy-gradient updates per batch (the first is on-policy, later ones use the PPO ratio). */
  updatesPerBatch: number;
  /** Peak learning rate. */
  lr: number;
  /** Gradient-norm clip. */
  maxGradNorm: number;
  /** PPO clip range. */
  clip: number;
  /** Evaluate every this many steps (and at step 0 and the end). */
  evalEvery: number;
  /** Held-out tasks per evaluation. */
  evalEpisodes: number;
  /** GEAR options for the `gear` method (library defaults when omitted). */
  gearOptions?: rl.GearOptions;
}

/** Metrics of one RL step (the JSON log's rows). */
export interface StepLog {
  /** Step index (0-based). */
  step: number;
  /** Learning rate used. */
  lr: number;
  /** Mean outcome reward of the batch's rollouts. */
  trainReward: number;
  /** Policy loss of the last update. */
  loss: number;
  /** Gradient norm before clipping (last update). */
  gradNorm: number;
  /** Mean entropy of the agent tokens under the rollout policy. */
  entropy: number;
  /** Mean |advantage| over agent tokens. */
  advAbsMean: number;
  /** Share of the batch's total |advantage| that sits on answer lockers (the token after `answer`): where the credit goes. */
  answerCreditShare: number;
  /** Metrics reported by `policyLoss` (last update). */
  lossMetrics: Record<string, number>;
  /** Method-specific advantage diagnostics. */
  advMetrics: Record<string, number>;
  /** How the batch's episodes ended (counts per outcome). */
  outcomes: Record<Outcome, number>;
  /** Held-out success rate after this step, when evaluated. */
  evalSuccess?: number;
  /** Milliseconds spent on this step (without evaluation). */
  ms: number;
}

/** A finished run. */
export interface RunResult {
  /** Settings. */
  config: RunConfig;
  /** Evaluation points: the step count they were taken after, and the held-out success rate. */
  curve: { step: number; success: number }[];
  /** Every step's metrics. */
  log: StepLog[];
  /** Wall time in seconds. */
  seconds: number;
  /** Area under the learning curve: trapezoid mean of `curve` over the steps (0..1). */
  auc: number;
  /** How the held-out episodes end after training. */
  finalOutcomes: Record<Outcome, number>;
}

function countOutcomes(xs: Outcome[]): Record<Outcome, number> {
  const c: Record<Outcome, number> = { win: 0, wrong_answer: 0, guess: 0, out_of_turns: 0 };
  for (const x of xs) c[x]++;
  return c;
}

/** Held-out success rate: one sampled episode per held-out task, the sampling seeded by the task. */
export function evaluate(policy: Policy, episodes: number): number {
  return evaluateOutcomes(policy, episodes).win / episodes;
}

/** How the held-out episodes of {@link evaluate} end (counts per outcome; `win` / episodes is the success rate). */
export function evaluateOutcomes(policy: Policy, episodes: number): Record<Outcome, number> {
  const out: Outcome[] = [];
  for (let i = 0; i < episodes; i++) {
    const seed = EVAL_SEED_BASE + i;
    out.push(outcome(playEpisode(policy, makeTask(seed), 0, new Rng(deriveSeed(seed, 77)))));
  }
  return countOutcomes(out);
}

/** Area under a learning curve, as the trapezoid mean over its step range. */
export function areaUnderCurve(curve: { step: number; success: number }[]): number {
  if (curve.length < 2) return curve[0]?.success ?? 0;
  let area = 0;
  for (let i = 1; i < curve.length; i++) area += (curve[i]!.step - curve[i - 1]!.step) * (curve[i]!.success + curve[i - 1]!.success) / 2;
  return area / (curve[curve.length - 1]!.step - curve[0]!.step);
}

/** What a caller may observe of a run while it trains. */
export interface RunHooks {
  /** After each step. */
  onStep?: (log: StepLog) => void;
  /** Once, with the first batch's advantages (for the token visualiser). */
  onFirstBatch?: (batch: PackedBatch, adv: AdvantageResult) => void;
}

/** One RL run from the warm-start checkpoint. */
export function train(init: Float32Array[], cfg: RunConfig, hooks: RunHooks = {}): RunResult {
  const t0 = performance.now();
  const policy = new Policy(POLICY, init.map((p) => p.slice()));
  const opt = new rl.AdamW(policy.params, { lr: cfg.lr, weightDecay: 0 });
  const totalUpdates = cfg.steps * cfg.updatesPerBatch;
  const schedule = rl.cosineSchedule({ peak: cfg.lr, warmupSteps: Math.round(totalUpdates * 0.05), totalSteps: totalUpdates, floor: 0.1 * cfg.lr });
  // Separate streams: every method sees the same tasks at the same step for a given seed (a paired
  // comparison), whatever its episodes consumed from the sampling stream.
  const taskRng = new Rng(deriveSeed(cfg.seed, 3));
  const sampleRng = new Rng(deriveSeed(cfg.seed, 4));
  const V = POLICY.vocab;
  const curve = [{ step: 0, success: evaluate(policy, cfg.evalEpisodes) }];
  const log: StepLog[] = [];
  let update = 0;
  let finalOutcomes = evaluateOutcomes(policy, 0);
  for (let step = 0; step < cfg.steps; step++) {
    const s0 = performance.now();
    const tasks: Task[] = [];
    for (let i = 0; i < cfg.tasksPerStep; i++) tasks.push(makeTask(taskRng.int(EVAL_SEED_BASE)));
    const batch = pack(collect(policy, tasks, cfg.groupSize, sampleRng));
    const { offsets, mask, tokenIds: targets } = batch.conversation;

    // The rollout policy's statistics (pi_old), and the teacher's logits for GEAR.
    const old = policy.forward(batch.studentRows);
    const oldLogits = logitsOf(old.logits, old.rows, V);
    const oldStats = rl.tokenStats(oldLogits, targets);
    const teacher = cfg.method === 'gear' ? policy.forward(batch.teacherRows) : undefined;
    const adv = advantages(cfg.method, {
      batch, student: oldLogits, teacher: teacher && logitsOf(teacher.logits, teacher.rows, V), gearOptions: cfg.gearOptions,
    });
    if (step === 0) hooks.onFirstBatch?.(batch, adv);

    let loss = NaN, gradNorm = NaN, lossMetrics: Record<string, number> = {};
    for (let u = 0; u < cfg.updatesPerBatch; u++, update++) {
      const fwd = u === 0 ? old : policy.forward(batch.studentRows);
      const logits = logitsOf(fwd.logits, fwd.rows, V);
      const stats = u === 0 ? oldStats : rl.tokenStats(logits, targets);
      const pl = rl.policyLoss({
        logprob: stats.logprob, oldLogprob: oldStats.logprob, advantages: adv.advantages, offsets, mask,
        kind: 'ppo', clipLow: cfg.clip, clipHigh: cfg.clip,
        // Dr.GRPO divides token sums by a constant (the longest possible response), not by lengths.
        ...(cfg.method === 'drgrpo'
          ? { agg: 'seq-mean-token-sum-norm' as const, lossScaleFactor: MAX_LEN - PROMPT_TOKENS }
          : { agg: 'token-mean' as const }),
      });
      // d loss / d logprob -> d loss / d logits (written over a copy: the first update's logits are pi_old's).
      // (policyLoss returns the gradient in the float type of `logprob`: float32 here.)
      const dlogits = rl.tokenStatsBackward(logits, targets, { logprob: pl.grad as Float32Array }, { stats });
      policy.zeroGrad();
      policy.backward(fwd, dlogits);
      gradNorm = rl.clipGradNorm(policy.grads, cfg.maxGradNorm);
      opt.lr = schedule(update);
      opt.step(policy.grads);
      loss = pl.loss;
      lossMetrics = pl.metrics;
    }

    let agent = 0, ent = 0, absAdv = 0, absAnswer = 0;
    for (let r = 0; r + 1 < offsets.length; r++) {
      let inTurn = 0; // position inside the current agent turn (turns are runs of agent tokens between observations)
      for (let i = offsets[r]!; i < offsets[r + 1]!; i++) {
        if (!mask[i]) { inTurn = 0; continue; }
        agent++;
        ent += oldStats.entropy[i]!;
        const a = Math.abs(adv.advantages[i]!);
        absAdv += a;
        if (inTurn === 1 && targets[i - 1] === tok('answer')) absAnswer += a;
        inTurn++;
      }
    }
    const entry: StepLog = {
      step, lr: opt.lr, trainReward: batch.trajectories.reduce((a, t) => a + t.reward, 0) / batch.trajectories.length,
      loss, gradNorm, entropy: ent / agent, advAbsMean: absAdv / agent,
      answerCreditShare: absAdv > 0 ? absAnswer / absAdv : 0, lossMetrics, advMetrics: adv.metrics,
      outcomes: countOutcomes(batch.trajectories.map(outcome)),
      ms: performance.now() - s0,
    };
    if ((step + 1) % cfg.evalEvery === 0 || step === cfg.steps - 1) {
      finalOutcomes = evaluateOutcomes(policy, cfg.evalEpisodes);
      entry.evalSuccess = finalOutcomes.win / cfg.evalEpisodes;
      curve.push({ step: step + 1, success: entry.evalSuccess });
    }
    log.push(entry);
    hooks.onStep?.(entry);
  }
  return { config: cfg, curve, log, seconds: (performance.now() - t0) / 1000, auc: areaUnderCurve(curve), finalOutcomes };
}
