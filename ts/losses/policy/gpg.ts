/**
 * GPG (verl `compute_policy_loss_gpg`): the plain policy gradient `−A·ℓ`.
 *
 * @module
 */
import type { FloatArray } from '../inputs.js';
import { type Terms, asTerms } from './grad.js';
import { builtinPolicyLoss } from './registry.js';

/** @internal Per-token terms of `gpg`. */
export function gpgTerms(lp: FloatArray, A: FloatArray): Terms {
  const n = lp.length;
  const L = new Float64Array(n);
  const dL = new Float64Array(n);
  for (let t = 0; t < n; t++) { L[t] = -lp[t]! * A[t]!; dL[t] = -A[t]!; }
  return { L, dL, metrics: {} };
}

/** @internal Kind `gpg` (no options of its own). */
export const gpg = builtinPolicyLoss<Record<never, never>>()({
  name: 'gpg',
  description: 'plain policy gradient −Aℓ',
  options: {},
  terms: (c) => asTerms(gpgTerms(c.logprob, c.advantages)),
});
