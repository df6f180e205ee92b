/**
 * Where a method puts its credit, measured with the environment's knowledge of every sampled decision
 * (credit fidelity), and the batch diagnostics the demo logs per step.
 *
 * @module
 */
import * as rl from 'gear-rl';

/** How one batch's advantage mass is distributed over the tokens' credit roles. */
export interface CreditFidelity {
  /** Signed advantage mass on wrong decisive tokens over the total |advantage| (ideal: negative). */
  wrong: number;
  /** Signed advantage mass on right decisive tokens over the total |advantage| (ideal: positive). */
  right: number;
  /** |advantage| mass on neutral tokens over the total |advantage| (unsigned: any credit there is noise). */
  neutral: number;
  /** Spearman rank correlation between |advantage| and decisiveness (1 decisive, 0 neutral) over the agent tokens. */
  spearman: number;
  /**
   * The same three shares weighted by how much gradient a token can take, `|A|·(1 − p)` with p the
   * probability of the sampled token (a token sampled with p ≈ 1 gets almost no gradient, whatever its
   * advantage): signed on wrong and right decisive tokens, unsigned on neutral ones. NaN without `p`.
   */
  gradWrong: number;
  /** See {@link CreditFidelity.gradWrong}: right decisive tokens. */
  gradRight: number;
  /** See {@link CreditFidelity.gradWrong}: neutral tokens. */
  gradNeutral: number;
}

/** Average ranks (1-based; ties share the mean of their ranks). */
export function ranks(xs: ArrayLike<number>): Float64Array {
  const n = xs.length;
  const idx = Array.from({ length: n }, (_, i) => i).sort((a, b) => xs[a]! - xs[b]!);
  const r = new Float64Array(n);
  for (let i = 0; i < n;) {
    let j = i;
    while (j + 1 < n && xs[idx[j + 1]!] === xs[idx[i]!]) j++;
    const avg = (i + j) / 2 + 1;
    for (let k = i; k <= j; k++) r[idx[k]!] = avg;
    i = j + 1;
  }
  return r;
}

/** Spearman's rank correlation (Pearson correlation of average ranks); NaN when either side is constant or n < 2. */
export function spearman(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new Error(`spearman: lengths differ (${a.length} vs ${b.length})`);
  const n = a.length;
  if (n < 2) return NaN;
  const ra = ranks(a), rb = ranks(b);
  const m = (n + 1) / 2;
  let sab = 0, saa = 0, sbb = 0;
  for (let i = 0; i < n; i++) {
    const x = ra[i]! - m, y = rb[i]! - m;
    sab += x * y; saa += x * x; sbb += y * y;
  }
  return saa > 0 && sbb > 0 ? sab / Math.sqrt(saa * sbb) : NaN;
}

/**
 * Credit fidelity of one batch: advantages, the environment's role per token (-1 wrong decisive,
 * 0 neutral, 1 right decisive), the agent-token mask and, optionally, the probability `p` of each
 * sampled token under the rollout policy (for the gradient-weighted shares). Every field is NaN when the
 * batch carries no advantage at all (every group had equal rewards).
 */
export function creditFidelity(adv: ArrayLike<number>, roles: ArrayLike<number>, mask: ArrayLike<number>, p?: ArrayLike<number>): CreditFidelity {
  const n = adv.length;
  if (roles.length !== n || mask.length !== n || (p && p.length !== n)) throw new Error('creditFidelity: advantages, roles, mask and p must have the same length');
  let total = 0, wrong = 0, right = 0, neutral = 0;
  let gTotal = 0, gWrong = 0, gRight = 0, gNeutral = 0;
  const absA: number[] = [], dec: number[] = [];
  for (let i = 0; i < n; i++) {
    if (!mask[i]) continue;
    const a = adv[i]!, r = roles[i]!;
    const g = p ? a * (1 - p[i]!) : 0;
    total += Math.abs(a);
    gTotal += Math.abs(g);
    if (r < 0) { wrong += a; gWrong += g; } else if (r > 0) { right += a; gRight += g; } else { neutral += Math.abs(a); gNeutral += Math.abs(g); }
    absA.push(Math.abs(a));
    dec.push(r !== 0 ? 1 : 0);
  }
  const nan = { wrong: NaN, right: NaN, neutral: NaN, spearman: NaN, gradWrong: NaN, gradRight: NaN, gradNeutral: NaN };
  if (!(total > 0)) return nan;
  const grad = p && gTotal > 0 ? { gradWrong: gWrong / gTotal, gradRight: gRight / gTotal, gradNeutral: gNeutral / gTotal } : { gradWrong: NaN, gradRight: NaN, gradNeutral: NaN };
  return { wrong: wrong / total, right: right / total, neutral: neutral / total, spearman: spearman(absA, dec), ...grad };
}

/** Share of groups whose rewards are all equal (they carry no outcome advantage). */
export function zeroVarianceGroupShare(rewards: ArrayLike<number>, groups: ArrayLike<number>): number {
  const seen = new Map<number, { first: number; equal: boolean }>();
  for (let i = 0; i < rewards.length; i++) {
    const g = groups[i]!, r = rewards[i]!;
    const s = seen.get(g);
    if (!s) seen.set(g, { first: r, equal: true });
    else if (r !== s.first) s.equal = false;
  }
  if (seen.size === 0) return NaN;
  let z = 0;
  for (const s of seen.values()) if (s.equal) z++;
  return z / seen.size;
}

/** How GiGPO's anchor-state step groups look in a batch of step rows. */
export interface AnchorStats {
  /** Share of step rows in an anchor group of size > 1. */
  grouped: number;
  /** Share of step rows in an anchor group of size > 1 whose discounted returns differ (a step-level signal). */
  informative: number;
}

/**
 * Anchor-group statistics of step rows: groups by `rl.stepGroups(anchors, groups)` (exact anchors within
 * a task's group) and discounted step returns by `rl.discountedStepReturns`.
 */
export function anchorStats(steps: { anchors: unknown[]; groupIndex: Int32Array; stepRewards: ArrayLike<number>; trajectoryIndex: Int32Array },
  gamma: number): AnchorStats {
  const n = steps.anchors.length;
  if (n === 0) return { grouped: NaN, informative: NaN };
  const g = rl.stepGroups(steps.anchors, steps.groupIndex);
  const ret = rl.discountedStepReturns(steps.stepRewards, steps.trajectoryIndex, gamma);
  const size = new Map<number, number>(), lo = new Map<number, number>(), hi = new Map<number, number>();
  for (let i = 0; i < n; i++) {
    const k = g[i]!;
    size.set(k, (size.get(k) ?? 0) + 1);
    lo.set(k, Math.min(lo.get(k) ?? Infinity, ret[i]!));
    hi.set(k, Math.max(hi.get(k) ?? -Infinity, ret[i]!));
  }
  let grouped = 0, informative = 0;
  for (let i = 0; i < n; i++) {
    const k = g[i]!;
    if (size.get(k)! > 1) {
      grouped++;
      if (hi.get(k)! > lo.get(k)!) informative++;
    }
  }
  return { grouped: grouped / n, informative: informative / n };
}

/** GEAR's spikes in a batch: count per episode, and the share that sits on decisive tokens. */
export function spikeStats(anchors: Int32Array, roles: ArrayLike<number>, episodes: number): { perEpisode: number; decisiveShare: number } {
  let dec = 0;
  for (const a of anchors) if (roles[a] !== 0) dec++;
  return { perEpisode: episodes > 0 ? anchors.length / episodes : NaN, decisiveShare: anchors.length ? dec / anchors.length : NaN };
}
