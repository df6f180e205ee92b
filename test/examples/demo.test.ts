// Runs the compiled quick demo as a user would (`node dist-examples/demo.js --quick`) and checks what
// it promises: it finishes in time, prints the table, every method's held-out success rises clearly
// above the warm-start checkpoint's, and the SVG / JSON / GEAR visualiser outputs are well formed.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';

const ROOT = resolve(import.meta.dirname, '../..');
const METHODS = ['GRPO', 'GiGPO', 'GEAR'];

/** Minimal XML well-formedness check: balanced tags, one root, quoted attributes, escaped text. */
function checkXml(xml: string): { root: string; elements: number } {
  const body = xml.replace(/^<\?xml[^?]*\?>\s*/, '').trim();
  const stack: string[] = [];
  let root = '', elements = 0, i = 0;
  const entity = /^&(amp|lt|gt|quot|apos|#\d+|#x[0-9a-fA-F]+);/;
  const checkText = (t: string, where: string) => {
    for (let k = 0; k < t.length; k++) {
      if (t[k] === '<') throw new Error(`unescaped < in ${where}`);
      if (t[k] === '&' && !entity.test(t.slice(k))) throw new Error(`bare & in ${where}`);
    }
  };
  while (i < body.length) {
    if (body[i] !== '<') {
      const j = body.indexOf('<', i);
      const text = body.slice(i, j < 0 ? body.length : j);
      if (stack.length === 0 && text.trim()) throw new Error(`text outside the root: ${text.slice(0, 20)}`);
      checkText(text, 'text');
      i = j < 0 ? body.length : j;
      continue;
    }
    const j = body.indexOf('>', i);
    if (j < 0) throw new Error('unterminated tag');
    const tag = body.slice(i + 1, j);
    i = j + 1;
    if (tag.startsWith('/')) {
      const name = tag.slice(1).trim();
      if (stack.pop() !== name) throw new Error(`mismatched </${name}>`);
      continue;
    }
    const selfClosing = tag.endsWith('/');
    const m = /^([A-Za-z_][\w.:-]*)((?:\s+[A-Za-z_][\w.:-]*="[^"]*")*)\s*\/?$/.exec(tag);
    if (!m) throw new Error(`malformed tag <${tag.slice(0, 40)}>`);
    for (const a of m[2]!.matchAll(/="([^"]*)"/g)) checkText(a[1]!, `attribute of <${m[1]}>`);
    if (stack.length === 0) {
      if (root) throw new Error('more than one root element');
      root = m[1]!;
    }
    elements++;
    if (!selfClosing) stack.push(m[1]!);
  }
  if (stack.length) throw new Error(`unclosed <${stack.pop()}>`);
  return { root, elements };
}

// The examples are compiled against the package's own name ('gear-rl' -> dist/index.js).
beforeAll(() => {
  if (!existsSync(join(ROOT, 'dist/index.js'))) throw new Error('dist/ is missing: run `npm run build:ts` (npm test does it in pretest)');
  execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.examples.json'], { cwd: ROOT });
}, 120_000);

describe('demo (quick)', () => {
  let out: string;
  let run: { status: number | null; stdout: string; stderr: string; seconds: number };

  beforeAll(() => {
    out = mkdtempSync(join(tmpdir(), 'gear-demo-'));
    const t0 = performance.now();
    const r = spawnSync(process.execPath, ['dist-examples/demo.js', '--quick', '--out', out], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 });
    run = { status: r.status, stdout: r.stdout, stderr: r.stderr, seconds: (performance.now() - t0) / 1000 };
  }, 180_000);
  afterAll(() => { if (out) rmSync(out, { recursive: true, force: true }); });

  it('exits cleanly within the time budget and prints the results table', () => {
    expect(run.status, run.stderr).toBe(0);
    expect(run.seconds).toBeLessThan(90);
    expect(run.stdout).toMatch(/method\s+success \(end\)\s+gain vs warm-start\s+AUC\s+AUC - GRPO \(paired\)\s+answer credit\s+wall s\/run/);
    expect(run.stdout).toMatch(/^GEAR\s.*\s[+-]\d\.\d{3} ± \d\.\d{3}\s/m);
    for (const m of METHODS) expect(run.stdout).toMatch(new RegExp(`^${m.replace('.', '\\.')}\\s+\\d\\.\\d{3} ± \\d\\.\\d{3}`, 'm'));
    // One progress line per run (stderr is not a terminal here) plus the warm-start.
    expect(run.stderr.match(/ done /g)?.length).toBe(1 + METHODS.length * 3);
  });

  it('prints how held-out episodes end, for the checkpoint and each method', () => {
    expect(run.stdout).toMatch(/checkpoint\s+win\s+wrong_answer\s+guess\s+out_of_turns/);
    const res = JSON.parse(readFileSync(join(out, 'results.json'), 'utf8'));
    const n = res.rl.evalEpisodes as number;
    const w = res.warmStart.heldOutOutcomes;
    expect(w.win + w.wrong_answer + w.guess + w.out_of_turns).toBe(n);
    expect(w.win / n).toBe(res.warmStart.heldOutSuccess);
    for (const r of res.runs) expect(r.finalOutcomes.win / n).toBe(r.curve[r.curve.length - 1].success);
  });

  it('every method ends clearly above the warm-start checkpoint on held-out tasks', () => {
    const res = JSON.parse(readFileSync(join(out, 'results.json'), 'utf8'));
    const warm = res.warmStart.heldOutSuccess as number;
    expect(warm).toBeGreaterThan(0.2);
    expect(warm).toBeLessThan(0.8);
    for (const m of ['grpo', 'gigpo', 'gear']) {
      const runs = res.runs.filter((r: { method: string }) => r.method === m);
      expect(runs.length).toBe(3);
      const finals = runs.map((r: { curve: { success: number }[] }) => r.curve[r.curve.length - 1]!.success);
      const mean = finals.reduce((a: number, b: number) => a + b, 0) / finals.length;
      expect(mean, `${m}: ${finals}`).toBeGreaterThan(warm + 0.1);
      for (const f of finals) expect(f, `${m}: ${finals}`).toBeGreaterThan(warm);
      // Every curve starts at the shared checkpoint.
      for (const r of runs) expect(r.curve[0].success).toBe(warm);
    }
  });

  it('writes a JSON log with every step of every run', () => {
    const res = JSON.parse(readFileSync(join(out, 'results.json'), 'utf8'));
    expect(res.format).toBe('gear-rl-demo');
    const steps = res.rl.steps as number;
    expect(res.runs.length).toBe(9);
    for (const r of res.runs) {
      expect(r.log.length).toBe(steps);
      r.log.forEach((l: Record<string, unknown>, i: number) => {
        expect(l.step).toBe(i);
        for (const k of ['lr', 'trainReward', 'loss', 'gradNorm', 'entropy', 'advAbsMean', 'answerCreditShare', 'ms']) expect(Number.isFinite(l[k]), `${k} at step ${i}`).toBe(true);
      });
      if (r.method === 'gear') expect(r.log[0].advMetrics).toHaveProperty('segments');
      if (r.method === 'gigpo') expect(r.log[0].advMetrics.singletonShare).toBeLessThan(0.9);
    }
    expect(res.summary.map((s: { label: string }) => s.label)).toEqual(METHODS);
  });

  it('draws a well-formed SVG with a mean line and a band per method', () => {
    const svg = readFileSync(join(out, 'learning-curves.svg'), 'utf8');
    const x = checkXml(svg);
    expect(x.root).toBe('svg');
    const res = JSON.parse(readFileSync(join(out, 'results.json'), 'utf8'));
    const points = res.runs[0].curve.length;
    for (const m of METHODS) {
      const line = new RegExp(`<polyline class="mean" data-method="${m}" points="([^"]+)"`).exec(svg);
      expect(line, m).not.toBeNull();
      const pts = line![1]!.split(' ').map((p) => p.split(',').map(Number));
      expect(pts.length).toBe(points);
      for (const [px, py] of pts) { expect(Number.isFinite(px)).toBe(true); expect(Number.isFinite(py)).toBe(true); }
      expect(svg).toContain(`<polygon class="band" data-method="${m}"`);
    }
    // The checker itself rejects broken markup.
    expect(() => checkXml('<svg><g></svg>')).toThrow();
    expect(() => checkXml('<svg><text>a & b</text></svg>')).toThrow();
  });

  it('saves one GEAR batch the visualiser reads back, and its HTML report', () => {
    const rec = rl.loadBatch(join(out, 'gear-batch.json'));
    const R = rec.offsets.length - 1;
    expect(R).toBe(64);
    expect(rec.tokens?.length).toBe(rec.offsets[R]);
    expect(rec.mask!.some((m) => m === 0)).toBe(true); // observation tokens are masked
    const html = readFileSync(join(out, 'gear-report.html'), 'utf8');
    expect(html).toMatch(/^<!DOCTYPE html>/i);
    expect(html).toContain('answer');
  });
});

describe('own-model example', () => {
  it('runs the rollouts-to-update path on plain Float32Array logits and the reward goes up', () => {
    const stdout = execFileSync(process.execPath, ['dist-examples/own-model.js'], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
    const rewards = [...stdout.matchAll(/mean reward (\d\.\d+)/g)].map((m) => Number(m[1]));
    expect(rewards.length).toBe(4);
    expect(rewards[3]!).toBeGreaterThan(rewards[0]! + 0.3);
  });
});


describe('demo command line', () => {
  it('rejects bad options with a message and exit code 2 before any training', () => {
    const bad = (...args: string[]) => spawnSync(process.execPath, ['dist-examples/demo.js', ...args], { cwd: ROOT, encoding: 'utf8', timeout: 30_000 });
    let r = bad('--bogus');
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^demo: unknown option --bogus/);
    r = bad('--methods', 'grpo,ppo');
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/--methods: expected some of grpo,gigpo,gear,drgrpo,rloo, got ppo/);
    r = bad('--gear', '{"alpha":-1}');
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/options\.alpha: expected a finite number >= 0/);
    r = bad('--steps', '0');
    expect(r.status).toBe(2);
    expect(r.stderr).not.toMatch(/warm-start/);
  });
});
