// Converts the peers' padded (B, T) tensors into the packed layout and back.
import { expect } from 'vitest';
import * as rl from '../../ts/index.js';
import { type PeerCase, data, expectClose } from '../helpers/peer.js';

export interface Packed {
  B: number;
  T: number;
  offsets: Int32Array;
  mask: Uint8Array;
  tokenRewards: Float64Array;
  /** Unmasked row sums of token_level_rewards (the peers' scores). */
  scores: Float64Array;
  /** Counted tokens per row. */
  lengths: Float64Array;
  groups: (string | number)[];
}

/** Every padded row becomes one packed row of T tokens (padding kept as mask-0 tokens). */
export function pack(c: PeerCase, rewardsKey = 'token_level_rewards'): Packed {
  const maskT = c.inputs.response_mask;
  const [B, T] = maskT.shape as [number, number];
  const m = data(maskT) as number[];
  const R = c.inputs[rewardsKey] ? (data(c.inputs[rewardsKey]) as number[]) : new Array(B * T).fill(0);
  const offsets = Int32Array.from({ length: B + 1 }, (_, i) => i * T);
  const scores = new Float64Array(B);
  const lengths = new Float64Array(B);
  for (let i = 0; i < B; i++) {
    for (let t = 0; t < T; t++) {
      scores[i] += R[i * T + t]!;
      lengths[i] += m[i * T + t]!;
    }
  }
  const groups = c.inputs.index ? (data(c.inputs.index) as (string | number)[]) : [];
  return { B, T, offsets, mask: Uint8Array.from(m), tokenRewards: Float64Array.from(R), scores, lengths, groups };
}

/** The peer's per-row value: its (B, T) output at the row's first counted token (NaN for an empty row). */
export function rowValues(p: Packed, out: unknown): Float64Array {
  const a = data(out) as number[];
  const r = new Float64Array(p.B).fill(NaN);
  for (let i = 0; i < p.B; i++) {
    for (let t = 0; t < p.T; t++) {
      if (p.mask[i * p.T + t]) {
        r[i] = a[i * p.T + t]!;
        break;
      }
    }
  }
  return r;
}

/**
 * Compares row-level float64 advantages with the peer's (B, T) output: row values at `rtol`, and the
 * per-token broadcast (float32, through segmentBroadcast) at float32 precision with exact zeros on
 * masked tokens. `atol` absorbs last-ulp residues where the peer cancels to ~1e-17 and we give an exact 0.
 */
export function expectRowsMatch(p: Packed, ours: Float64Array, peerOut: unknown, what: string, rtol = 1e-12, atol = 0): void {
  const expected = rowValues(p, peerOut);
  const keep = [...expected.keys()].filter((i) => !Number.isNaN(expected[i]!));
  expectClose(keep.map((i) => ours[i]!), keep.map((i) => expected[i]!), { rtol, atol, what: `${what} rows` });
  const tok = rl.segmentBroadcast(ours, p.offsets, p.mask);
  const e = data(peerOut) as number[];
  for (let t = 0; t < tok.length; t++) {
    if (!p.mask[t]) expect(tok[t], `${what} masked token ${t}`).toBe(0);
  }
  expectClose(tok, e.map((x, t) => (p.mask[t] ? Math.fround(x) : 0)), { rtol: Math.max(rtol, 2 ** -23), atol: Math.max(atol, 1e-30), what: `${what} tokens` });
}
