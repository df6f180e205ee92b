/**
 * Demo output: progress display (stderr), plain-text tables and the SVG figure (hand-written SVG): the
 * learning curves, the paired difference to GRPO and the credit-fidelity bars.
 *
 * @module
 */
import { meanSe } from './stats.js';

/** Mean and sample standard deviation (0 for a single value). */
export function meanStd(xs: number[]): { mean: number; std: number } {
  const { mean, std } = meanSe(xs);
  return { mean, std };
}

/** True when progress may be redrawn in place on `stream`. */
export function isInteractive(stream: NodeJS.WriteStream = process.stderr): boolean {
  return Boolean(stream.isTTY) && !process.env.CI;
}

/** A progress bar written to stderr: redrawn in place on a terminal, a single final line otherwise. */
export class Progress {
  private readonly tty: boolean;
  private readonly t0 = performance.now();
  private last = '';

  /**
   * @param label what runs (e.g. `warm-start`)
   * @param total number of units
   * @param stream where to draw (stderr by default)
   */
  constructor(private readonly label: string, private readonly total: number,
    private readonly stream: NodeJS.WriteStream = process.stderr) {
    this.tty = isInteractive(stream);
  }

  /** Updates the bar after `done` units with a short status text (terminals only). */
  update(done: number, status = ''): void {
    if (!this.tty) return;
    const width = 24;
    const fill = Math.round((done / this.total) * width);
    const secs = ((performance.now() - this.t0) / 1000).toFixed(1);
    const line = `${this.label.padEnd(16)} [${'#'.repeat(fill)}${'.'.repeat(width - fill)}] ${String(done).padStart(4)}/${this.total} ${secs}s ${status}`;
    if (line === this.last) return;
    this.last = line;
    this.stream.write(`\r${line.slice(0, (this.stream.columns || 120) - 1)}\x1b[K`);
  }

  /** Clears the bar so another line can be printed (terminals only); the next update redraws it. */
  clear(): void {
    if (this.tty && this.last) { this.stream.write('\r\x1b[K'); this.last = ''; }
  }

  /** Finishes with a final status line. */
  done(status: string): void {
    const secs = ((performance.now() - this.t0) / 1000).toFixed(1);
    const line = `${this.label.padEnd(16)} done ${this.total}/${this.total} in ${secs}s  ${status}`;
    this.stream.write(this.tty ? `\r${line}\x1b[K\n` : `${line}\n`);
  }
}

/** Formats `mean ± std` with fixed decimals. */
export function pm(xs: number[], digits = 3): string {
  const { mean, std } = meanStd(xs);
  return `${mean.toFixed(digits)} ± ${std.toFixed(digits)}`;
}

/** Renders a plain-text table (first row = header; first column left-aligned, the others right-aligned). */
export function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  const line = (r: string[]) => r.map((x, c) => (c === 0 ? x.padEnd(widths[c]!) : x.padStart(widths[c]!))).join('  ');
  return [line(rows[0]!), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.slice(1).map(line)].join('\n');
}

/** The Okabe–Ito palette (colour-blind safe), in the order methods are given colours. */
export const OKABE_ITO = ['#000000', '#E69F00', '#0072B2', '#D55E00', '#009E73', '#CC79A7', '#56B4E9', '#F0E442'] as const;
/** Dash patterns paired with the palette so lines differ without colour too. */
export const DASHES = ['', '7 4', '2 3', '9 3 2 3', '4 2', '12 3', '1 2'] as const;

/** One method's series for the figure. */
export interface MethodSeries {
  /** Legend label. */
  label: string;
  /** Stroke colour. */
  color: string;
  /** `stroke-dasharray` ('' = solid). */
  dash: string;
  /** Evaluation steps (shared by all seeds). */
  steps: number[];
  /** Success rate per seed per evaluation step. */
  perSeed: number[][];
  /** Per seed per evaluation step: success minus GRPO's on the same seed (absent for GRPO itself). */
  diffPerSeed?: number[][];
  /** Credit fidelity (mean and se over seeds) of wrong, right and neutral. */
  fidelity?: { wrong: [number, number]; right: [number, number]; neutral: [number, number] };
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const f1 = (x: number) => x.toFixed(1);

/** A "nice" tick step (1, 2, 2.5 or 5 times a power of ten) giving about `target` ticks over `span`. */
export function niceStep(span: number, target = 5): number {
  if (!(span > 0)) return 1;
  const raw = span / target;
  const p = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

/**
 * A y-range fitted to the data: the data's min and max widened by `margin` of the span on each side
 * (at least a small absolute span), optionally clamped to `clamp`.
 */
export function fitRange(values: number[], margin = 0.06, clamp?: [number, number], minSpan = 0.02): [number, number] {
  const xs = values.filter(Number.isFinite);
  let lo = xs.length ? Math.min(...xs) : 0, hi = xs.length ? Math.max(...xs) : 1;
  if (hi - lo < minSpan) { const c = (hi + lo) / 2; lo = c - minSpan / 2; hi = c + minSpan / 2; }
  const m = (hi - lo) * margin;
  lo -= m; hi += m;
  if (clamp) { lo = Math.max(clamp[0], lo); hi = Math.min(clamp[1], hi); }
  return [lo, hi];
}

interface Panel { x: number; y: number; w: number; h: number }

/** Draws y grid, ticks and labels for [lo, hi] and returns the value-to-pixel map. */
function yAxis(out: string[], p: Panel, lo: number, hi: number, label: string, digits?: number): (v: number) => number {
  const y = (v: number) => p.y + (1 - (v - lo) / (hi - lo)) * p.h;
  const step = niceStep(hi - lo, 5);
  const mant = step / 10 ** Math.floor(Math.log10(step) + 1e-9);
  const dg = digits ?? Math.max(0, Math.ceil(-Math.log10(step) - 1e-9) + (Math.abs(mant - 2.5) < 1e-6 ? 1 : 0));
  for (let v = Math.ceil(lo / step - 1e-9) * step; v <= hi + 1e-9; v += step) {
    const py = f1(y(v));
    out.push(`<line x1="${p.x}" x2="${p.x + p.w}" y1="${py}" y2="${py}" stroke="#e6e6e6"/>`);
    out.push(`<text x="${p.x - 6}" y="${f1(y(v) + 4)}" text-anchor="end">${(Math.abs(v) < 1e-12 ? 0 : v).toFixed(dg)}</text>`);
  }
  out.push(`<text x="${p.x - 46}" y="${f1(p.y + p.h / 2)}" text-anchor="middle" transform="rotate(-90 ${p.x - 46} ${f1(p.y + p.h / 2)})">${esc(label)}</text>`);
  return y;
}

/** Draws x ticks for steps 0..maxStep and returns the step-to-pixel map. */
function xAxis(out: string[], p: Panel, maxStep: number, label: string): (s: number) => number {
  const x = (s: number) => p.x + (s / maxStep) * p.w;
  const step = niceStep(maxStep, 6);
  for (let s = 0; s <= maxStep + 1e-9; s += step) {
    out.push(`<line x1="${f1(x(s))}" x2="${f1(x(s))}" y1="${p.y + p.h}" y2="${p.y + p.h + 4}" stroke="#333"/>`);
    out.push(`<text x="${f1(x(s))}" y="${p.y + p.h + 16}" text-anchor="middle">${s}</text>`);
  }
  out.push(`<text x="${p.x + p.w / 2}" y="${p.y + p.h + 32}" text-anchor="middle">${esc(label)}</text>`);
  return x;
}

/** A mean line with a ±se band. */
function band(out: string[], cls: string, s: MethodSeries, steps: number[], series: number[][], x: (s: number) => number, y: (v: number) => number): void {
  const stats = steps.map((_, i) => meanSe(series.map((c) => c[i]!)));
  const upper = steps.map((st, i) => `${f1(x(st))},${f1(y(stats[i]!.mean + stats[i]!.se))}`);
  const lower = steps.map((st, i) => `${f1(x(st))},${f1(y(stats[i]!.mean - stats[i]!.se))}`).reverse();
  out.push(`<polygon class="${cls}-band" data-method="${esc(s.label)}" points="${[...upper, ...lower].join(' ')}" fill="${s.color}" fill-opacity="0.15" stroke="none"/>`);
  out.push(`<polyline class="${cls}" data-method="${esc(s.label)}" points="${steps.map((st, i) => `${f1(x(st))},${f1(y(stats[i]!.mean))}`).join(' ')}" fill="none" stroke="${s.color}" stroke-width="2.2"${s.dash ? ` stroke-dasharray="${s.dash}"` : ''}/>`);
}

/**
 * The demo's figure: (a) held-out success against RL step, mean and ±1 se band per method; (b) the
 * paired difference to GRPO (same seeds), mean and ±1 se band; (c) credit fidelity per method (signed
 * share of advantage mass on wrong and right decisive tokens, |advantage| share on neutral tokens), with
 * ±1 se whiskers. Panels (b) and (c) are drawn when the series carry the data. Every y-axis is fitted
 * to its data with a small margin.
 */
export function demoSvg(sets: MethodSeries[], title: string): string {
  // The legend column widens with the longest label (about 6.6 px a character at 12 px).
  const longest = Math.max(0, ...sets.map((s) => `${s.label} (n=${s.perSeed.length})`.length));
  const R = Math.max(190, Math.ceil(56 + 6.6 * longest)), L = 76, pw = 590 - L, W = L + pw + R;
  const hasDiff = sets.some((s) => s.diffPerSeed);
  const hasFid = sets.some((s) => s.fidelity);
  const pA: Panel = { x: L, y: 56, w: pw, h: 250 };
  const pB: Panel = { x: L, y: pA.y + pA.h + 70, w: pw, h: 170 };
  const pC: Panel = { x: L, y: (hasDiff ? pB.y + pB.h : pA.y + pA.h) + 70, w: pw, h: 190 };
  const H = (hasFid ? pC.y + pC.h : hasDiff ? pB.y + pB.h : pA.y + pA.h) + 56;
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`);
  out.push(`<rect x="0" y="0" width="${W}" height="${H}" fill="#ffffff"/>`);
  out.push(`<text x="${W / 2}" y="24" text-anchor="middle" font-size="15">${esc(title)}</text>`);
  const maxStep = Math.max(1, ...sets.flatMap((s) => s.steps));

  // (a) learning curves.
  const meansA = sets.flatMap((s) => s.steps.flatMap((_, i) => {
    const m = meanSe(s.perSeed.map((c) => c[i]!));
    return [m.mean - m.se, m.mean + m.se];
  }));
  const [aLo, aHi] = fitRange(meansA, 0.06, [0, 1]);
  out.push(`<text x="${pA.x}" y="${pA.y - 10}" font-weight="bold">(a) held-out success rate, mean ± 1 se over seeds</text>`);
  let y = yAxis(out, pA, aLo, aHi, 'held-out success');
  let x = xAxis(out, pA, maxStep, 'RL step');
  for (const s of sets) band(out, 'mean', s, s.steps, s.perSeed, x, y);
  out.push(`<rect x="${pA.x}" y="${pA.y}" width="${pA.w}" height="${pA.h}" fill="none" stroke="#333"/>`);

  // (b) paired difference to GRPO.
  if (hasDiff) {
    const vals = sets.flatMap((s) => (s.diffPerSeed ? s.steps.flatMap((_, i) => {
      const m = meanSe(s.diffPerSeed!.map((c) => c[i]!));
      return [m.mean - m.se, m.mean + m.se];
    }) : []));
    const [bLo, bHi] = fitRange([...vals, 0], 0.08);
    out.push(`<text x="${pB.x}" y="${pB.y - 10}" font-weight="bold">(b) paired difference to GRPO (same seeds), mean ± 1 se</text>`);
    y = yAxis(out, pB, bLo, bHi, 'success − GRPO');
    x = xAxis(out, pB, maxStep, 'RL step');
    out.push(`<line class="zero" x1="${pB.x}" x2="${pB.x + pB.w}" y1="${f1(y(0))}" y2="${f1(y(0))}" stroke="#555" stroke-width="1"/>`);
    for (const s of sets) if (s.diffPerSeed) band(out, 'diff', s, s.steps, s.diffPerSeed, x, y);
    out.push(`<rect x="${pB.x}" y="${pB.y}" width="${pB.w}" height="${pB.h}" fill="none" stroke="#333"/>`);
  }

  // (c) credit-fidelity bars: signed mass on decisive tokens (left), |A| share on neutral tokens (right, own axis).
  if (hasFid) {
    const fs = sets.filter((s) => s.fidelity);
    out.push(`<text x="${pC.x}" y="${pC.y - 10}" font-weight="bold">(c) credit fidelity: share of Σ|A| per batch, mean ± 1 se over seeds</text>`);
    const bars = (p: Panel, cats: readonly (readonly ['wrong' | 'right' | 'neutral', string])[], label: string) => {
      const vals = fs.flatMap((s) => cats.flatMap(([k]) => [s.fidelity![k][0] - s.fidelity![k][1], s.fidelity![k][0] + s.fidelity![k][1]]));
      const [lo, hi] = fitRange([...vals, 0], 0.08);
      const yy = yAxis(out, p, lo, hi, label);
      const gw = p.w / cats.length, bw = Math.min(24, (gw - 16) / fs.length);
      cats.forEach(([k, name], c) => {
        const gx = p.x + c * gw + (gw - bw * fs.length) / 2;
        fs.forEach((s, i) => {
          const [m, se] = s.fidelity![k];
          const bx = gx + i * bw, y0 = yy(0), y1 = yy(m);
          out.push(`<rect class="bar" data-method="${esc(s.label)}" data-kind="${k}" x="${f1(bx + 1)}" y="${f1(Math.min(y0, y1))}" width="${f1(bw - 2)}" height="${f1(Math.abs(y1 - y0))}" fill="${s.color}"${s.dash ? ` fill-opacity="0.8" stroke="#333" stroke-dasharray="${s.dash}"` : ''}/>`);
          const cx = f1(bx + bw / 2);
          out.push(`<line x1="${cx}" x2="${cx}" y1="${f1(yy(m - se))}" y2="${f1(yy(m + se))}" stroke="#333"/>`);
        });
        out.push(`<text x="${f1(p.x + c * gw + gw / 2)}" y="${p.y + p.h + 16}" text-anchor="middle">${esc(name)}</text>`);
      });
      out.push(`<line class="zero" x1="${p.x}" x2="${p.x + p.w}" y1="${f1(yy(0))}" y2="${f1(yy(0))}" stroke="#555"/>`);
      out.push(`<rect x="${p.x}" y="${p.y}" width="${p.w}" height="${p.h}" fill="none" stroke="#333"/>`);
    };
    const wl = Math.round(pC.w * 0.6);
    bars({ ...pC, w: wl }, [['wrong', 'wrong decisive (signed)'], ['right', 'right decisive (signed)']], 'signed share');
    bars({ x: pC.x + wl + 70, y: pC.y, w: pC.w - wl - 70, h: pC.h }, [['neutral', 'neutral (|A|)']], '|A| share');
  }

  // Legend (shared by the panels).
  const lx = L + pw + 16;
  sets.forEach((s, k) => {
    const ly = pA.y + 12 + k * 22;
    out.push(`<line x1="${lx}" x2="${lx + 30}" y1="${ly}" y2="${ly}" stroke="${s.color}" stroke-width="3"${s.dash ? ` stroke-dasharray="${s.dash}"` : ''}/>`);
    out.push(`<text class="legend" x="${lx + 36}" y="${ly + 4}">${esc(s.label)} (n=${s.perSeed.length})</text>`);
  });
  out.push(`<text x="${lx}" y="${pA.y + 12 + sets.length * 22 + 6}" font-size="10" fill="#555">bands: ± 1 standard error</text>`);
  out.push('</svg>');
  return out.join('\n') + '\n';
}
