import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import * as similarity from '../../ts/similarity.js';
import { GearError } from '../../ts/core/errors.js';

function rng(seed: number) {
  let s = seed >>> 0;
  return () => ((s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32);
}

const ALPHABETS = ['ab', 'abc ', 'abcdefghij', 'The quick brown fox jumps over the lazy dog.,;', 'aé漢😀b', 'xyz\n\t 0123456789'];

/** Random strings: short and long (>= 200 chars, autojunk on), repeated runs, unicode incl. astral. */
function randomString(r: () => number): string {
  const alpha = [...ALPHABETS[Math.floor(r() * ALPHABETS.length)]!];
  const kind = r();
  const len = kind < 0.4 ? Math.floor(r() * 40) : kind < 0.8 ? 200 + Math.floor(r() * 250) : Math.floor(r() * 200);
  let s = '';
  while ([...s].length < len) {
    const c = alpha[Math.floor(r() * alpha.length)]!;
    s += r() < 0.15 ? c.repeat(1 + Math.floor(r() * 12)) : c;
  }
  return s;
}

/** b = a lightly edited (so ratios land near typical thresholds), or an unrelated string. */
function pairs(n: number, seed: number): [string, string][] {
  const r = rng(seed);
  const out: [string, string][] = [['', ''], ['', 'abc'], ['abc', ''], ['a'.repeat(300), 'a'.repeat(250)]];
  while (out.length < n) {
    const a = randomString(r);
    let b: string;
    if (r() < 0.6) {
      const cs = [...a];
      const edits = Math.floor(r() * 8);
      for (let e = 0; e < edits && cs.length; e++) {
        const p = Math.floor(r() * cs.length);
        if (r() < 0.5) cs.splice(p, 1);
        else cs.splice(p, 0, ...[...randomString(r)].slice(0, 3));
      }
      b = cs.join('');
    } else b = randomString(r);
    out.push(r() < 0.5 ? [a, b] : [b, a]);
  }
  return out;
}

function python(code: string, input: unknown): any {
  const res = spawnSync('python3', ['-c', code], { input: JSON.stringify(input), encoding: 'utf8', maxBuffer: 1 << 28 });
  if (res.status !== 0) throw new Error(`python3 failed: ${res.stderr}`);
  return JSON.parse(res.stdout);
}

const PY_RATIOS = `
import sys, json, difflib
pairs = json.load(sys.stdin)
out = []
for a, b in pairs:
    m = difflib.SequenceMatcher(None, a, b)
    out.append([m.ratio(), m.quick_ratio(), m.real_quick_ratio()])
print(json.dumps(out))
`;

describe('difflib port vs CPython difflib (bit for bit)', () => {
  const ps = pairs(400, 12345);
  const expected = python(PY_RATIOS, ps) as [number, number, number][];

  it('covers short, long (autojunk), repeated and astral-plane strings', () => {
    expect(ps.some(([, b]) => [...b].length >= 200)).toBe(true);
    expect(ps.some(([a]) => /😀/u.test(a))).toBe(true);
    expect(ps.some(([a, b]) => [...a].length < 200 && [...b].length < 200 && a !== b)).toBe(true);
  });

  it('ratio, quick_ratio and real_quick_ratio are identical', () => {
    ps.forEach(([a, b], i) => {
      const [r, q, rq] = expected[i]!;
      expect(similarity.sequenceMatcherRatio(a, b), `ratio #${i}`).toBe(r);
      expect(similarity.quickRatio(a, b), `quick_ratio #${i}`).toBe(q);
      expect(similarity.realQuickRatio(a, b), `real_quick_ratio #${i}`).toBe(rq);
    });
  });

  it('the ratio is not symmetric when autojunk applies to b only, exactly as difflib', () => {
    const asym = ps.findIndex(([a, b]) => similarity.sequenceMatcherRatio(a, b) !== similarity.sequenceMatcherRatio(b, a));
    expect(asym).toBeGreaterThanOrEqual(0);
    const [a, b] = ps[asym]!;
    const [ab, ba] = python(PY_RATIOS, [[a, b], [b, a]]) as [number[], number[]];
    expect(similarity.sequenceMatcherRatio(a, b)).toBe(ab![0]);
    expect(similarity.sequenceMatcherRatio(b, a)).toBe(ba![0]);
  });

  it('a prepared representative gives the same ratio as the plain string', () => {
    ps.slice(0, 50).forEach(([a, b], i) => {
      expect(similarity.sequenceMatcherRatio(a, new similarity.PreparedText(b))).toBe(expected[i]![0]);
    });
  });

  it('similarity clustering equals verl-agent greedy first-cluster scan run by Python', () => {
    const r = rng(99);
    const base = Array.from({ length: 6 }, () => randomString(r));
    const texts: string[] = [];
    for (let i = 0; i < 150; i++) {
      const cs = [...base[Math.floor(r() * base.length)]!];
      const edits = Math.floor(r() * 4);
      for (let e = 0; e < edits && cs.length; e++) cs.splice(Math.floor(r() * cs.length), 1, 'Z');
      texts.push(cs.join(''));
    }
    for (const thr of [0.5, 0.9, 0.95]) {
      const py = python(`
import sys, json
from difflib import SequenceMatcher
texts, thr = json.load(sys.stdin)
clusters = []
out = []
for obs in texts:
    for ci, cl in enumerate(clusters):
        if SequenceMatcher(None, obs, cl).ratio() >= thr:
            out.append(ci); break
    else:
        clusters.append(obs); out.append(len(clusters) - 1)
print(json.dumps(out))
`, [texts, thr]) as number[];
      expect(Array.from(similarity.similarityClusters(texts, thr)), `threshold ${thr}`).toEqual(py);
    }
  });

  it('rejects non-strings with GearError', () => {
    expect(() => similarity.sequenceMatcherRatio(1 as unknown as string, 'a')).toThrow(GearError);
    expect(() => similarity.quickRatio('a', null as unknown as string)).toThrow(GearError);
  });
});
