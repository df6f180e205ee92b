/**
 * Which log-probs a server returned: raw (the model's own distribution) or processed (after the
 * sampler's transforms), with the request's temperature, top-k and top-p. A log-ratio or an importance
 * ratio is right only when both of its log-probs come from the same distribution, and a server does not
 * say which one it reports: the caller states it once, at parse time (docs/server.md lists what each
 * server and setting returns).
 *
 * @module
 */
import { GearError, fail } from '../core/errors.js';

/**
 * What distribution a server's log-probs were taken from.
 * @category Server ingestion
 */
export interface LogprobMode {
  /**
   * `'raw'`: the log-softmax of the model's logits, before temperature, penalties, top-k and top-p (vLLM's
   * default `--logprobs-mode raw_logprobs`, SGLang with `SGLANG_RETURN_ORIGINAL_LOGPROB`, every server's
   * prompt / input log-probs). `'processed'`: after the transforms the server applies before it reports
   * them (vLLM `processed_logprobs`: penalties and temperature; SGLang's default output log-probs:
   * temperature; llama.cpp `post_sampling_probs`: the whole sampler chain).
   */
  kind: 'raw' | 'processed';
  /** The request's sampling temperature (> 0). Raw log-probs are at temperature 1 whatever it was. */
  temperature: number;
  /** The request's top-k (0: off). */
  topK: number;
  /** The request's top-p (1: off). */
  topP: number;
}

/**
 * A {@link LogprobMode} as a parser option takes it: `temperature` defaults to 1, `topK` to 0 (off; -1,
 * vLLM's and SGLang's "off", reads as 0) and `topP` to 1 (off).
 * @category Server ingestion
 */
export interface LogprobModeInput {
  /** See {@link LogprobMode.kind}. */
  kind: 'raw' | 'processed';
  /**
   * See {@link LogprobMode.temperature}.
   *
   * @defaultValue `1`
   */
  temperature?: number;
  /**
   * See {@link LogprobMode.topK}.
   *
   * @defaultValue `0` (off)
   */
  topK?: number;
  /**
   * See {@link LogprobMode.topP}.
   *
   * @defaultValue `1` (off)
   */
  topP?: number;
}

/** Reads and checks a mode (`ERR_OPTION` naming `what`); the result is frozen. @internal */
export function readLogprobMode(m: unknown, what: string): LogprobMode {
  if (typeof m !== 'object' || m === null || Array.isArray(m)) fail('ERR_OPTION', what, "a log-prob mode { kind: 'raw' | 'processed', temperature?, topK?, topP? }", m);
  const o = m as Record<string, unknown>;
  for (const k of Object.keys(o)) if (!['kind', 'temperature', 'topK', 'topP'].includes(k)) fail('ERR_OPTION', `${what}.${k}`, 'a known field (kind, temperature, topK, topP)', k);
  const kind = o.kind;
  if (kind !== 'raw' && kind !== 'processed') fail('ERR_OPTION', `${what}.kind`, "'raw' or 'processed'", kind);
  const temperature = o.temperature ?? 1;
  if (typeof temperature !== 'number' || !(temperature > 0 && temperature < Infinity)) fail('ERR_OPTION', `${what}.temperature`, 'a finite number > 0', temperature);
  const topK0 = o.topK ?? 0;
  if (typeof topK0 !== 'number' || !Number.isInteger(topK0) || topK0 < -1 || topK0 > 2 ** 31 - 1) fail('ERR_OPTION', `${what}.topK`, 'an integer >= 0 (0 or -1: off)', topK0);
  const topP = o.topP ?? 1;
  if (typeof topP !== 'number' || !(topP > 0 && topP <= 1)) fail('ERR_OPTION', `${what}.topP`, 'a number in (0, 1] (1: off)', topP);
  return Object.freeze({ kind, temperature, topK: Math.max(0, topK0), topP });
}

/**
 * True when two modes give log-probs of one distribution, so that their difference is a log-ratio of
 * that distribution's probabilities: both raw (whatever the temperatures they were sampled at: raw
 * log-probs are at temperature 1), or both processed with the same temperature, top-k and top-p. A raw
 * log-prob cannot be turned into a processed one afterwards: at another temperature the normaliser is a
 * sum over the whole vocabulary, which a top-k list does not hold.
 *
 * @param a one side's mode
 * @param b the other side's mode
 * @returns whether they may form one log-ratio
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 * const raw = { kind: 'raw', temperature: 0.7, topK: 0, topP: 1 } as const;
 * const processed = { kind: 'processed', temperature: 0.7, topK: 0, topP: 1 } as const;
 * console.log(rl.logprobModesMatch(raw, { ...raw, temperature: 1 }), rl.logprobModesMatch(raw, processed)); // true false
 * ```
 * @category Server ingestion
 */
export function logprobModesMatch(a: LogprobMode, b: LogprobMode): boolean {
  const x = readLogprobMode(a, 'a'), y = readLogprobMode(b, 'b');
  if (x.kind !== y.kind) return false;
  return x.kind === 'raw' || (x.temperature === y.temperature && x.topK === y.topK && x.topP === y.topP);
}

/**
 * True when the log-probs are those of the distribution the tokens were sampled from, which is what the
 * old log-probs of an importance ratio must be: top-k and top-p off, and processed, or raw sampled at
 * temperature 1. (Penalties, logit bias and grammar masks also change the sampler's distribution and
 * are not recorded in the mode: leave them off, or use processed log-probs that include them.)
 *
 * @param m the log-probs' mode
 * @returns whether they are the sampler's log-probs
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 * console.log(rl.isSamplerLogprob({ kind: 'raw', temperature: 1, topK: 0, topP: 1 }),
 *   rl.isSamplerLogprob({ kind: 'raw', temperature: 0.7, topK: 0, topP: 1 })); // true false
 * ```
 * @category Server ingestion
 */
export function isSamplerLogprob(m: LogprobMode): boolean {
  const x = readLogprobMode(m, 'mode');
  return x.topK === 0 && x.topP === 1 && (x.kind === 'processed' || x.temperature === 1);
}

/** Spells a mode for messages: `raw (sampled at T = 0.7)`, `processed at T = 0.7, top-p 0.9`. @internal */
export function describeMode(m: LogprobMode): string {
  const trunc = [m.topK > 0 ? `top-k ${m.topK}` : '', m.topP < 1 ? `top-p ${m.topP}` : ''].filter(Boolean).join(', ');
  return m.kind === 'raw' ? `raw (sampled at T = ${m.temperature}${trunc ? `, ${trunc}` : ''})` : `processed at T = ${m.temperature}${trunc ? `, ${trunc}` : ''}`;
}

/** Throws `ERR_OPTION` at `what` unless the two modes may form one log-ratio ({@link logprobModesMatch}). @internal */
export function checkModesMatch(a: LogprobMode, b: LogprobMode, what: string, sides: [string, string]): void {
  if (!logprobModesMatch(a, b)) {
    throw new GearError('ERR_OPTION', `${what}: expected the ${sides[0]}'s and the ${sides[1]}'s log-probs in one mode (both raw, or both processed with ` +
      `the same temperature, top-k and top-p), got ${sides[0]} ${describeMode(a)}, ${sides[1]} ${describeMode(b)}`);
  }
}
