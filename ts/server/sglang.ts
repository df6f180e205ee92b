/**
 * SGLang's native `/generate` responses: `meta_info.output_token_logprobs` (`[logprob, token_id, text]`
 * per generated token), `output_top_logprobs` (a list of such tuples per token), and
 * `input_token_logprobs` / `input_top_logprobs` for the prompt (the teacher's scores of a prefilled
 * sequence). A batch (several prompts, or `n > 1`) is an array of responses. SGLang's OpenAI-compatible
 * endpoints go through the OpenAI parsers.
 *
 * @module
 */
import { arr, bad, badLp, builder, done, isLp, obj, parseOptions } from './common.js';
import type { ParseOptions, ServerSequence, SequenceBuilder } from './common.js';

/**
 * Options of {@link parseSglangInputLogprobs}.
 * @category Server ingestion
 */
export interface SglangInputOptions extends Pick<ParseOptions, 'topLogprobs'> {
  /**
   * First position of `input_token_logprobs` to read (default: `total - length` when `length` is
   * given, else the first position with a log-prob).
   *
   * @defaultValue `total - length`, or the first position with a log-prob
   */
  start?: number;
  /**
   * Number of positions to read (default: to the end).
   *
   * @defaultValue to the end
   */
  length?: number;
}

/** Throws for a bad tuple `t` at `pos` (only called once a check failed). */
function badTuple(t: unknown, pos: string): never {
  if (!Array.isArray(t) || t.length < 2) bad('ERR_DTYPE', pos, 'a [logprob, token_id, text] tuple', t);
  if (!isLp(t[0])) badLp(`${pos}[0]`, t[0]);
  const id = t[1];
  return bad(typeof id === 'number' && Number.isInteger(id) ? 'ERR_TARGET_RANGE' : 'ERR_DTYPE', `${pos}[1]`, 'an integer token id in [0, 2^31)', id);
}

/** Fills a sequence from `tokens[from..from+n)` and `tops[from..from+n)`. Positions are spelled out
 *  only when a check fails: building them per entry would dominate the run time. */
function fill(tokens: unknown[], tops: unknown[] | null, from: number, n: number, pos: string, topPos: string,
  top: boolean): SequenceBuilder {
  let k = top ? 0 : -1;
  if (top && tops) {
    for (let i = from; i < from + n; i++) {
      const r = tops[i];
      if (Array.isArray(r)) {
        if (r.length > k) k = r.length;
      } else if (r !== null && r !== undefined) bad('ERR_DTYPE', `${topPos}[${i}]`, 'a list of [logprob, token_id, text] tuples', r);
    }
  }
  const b = builder(n, k);
  const K = Math.max(k, 0);
  const ids = b.tokenIds;
  const lps = b.logprobs;
  for (let i = 0; i < n; i++) {
    const t = tokens[from + i] as unknown[];
    if (!Array.isArray(t)) badTuple(t, `${pos}[${from + i}]`);
    const lp = t[0];
    const id = t[1];
    if (!(typeof lp === 'number' && lp <= 0 && lp > -Infinity && typeof id === 'number' && (id | 0) === id && id >= 0)) {
      badTuple(t, `${pos}[${from + i}]`);
    }
    ids[i] = id;
    lps[i] = lp;
    if (k > 0) {
      const r = tops![from + i] as unknown[] | null | undefined;
      if (!r) continue;
      const tk = b.topK!;
      const tids = tk.ids;
      const tlps = tk.logprobs;
      const base = i * K;
      for (let j = 0; j < r.length; j++) {
        const a = r[j] as unknown[];
        if (!Array.isArray(a)) badTuple(a, `${topPos}[${from + i}][${j}]`);
        const alp = a[0];
        const aid = a[1];
        if (!(typeof alp === 'number' && alp <= 0 && alp > -Infinity && typeof aid === 'number' && (aid | 0) === aid && aid >= 0)) {
          badTuple(a, `${topPos}[${from + i}][${j}]`);
        }
        tids[base + j] = aid;
        tlps[base + j] = alp;
      }
      b.counts![i] = r.length;
    }
  }
  return b;
}

function metaInfo(x: unknown, pos: string): Record<string, unknown> {
  const r = obj(x, pos);
  if (r.error !== undefined) bad('ERR_OPTION', `${pos}.error`, 'a response without an error', JSON.stringify(r.error));
  return obj(r.meta_info, `${pos}.meta_info`);
}

function topList(m: Record<string, unknown>, field: string, pos: string, n: number): unknown[] | null {
  const t = m[field];
  if (t === undefined || t === null) return null;
  const a = arr(t, `${pos}.${field}`);
  if (a.length !== n) bad('ERR_SHAPE', `${pos}.${field}.length`, `${n} (one per token)`, a.length);
  return a;
}

/**
 * Parses SGLang `/generate` responses (`return_logprob: true`, `top_logprobs_num: k`) into one
 * {@link ServerSequence} per response: ids and log-probs from `meta_info.output_token_logprobs`,
 * alternatives from `output_top_logprobs`. Token ids are in the tuples, so no token map is needed.
 *
 * @param response one parsed response, or an array of them (a batch, or `n > 1`)
 * @param options top-k switch
 * @returns one sequence per response, `index` its position in the array
 * @throws GearError `ERR_SHAPE`, `ERR_DTYPE`, `ERR_OPTION`, `ERR_TARGET_RANGE`, `ERR_NON_FINITE`
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 * const response = { text: 'ok', meta_info: {
 *   output_token_logprobs: [[-0.25, 812, null]],
 *   output_top_logprobs: [[[-0.25, 812, null], [-1.6, 9, null]]] } };
 * const [seq] = rl.parseSglang(response);
 * console.log(seq!.tokenIds[0], Array.from(seq!.topK!.ids)); // 812 [812, 9]
 * ```
 * @category Server ingestion
 */
export function parseSglang(response: unknown, options?: Pick<ParseOptions, 'topLogprobs'>): ServerSequence[] {
  const o = parseOptions(options, 'parseSglang');
  const list = Array.isArray(response) ? response : [response];
  return list.map((r, ri) => {
    const rp = Array.isArray(response) ? `response[${ri}]` : 'response';
    const m = metaInfo(r, rp);
    const mp = `${rp}.meta_info`;
    if (m.output_token_logprobs === undefined || m.output_token_logprobs === null) {
      bad('ERR_SHAPE', `${mp}.output_token_logprobs`, 'per-token log-probs (request return_logprob: true)', m.output_token_logprobs);
    }
    const toks = arr(m.output_token_logprobs, `${mp}.output_token_logprobs`);
    const tops = o.topLogprobs ? topList(m, 'output_top_logprobs', mp, toks.length) : null;
    const b = fill(toks, tops, 0, toks.length, `${mp}.output_token_logprobs`, `${mp}.output_top_logprobs`, o.topLogprobs);
    const seq: ServerSequence = { index: ri, tokenIds: b.tokenIds, logprobs: b.logprobs, topK: done(b) };
    const rr = r as Record<string, unknown>;
    if (typeof rr.text === 'string') seq.text = rr.text;
    const fr = m.finish_reason;
    if (fr === null) seq.finishReason = null;
    else if (typeof fr === 'string') seq.finishReason = fr;
    else if (typeof fr === 'object' && fr !== null && typeof (fr as { type?: unknown }).type === 'string') seq.finishReason = (fr as { type: string }).type;
    return seq;
  });
}

/**
 * Reads SGLang's prompt log-probs (`meta_info.input_token_logprobs` / `input_top_logprobs`, from
 * `return_logprob: true` with `logprob_start_len` set and `top_logprobs_num: k`): the scores a model gave
 * to tokens it was fed. For teacher log-probs, send the privileged context followed by the student's
 * tokens as `input_ids` with `max_new_tokens: 1`, and read the last `length` positions. Positions
 * index the returned `input_token_logprobs` list (which starts at `logprob_start_len`); the first entry
 * has no log-prob.
 *
 * @param response one parsed `/generate` response
 * @param options positions to read, top-k switch
 * @returns the scored positions as one sequence (`index` 0)
 * @throws GearError `ERR_SHAPE`, `ERR_DTYPE`, `ERR_OPTION`, `ERR_TARGET_RANGE`, `ERR_NON_FINITE`
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 * const response = { meta_info: {
 *   input_token_logprobs: [[null, 1, null], [-3.2, 50, null], [-0.7, 51, null]],
 *   input_top_logprobs: [null, [[-0.9, 7, null]], [[-0.7, 51, null]]] } };
 * const t = rl.parseSglangInputLogprobs(response, { length: 2 });
 * console.log(Array.from(t.tokenIds), t.logprobs[0]); // [50, 51] -3.200000047683716
 * ```
 * @category Server ingestion
 */
export function parseSglangInputLogprobs(response: unknown, options?: SglangInputOptions): ServerSequence {
  const o = parseOptions(options as ParseOptions, 'parseSglangInputLogprobs', ['start', 'length']);
  const opts = (options ?? {}) as SglangInputOptions;
  const m = metaInfo(response, 'response');
  const mp = 'response.meta_info';
  if (m.input_token_logprobs === undefined || m.input_token_logprobs === null) {
    bad('ERR_SHAPE', `${mp}.input_token_logprobs`, 'prompt log-probs (request return_logprob: true with logprob_start_len)', m.input_token_logprobs);
  }
  const toks = arr(m.input_token_logprobs, `${mp}.input_token_logprobs`);
  const total = toks.length;
  const intOpt = (x: unknown, name: string): number | undefined => {
    if (x === undefined) return undefined;
    if (typeof x !== 'number' || !Number.isInteger(x) || x < 0 || x > total) bad('ERR_OPTION', `parseSglangInputLogprobs: options.${name}`, `an integer in [0, ${total}]`, x);
    return x;
  };
  const length = intOpt(opts.length, 'length');
  let start = intOpt(opts.start, 'start');
  if (start === undefined) {
    if (length !== undefined) start = total - length;
    else {
      start = 0;
      while (start < total && Array.isArray(toks[start]) && (toks[start] as unknown[])[0] === null) start++;
    }
  }
  const n = length ?? total - start;
  if (start + n > total) bad('ERR_SHAPE', 'parseSglangInputLogprobs: options.start + options.length', `at most the ${total} returned positions`, start + n);
  const tops = o.topLogprobs ? topList(m, 'input_top_logprobs', mp, total) : null;
  const b = fill(toks, tops, start, n, `${mp}.input_token_logprobs`, `${mp}.input_top_logprobs`, o.topLogprobs);
  return { index: 0, tokenIds: b.tokenIds, logprobs: b.logprobs, topK: done(b) };
}
