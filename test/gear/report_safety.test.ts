// The GEAR report and its batch format against hostile input: every string shown in the page is
// escaped, every diagnostics field must be a number (a batch file is data, never markup or script), and
// arrays the page indexes must match the batch. Errors are GearErrors with a code.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import * as report from '../../ts/report.js';

const HOSTILE = '<img src=x onerror=alert(1)>';
const RAW = /<img|<script(?! type="application\/json" id="gear-data">)(?!>)/i;

function record(): report.GearBatchRecord {
  const offsets = Int32Array.of(0, 4, 7);
  const rec: report.GearBatchRecord = {
    advantages: [1, -0.5], offsets,
    mask: Uint8Array.of(1, 1, 1, 1, 1, 0, 1),
    divergence: Float32Array.of(0.01, 3.5, 0.02, 0.01, 0.2, 0, 4),
    entropy: Float32Array.of(0.3, 2, 0.1, 0.1, 1.5, 0, 0.2),
  };
  rec.result = rl.gear(rec);
  return rec;
}

/** Every numeric leaf of the diagnostics object, as a path. */
function diagnosticPaths(d: object, prefix: string[] = []): string[][] {
  return Object.entries(d).flatMap(([k, x]) => (typeof x === 'object' && x !== null ? diagnosticPaths(x, [...prefix, k]) : [[...prefix, k]]));
}

function withValue(obj: unknown, path: string[], value: unknown): unknown {
  const copy = JSON.parse(JSON.stringify(obj));
  let o = copy;
  for (const k of path.slice(0, -1)) o = o[k];
  o[path[path.length - 1]!] = value;
  return copy;
}

function expectCode(f: () => unknown, code: string): void {
  let err: unknown;
  try { f(); } catch (e) { err = e; }
  expect(err).toBeInstanceOf(rl.GearError);
  expect((err as rl.GearError).code).toBe(code);
}

describe('GEAR report safety', () => {
  const paths = diagnosticPaths(record().result!.diagnostics);

  it('knows every diagnostics field (the walk below covers them all)', () => {
    expect(paths.length).toBeGreaterThanOrEqual(9 + 5 + 10);
  });

  it('refuses a non-number in any diagnostics field, in memory and from a batch file', () => {
    for (const path of paths) {
      for (const bad of [HOSTILE, null, { toString: () => HOSTILE }, [1]]) {
        const rec = record();
        const diag = withValue(rec.result!.diagnostics, path, bad) as rl.GearDiagnostics;
        expectCode(() => report.renderReport({ ...rec, result: { ...rec.result!, diagnostics: diag } }), 'ERR_DTYPE');
        const saved = report.toSavedBatch(rec) as unknown as { result: { diagnostics: unknown } };
        saved.result.diagnostics = withValue(saved.result.diagnostics, path, bad);
        expectCode(() => report.fromSavedBatch(saved), 'ERR_DTYPE');
      }
    }
    // whole sub-objects missing (a diagnostics object without thresholds)
    for (const k of ['thresholds', 'klQuantiles', 'entropyQuantiles']) {
      const rec = record();
      const { [k]: _gone, ...rest } = rec.result!.diagnostics as unknown as Record<string, unknown>;
      expectCode(() => report.renderReport({ ...rec, result: { ...rec.result!, diagnostics: rest as unknown as rl.GearDiagnostics } }), 'ERR_DTYPE');
    }
  });

  it('escapes every string it shows: title, metadata keys and values, tokens, row labels', () => {
    const rec = record();
    const html = report.renderReport({
      ...rec,
      tokens: [HOSTILE, 'a', '"b\'', '&', '</script><script>alert(1)</script>', 'c', 'd'],
      rowLabels: [HOSTILE, '</title>'],
      meta: { [HOSTILE]: HOSTILE, step: 3 },
    }, { title: `</title>${HOSTILE}` });
    expect(html).not.toMatch(RAW);
    expect(html).not.toContain('</script><script>');
    expect(html.match(/<script/g)).toHaveLength(2); // the data block and the page's own script
    expect(html).toContain('&#60;img src=x onerror=alert(1)&#62;');
  });

  it('refuses display arrays that do not match the batch', () => {
    const rec = record();
    expectCode(() => report.renderReport({ ...rec, tokens: ['only one'] }), 'ERR_SHAPE');
    expectCode(() => report.renderReport({ ...rec, rowLabels: ['a', 'b', 'c'] }), 'ERR_SHAPE');
    expectCode(() => report.renderReport({ ...rec, result: { ...rec.result!, weights: rec.result!.weights.subarray(1) } }), 'ERR_SHAPE');
    expect(() => report.renderReport(rec)).not.toThrow();
  });
});
