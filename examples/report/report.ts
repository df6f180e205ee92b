/**
 * Demo output: progress bars (stderr, redrawn in place on a terminal, one line per run otherwise), the
 * results table, the SVG learning-curve plot (mean with a +-1 std band per method; hand-written SVG) and
 * small statistics helpers.
 *
 * @module
 */

/** Mean and sample standard deviation (0 for a single value). */
export function meanStd(xs: number[]): { mean: number; std: number } {
  const n = xs.length;
  if (n === 0) return { mean: NaN, std: NaN };
  const mean = xs.reduce((a, b) => a + b, 0) / n;
  const std = n > 1 ? Math.sqrt(xs.reduce((a, b) => a + (b - mean) ** 2, 0) / (n - 1)) : 0;
  return { mean, std };
}

/** A progress bar for one run, written to stderr. */
export class Progress {
  private readonly tty: boolean;
  private readonly t0 = performance.now();
  private last = '';

  /**
   * @param label what runs (e.g. `GEAR seed 2`)
   * @param total number of steps
   * @param stream where to draw (stderr by default)
   */
  constructor(private readonly label: string, private readonly total: number,
    private readonly stream: NodeJS.WriteStream = process.stderr) {
    this.tty = Boolean(stream.isTTY) && !process.env.CI;
  }

  /** Updates the bar after `done` steps with a short status text. */
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

  /** Finishes the bar with a final status (one line on a non-terminal). */
  done(status: string): void {
    const secs = ((performance.now() - this.t0) / 1000).toFixed(1);
    const line = `${this.label.padEnd(16)} done ${this.total}/${this.total} in ${secs}s  ${status}`;
    this.stream.write(this.tty ? `\r${line}\x1b[K\n` : `${line}\n`);
  }
}

/** Formats `mean +- std` with fixed decimals. */
export function pm(xs: number[], digits = 3): string {
  const { mean, std } = meanStd(xs);
  return `${mean.toFixed(digits)} ± ${std.toFixed(digits)}`;
}

/** Renders a plain-text table (first row = header). */
export function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  const line = (r: string[]) => r.map((x, c) => (c === 0 ? x.padEnd(widths[c]!) : x.padStart(widths[c]!))).join('  ');
  return [line(rows[0]!), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.slice(1).map(line)].join('\n');
}

/** One method's learning curves (one per seed, evaluated at the same steps). */
export interface CurveSet {
  /** Legend label. */
  label: string;
  /** Stroke colour. */
  color: string;
  /** Evaluation steps (shared by all seeds). */
  steps: number[];
  /** Success rate per seed per evaluation step. */
  perSeed: number[][];
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** The learning-curve plot: held-out success rate against RL step, mean line and +-1 std band per method. */
export function learningCurveSvg(sets: CurveSet[], title: string): string {
  const W = 720, H = 440, L = 64, R = 150, T = 44, B = 56;
  const pw = W - L - R, ph = H - T - B;
  const maxStep = Math.max(1, ...sets.flatMap((s) => s.steps));
  const x = (s: number) => (L + (s / maxStep) * pw).toFixed(1);
  const y = (v: number) => (T + (1 - Math.min(1, Math.max(0, v))) * ph).toFixed(1);
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`);
  out.push(`<rect x="0" y="0" width="${W}" height="${H}" fill="#ffffff"/>`);
  out.push(`<text x="${W / 2}" y="24" text-anchor="middle" font-size="15">${esc(title)}</text>`);
  for (let i = 0; i <= 5; i++) {
    const v = i / 5;
    out.push(`<line x1="${L}" x2="${L + pw}" y1="${y(v)}" y2="${y(v)}" stroke="#e3e3e3"/>`);
    out.push(`<text x="${L - 8}" y="${(Number(y(v)) + 4).toFixed(1)}" text-anchor="end">${v.toFixed(1)}</text>`);
  }
  const tickEvery = Math.max(1, Math.ceil(maxStep / 8 / 5) * 5);
  for (let s = 0; s <= maxStep; s += tickEvery) {
    out.push(`<line x1="${x(s)}" x2="${x(s)}" y1="${T + ph}" y2="${T + ph + 5}" stroke="#333"/>`);
    out.push(`<text x="${x(s)}" y="${T + ph + 18}" text-anchor="middle">${s}</text>`);
  }
  out.push(`<rect x="${L}" y="${T}" width="${pw}" height="${ph}" fill="none" stroke="#333"/>`);
  out.push(`<text x="${L + pw / 2}" y="${H - 14}" text-anchor="middle">RL step</text>`);
  out.push(`<text x="18" y="${T + ph / 2}" text-anchor="middle" transform="rotate(-90 18 ${T + ph / 2})">held-out success rate</text>`);
  sets.forEach((s, k) => {
    const stats = s.steps.map((_, i) => meanStd(s.perSeed.map((c) => c[i]!)));
    const upper = s.steps.map((st, i) => `${x(st)},${y(stats[i]!.mean + stats[i]!.std)}`);
    const lower = s.steps.map((st, i) => `${x(st)},${y(stats[i]!.mean - stats[i]!.std)}`).reverse();
    out.push(`<polygon class="band" data-method="${esc(s.label)}" points="${[...upper, ...lower].join(' ')}" fill="${s.color}" fill-opacity="0.18" stroke="none"/>`);
    out.push(`<polyline class="mean" data-method="${esc(s.label)}" points="${s.steps.map((st, i) => `${x(st)},${y(stats[i]!.mean)}`).join(' ')}" fill="none" stroke="${s.color}" stroke-width="2.2"/>`);
    const ly = T + 16 + k * 22;
    out.push(`<line x1="${L + pw + 14}" x2="${L + pw + 40}" y1="${ly}" y2="${ly}" stroke="${s.color}" stroke-width="3"/>`);
    out.push(`<text x="${L + pw + 46}" y="${ly + 4}">${esc(s.label)} (n=${s.perSeed.length})</text>`);
  });
  out.push(`<text x="${L + pw + 14}" y="${T + 16 + sets.length * 22 + 8}" font-size="10" fill="#555">band: mean ± 1 std</text>`);
  out.push('</svg>');
  return out.join('\n') + '\n';
}
