/**
 * The schemas of the shared `policyLoss` options that the built-in kinds read. They are validated for
 * every call (whichever kind runs, so a typo never passes silently); a kind's schema lists the ones it
 * reads.
 *
 * @module
 */
import type { OptionSpec, OptionsSchema } from '../../registry/schema.js';

const SPECS = {
  clipLow: { type: 'number', min: 0, finite: true, description: 'ε_low (default 0.2)' },
  clipHigh: { type: 'number', min: 0, finite: true, description: 'ε_high (default clipLow)' },
  clipC: { type: 'number', min: 1, minOpen: true, description: 'dual-clip constant c for A < 0 (default 3)' },
  truncation: { type: 'number', min: 0, minOpen: true, description: 'IS truncation, given as clipC (default 20)' },
  tauPos: { type: 'number', min: 0, minOpen: true, description: 'temperature for A > 0 (default 1.0)' },
  tauNeg: { type: 'number', min: 0, minOpen: true, description: 'temperature for A <= 0 (default 1.05)' },
  clipCovRatio: { type: 'number', min: 0, minOpen: true, description: 'share of valid tokens (default 2e-4)' },
  clipCovLb: { type: 'number', description: 'lower covariance bound (default 1)' },
  clipCovUb: { type: 'number', description: 'upper covariance bound (default 5)' },
  seed: { type: 'number', int: true, min: 0, max: 2 ** 32 - 1, description: 'seed of the random pick (default 0)' },
  klCovRatio: { type: 'number', min: 0, minOpen: true, description: 'share of valid tokens penalised (default 2e-4)' },
  ppoKlCoef: { type: 'number', description: 'coefficient of |δ| (default 1.0)' },
  droBeta: { type: 'number', min: 0, minOpen: true, required: true, description: 'β (required, > 0)' },
} as const satisfies Record<string, OptionSpec>;

/** @internal The schema of the named shared options. */
export function sharedOptions(...names: (keyof typeof SPECS)[]): OptionsSchema {
  return Object.fromEntries(names.map((k) => [k === 'truncation' ? 'clipC' : k, SPECS[k]]));
}
