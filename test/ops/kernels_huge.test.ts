// More than 2^31 logits in one call: 16384 x 140000 bfloat16 (4.6 GB as a Uint16Array). Rows past
// element 2^31 must be read at their true 64-bit offsets.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { encode, maxScaledError, randomLogits, refTokenStats } from '../helpers/reference.js';

describe('logits kernels beyond 2^31 elements', () => {
  it('tokenStats on 16384 x 140000 bfloat16 matches the reference on rows near the end', { timeout: 600_000 }, () => {
    const rows = 16384;
    const vocab = 140000;
    expect(rows * vocab).toBeGreaterThan(2 ** 31);
    const data = new Uint16Array(rows * vocab); // zeros = bf16 0.0: uniform rows
    // Distinct rows past element 2^31 (row 15340 starts beyond it) and the last row.
    const checkRows = [15400, 16000, rows - 1];
    const decodedRows = new Map<number, Float64Array>();
    for (const [i, r] of checkRows.entries()) {
      const vals = randomLogits(100 + i, 1, vocab, 4);
      vals[(i * 7919) % vocab] = -Infinity;
      const { data: enc, decoded } = encode(vals, 'bfloat16');
      data.set(enc, r * vocab);
      decodedRows.set(r, decoded);
    }
    const targets = Int32Array.from({ length: rows }, (_, r) => (r * 131) % vocab);
    const out = rl.tokenStats({ data, rows, vocab, dtype: 'bfloat16' }, targets, { temperature: 0.9 });
    for (const r of checkRows) {
      const want = refTokenStats(decodedRows.get(r)!, 1, vocab, targets.subarray(r, r + 1), 0.9);
      expect(maxScaledError([out.logprob[r]!], want.logprob), `row ${r} logprob`).toBeLessThanOrEqual(1e-5);
      expect(maxScaledError([out.entropy[r]!], want.entropy), `row ${r} entropy`).toBeLessThanOrEqual(1e-5);
      expect(maxScaledError([out.logsumexp[r]!], want.logsumexp), `row ${r} lse`).toBeLessThanOrEqual(1e-5);
    }
    // a uniform (all-zero) row: entropy = lse = log(vocab), logprob = -log(vocab)
    const lnV = Math.log(vocab);
    for (const r of [0, 15339, 16383 - 1]) {
      expect(Math.abs(out.entropy[r]! - lnV)).toBeLessThanOrEqual(1e-5 * lnV);
      expect(Math.abs(out.logsumexp[r]! - lnV)).toBeLessThanOrEqual(1e-5 * lnV);
      expect(Math.abs(out.logprob[r]! + lnV)).toBeLessThanOrEqual(1e-5 * lnV);
    }
  });
});
