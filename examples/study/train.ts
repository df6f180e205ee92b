/**
 * The study's training loops, through the library's public API: a supervised warm start of the GRU
 * on a noisy demonstrator, then critic-free RL with GRPO, GiGPO or GEAR advantages and the clipped
 * policy loss.
 *
 * @module
 */
import * as rl from 'gear-rl';
import { Rng, deriveSeed } from '../env/rng.js';
import { auroc } from '../report/stats.js';
import { Gru, type GruConfig, type GruRows } from './gru.js';
import { VOCAB, makeTask, play, teacherPrompt, tok, Vault, type Episode, type VaultTask } from './env.js';

/** The network's shape. */
export const NET: GruConfig = { vocab: VOCAB.length, embed: 16, hidden: 48 };
/** Held-out evaluation tasks come from this seed range; training tasks never do. */
export const EVAL_SEED_BASE = 1_000_000_000;

/** The methods the study compares (`gear-lr`: GEAR with the log-ratio anchor signal). */
export type StudyMethod = 'grpo' | 'gigpo' | 'gear' | 'gear-lr';
/** Display names. */
export const STUDY_LABEL: Record<StudyMethod, string> = { grpo: 'GRPO', gigpo: 'GiGPO', gear: 'GEAR (self)', 'gear-lr': 'GEAR log-ratio (self)' };

/** Settings of the warm start. */
export interface WarmConfig {
  /** Optimizer steps. */
  steps: number;
  /** Demonstrations per step (every other one with the teacher's privileged prompt). */
  batch: number;
  /** Demonstrator noise per code digit and per answer. */
  eps: number;
  /** Learning rate. */
  lr: number;
  /** Seed of the weights and the demonstrations. */
  seed: number;
}

/** Settings of one RL run. */
export interface StudyRunConfig {
  /** Advantage method. */
  method: StudyMethod;
  /** Seed: the task and sampling streams (shared by every method: a paired comparison). */
  seed: number;
  /** RL steps. */
  steps: number;
  /** Tasks per step. */
  tasksPerStep: number;
  /** Rollouts per task. */
  groupSize: number;
  /** Learning rate. */
  lr: number;
  /** Evaluate every this many steps (and at 0). */
  evalEvery: number;
  /** Held-out tasks per evaluation. */
  evalEpisodes: number;
}

/** A finished run. */
export interface StudyRun {
  /** Settings. */
  config: StudyRunConfig;
  /** Held-out success after each evaluated step. */
  curve: { step: number; success: number }[];
  /** Trapezoid mean of the curve. */
  auc: number;
  /** Success at the end. */
  end: number;
  /** Mean decisions per training episode. */
  decisions: number;
  /** Seconds. */
  seconds: number;
}

/** Rows of the student (positions after the prompt) or of the teacher (same tokens, privileged prompt first). */
function rowsOf(eps: Episode[], teacher: boolean): GruRows {
  const seqs = eps.map((e) => (teacher ? [...teacherPrompt(e.task), ...e.tokens.slice(1)] : e.tokens));
  const shift = teacher ? teacherPrompt(eps[0]!.task).length - 1 : 0;
  return { seqs, from: eps.map(() => 1 + shift), to: seqs.map((s) => s.length) };
}

/** Targets and agent mask of the student rows, and the row offsets. */
function packed(eps: Episode[]): { targets: Int32Array; mask: Uint8Array; offsets: Int32Array } {
  const targets: number[] = [], mask: number[] = [], offsets = [0];
  for (const e of eps) {
    for (let t = 1; t < e.tokens.length; t++) { targets.push(e.tokens[t]!); mask.push(e.agentMask[t]!); }
    offsets.push(targets.length);
  }
  return { targets: Int32Array.from(targets), mask: Uint8Array.from(mask), offsets: Int32Array.from(offsets) };
}

const logitsOf = (data: Float64Array, rows: number): rl.Logits => ({ data: Float32Array.from(data), rows, vocab: NET.vocab });

/** Plays an episode sampling from the policy (temperature 1). */
export function sampleEpisode(net: Gru, task: VaultTask, rng: Rng): Episode {
  let h = net.start();
  let seen = 0;
  const lg = new Float64Array(NET.vocab);
  return play(task, (tokens) => {
    for (; seen < tokens.length; seen++) h = net.step(h, tokens[seen]!, lg);
    return rng.sampleLogits(lg, NET.vocab);
  });
}

/** Held-out success rate (one sampled episode per held-out task, the sampling seeded by the task). */
export function evaluate(net: Gru, episodes: number): number {
  let wins = 0;
  for (let i = 0; i < episodes; i++) {
    const seed = EVAL_SEED_BASE + i;
    wins += sampleEpisode(net, makeTask(seed), new Rng(deriveSeed(seed, 77))).reward;
  }
  return wins / episodes;
}

/** Supervised warm start: mean NLL of the demonstrated actions, half with the privileged prompt. */
export function warmStart(cfg: WarmConfig): Gru {
  const net = new Gru(NET, deriveSeed(cfg.seed, 1));
  const opt = new rl.AdamW(net.params, { lr: cfg.lr, weightDecay: 0 });
  const rng = new Rng(deriveSeed(cfg.seed, 2));
  for (let step = 0; step < cfg.steps; step++) {
    const demos: Episode[] = [];
    for (let i = 0; i < cfg.batch; i++) {
      const task = makeTask(rng.int(EVAL_SEED_BASE));
      // The teacher's demonstrations open the key box first: the privileged map is useful.
      const teach = i % 2 === 1;
      demos.push(play(task, (_t, env: Vault) => (teach && env.phase === 0 ? tok('box0') + task.keyBox : env.demoAction(rng, cfg.eps))));
    }
    const half = [demos.filter((_, i) => i % 2 === 0), demos.filter((_, i) => i % 2 === 1)];
    net.zeroGrad();
    let count = 0;
    for (const d of demos) for (let t = 1; t < d.tokens.length; t++) count += d.agentMask[t]!;
    for (let k = 0; k < 2; k++) {
      const eps = half[k]!;
      const fwd = net.forward(rowsOf(eps, k === 1));
      const logits = logitsOf(fwd.logits, fwd.rows);
      const { targets, mask } = packed(eps);
      const stats = rl.tokenStats(logits, targets);
      const g = new Float32Array(fwd.rows);
      for (let i = 0; i < fwd.rows; i++) if (mask[i]) g[i] = -1 / count;
      net.backward(fwd, rl.tokenStatsBackward(logits, targets, { logprob: g }, { stats, inPlace: true }));
    }
    rl.clipGradNorm(net.grads, 1);
    opt.step(net.grads);
  }
  return net;
}

/** Per-token advantages of `method` for the batch (0 on observations). */
function advantagesOf(method: StudyMethod, net: Gru, eps: Episode[], groups: number[], studentLogits: rl.Logits,
  p: ReturnType<typeof packed>): Float32Array {
  const rewards = eps.map((e) => e.reward);
  if (method === 'grpo') return rl.segmentBroadcast(rl.grpo({ rewards, groups }), p.offsets, p.mask);
  if (method === 'gear' || method === 'gear-lr') return gearOf(method, net, eps, groups, studentLogits, p).advantages;
  // GiGPO: one step row per decision; the anchor is the situation it acted from, within its task group.
  const episodeRewards: number[] = [], stepRewards: number[] = [], trajectories: number[] = [], g: number[] = [], anchors: string[] = [];
  eps.forEach((e, i) => e.decisions.forEach((d, k) => {
    episodeRewards.push(e.reward); stepRewards.push(k === e.decisions.length - 1 ? e.reward : 0);
    trajectories.push(i); g.push(groups[i]!); anchors.push(d.anchor);
  }));
  const res = rl.gigpo({ episodeRewards, stepRewards, trajectories, groups: g, anchors, gamma: 0.95, mode: 'mean_std_norm' });
  const out = new Float32Array(p.targets.length);
  let row = 0;
  eps.forEach((e, i) => e.decisions.forEach((d) => { out[p.offsets[i]! + d.pos - 1] = res.advantages[row++]!; }));
  return out;
}

/** GEAR (self teacher) on a batch, with the divergence (`gear`) or the log-ratio anchor signal (`gear-lr`). */
function gearOf(method: 'gear' | 'gear-lr', net: Gru, eps: Episode[], groups: number[], studentLogits: rl.Logits,
  p: ReturnType<typeof packed>): rl.GearFromLogitsResult {
  const t = net.forward(rowsOf(eps, true));
  return rl.gearFromLogits({
    student: studentLogits, teacher: logitsOf(t.logits, t.rows), targets: p.targets,
    advantages: rl.grpo({ rewards: eps.map((e) => e.reward), groups }), offsets: p.offsets, mask: p.mask,
    ...(method === 'gear-lr' ? { options: { anchorSignal: 'logratio' as const } } : {}),
  });
}

/** One RL run from the warm-start weights. */
export function trainRun(init: Float32Array[], cfg: StudyRunConfig): StudyRun {
  const t0 = performance.now();
  const net = new Gru(NET, 0, init.map((p) => p.slice()));
  const opt = new rl.AdamW(net.params, { lr: cfg.lr, weightDecay: 0 });
  const taskRng = new Rng(deriveSeed(cfg.seed, 3));
  const sampleRng = new Rng(deriveSeed(cfg.seed, 4));
  const curve = [{ step: 0, success: evaluate(net, cfg.evalEpisodes) }];
  let decisions = 0, episodes = 0;
  for (let step = 0; step < cfg.steps; step++) {
    const eps: Episode[] = [], groups: number[] = [];
    for (let i = 0; i < cfg.tasksPerStep; i++) {
      const task = makeTask(taskRng.int(EVAL_SEED_BASE));
      for (let k = 0; k < cfg.groupSize; k++) { eps.push(sampleEpisode(net, task, sampleRng)); groups.push(i); }
    }
    for (const e of eps) decisions += e.decisions.length;
    episodes += eps.length;
    const p = packed(eps);
    const fwd = net.forward(rowsOf(eps, false));
    const logits = logitsOf(fwd.logits, fwd.rows);
    const stats = rl.tokenStats(logits, p.targets);
    const advantages = advantagesOf(cfg.method, net, eps, groups, logits, p);
    const pl = rl.policyLoss({
      logprob: stats.logprob, oldLogprob: stats.logprob, advantages, offsets: p.offsets, mask: p.mask,
      kind: 'ppo', agg: 'token-mean',
    });
    net.zeroGrad();
    net.backward(fwd, rl.tokenStatsBackward(logits, p.targets, { logprob: pl.grad as Float32Array }, { stats }));
    rl.clipGradNorm(net.grads, 1);
    opt.step(net.grads);
    if ((step + 1) % cfg.evalEvery === 0 || step === cfg.steps - 1) curve.push({ step: step + 1, success: evaluate(net, cfg.evalEpisodes) });
  }
  let area = 0;
  for (let i = 1; i < curve.length; i++) area += (curve[i]!.step - curve[i - 1]!.step) * (curve[i]!.success + curve[i - 1]!.success) / 2;
  return {
    config: cfg, curve, auc: area / curve[curve.length - 1]!.step, end: curve[curve.length - 1]!.success,
    decisions: decisions / episodes, seconds: (performance.now() - t0) / 1000,
  };
}

/** A decision category of the vault's credit table: the decision's kind and whether it was right. */
export const VAULT_CATEGORIES = ['box right', 'box wrong', 'digit right', 'digit wrong', 'turn right', 'turn wrong', 'answer right', 'answer wrong', 'invalid'] as const;
/** One of {@link VAULT_CATEGORIES}. */
export type VaultCategory = (typeof VAULT_CATEGORIES)[number];

/** Where one method puts its credit: per category, its share of the total |A| and of the total |A|·(1 − p). */
export type VaultCredit = Record<VaultCategory, { abs: number; grad: number }>;

/**
 * Credit of each method at a checkpoint, without training: `batches` batches of `tasks` tasks × `groupSize`
 * rollouts sampled from `net`; per decision category, the share of the summed |A| and of the summed
 * |A|·(1 − p), p the probability of the sampled action (a token sampled with p ≈ 1 takes almost no gradient).
 */
export function vaultCredit(net: Gru, cfg: { batches: number; tasks: number; groupSize: number; seed: number }): Record<StudyMethod, VaultCredit> {
  const methods: StudyMethod[] = ['grpo', 'gigpo', 'gear', 'gear-lr'];
  const sums = Object.fromEntries(methods.map((m) => [m, Object.fromEntries(VAULT_CATEGORIES.map((c) => [c, { abs: 0, grad: 0 }]))])) as Record<StudyMethod, VaultCredit>;
  for (const { eps, groups, p, logits, prob, cat } of vaultBatches(net, cfg)) {
    for (const m of methods) {
      const a = advantagesOf(m, net, eps, groups, logits, p);
      for (let t = 0; t < a.length; t++) {
        const c = cat[t];
        if (!p.mask[t] || !c) continue;
        sums[m][c].abs += Math.abs(a[t]!);
        sums[m][c].grad += Math.abs(a[t]!) * (1 - prob[t]!);
      }
    }
  }
  for (const m of methods) {
    let abs = 0, grad = 0;
    for (const c of VAULT_CATEGORIES) { abs += sums[m][c].abs; grad += sums[m][c].grad; }
    for (const c of VAULT_CATEGORIES) sums[m][c] = { abs: abs > 0 ? sums[m][c].abs / abs : NaN, grad: grad > 0 ? sums[m][c].grad / grad : NaN };
  }
  return sums;
}

/** One sampled batch of the credit measurements: episodes, packed rows, student logits, p and each agent token's category. */
function* vaultBatches(net: Gru, cfg: { batches: number; tasks: number; groupSize: number; seed: number }) {
  const taskRng = new Rng(deriveSeed(cfg.seed, 3)), sampleRng = new Rng(deriveSeed(cfg.seed, 4));
  for (let b = 0; b < cfg.batches; b++) {
    const eps: Episode[] = [], groups: number[] = [];
    for (let i = 0; i < cfg.tasks; i++) {
      const task = makeTask(taskRng.int(EVAL_SEED_BASE));
      for (let k = 0; k < cfg.groupSize; k++) { eps.push(sampleEpisode(net, task, sampleRng)); groups.push(i); }
    }
    const p = packed(eps);
    const fwd = net.forward(rowsOf(eps, false));
    const logits = logitsOf(fwd.logits, fwd.rows);
    const prob = rl.tokenStats(logits, p.targets).logprob.map(Math.exp);
    // The category of each agent token (its decision).
    const cat: (VaultCategory | undefined)[] = new Array(p.targets.length);
    eps.forEach((e, i) => e.decisions.forEach((d) => {
      cat[p.offsets[i]! + d.pos - 1] = d.kind === 'invalid' ? 'invalid' : `${d.kind} ${d.right ? 'right' : 'wrong'}` as VaultCategory;
    }));
    yield { eps, groups, p, logits, prob, cat };
  }
}

/** How GEAR's two anchor signals single out the vault's wrong decisions (and invalid actions), and where each puts its anchors. */
export interface VaultSignals {
  /** Per signal (D, s = max(0, −logratio)): AUROC of the wrong decisions against the right ones, mean value on each. */
  signals: Record<'D' | 's', { auroc: number; meanWrong: number; meanRight: number }>;
  /** Per GEAR method: anchors per episode, their share on wrong decisions (precision) and the share of wrong decisions holding one (recall). */
  anchors: Record<'gear' | 'gear-lr', { perEpisode: number; precision: number; recall: number }>;
}

/** {@link VaultSignals} of a checkpoint over the same batches as {@link vaultCredit} (pooled over batches). */
export function vaultSignals(net: Gru, cfg: { batches: number; tasks: number; groupSize: number; seed: number }): VaultSignals {
  const sc: Record<'D' | 's', number[]> = { D: [], s: [] }, wrong: boolean[] = [];
  const an = { gear: { n: 0, on: 0, found: 0 }, 'gear-lr': { n: 0, on: 0, found: 0 } };
  let wrongTotal = 0, episodes = 0;
  for (const { eps, groups, p, logits, cat } of vaultBatches(net, cfg)) {
    episodes += eps.length;
    const res = { gear: gearOf('gear', net, eps, groups, logits, p), 'gear-lr': gearOf('gear-lr', net, eps, groups, logits, p) };
    const D = res.gear.signals.divergence, lr = res.gear.signals.logratio;
    const isWrong = (t: number) => cat[t] !== undefined && (cat[t] === 'invalid' || cat[t]!.endsWith('wrong'));
    for (let t = 0; t < cat.length; t++) {
      if (!p.mask[t] || cat[t] === undefined) continue;
      sc.D.push(D[t]!); sc.s.push(Math.max(0, -lr[t]!)); wrong.push(isWrong(t));
      if (isWrong(t)) wrongTotal++;
    }
    for (const k of ['gear', 'gear-lr'] as const) {
      const anchors = new Set(res[k].anchors);
      an[k].n += anchors.size;
      for (const a of anchors) if (isWrong(a)) an[k].on++;
      for (let t = 0; t < cat.length; t++) if (p.mask[t] && isWrong(t) && anchors.has(t)) an[k].found++;
    }
  }
  const mean = (xs: number[], keep: (i: number) => boolean) => { let s = 0, c = 0; xs.forEach((x, i) => { if (keep(i)) { s += x; c++; } }); return c ? s / c : NaN; };
  const sig = (k: 'D' | 's') => ({ auroc: auroc(sc[k], wrong), meanWrong: mean(sc[k], (i) => wrong[i]!), meanRight: mean(sc[k], (i) => !wrong[i]) });
  const anc = (k: 'gear' | 'gear-lr') => ({ perEpisode: an[k].n / episodes, precision: an[k].n ? an[k].on / an[k].n : NaN, recall: wrongTotal ? an[k].found / wrongTotal : NaN });
  return { signals: { D: sig('D'), s: sig('s') }, anchors: { gear: anc('gear'), 'gear-lr': anc('gear-lr') } };
}
