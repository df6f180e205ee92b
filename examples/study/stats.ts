/**
 * The study's paired statistics: the demo's (examples/report/stats.ts), plus one formatter for its table.
 *
 * @module
 */
import { paired, signedPm, type Paired } from '../report/stats.js';

export { paired, type Paired };

/** "+0.012 ± 0.008 (t 1.5, 18/10/2)": the difference, its standard error, t and seeds ahead/behind/level. */
export function formatPaired(p: Paired): string {
  const t = Number.isFinite(p.t) ? p.t.toFixed(1) : p.t > 0 ? '∞' : '−∞';
  return `${signedPm(p.mean, p.se)} (t ${t}, ${p.wins}/${p.losses}/${p.draws})`;
}
