/**
 * GPG (verl `compute_policy_loss_gpg`): the plain policy gradient `−A·ℓ`.
 *
 * @module
 */
import type { FloatArray } from '../inputs.js';
import { asTerms } from './grad.js';
import { registerBuiltinPolicyLoss } from './registry.js';
import { sharedOptions } from './shared_options.js';
import type { Terms } from './types.js';

/** @internal Per-token terms of `gpg`. */
export function gpgTerms(lp: FloatArray, A: FloatArray): Terms {
  const n = lp.length;
  const L = new Float64Array(n);
  const dL = new Float64Array(n);
  for (let t = 0; t < n; t++) { L[t] = -lp[t]! * A[t]!; dL[t] = -A[t]!; }
  return { L, dL, metrics: {} };
}

registerBuiltinPolicyLoss({
  name: 'gpg',
  description: 'plain policy gradient −Aℓ',
  options: sharedOptions(),
  terms: (c) => asTerms(gpgTerms(c.logprob, c.advantages)),
});
