/**
 * The clip range ε_low / ε_high that the PPO family of kinds shares (`ppo`, `gspo`, `cispo`, `gmpo`,
 * `clip_cov`, `dppo_tv`, `dppo_kl`): its options, declared once, and their resolution.
 *
 * @module
 */
import type { OptionsSchema } from '../../registry/schema.js';

/**
 * The clip range of the clipped kinds (`ppo`, `gspo`, `cispo`, `gmpo`, `clip_cov`, `dppo_tv`, `dppo_kl`).
 *
 * @category Losses
 */
export interface ClipRangeOptions {
  /**
   * ε_low (default 0.2; verl's `clip_ratio_low ?? clip_ratio`). Must be >= 0.
   *
   * @defaultValue `0.2`
   */
  clipLow?: number;
  /**
   * ε_high (default = clipLow; verl's `clip_ratio_high ?? clip_ratio`). Must be >= 0.
   *
   * @defaultValue `clipLow`
   */
  clipHigh?: number;
}

/** @internal The schema of {@link ClipRangeOptions}. */
export const CLIP_RANGE = {
  clipLow: { type: 'number', min: 0, finite: true, default: 0.2, description: 'ε_low' },
  clipHigh: { type: 'number', min: 0, finite: true, description: 'ε_high (default clipLow)' },
} as const satisfies OptionsSchema;

/** @internal ε_low and ε_high of resolved arguments (ε_high defaults to ε_low). */
export function clipRange(args: Readonly<Record<string, unknown>>): { lo: number; hi: number } {
  const lo = args.clipLow as number;
  return { lo, hi: (args.clipHigh as number | undefined) ?? lo };
}
