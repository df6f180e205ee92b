/**
 * SGLang's native `/generate` responses: `meta_info.output_token_logprobs` (`[logprob, token_id, text]`
 * per generated token), `output_top_logprobs` (a list of such tuples per token), and
 * `input_token_logprobs` / `input_top_logprobs` for the prompt (the teacher's scores of a prefilled
 * sequence). A batch (several prompts, or `n > 1`) is an array of responses; a streamed response
 * (`stream: true`) is the array of its SSE chunks. SGLang's OpenAI-compatible endpoints go through the
 * OpenAI parsers.
 *
 * @module
 */
import { arr, bad, badLp, builder, done, isId, isLp, isObj, obj, parseOptions, PROMPT_MODE, withMode } from './common.js';
import type { ParseArena } from './arena.js';
import type { ParseOptions, ServerSequence, SequenceBuilder } from './common.js';

/**
 * Options of {@link parseSglangInputLogprobs}.
 * @category Server ingestion
 */
export interface SglangInputOptions extends Pick<ParseOptions, 'topLogprobs' | 'arena' | 'mode'> {
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

/**
 * Options of {@link parseSglang}.
 * @category Server ingestion
 */
export interface SglangOptions extends Pick<ParseOptions, 'topLogprobs' | 'arena' | 'mode'> {
  /**
   * Treat an array as the SSE chunks of streamed responses (`stream: true`) rather than a batch of
   * finished ones (default: when an element is the `'[DONE]'` terminator or has
   * `meta_info.finish_reason: null`, which SGLang sends on every chunk but a request's last).
   *
   * @defaultValue whether any element is `'[DONE]'` or has `meta_info.finish_reason: null`
   */
  stream?: boolean;
  /**
   * For streams: whether each chunk's `output_token_logprobs` / `output_top_logprobs` hold only the
   * tokens new in that chunk (`true`: the server ran with `--incremental-streaming-output`) or every
   * token generated so far (`false`: SGLang's default). Default: read from the chunks'
   * `meta_info.completion_tokens` (the running token count, in both forms): lists as long as the count
   * are cumulative, lists that add up to it incremental. Without counts, lists that cannot be
   * cumulative (one shorter than the chunk before, or not repeating its last entry) are incremental, and
   * anything else with tokens in more than one chunk is refused as ambiguous (`ERR_OPTION`): set this.
   *
   * @defaultValue detected from `meta_info.completion_tokens`
   */
  incremental?: boolean;
}

/** Throws for a bad tuple `t` at `pos` (only called once a check failed). */
function badTuple(t: unknown, pos: string): never {
  if (!Array.isArray(t) || t.length < 2) bad('ERR_DTYPE', pos, 'a [logprob, token_id, text] tuple', t);
  if (!isLp(t[0])) badLp(`${pos}[0]`, t[0]);
  const id = t[1];
  return bad(typeof id === 'number' && Number.isInteger(id) ? 'ERR_TARGET_RANGE' : 'ERR_DTYPE', `${pos}[1]`, 'an integer token id in [0, 2^31)', id);
}

/** Fills a sequence from `tokens[from..from+n)` and `tops[from..from+n)`; `pos(i)` / `topPos(i)` spell
 *  the position of entry `i`. Positions are spelled out only when a check fails: building them per
 *  entry would dominate the run time. */
function fill(tokens: unknown[], tops: unknown[] | null, from: number, n: number, pos: (i: number) => string,
  topPos: (i: number) => string, top: boolean, arena: ParseArena | undefined): SequenceBuilder {
  let k = top ? 0 : -1;
  if (top && tops) {
    for (let i = from; i < from + n; i++) {
      const r = tops[i];
      if (Array.isArray(r)) {
        if (r.length > k) k = r.length;
      } else if (r !== null && r !== undefined) bad('ERR_DTYPE', topPos(i), 'a list of [logprob, token_id, text] tuples', r);
    }
  }
  const b = builder(n, k, arena);
  const K = Math.max(k, 0);
  const ids = b.tokenIds;
  const lps = b.logprobs;
  for (let i = 0; i < n; i++) {
    const t = tokens[from + i] as unknown[];
    if (!Array.isArray(t)) badTuple(t, pos(from + i));
    const lp = t[0];
    const id = t[1];
    if (!(typeof lp === 'number' && lp <= 0 && lp > -Infinity && typeof id === 'number' && (id | 0) === id && id >= 0)) {
      badTuple(t, pos(from + i));
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
        if (!Array.isArray(a)) badTuple(a, `${topPos(from + i)}[${j}]`);
        const alp = a[0];
        const aid = a[1];
        if (!(typeof alp === 'number' && alp <= 0 && alp > -Infinity && typeof aid === 'number' && (aid | 0) === aid && aid >= 0)) {
          badTuple(a, `${topPos(from + i)}[${j}]`);
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

/** The request's output log-prob tuples, required (`return_logprob: true`). */
function outputTuples(m: Record<string, unknown>, mp: string): unknown[] {
  if (m.output_token_logprobs === undefined || m.output_token_logprobs === null) {
    bad('ERR_SHAPE', `${mp}.output_token_logprobs`, 'per-token log-probs (request return_logprob: true)', m.output_token_logprobs);
  }
  return arr(m.output_token_logprobs, `${mp}.output_token_logprobs`);
}

/** `meta_info.finish_reason` as a string (`{ type, ... }` gives its type), null, or undefined. */
function finishOf(m: Record<string, unknown>): string | null | undefined {
  const fr = m.finish_reason;
  if (fr === null) return null;
  if (typeof fr === 'string') return fr;
  if (isObj(fr) && typeof fr.type === 'string') return fr.type;
  return undefined;
}

/**
 * Parses SGLang `/generate` responses (`return_logprob: true`, `top_logprobs_num: k`) into one
 * {@link ServerSequence} per response: ids and log-probs from `meta_info.output_token_logprobs`,
 * alternatives from `output_top_logprobs`. Token ids are in the tuples, so no token map is needed.
 *
 * Streamed responses (`stream: true`): pass the array of parsed SSE `data:` chunks (a trailing
 * `'[DONE]'` string is allowed). Chunks are grouped by their `index` (a batch or `n > 1` streams its
 * requests interleaved; no `index` means 0) and each request must end with a chunk whose
 * `meta_info.finish_reason` is set: a stream cut short is refused, never returned in part. The
 * log-prob lists of the chunks are either cumulative (SGLang's default: every chunk repeats all tokens
 * so far, the last one holds them all) or incremental (`--incremental-streaming-output`: each chunk
 * holds its new tokens, concatenated here); see {@link SglangOptions.incremental} for how the two are
 * told apart. Chunk lists that contradict each other or `meta_info.completion_tokens`, or `output_ids`
 * that differ from the tuples' ids, are errors naming the chunk.
 *
 * @param response one parsed response, an array of them (a batch, or `n > 1`), or an array of streamed chunks
 * @param options top-k switch, `stream` to force reading an array as chunks, `incremental` for streams
 * @returns one sequence per response (its position in the array), or per streamed request (its `index`, in order)
 * @throws GearError `ERR_SHAPE`, `ERR_DTYPE`, `ERR_OPTION`, `ERR_TARGET_RANGE`, `ERR_NON_FINITE`
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 * const response = { text: 'ok', meta_info: {
 *   output_token_logprobs: [[-0.25, 812, null]],
 *   output_top_logprobs: [[[-0.25, 812, null], [-1.6, 9, null]]] } };
 * const [seq] = rl.parseSglang(response);
 * console.log(seq!.tokenIds[0], Array.from(seq!.topK!.ids)); // 812 [812, 9]
 *
 * // a stream with --incremental-streaming-output: each chunk carries its new tokens
 * const chunks = [
 *   { text: 'o', meta_info: { finish_reason: null, completion_tokens: 1, output_token_logprobs: [[-0.25, 78, 'o']] } },
 *   { text: 'k', meta_info: { finish_reason: { type: 'stop' }, completion_tokens: 2, output_token_logprobs: [[-0.5, 74, 'k']] } },
 *   '[DONE]',
 * ];
 * const [s] = rl.parseSglang(chunks, { topLogprobs: false });
 * console.log(Array.from(s!.tokenIds), s!.text, s!.finishReason); // [78, 74] 'ok' 'stop'
 * ```
 * @category Server ingestion
 */
export function parseSglang(response: unknown, options?: SglangOptions): ServerSequence[] {
  const o = parseOptions(options, 'parseSglang', ['stream', 'incremental']);
  const streamOpt = options?.stream;
  if (streamOpt !== undefined && typeof streamOpt !== 'boolean') bad('ERR_OPTION', 'parseSglang: options.stream', 'a boolean', streamOpt);
  const incOpt = options?.incremental;
  if (incOpt !== undefined && typeof incOpt !== 'boolean') bad('ERR_OPTION', 'parseSglang: options.incremental', 'a boolean', incOpt);
  if (Array.isArray(response)) {
    const stream = streamOpt ?? response.some((c) => c === DONE || (isObj(c) && isObj(c.meta_info) && c.meta_info.finish_reason === null));
    if (stream) return withMode(parseStream(response, o.topLogprobs, incOpt, o.arena), o.mode);
  } else if (streamOpt === true) {
    return withMode(parseStream([response], o.topLogprobs, incOpt, o.arena), o.mode);
  }
  const list = Array.isArray(response) ? response : [response];
  return withMode(list.map((r, ri) => {
    const rp = Array.isArray(response) ? `response[${ri}]` : 'response';
    const m = metaInfo(r, rp);
    const mp = `${rp}.meta_info`;
    const toks = outputTuples(m, mp);
    const tops = o.topLogprobs ? topList(m, 'output_top_logprobs', mp, toks.length) : null;
    const b = fill(toks, tops, 0, toks.length, (i) => `${mp}.output_token_logprobs[${i}]`, (i) => `${mp}.output_top_logprobs[${i}]`,
      o.topLogprobs, o.arena);
    const seq: ServerSequence = { index: ri, tokenIds: b.tokenIds, logprobs: b.logprobs, topK: done(b) };
    const rr = r as Record<string, unknown>;
    if (typeof rr.text === 'string') seq.text = rr.text;
    const fr = finishOf(m);
    if (fr !== undefined) seq.finishReason = fr;
    return seq;
  }), o.mode);
}

/** SGLang's SSE terminator (`data: [DONE]`). */
const DONE = '[DONE]';

/** Streamed chunks: grouped by `index`, one sequence per request in index order. */
function parseStream(chunks: unknown[], top: boolean, incremental: boolean | undefined, arena: ParseArena | undefined): ServerSequence[] {
  const groups = new Map<number, number[]>();
  for (let ci = 0; ci < chunks.length; ci++) {
    const c = chunks[ci];
    if (c === DONE) {
      if (ci !== chunks.length - 1) bad('ERR_SHAPE', `chunks[${ci}]`, `the '${DONE}' terminator only as the last chunk`, c);
      break;
    }
    const d = obj(c, `chunks[${ci}]`);
    const ix = d.index ?? 0;
    if (!isId(ix)) bad(typeof ix === 'number' && Number.isInteger(ix) ? 'ERR_TARGET_RANGE' : 'ERR_DTYPE', `chunks[${ci}].index`, 'an integer request index in [0, 2^31)', ix);
    let g = groups.get(ix);
    if (g === undefined) groups.set(ix, (g = []));
    g.push(ci);
  }
  return [...groups.keys()].sort((a, b) => a - b).map((ix) => streamSequence(chunks, groups.get(ix)!, ix, top, incremental, arena));
}

/** Same [logprob, id] in two tuples (the cumulative lists' overlap check). */
function sameTuple(a: unknown, b: unknown): boolean {
  return Array.isArray(a) && Array.isArray(b) && a[0] === b[0] && a[1] === b[1];
}

/** A tuple's [logprob, id] for an error message. */
function tupleText(t: unknown): unknown {
  return Array.isArray(t) ? `[${String(t[0])}, ${String(t[1])}]` : t;
}

/** One streamed request from its chunks `cis` (positions in `chunks`). */
function streamSequence(chunks: unknown[], cis: number[], index: number, top: boolean, incOpt: boolean | undefined,
  arena: ParseArena | undefined): ServerSequence {
  const K = cis.length;
  const cp = (k: number) => `chunks[${cis[k]}]`;
  const metas: Record<string, unknown>[] = [];
  const lists: unknown[][] = [];
  const tops: (unknown[] | null)[] = [];
  for (let k = 0; k < K; k++) {
    const m = metaInfo(chunks[cis[k]!], cp(k));
    const fr = finishOf(m);
    if (k < K - 1 && fr !== null && fr !== undefined) {
      bad('ERR_SHAPE', cp(k + 1), `no chunk of request index ${index} after its final chunk ${cp(k)} (finish_reason ${JSON.stringify(fr)})`, 'another chunk');
    }
    if (k === K - 1 && (fr === null || fr === undefined)) {
      bad('ERR_SHAPE', `${cp(k)}.meta_info.finish_reason`, `a finish reason on the last chunk of request index ${index} (the stream was cut short)`, m.finish_reason);
    }
    metas.push(m);
    const l = outputTuples(m, `${cp(k)}.meta_info`);
    lists.push(l);
    tops.push(top ? topList(m, 'output_top_logprobs', `${cp(k)}.meta_info`, l.length) : null);
  }
  // Running token counts (`completion_tokens`), when every chunk has one.
  const counts = metas.every((m) => isId(m.completion_tokens)) ? metas.map((m) => m.completion_tokens as number) : null;
  const inc = incOpt ?? detectIncremental(lists, counts, cp);

  const last = K - 1;
  let seq: ServerSequence;
  let text: string | undefined;
  if (!inc) {
    for (let k = 0; k < K; k++) {
      const L = lists[k]!.length;
      const prev = k > 0 ? lists[k - 1]!.length : 0;
      if (L < prev) bad('ERR_SHAPE', `${cp(k)}.meta_info.output_token_logprobs.length`, `at least ${prev} (cumulative lists grow; set options.incremental if the server streams increments)`, L);
      if (prev > 0 && !sameTuple(lists[k]![prev - 1], lists[k - 1]![prev - 1])) {
        bad('ERR_SHAPE', `${cp(k)}.meta_info.output_token_logprobs[${prev - 1}]`, `the same [logprob, token_id] as ${cp(k - 1)} (cumulative lists)`, tupleText(lists[k]![prev - 1]));
      }
      if (counts && L !== counts[k]) bad('ERR_SHAPE', `${cp(k)}.meta_info.output_token_logprobs.length`, `${counts[k]} (meta_info.completion_tokens, cumulative lists)`, L);
    }
    const mp = `${cp(last)}.meta_info`;
    const b = fill(lists[last]!, tops[last]!, 0, lists[last]!.length, (i) => `${mp}.output_token_logprobs[${i}]`,
      (i) => `${mp}.output_top_logprobs[${i}]`, top, arena);
    seq = { index, tokenIds: b.tokenIds, logprobs: b.logprobs, topK: done(b) };
    checkOutputIds(chunks[cis[last]!], cp(last), seq.tokenIds, 0);
    const t = (chunks[cis[last]!] as Record<string, unknown>).text;
    if (typeof t === 'string') text = t;
  } else {
    let total = 0;
    for (let k = 0; k < K; k++) {
      total += lists[k]!.length;
      if (counts && total !== counts[k]) {
        bad('ERR_SHAPE', `${cp(k)}.meta_info.output_token_logprobs.length`, `${counts[k]! - total + lists[k]!.length} (meta_info.completion_tokens ${counts[k]} less the ${total - lists[k]!.length} tokens before, incremental lists)`, lists[k]!.length);
      }
    }
    // Concatenate, remembering each entry's chunk and place for error positions.
    const toks = new Array<unknown>(total);
    const tks: unknown[] | null = top && tops.some((t) => t !== null) ? new Array<unknown>(total) : null;
    const chunkOf = new Int32Array(total);
    const localOf = new Int32Array(total);
    let i = 0;
    for (let k = 0; k < K; k++) {
      const l = lists[k]!;
      const tl = tops[k];
      for (let j = 0; j < l.length; j++, i++) {
        toks[i] = l[j];
        if (tks) tks[i] = tl ? tl[j] : null; // a chunk without alternatives: rows of padding
        chunkOf[i] = cis[k]!;
        localOf[i] = j;
      }
    }
    const b = fill(toks, tks, 0, total, (x) => `chunks[${chunkOf[x]}].meta_info.output_token_logprobs[${localOf[x]}]`,
      (x) => `chunks[${chunkOf[x]}].meta_info.output_top_logprobs[${localOf[x]}]`, top, arena);
    seq = { index, tokenIds: b.tokenIds, logprobs: b.logprobs, topK: done(b) };
    let off = 0;
    for (let k = 0; k < K; k++) {
      checkOutputIds(chunks[cis[k]!], cp(k), seq.tokenIds.subarray(off, off + lists[k]!.length), off);
      off += lists[k]!.length;
      const t = (chunks[cis[k]!] as Record<string, unknown>).text;
      if (typeof t === 'string') text = (text ?? '') + t;
    }
  }
  if (text !== undefined) seq.text = text;
  seq.finishReason = finishOf(metas[last]!)!;
  return seq;
}

/**
 * Cumulative (false) or incremental (true) log-prob lists. With running counts: lists as long as the
 * count are cumulative, lists adding up to it incremental (both hold only when at most the last chunk
 * has tokens, where both readings agree). Without: lists that cannot be cumulative are incremental;
 * lists that could be either are refused.
 */
function detectIncremental(lists: unknown[][], counts: number[] | null, cp: (k: number) => string): boolean {
  const K = lists.length;
  if (counts) {
    let cumBad = -1, incBad = -1, total = 0;
    for (let k = 0; k < K; k++) {
      total += lists[k]!.length;
      if (cumBad < 0 && lists[k]!.length !== counts[k]) cumBad = k;
      if (incBad < 0 && total !== counts[k]) incBad = k;
    }
    if (cumBad < 0) return false;
    if (incBad < 0) return true;
    // report where the reading that holds longer (the likelier one) breaks
    const inc = incBad > cumBad;
    const k = inc ? incBad : cumBad;
    let before = 0;
    for (let j = 0; j < k; j++) before += lists[j]!.length;
    return bad('ERR_SHAPE', `${cp(k)}.meta_info.output_token_logprobs.length`,
      `${inc ? counts[k]! - before : counts[k]} (meta_info.completion_tokens ${counts[k]} read with ${inc ? 'incremental' : 'cumulative'} lists; ` +
      `${inc ? 'cumulative' : 'incremental'} lists disagree from ${cp(inc ? cumBad : incBad)} on)`, lists[k]!.length);
  }
  let withTokens = 0;
  let cumulative = true;
  for (let k = 0; k < K; k++) {
    const L = lists[k]!.length;
    if (L > 0) withTokens++;
    const prev = k > 0 ? lists[k - 1]!.length : 0;
    if (L < prev || (prev > 0 && !sameTuple(lists[k]![prev - 1], lists[k - 1]![prev - 1]))) cumulative = false;
  }
  if (withTokens <= 1) return false;
  if (!cumulative) return true;
  return bad('ERR_OPTION', `${cp(0)}.meta_info.completion_tokens`,
    'running token counts to tell cumulative from incremental log-prob lists (or set options.incremental)', undefined);
}

/** A chunk's `output_ids` (when it has them) must be the ids read from its tuples. */
function checkOutputIds(chunk: unknown, pos: string, ids: Int32Array, from: number): void {
  const o = (chunk as Record<string, unknown>).output_ids;
  if (o === undefined || o === null) return;
  const a = arr(o, `${pos}.output_ids`);
  if (a.length !== ids.length) bad('ERR_SHAPE', `${pos}.output_ids.length`, `${ids.length} (one per output_token_logprobs entry)`, a.length);
  for (let j = 0; j < a.length; j++) {
    if (a[j] !== ids[j]) bad('ERR_TARGET_RANGE', `${pos}.output_ids[${j}]`, `${ids[j]} (the token id of output_token_logprobs[${j}], token ${from + j} of the stream)`, a[j]);
  }
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
  const b = fill(toks, tops, start, n, (i) => `${mp}.input_token_logprobs[${i}]`, (i) => `${mp}.input_top_logprobs[${i}]`,
    o.topLogprobs, o.arena);
  return withMode({ index: 0, tokenIds: b.tokenIds, logprobs: b.logprobs, topK: done(b) }, o.mode ?? PROMPT_MODE);
}
