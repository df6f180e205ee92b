/**
 * The training loops of the demo: the supervised warm-start and the critic-free RL run, both through
 * the library's public API (log-probs and their backward, advantages, the clipped policy loss,
 * gradient clipping, AdamW and a learning-rate schedule), for any {@link Environment}.
 *
 * @module
 */
import * as rl from 'gear-rl';
import { Rng, deriveSeed } from '../env/rng.js';
import { demoTranscript, type EnvTask, type Environment, type PromptView, type Transcript } from '../env/types.js';
import { Policy, type PolicyConfig, type RowSpec } from '../model/policy.js';
import { anchorStats, creditFidelity, spikeStats, zeroVarianceGroupShare, type CreditFidelity } from './credit.js';
import { GIGPO_GAMMA, advantages, teacherOf, type AdvantageResult, type Method, type TeacherKind } from './methods.js';
import { collect, pack, playEpisode, type PackedBatch } from './rollout.js';

/**
 * The demo network's shape for an environment: a 32 x 32 tanh MLP, with the position-independent token
 * embedding except for locker search (whose short fixed-layout episodes the positional tables suffice for).
 */
export function policyConfig(env: Environment): PolicyConfig {
  return { vocab: env.vocab.length, positions: env.maxLength, hidden1: 32, hidden2: 32, tokenEmbedding: env.name !== 'locker' };
}

/** Held-out evaluation tasks come from this seed range; training tasks never do. */
export const EVAL_SEED_BASE = 1_000_000_000;

/** Settings of the supervised warm-start. */
export interface WarmStartConfig {
  /** Optimizer steps. */
  steps: number;
  /** Demonstrations per step (half in the teacher's privileged view, half in the student's). */
  batch: number;
  /** Demonstrator noise (see the environment's `demoTurn`). */
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

/** Flattens the response tokens of demonstrations into rows, target ids and a 0/1 mask of agent tokens. */
function demoRows(demos: Transcript[], promptLength: number): { spec: RowSpec; targets: Int32Array; mask: Uint8Array } {
  // Rows from the first response position on: the prompt is given, never predicted.
  const spec: RowSpec = { seqs: demos.map((d) => d.tokens), from: demos.map(() => promptLength), to: demos.map((d) => d.tokens.length) };
  const targets: number[] = [], mask: number[] = [];
  for (const d of demos) for (let t = promptLength; t < d.tokens.length; t++) { targets.push(d.tokens[t]!); mask.push(d.agentMask[t]!); }
  return { spec, targets: Int32Array.from(targets), mask: Uint8Array.from(mask) };
}

/** The view of the i-th demonstration of a warm-start batch: every other one privileged, cycling through the environment's views. */
export function demoView(env: Environment, i: number): PromptView {
  if (i % 2 === 0) return false;
  return env.views ? env.views[((i - 1) / 2) % env.views.length]! : true;
}

/**
 * Supervised warm-start (behaviour cloning of a noisy demonstrator): mean negative log-likelihood of
 * the demonstrated agent tokens, half of the demonstrations in the teacher's privileged view, half in
 * the student's. Returns the trained policy and the final loss. With `init`, training continues from
 * that checkpoint instead of fresh weights.
 */
export function warmStart(env: Environment, cfg: WarmStartConfig, onStep?: (step: number, loss: number) => void,
  init?: Float32Array[]): { policy: Policy; loss: number } {
  const pc = policyConfig(env);
  const policy = init ? new Policy(pc, init.map((p) => Float32Array.from(p))) : new Policy(pc, undefined, deriveSeed(cfg.seed, 1));
  const opt = new rl.AdamW(policy.params, { lr: cfg.lr, weightDecay: 0 });
  const schedule = rl.cosineSchedule({ peak: cfg.lr, warmupSteps: Math.round(cfg.steps * 0.05), totalSteps: cfg.steps, floor: 0.1 * cfg.lr });
  const rng = new Rng(deriveSeed(cfg.seed, 2));
  let loss = NaN;
  for (let step = 0; step < cfg.steps; step++) {
    const demos: Transcript[] = [];
    for (let i = 0; i < cfg.batch; i++) demos.push(demoTranscript(env, env.makeTask(rng.int(EVAL_SEED_BASE)), rng, cfg.eps, demoView(env, i)));
    const { spec, targets, mask } = demoRows(demos, env.promptLength);
    const fwd = policy.forward(spec);
    const logits = logitsOf(fwd.logits, fwd.rows, pc.vocab);
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
  /** Held-out tasks per evaluation of a GEAR teacher's own success (default: `evalEpisodes`). */
  teacherEvalEpisodes?: number;
  /** Decay of the `ema` teacher per optimizer update (default 0.95). */
  emaDecay?: number;
  /** GEAR options for the GEAR methods (library defaults when omitted). */
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
  /** Where the batch's advantage mass sits (NaN fields when no group had differing rewards). */
  fidelity: CreditFidelity;
  /** Share of groups whose rewards are all equal. */
  zeroVarianceGroups: number;
  /** Share of step rows in anchor groups of size > 1. */
  anchorGrouped: number;
  /** Share of step rows in anchor groups of size > 1 with differing returns. */
  anchorInformative: number;
  /** Metrics reported by `policyLoss` (last update). */
  lossMetrics: Record<string, number>;
  /** Method-specific advantage diagnostics (GEAR: spikes, segments, weight range). */
  advMetrics: Record<string, number>;
  /** How the batch's episodes ended (counts per outcome). */
  outcomes: Record<string, number>;
  /** Held-out success rate after this step, when evaluated. */
  evalSuccess?: number;
  /** A GEAR teacher's own held-out success with the privileged prompt, when evaluated. */
  teacherSuccess?: number;
  /** Milliseconds spent on this step (without evaluation). */
  ms: number;
}

/** One evaluation point. */
export interface CurvePoint {
  /** Steps taken before it. */
  step: number;
  /** Held-out success rate of the student. */
  success: number;
  /** GEAR methods: the teacher's held-out success with the privileged prompt. */
  teacher?: number;
}

/** A finished run. */
export interface RunResult {
  /** Settings. */
  config: RunConfig;
  /** Evaluation points. */
  curve: CurvePoint[];
  /** Every step's metrics. */
  log: StepLog[];
  /** Wall time in seconds. */
  seconds: number;
  /** Area under the learning curve: trapezoid mean of `curve` over the steps (0..1). */
  auc: number;
  /** How the held-out episodes end after training. */
  finalOutcomes: Record<string, number>;
}

/**
 * How held-out episodes end (counts per outcome; `win` / episodes is the success rate): one sampled
 * episode per held-out task, the sampling seeded by the task, so every evaluation sees the same tasks
 * and random numbers. `privileged` plays from the teacher's prompt.
 */
export function evaluateOutcomes(env: Environment, policy: Policy, episodes: number, privileged = false): Record<string, number> {
  const c: Record<string, number> = Object.fromEntries(env.outcomes.map((o) => [o, 0]));
  const buf = new Float32Array(policy.cfg.vocab);
  for (let i = 0; i < episodes; i++) {
    const seed = EVAL_SEED_BASE + i;
    const t = playEpisode(env, policy, env.makeTask(seed), 0, new Rng(deriveSeed(seed, 77)), buf, privileged);
    c[t.outcome] = (c[t.outcome] ?? 0) + 1;
  }
  return c;
}

/** Held-out success rate (see {@link evaluateOutcomes}). */
export function evaluate(env: Environment, policy: Policy, episodes: number, privileged = false): number {
  return episodes > 0 ? (evaluateOutcomes(env, policy, episodes, privileged)[env.outcomes[0]!] ?? 0) / episodes : NaN;
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

/** The teacher's weights for a GEAR method: the current policy, a frozen copy of the start or an EMA. */
class Teacher {
  readonly policy: Policy;
  private readonly decay: number;

  constructor(readonly kind: TeacherKind, student: Policy, decay: number) {
    this.policy = kind === 'self' ? student : new Policy(student.cfg, student.snapshot());
    this.decay = decay;
  }

  /** After an optimizer update of the student: the EMA teacher follows it. */
  follow(student: Policy): void {
    if (this.kind !== 'ema') return;
    const d = this.decay;
    this.policy.params.forEach((p, k) => {
      const s = student.params[k]!;
      for (let i = 0; i < p.length; i++) p[i] = d * p[i]! + (1 - d) * s[i]!;
    });
  }
}

/** One RL run of `env` from the warm-start checkpoint `init`. */
export function train(env: Environment, init: Float32Array[], cfg: RunConfig, hooks: RunHooks = {}): RunResult {
  const t0 = performance.now();
  const pc = policyConfig(env);
  const policy = new Policy(pc, init.map((p) => p.slice()));
  const opt = new rl.AdamW(policy.params, { lr: cfg.lr, weightDecay: 0 });
  const totalUpdates = cfg.steps * cfg.updatesPerBatch;
  const schedule = rl.cosineSchedule({ peak: cfg.lr, warmupSteps: Math.round(totalUpdates * 0.05), totalSteps: totalUpdates, floor: 0.1 * cfg.lr });
  // Separate streams: every method sees the same tasks at the same step for a given seed (a paired
  // comparison), whatever its episodes consumed from the sampling stream.
  const taskRng = new Rng(deriveSeed(cfg.seed, 3));
  const sampleRng = new Rng(deriveSeed(cfg.seed, 4));
  const V = pc.vocab;
  const kind = teacherOf(cfg.method);
  const teacher = kind ? new Teacher(kind, policy, cfg.emaDecay ?? 0.95) : undefined;
  const teacherEval = cfg.teacherEvalEpisodes ?? cfg.evalEpisodes;
  let frozenSuccess: number | undefined;
  const point = (step: number, success: number): CurvePoint => {
    if (!teacher) return { step, success };
    // The frozen teacher never changes: evaluate it once.
    const t = teacher.kind === 'frozen'
      ? (frozenSuccess ??= evaluate(env, teacher.policy, teacherEval, true))
      : evaluate(env, teacher.policy, teacherEval, true);
    return { step, success, teacher: t };
  };
  let finalOutcomes = evaluateOutcomes(env, policy, cfg.evalEpisodes);
  const curve = [point(0, finalOutcomes[env.outcomes[0]!]! / cfg.evalEpisodes)];
  const log: StepLog[] = [];
  let update = 0;
  for (let step = 0; step < cfg.steps; step++) {
    const s0 = performance.now();
    const tasks: EnvTask[] = [];
    for (let i = 0; i < cfg.tasksPerStep; i++) tasks.push(env.makeTask(taskRng.int(EVAL_SEED_BASE)));
    const batch = pack(env, collect(env, policy, tasks, cfg.groupSize, sampleRng));
    const { offsets, mask, tokenIds: targets } = batch.conversation;

    // The rollout policy's statistics (pi_old), and the teacher's logits for GEAR.
    const old = policy.forward(batch.studentRows);
    const oldLogits = logitsOf(old.logits, old.rows, V);
    const oldStats = rl.tokenStats(oldLogits, targets);
    const tFwd = teacher?.policy.forward(batch.teacherRows);
    const adv = advantages(cfg.method, {
      batch, student: oldLogits, teacher: tFwd && logitsOf(tFwd.logits, tFwd.rows, V), gearOptions: cfg.gearOptions,
      shuffleSeed: deriveSeed(cfg.seed, 5, step),
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
          ? { agg: 'seq-mean-token-sum-norm' as const, lossScaleFactor: env.maxLength - env.promptLength }
          : { agg: 'token-mean' as const }),
      });
      // d loss / d logprob -> d loss / d logits (policyLoss returns the gradient in the float type of `logprob`).
      const dlogits = rl.tokenStatsBackward(logits, targets, { logprob: pl.grad as Float32Array }, { stats });
      policy.zeroGrad();
      policy.backward(fwd, dlogits);
      gradNorm = rl.clipGradNorm(policy.grads, cfg.maxGradNorm);
      opt.lr = schedule(update);
      opt.step(policy.grads);
      teacher?.follow(policy);
      loss = pl.loss;
      lossMetrics = pl.metrics;
    }

    let agent = 0, ent = 0, absAdv = 0;
    for (let i = 0; i < targets.length; i++) {
      if (!mask[i]) continue;
      agent++;
      ent += oldStats.entropy[i]!;
      absAdv += Math.abs(adv.advantages[i]!);
    }
    const anchors = anchorStats(batch.steps, GIGPO_GAMMA);
    const advMetrics = { ...adv.metrics };
    if (adv.gear) {
      const s = spikeStats(adv.gear.result.anchors, batch.roles, batch.trajectories.length);
      advMetrics.spikesPerEpisode = s.perEpisode;
      advMetrics.spikeDecisiveShare = s.decisiveShare;
    }
    const outcomes: Record<string, number> = Object.fromEntries(env.outcomes.map((o) => [o, 0]));
    for (const t of batch.trajectories) outcomes[t.outcome] = (outcomes[t.outcome] ?? 0) + 1;
    const entry: StepLog = {
      step, lr: opt.lr, trainReward: batch.trajectories.reduce((a, t) => a + t.reward, 0) / batch.trajectories.length,
      loss, gradNorm, entropy: ent / agent, advAbsMean: absAdv / agent,
      fidelity: creditFidelity(adv.advantages, batch.roles, mask, oldStats.logprob.map(Math.exp)),
      zeroVarianceGroups: zeroVarianceGroupShare(batch.conversation.episodeRewards, batch.conversation.groupIndex),
      anchorGrouped: anchors.grouped, anchorInformative: anchors.informative,
      lossMetrics, advMetrics, outcomes,
      ms: performance.now() - s0,
    };
    if ((step + 1) % cfg.evalEvery === 0 || step === cfg.steps - 1) {
      finalOutcomes = evaluateOutcomes(env, policy, cfg.evalEpisodes);
      const p = point(step + 1, finalOutcomes[env.outcomes[0]!]! / cfg.evalEpisodes);
      entry.evalSuccess = p.success;
      if (p.teacher !== undefined) entry.teacherSuccess = p.teacher;
      curve.push(p);
    }
    log.push(entry);
    hooks.onStep?.(entry);
  }
  return { config: cfg, curve, log, seconds: (performance.now() - t0) / 1000, auc: areaUnderCurve(curve), finalOutcomes };
}
