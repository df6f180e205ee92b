/**
 * How far GEAR moves when it reads an inference server's top-k log-probs instead of full logits
 * (`gearFromSparse` vs `gearFromLogits`), measured on the demo's task: a warm-started demo policy
 * plays rollout batches; GEAR runs once from the student's and the (self, privileged-prompt) teacher's
 * full logits, and once from their top-k (k = 2, 5, 20 by default, tail bucket) with the sampled tokens' log-probs.
 *
 * Printed per k: the segment agreement (F1 of the segment anchors, Jaccard of the in-segment token sets),
 * the Pearson / Spearman correlation of the per-token weights over the agent tokens, and the bias of the
 * two signals (the sparse reverse KL is a lower bound of the full one; the entropy is the lower or the
 * mid bound). docs/gear.md ("From server log-probs (sparse)") reports a run.
 *
 * Run: `node dist-examples/gear-sparse-bias.js [--env maze] [--batches 4] [--warm-steps 400] [--ks 2,5,20] [--seed 7]`.
 *
 * @module
 */
import * as rl from 'gear-rl';
import { ENVIRONMENTS } from './env/index.js';
import { Rng, deriveSeed } from './env/rng.js';
import { spearman } from './trainer/credit.js';
import { collect, pack } from './trainer/rollout.js';
import { EVAL_SEED_BASE, policyConfig, warmStart } from './trainer/train.js';

function arg(name: string, dflt: number | string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : String(dflt);
}

/** Row-wise log-softmax of rows x vocab logits (float64). */
function logSoftmax(l: rl.Logits): Float64Array {
  const { rows, vocab } = l;
  const z = l.data as Float32Array;
  const out = new Float64Array(rows * vocab);
  for (let r = 0; r < rows; r++) {
    let m = -Infinity;
    for (let v = 0; v < vocab; v++) m = Math.max(m, z[r * vocab + v]!);
    let s = 0;
    for (let v = 0; v < vocab; v++) s += Math.exp(z[r * vocab + v]! - m);
    const lse = m + Math.log(s);
    for (let v = 0; v < vocab; v++) out[r * vocab + v] = z[r * vocab + v]! - lse;
  }
  return out;
}

/** What a server returns: each row's top-k ids and log-probs (by decreasing probability). */
function topk(lp: Float64Array, rows: number, vocab: number, k: number): rl.SparseTopK {
  const kk = Math.min(k, vocab);
  const ids = new Int32Array(rows * kk), logprobs = new Float32Array(rows * kk);
  const order = Array.from({ length: vocab }, (_, v) => v);
  for (let r = 0; r < rows; r++) {
    order.sort((a, b) => lp[r * vocab + b]! - lp[r * vocab + a]! || a - b);
    for (let j = 0; j < kk; j++) { ids[r * kk + j] = order[j]!; logprobs[r * kk + j] = lp[r * vocab + order[j]!]!; }
  }
  return { ids, logprobs, k: kk };
}

function pearson(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const n = a.length;
  let ma = 0, mb = 0;
  for (let i = 0; i < n; i++) { ma += a[i]! / n; mb += b[i]! / n; }
  let sab = 0, saa = 0, sbb = 0;
  for (let i = 0; i < n; i++) { const x = a[i]! - ma, y = b[i]! - mb; sab += x * y; saa += x * x; sbb += y * y; }
  return saa > 0 && sbb > 0 ? sab / Math.sqrt(saa * sbb) : NaN;
}

interface Tally { anchorsFull: number; anchorsSparse: number; anchorsBoth: number; segUnion: number; segBoth: number;
  wFull: number[]; wSparse: number[]; dFull: number; dSparse: number; hFull: number; hSparse: number; tail: number; shared: number; tokens: number }

// The maze by default: the run docs/gear.md reports.
const env = ENVIRONMENTS[arg('env', 'maze')]!();
const batches = Number(arg('batches', 4));
const seed = Number(arg('seed', 7));
const V = policyConfig(env).vocab;
const { policy } = warmStart(env, { steps: Number(arg('warm-steps', 400)), batch: 64, eps: 0.35, lr: 0.03, seed: 12345 });
const ks = arg('ks', '2,5,20').split(',').map(Number);
const entropyModes = ['lower', 'mid'] as const;
const tallies = new Map<string, Tally>();
const key = (k: number, e: string) => `k=${k} entropy=${e}`;
for (const k of ks) for (const e of entropyModes) tallies.set(key(k, e), { anchorsFull: 0, anchorsSparse: 0, anchorsBoth: 0,
  segUnion: 0, segBoth: 0, wFull: [], wSparse: [], dFull: 0, dSparse: 0, hFull: 0, hSparse: 0, tail: 0, shared: 0, tokens: 0 });

for (let b = 0; b < batches; b++) {
  const rng = new Rng(deriveSeed(seed, b));
  const tasks = Array.from({ length: 8 }, () => env.makeTask(rng.int(EVAL_SEED_BASE)));
  const batch = pack(env, collect(env, policy, tasks, 8, rng));
  const conv = batch.conversation;
  const sFwd = policy.forward(batch.studentRows), tFwd = policy.forward(batch.teacherRows);
  const student: rl.Logits = { data: sFwd.logits, rows: sFwd.rows, vocab: V };
  const teacher: rl.Logits = { data: tFwd.logits, rows: tFwd.rows, vocab: V };
  const advantages = rl.grpo({ rewards: conv.episodeRewards, groups: conv.groupIndex });
  const layout = { advantages, offsets: conv.offsets, mask: conv.mask };
  const full = rl.gearFromLogits({ student, teacher, targets: conv.tokenIds, ...layout });
  const ls = logSoftmax(student), lt = logSoftmax(teacher);
  const chosen = (lp: Float64Array) => Float32Array.from(conv.tokenIds, (y, t) => lp[t * V + y]!);
  for (const k of ks) {
    const s = topk(ls, student.rows, V, k), t = topk(lt, teacher.rows, V, k);
    for (const e of entropyModes) {
      const sp = rl.gearFromSparse({ student: s, teacher: t, studentLogprob: chosen(ls), teacherLogprob: chosen(lt), vocab: V,
        entropy: e, ...layout });
      const y = tallies.get(key(k, e))!;
      const fa = new Set(full.anchors), sa = new Set(sp.anchors);
      y.anchorsFull += fa.size;
      y.anchorsSparse += sa.size;
      for (const a of sa) if (fa.has(a)) y.anchorsBoth++;
      for (let i = 0; i < conv.mask.length; i++) {
        if (!conv.mask[i]) continue;
        const inF = full.segmentId[i]! >= 0, inS = sp.segmentId[i]! >= 0;
        if (inF || inS) y.segUnion++;
        if (inF && inS) y.segBoth++;
        y.wFull.push(full.weights[i]!);
        y.wSparse.push(sp.weights[i]!);
        y.dFull += full.signals.divergence[i]!;
        y.dSparse += sp.signals.divergence[i]!;
        y.hFull += full.signals.entropy[i]!;
        y.hSparse += sp.signals.entropy[i]!;
        y.tail += sp.stats.studentTail[i]!;
        y.shared += sp.stats.studentSharedMass[i]!;
        y.tokens++;
      }
    }
  }
}

console.log(`${env.title}: vocab ${V}, ${batches} batches of 64 episodes, warm-started demo policy, self teacher`);
console.log('| top-k | entropy | student tail mass (mean) | student shared mass (mean) | D sparse / D full | H sparse / H full | anchor F1 | in-segment Jaccard | weights Pearson | weights Spearman |');
console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
for (const [name, y] of tallies) {
  const prec = y.anchorsSparse ? y.anchorsBoth / y.anchorsSparse : NaN, rec = y.anchorsFull ? y.anchorsBoth / y.anchorsFull : NaN;
  const f1 = prec + rec > 0 ? (2 * prec * rec) / (prec + rec) : NaN;
  const [k, e] = name.split(' ');
  console.log(`| ${k!.slice(2)} | ${e!.slice(8)} | ${(y.tail / y.tokens).toFixed(4)} | ${(y.shared / y.tokens).toFixed(4)} | ${(y.dSparse / y.dFull).toFixed(3)} | ` +
    `${(y.hSparse / y.hFull).toFixed(3)} | ${f1.toFixed(3)} (${y.anchorsBoth}/${y.anchorsSparse} of ${y.anchorsFull}) | ` +
    `${(y.segBoth / y.segUnion).toFixed(3)} | ${pearson(y.wFull, y.wSparse).toFixed(4)} | ${spearman(y.wFull, y.wSparse).toFixed(4)} |`);
}
