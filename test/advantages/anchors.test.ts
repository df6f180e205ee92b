import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import * as similarity from '../../ts/similarity.js';

/** Reference numbering: equal strings share an id, ids in order of first appearance. */
function reference(xs: readonly string[]): number[] {
  const m = new Map<string, number>();
  return xs.map((x) => {
    if (!m.has(x)) m.set(x, m.size);
    return m.get(x)!;
  });
}

function rng(seed: number) {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

/** Long strings that differ from one another in a single character, at every position in turn. */
function nearTwins(count: number, len: number, seed: number): string[] {
  const r = rng(seed);
  const base = Array.from({ length: len }, (_, i) => String.fromCharCode(97 + (i % 7)));
  const distinct = Array.from({ length: count }, (_, k) => {
    const s = base.slice();
    s[k % len] = String.fromCharCode(65 + Math.floor(k / len));
    return s.join('');
  });
  // Every state occurs a few times, in shuffled order, as fresh (non-identical) string objects.
  const rows: string[] = [];
  for (let i = 0; i < 3 * count; i++) rows.push(JSON.parse(JSON.stringify(distinct[Math.floor(r() * count)]!)));
  return rows;
}

describe('anchorIds on text states', () => {
  it('tells apart long strings differing in one character anywhere (few such strings)', () => {
    const rows = nearTwins(8, 300, 1);
    expect(Array.from(similarity.anchorIds(rows))).toEqual(reference(rows));
  });
  it('tells apart long strings differing in one character anywhere (many such strings)', () => {
    const rows = nearTwins(3000, 300, 2);
    expect(Array.from(similarity.anchorIds(rows))).toEqual(reference(rows));
  });
  it('numbers strings and other states together in order of first appearance', () => {
    const rows: unknown[] = ['b'.repeat(500), 1, 'b'.repeat(500), [1], 'a', 'b'.repeat(499) + 'c', 1.0, [1], 'a'];
    expect(Array.from(similarity.anchorIds(rows))).toEqual([0, 1, 0, 2, 3, 4, 1, 2, 3]);
  });
  it('short and empty strings, and strings of every length up to 200', () => {
    const r = rng(3);
    const rows = Array.from({ length: 4000 }, () => {
      const n = Math.floor(r() * 200);
      return Array.from({ length: n }, () => (r() < 0.97 ? 'x' : 'y')).join('');
    });
    rows.push('', '');
    expect(Array.from(similarity.anchorIds(rows))).toEqual(reference(rows));
  });
});
