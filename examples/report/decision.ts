/**
 * The decision rules of the GEAR learning comparison, declared before any run and applied to the paired
 * per-seed AUCs (the same seeds, tasks and sampling streams for every method).
 *
 * * **H1 (GEAR helps).** GEAR with the answer teacher helps only if its AUC beats GRPO's by more than
 *   2 standard errors **and** beats its own shuffled-divergence control's by more than 2 standard errors
 *   (the same weights at random places): the gain must come from where the divergence puts the weight.
 * * **Ceiling check.** Oracle weights (the same weight family on the true departure segments) against
 *   GRPO. If they tie too, the bounded, mean-one family is the limit, not the signal, and:
 * * **H2 (a stronger family).** The same tests with a wider weight range and no per-row normalisation
 *   (`STRONG_FAMILY`): oracle weights of that family against GRPO, and GEAR of that family against GRPO
 *   and against its shuffled control. Its arms are run whatever H1 shows, so the result of H2 never
 *   depends on having looked at H1; it is read as a test only when the ceiling check ties.
 *
 * The log-ratio anchor signal (`anchorSignal: 'logratio'`, declared before its first full run, with
 * the same measure and threshold):
 *
 * * **H3 (the log-ratio signal helps), per teacher** — the frozen answer teacher (the primary test) and
 *   the self teacher: GEAR with the log-ratio signal helps only if its AUC beats GRPO's by more than
 *   2 standard errors **and** beats its own shuffled control's (the log-ratio values permuted within each
 *   row) by more than 2 standard errors.
 * * **H3 against D**, per teacher: the log-ratio signal is better than the divergence only if GEAR with
 *   it beats GEAR with `D` (same teacher, same options) by more than 2 standard errors.
 * * **H3, stronger family**: the log-ratio signal in H2's family (α = 3, no normalisation) against GRPO
 *   and against its own shuffled control (and, reported, against GEAR with `D` in that family).
 * * **Recommendation.** The log-ratio signal is recommended for a teacher only if H3 holds for it and it
 *   beats `D` (both beyond 2 se). If it beats `D` but not GRPO, GEAR is not recommended with that
 *   teacher. If neither signal beats GRPO, GRPO is the recommendation.
 *
 * @module
 */
import { paired, signedPm, type Paired } from './stats.js';

/** The measure the rules read: the area under the held-out learning curve. */
export const DECISION_MEASURE = 'AUC';
/** A difference counts only beyond this many standard errors. */
export const DECISION_SE = 2;

/** The arms the rules compare (method keys of the demo). */
export const DECISION_ARMS = {
  baseline: 'grpo', gear: 'gear-frozen', shuffled: 'gear-shuffled', oracle: 'oracle',
  strongOracle: 'oracle-strong', strongGear: 'gear-strong', strongShuffled: 'gear-strong-shuffled',
} as const;

/**
 * The arms of the log-ratio rules (H3): per teacher, GEAR with the log-ratio signal, its shuffled control
 * and GEAR with `D`; and the stronger family's.
 */
export const LOGRATIO_ARMS = {
  frozen: { gear: 'gear-lr-frozen', shuffled: 'gear-lr-shuffled', divergence: 'gear-frozen' },
  self: { gear: 'gear-lr', shuffled: 'gear-lr-self-shuffled', divergence: 'gear' },
  strong: { gear: 'gear-lr-strong', shuffled: 'gear-lr-strong-shuffled', divergence: 'gear-strong' },
} as const;

/** H3 for one teacher (or the stronger family). */
export interface LogratioOutcome {
  /** Against GRPO. */
  vsBaseline: DecisionTest;
  /** Against its shuffled control. */
  vsShuffled: DecisionTest;
  /** Against GEAR with `D` (absent when that arm was not run). */
  vsDivergence?: DecisionTest;
  /** Both of the first two beyond 2 se. */
  helps: boolean;
  /** Ahead of GEAR with `D` beyond 2 se. */
  beatsDivergence: boolean;
  /** Ahead of GRPO and of its shuffled control (H3) and of `D`, all beyond 2 se. */
  recommended: boolean;
}

/** One paired test of the rules. */
export interface DecisionTest {
  /** What is compared, e.g. `GEAR − GRPO`. */
  label: string;
  /** The paired statistics of the per-seed differences. */
  paired: Paired;
  /** The difference is positive by more than {@link DECISION_SE} standard errors. */
  ahead: boolean;
}

/** Everything the rules decide. */
export interface DecisionOutcome {
  /** H1's two tests (absent when an arm was not run). */
  h1?: { vsBaseline: DecisionTest; vsShuffled: DecisionTest; helps: boolean };
  /** The ceiling check. */
  ceiling?: { test: DecisionTest; tie: boolean };
  /** H2's tests (absent when its arms were not run). */
  h2?: { oracle: DecisionTest; vsBaseline?: DecisionTest; vsShuffled?: DecisionTest; oracleHelps: boolean; gearHelps?: boolean; read: boolean };
  /** H3, the log-ratio anchor signal, per teacher and for the stronger family (absent when its arms were not run). */
  h3?: { frozen?: LogratioOutcome; self?: LogratioOutcome; strong?: LogratioOutcome };
  /** The verdict in sentences. */
  lines: string[];
}

function test(label: string, a: readonly number[], b: readonly number[]): DecisionTest {
  const p = paired(a, b);
  return { label, paired: p, ahead: p.mean > DECISION_SE * p.se };
}

const fmt = (t: DecisionTest) => {
  const p = t.paired;
  const tt = Number.isFinite(p.t) ? p.t.toFixed(2) : p.t > 0 ? 'inf' : '-inf';
  return `${t.label} ${DECISION_MEASURE} ${signedPm(p.mean, p.se)} (t ${tt}, ahead on ${p.wins} of ${p.n} seeds)`;
};

/**
 * Applies the declared rules to the per-seed AUCs of each arm (`auc(method)` in seed order, or
 * `undefined` when that arm was not run). Labels name the arms in the sentences.
 */
export function decide(auc: (method: string) => readonly number[] | undefined, label: (method: string) => string): DecisionOutcome {
  const A = DECISION_ARMS;
  const base = auc(A.baseline);
  const out: DecisionOutcome = { lines: [] };
  if (!base) return { lines: ['No decision: GRPO was not run.'] };
  const L = (m: string) => label(m);
  const gear = auc(A.gear), shuffled = auc(A.shuffled), oracle = auc(A.oracle);
  if (gear && shuffled) {
    const vsBaseline = test(`${L(A.gear)} − ${L(A.baseline)}`, gear, base);
    const vsShuffled = test(`${L(A.gear)} − ${L(A.shuffled)}`, gear, shuffled);
    const helps = vsBaseline.ahead && vsShuffled.ahead;
    out.h1 = { vsBaseline, vsShuffled, helps };
    out.lines.push(`H1: ${fmt(vsBaseline)}; ${fmt(vsShuffled)}.`,
      `H1 outcome: GEAR ${helps ? 'helps' : 'does not help'} (the rule needs both differences above ${DECISION_SE} se${helps ? '' : `; ${[!vsBaseline.ahead ? 'not ahead of GRPO' : '', !vsShuffled.ahead ? 'not ahead of its shuffled control' : ''].filter(Boolean).join(', ')}`}).`);
  } else out.lines.push('H1 not tested: GEAR or its shuffled control was not run.');
  if (oracle) {
    const t = test(`${L(A.oracle)} − ${L(A.baseline)}`, oracle, base);
    const tie = !(Math.abs(t.paired.mean) > DECISION_SE * t.paired.se);
    out.ceiling = { test: t, tie };
    out.lines.push(`Ceiling: ${fmt(t)}: ${tie ? 'a tie: by the rule, the bounded mean-one family may itself be the limit, not the signal (H2 is read)'
      : t.paired.mean > 0 ? 'ahead beyond 2 se: the family can help when its anchors are right' : 'behind beyond 2 se'}.`);
  }
  const sOracle = auc(A.strongOracle), sGear = auc(A.strongGear), sShuffled = auc(A.strongShuffled);
  if (!sOracle && out.ceiling?.tie) {
    out.lines.push(`H2 not tested here: its arms (${[A.strongOracle, A.strongGear, A.strongShuffled].join(', ')}) were not run; \`npm run study\` runs them.`);
  }
  if (sOracle) {
    const o = test(`${L(A.strongOracle)} − ${L(A.baseline)}`, sOracle, base);
    const h2: NonNullable<DecisionOutcome['h2']> = { oracle: o, oracleHelps: o.ahead, read: out.ceiling?.tie ?? false };
    const parts = [fmt(o)];
    if (sGear && sShuffled) {
      h2.vsBaseline = test(`${L(A.strongGear)} − ${L(A.baseline)}`, sGear, base);
      h2.vsShuffled = test(`${L(A.strongGear)} − ${L(A.strongShuffled)}`, sGear, sShuffled);
      h2.gearHelps = h2.vsBaseline.ahead && h2.vsShuffled.ahead;
      parts.push(fmt(h2.vsBaseline), fmt(h2.vsShuffled));
    }
    out.h2 = h2;
    out.lines.push(`H2 (stronger family${h2.read ? '' : ', reported although the ceiling check did not tie'}): ${parts.join('; ')}.`,
      `H2 outcome: oracle weights of the stronger family ${o.ahead ? 'beat' : 'do not beat'} GRPO beyond 2 se` +
      (h2.gearHelps === undefined ? '.' : `; GEAR of the stronger family ${h2.gearHelps ? 'helps' : 'does not help'} (ahead of GRPO and of its shuffled control beyond 2 se: ${h2.vsBaseline!.ahead ? 'yes' : 'no'}, ${h2.vsShuffled!.ahead ? 'yes' : 'no'}).`));
  }
  const names = { frozen: 'frozen answer teacher', self: 'self teacher', strong: 'stronger family (α 3, raw), frozen answer teacher' } as const;
  for (const key of ['frozen', 'self', 'strong'] as const) {
    const arms = LOGRATIO_ARMS[key];
    const g = auc(arms.gear), sh = auc(arms.shuffled), dv = auc(arms.divergence);
    if (!g || !sh) continue;
    const vsBaseline = test(`${L(arms.gear)} − ${L(A.baseline)}`, g, base);
    const vsShuffled = test(`${L(arms.gear)} − ${L(arms.shuffled)}`, g, sh);
    const vsDivergence = dv ? test(`${L(arms.gear)} − ${L(arms.divergence)}`, g, dv) : undefined;
    const helps = vsBaseline.ahead && vsShuffled.ahead;
    const beatsDivergence = vsDivergence?.ahead ?? false;
    const r: LogratioOutcome = { vsBaseline, vsShuffled, ...(vsDivergence ? { vsDivergence } : {}), helps, beatsDivergence, recommended: helps && beatsDivergence };
    (out.h3 ??= {})[key] = r;
    const tests = [vsBaseline, vsShuffled, ...(vsDivergence ? [vsDivergence] : [])];
    // the sentence names every test that failed
    const missed = [!vsBaseline.ahead ? 'GRPO' : '', !vsShuffled.ahead ? 'its shuffled control' : ''].filter(Boolean).join(' or ');
    const verdict = r.recommended ? 'recommended: it beats GRPO, its shuffled control and GEAR with D'
      : helps ? 'it helps (beats GRPO and its shuffled control) but does not beat GEAR with D: not recommended over D'
        : `it does not help (not ahead of ${missed} beyond 2 se)` +
          (beatsDivergence ? '; it is ahead of GEAR with D beyond 2 se, but not recommended (GRPO)' : '');
    out.lines.push(`H3, ${names[key]}: ${tests.map(fmt).join('; ')}.`, `H3 outcome (${names[key]}): ${verdict}.`);
  }
  return out;
}
