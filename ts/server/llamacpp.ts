/**
 * llama.cpp server's native `/completion` responses: `completion_probabilities` (`n_probs: k`) in the
 * current form (`{ id, token, logprob, bytes, top_logprobs: [{ id, token, logprob, bytes }] }`, or with
 * `post_sampling_probs: true` `prob` / `top_probs`), and the older form without ids (`{ content, probs:
 * [{ tok_str, prob }] }`, which needs the response's `tokens` or a token map). Whole responses, a batch
 * (an array of responses), or the chunks of a streamed one (an array whose chunks have `stop: false`
 * until the last). llama.cpp's `/v1` endpoints go through the OpenAI parsers.
 *
 * @module
 */
import {
  arr, bad, badLp, builder, done, idArray, IdResolver, isId, isLp, isObj, obj, parseOptions,
  withMode,
} from './common.js';
import type { ParseOptions, PosFn, ServerSequence } from './common.js';
import type { ParseArena } from './arena.js';

/**
 * Options of {@link parseLlamaCpp}.
 * @category Server ingestion
 */
export interface LlamaCppOptions extends ParseOptions {
  /**
   * Treat an array as the chunks of one streamed response (default: when a chunk has `stop: false`).
   *
   * @defaultValue whether any element has `stop: false`
   */
  stream?: boolean;
}

/** A probability in (0, 1] as a log-prob; 0 gives -Infinity (the caller decides). Throws on others. */
function probLp(p: unknown, pos: string): number {
  if (typeof p !== 'number' || !(p >= 0 && p <= 1)) bad(typeof p === 'number' ? (Number.isFinite(p) ? 'ERR_OPTION' : 'ERR_NON_FINITE') : 'ERR_DTYPE', pos, 'a probability in [0, 1]', p);
  return Math.log(p);
}

function entryId(e: Record<string, unknown>, res: IdResolver, tokenField: string, where: PosFn, i: number, j: number): number {
  const id = e.id;
  if (id !== undefined) {
    if (!isId(id)) bad('ERR_TARGET_RANGE', `${where(i, j)}.id`, 'an integer token id in [0, 2^31)', id);
    return id;
  }
  return res.id(e[tokenField], e.bytes, where, i, j);
}

/** One sequence from a list of `completion_probabilities` entries (with their positions). */
function sequence(entries: unknown[], posOf: (i: number) => string, tokens: Int32Array | null, tokensPos: string,
  res: IdResolver, top: boolean, index: number, arena?: ParseArena): ServerSequence {
  const n = entries.length;
  if (tokens && tokens.length !== n) bad('ERR_SHAPE', `${tokensPos}.length`, `${n} (one per completion_probabilities entry)`, tokens.length);
  let k = top ? 0 : -1;
  for (let i = 0; i < n; i++) {
    const e = entries[i];
    if (!isObj(e)) bad('ERR_DTYPE', posOf(i), 'a completion_probabilities entry', e);
    if (!top) continue;
    const t = e.top_logprobs ?? e.top_probs ?? e.probs;
    if (Array.isArray(t)) {
      if (t.length > k) k = t.length;
    } else if (t !== undefined && t !== null) bad('ERR_DTYPE', `${posOf(i)}.top_logprobs`, 'an array', t);
  }
  const b = builder(n, k, arena);
  const K = Math.max(k, 0);
  const names: string[] = [];
  const where: PosFn = (i, j) => (j < 0 ? posOf(i) : `${posOf(i)}.${names[i]}[${j}]`);
  for (let i = 0; i < n; i++) {
    const e = entries[i] as Record<string, unknown>;
    const old = e.probs !== undefined && e.id === undefined && e.logprob === undefined && e.prob === undefined;
    const list = (e.top_logprobs ?? e.top_probs ?? e.probs) as unknown[] | undefined | null;
    let id: number;
    let lp: number;
    if (!old) {
      id = tokens ? tokens[i]! : entryId(e, res, 'token', where, i, -1);
      if (tokens && e.id !== undefined && e.id !== id) bad('ERR_TARGET_RANGE', `${posOf(i)}.id`, `${id} (as in tokens)`, e.id);
      const elp = e.logprob;
      if (elp !== undefined) {
        if (!isLp(elp)) badLp(`${posOf(i)}.logprob`, elp);
        lp = elp;
      } else {
        lp = probLp(e.prob, `${posOf(i)}.prob`);
        if (lp === -Infinity) bad('ERR_NON_FINITE', `${posOf(i)}.prob`, 'a probability > 0 for the sampled token', e.prob);
      }
    } else {
      // old form: the sampled token is `content`; its probability is its entry in `probs`
      const p = posOf(i);
      if (typeof e.content !== 'string') bad('ERR_DTYPE', `${p}.content`, 'the sampled token string', e.content);
      id = tokens ? tokens[i]! : res.id(e.content, undefined, (ii) => `${posOf(ii)}.content`, i, -1);
      lp = NaN;
      const ps = arr(e.probs, `${p}.probs`);
      for (let j = 0; j < ps.length; j++) {
        const a = obj(ps[j], `${p}.probs[${j}]`);
        if (a.tok_str === e.content) {
          lp = probLp(a.prob, `${p}.probs[${j}].prob`);
          break;
        }
      }
      if (!(lp > -Infinity)) bad('ERR_SHAPE', `${p}.probs`, `an entry with tok_str ${JSON.stringify(e.content)} and a probability > 0 (raise n_probs)`, `${ps.length} other entries`);
    }
    b.tokenIds[i] = id;
    b.logprobs[i] = lp;
    if (k <= 0 || !list) continue;
    names[i] = e.top_logprobs !== undefined ? 'top_logprobs' : e.top_probs !== undefined ? 'top_probs' : 'probs';
    const tk = b.topK!;
    const base = i * K;
    let j2 = 0;
    for (let j = 0; j < list.length; j++) {
      const a = list[j];
      if (!isObj(a)) bad('ERR_DTYPE', where(i, j), 'an entry { id, token, logprob }', a);
      let alp: number;
      const l = a.logprob;
      if (l !== undefined) {
        if (!isLp(l)) badLp(`${where(i, j)}.logprob`, l);
        alp = l;
      } else alp = probLp(a.prob, `${where(i, j)}.prob`);
      // a post-sampling probability of 0 (cut by the sampler chain) carries no support: left out
      if (alp === -Infinity) continue;
      let aid: number;
      if (old) aid = a.tok_str === e.content ? id : res.id(a.tok_str, undefined, (ii, jj) => `${where(ii, jj)}.tok_str`, i, j);
      else aid = entryId(a, res, 'token', where, i, j);
      tk.ids[base + j2] = aid;
      tk.logprobs[base + j2] = alp;
      j2++;
    }
    b.counts![i] = j2;
  }
  return { index, tokenIds: b.tokenIds, logprobs: b.logprobs, topK: done(b) };
}

function checkError(d: Record<string, unknown>, pos: string): void {
  if (d.error !== undefined) bad('ERR_OPTION', `${pos}.error`, 'a response without an error', JSON.stringify(d.error));
}

function missing(pos: string): never {
  return bad('ERR_SHAPE', `${pos}.completion_probabilities`, 'per-token probabilities (request n_probs: k)', undefined);
}

/**
 * Parses llama.cpp server `/completion` responses (`n_probs: k`) into one {@link ServerSequence} per
 * response. The current form carries ids (`id` per token and per alternative); the older
 * `probs` / `tok_str` form has none and takes the ids from the response's `tokens` (`return_tokens:
 * true`) or `options.tokenMap` (its alternatives always need the map; pass `topLogprobs: false` to skip
 * them). Probabilities (`post_sampling_probs`, old form) become log-probs; an alternative with
 * probability 0 is left out.
 *
 * @param response one parsed response, an array of them (a batch), or an array of streamed chunks
 * @param options token map, top-k switch, `stream` to force reading an array as chunks
 * @returns one sequence per response (one for a stream)
 * @throws GearError `ERR_SHAPE`, `ERR_DTYPE`, `ERR_OPTION`, `ERR_TARGET_RANGE`, `ERR_NON_FINITE`
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 * const response = { content: ' the', stop: true, completion_probabilities: [
 *   { id: 278, token: ' the', logprob: -0.4, bytes: [32, 116, 104, 101],
 *     top_logprobs: [{ id: 278, token: ' the', logprob: -0.4, bytes: [32, 116, 104, 101] },
 *                    { id: 263, token: ' a', logprob: -1.3, bytes: [32, 97] }] }] };
 * const [seq] = rl.parseLlamaCpp(response);
 * console.log(seq!.tokenIds[0], Array.from(seq!.topK!.ids)); // 278 [278, 263]
 * ```
 * @category Server ingestion
 */
export function parseLlamaCpp(response: unknown, options?: LlamaCppOptions): ServerSequence[] {
  const o = parseOptions(options, 'parseLlamaCpp', ['stream']);
  const streamOpt = options?.stream;
  if (streamOpt !== undefined && typeof streamOpt !== 'boolean') bad('ERR_OPTION', 'parseLlamaCpp: options.stream', 'a boolean', streamOpt);
  const res = new IdResolver(o.tokenMap, o.tokenKeys, 'this llama.cpp response');
  if (!Array.isArray(response)) {
    const d = obj(response, 'response');
    checkError(d, 'response');
    if (d.completion_probabilities === undefined || d.completion_probabilities === null) missing('response');
    const entries = arr(d.completion_probabilities, 'completion_probabilities');
    const tokens = Array.isArray(d.tokens) && d.tokens.length > 0 ? idArray(d.tokens, 'tokens') : null;
    const seq = sequence(entries, (i) => `completion_probabilities[${i}]`, tokens, 'tokens', res, o.topLogprobs, 0, o.arena);
    if (typeof d.content === 'string') seq.text = d.content;
    if (typeof d.stop_type === 'string') seq.finishReason = d.stop_type;
    return withMode([seq], o.mode);
  }
  const stream = streamOpt ?? response.some((c) => isObj(c) && c.stop === false);
  if (!stream) {
    return withMode(response.map((r, ri) => {
      const d = obj(r, `response[${ri}]`);
      checkError(d, `response[${ri}]`);
      if (d.completion_probabilities === undefined || d.completion_probabilities === null) missing(`response[${ri}]`);
      const entries = arr(d.completion_probabilities, `response[${ri}].completion_probabilities`);
      const tokens = Array.isArray(d.tokens) && d.tokens.length > 0 ? idArray(d.tokens, `response[${ri}].tokens`) : null;
      const seq = sequence(entries, (i) => `response[${ri}].completion_probabilities[${i}]`, tokens, `response[${ri}].tokens`,
        res, o.topLogprobs, typeof d.index === 'number' && isId(d.index) ? d.index : ri, o.arena);
      if (typeof d.content === 'string') seq.text = d.content;
      if (typeof d.stop_type === 'string') seq.finishReason = d.stop_type;
      return seq;
    }), o.mode);
  }
  // streamed: every chunk with tokens carries their probabilities; the last (`stop: true`) may repeat none
  const entries: unknown[] = [];
  const where: string[] = [];
  const ids: unknown[] = [];
  let allTokens = true;
  let text = '';
  let finish: string | undefined;
  response.forEach((c, ci) => {
    const d = obj(c, `chunks[${ci}]`);
    checkError(d, `chunks[${ci}]`);
    if (typeof d.content === 'string') text += d.content;
    if (typeof d.stop_type === 'string') finish = d.stop_type;
    const probs = d.completion_probabilities;
    const toks = Array.isArray(d.tokens) ? d.tokens : null;
    if (probs === undefined || probs === null) {
      if (toks && toks.length > 0) missing(`chunks[${ci}]`);
      return;
    }
    const list = arr(probs, `chunks[${ci}].completion_probabilities`);
    if (toks && toks.length !== list.length) bad('ERR_SHAPE', `chunks[${ci}].tokens.length`, `${list.length} (one per completion_probabilities entry)`, toks.length);
    if (!toks) allTokens = false;
    for (let i = 0; i < list.length; i++) {
      entries.push(list[i]);
      where.push(`chunks[${ci}].completion_probabilities[${i}]`);
      if (toks) ids.push(toks[i]);
    }
  });
  const tokens = allTokens && ids.length === entries.length && ids.length > 0 ? idArray(ids, 'chunks[*].tokens') : null;
  const seq = sequence(entries, (i) => where[i]!, tokens, 'chunks[*].tokens', res, o.topLogprobs, 0, o.arena);
  seq.text = text;
  if (finish !== undefined) seq.finishReason = finish;
  return withMode([seq], o.mode);
}
