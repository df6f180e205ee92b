/**
 * vLLM: log-probs keyed by token id. `prompt_logprobs` (the teacher's scores of a prefilled sequence:
 * one `{ "<id>": { logprob, rank, decoded_token } }` per prompt position, `null` first) with
 * `prompt_token_ids`, and the offline `RequestOutput` form (`outputs[i].token_ids` with `logprobs`
 * keyed by id). vLLM's OpenAI-compatible responses go through {@link parseVllm} (or the OpenAI parsers
 * directly), which read its `token_ids` / `token_id:N` extensions.
 *
 * @module
 */
import {
  arr, bad, badLp, builder, done, idArray, isId, isLp, isObj, obj, parseOptions, PROMPT_MODE, withMode,
} from './common.js';
import type { ParseOptions, ServerSequence, SequenceBuilder } from './common.js';
import { parseOpenAIChat, parseOpenAICompletion } from './openai.js';

/**
 * Options of {@link parseVllmPromptLogprobs}.
 * @category Server ingestion
 */
export interface VllmPromptOptions extends Pick<ParseOptions, 'topLogprobs' | 'mode'> {
  /**
   * First prompt position to read (default: `total - length` when `length` is given, else 1).
   *
   * @defaultValue `total - length`, or 1
   */
  start?: number;
  /**
   * Number of positions to read (default: to the end of the prompt).
   *
   * @defaultValue to the end of the prompt
   */
  length?: number;
  /**
   * Which choice holds `prompt_logprobs` in a completions response (default 0).
   *
   * @defaultValue `0`
   */
  choice?: number;
  /** The prompt's token ids, when the response does not carry `prompt_token_ids`. */
  promptTokenIds?: ArrayLike<number>;
}

/** A decimal token id key ("123") as a number, or -1. Reads char codes (no allocation). */
function keyId(key: string): number {
  const n = key.length;
  if (n === 0 || n > 10 || (n > 1 && key.charCodeAt(0) === 48)) return -1;
  let v = 0;
  for (let i = 0; i < n; i++) {
    const c = key.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return -1;
    v = v * 10 + c;
  }
  return v <= 0x7fffffff ? v : -1;
}

/** Reads one id-keyed row (at position `where(i)`) into position `i`: the chosen token's log-prob and
 *  the alternatives, most likely first. Throws on a bad entry or a missing chosen id. */
function keyedRow(d: unknown, where: (i: number) => string, chosen: number, b: SequenceBuilder, i: number, K: number): void {
  if (!isObj(d)) obj(d, where(i));
  const row = d as Record<string, unknown>;
  let found = false;
  let j = 0;
  const tk = b.topK;
  for (const key in row) {
    const id = keyId(key);
    if (id < 0) bad('ERR_TARGET_RANGE', `${where(i)}[${JSON.stringify(key)}]`, 'a token id key in [0, 2^31)', key);
    const v = row[key];
    const lp = isObj(v) ? v.logprob : v;
    if (!isLp(lp)) badLp(isObj(v) ? `${where(i)}["${key}"].logprob` : `${where(i)}["${key}"]`, lp);
    if (id === chosen) {
      b.logprobs[i] = lp;
      found = true;
    }
    if (tk) {
      // insertion into the row, most likely first (integer keys enumerate in id order, not rank order)
      const base = i * K;
      let p = j;
      while (p > 0 && tk.logprobs[base + p - 1]! < lp) {
        tk.logprobs[base + p] = tk.logprobs[base + p - 1]!;
        tk.ids[base + p] = tk.ids[base + p - 1]!;
        p--;
      }
      tk.logprobs[base + p] = lp;
      tk.ids[base + p] = id;
    }
    j++;
  }
  if (b.counts) b.counts[i] = j;
  if (!found) bad('ERR_SHAPE', where(i), `an entry for the sampled token id ${chosen}`, `ids [${Object.keys(row).join(', ')}]`);
  b.tokenIds[i] = chosen;
}

/** Width of the widest id-keyed row among `rows[from..to)`. */
function keyedWidth(rows: unknown[], from: number, to: number): number {
  let k = 0;
  for (let i = from; i < to; i++) {
    const r = rows[i];
    if (isObj(r)) {
      let c = 0;
      for (const _ in r) c++;
      if (c > k) k = c;
    }
  }
  return k;
}

function intOpt(x: unknown, pos: string, min: number, max: number): number | undefined {
  if (x === undefined) return undefined;
  if (typeof x !== 'number' || !Number.isInteger(x) || x < min || x > max) bad('ERR_OPTION', pos, `an integer in [${min}, ${max}]`, x);
  return x;
}

/**
 * Reads vLLM's `prompt_logprobs` for a range of prompt positions: the scores a model gave to tokens
 * it was fed. This is how teacher log-probs are obtained from a server: send the privileged context
 * followed by the student's sampled tokens as the prompt (`max_tokens: 1`, `prompt_logprobs: k`,
 * `return_token_ids: true`) and read the last `length` positions. The chosen token at each position is
 * the prompt token; the alternatives are every id in that position's map, most likely first (vLLM adds
 * the prompt token to its top-k, so a row may hold k + 1 entries).
 *
 * Looks in `choices[choice].prompt_logprobs` (completions) then the top-level `prompt_logprobs`
 * (chat), with the matching `prompt_token_ids` (or `options.promptTokenIds`).
 *
 * @param response a parsed vLLM completion or chat completion
 * @param options positions to read, which choice, top-k switch
 * @returns the scored positions as one sequence (`index` 0)
 * @throws GearError `ERR_SHAPE` (missing field, range outside the prompt, a position without its prompt
 *   token), `ERR_DTYPE`, `ERR_OPTION`, `ERR_TARGET_RANGE`, `ERR_NON_FINITE`
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 * const response = {
 *   prompt_token_ids: [1, 50, 51],
 *   prompt_logprobs: [null,
 *     { '50': { logprob: -0.2, rank: 1 }, '7': { logprob: -2.1, rank: 2 } },
 *     { '51': { logprob: -1.5, rank: 2 }, '9': { logprob: -0.4, rank: 1 } }],
 *   choices: [{ index: 0, text: '' }],
 * };
 * const teacher = rl.parseVllmPromptLogprobs(response, { length: 2 });
 * console.log(Array.from(teacher.tokenIds), Array.from(teacher.topK!.ids)); // [50, 51] [50, 7, 9, 51]
 * ```
 * @category Server ingestion
 */
export function parseVllmPromptLogprobs(response: unknown, options?: VllmPromptOptions): ServerSequence {
  const o = parseOptions(options as ParseOptions, 'parseVllmPromptLogprobs', ['start', 'length', 'choice', 'promptTokenIds']);
  const opts = (options ?? {}) as VllmPromptOptions;
  const doc = obj(response, 'response');
  const ci = intOpt(opts.choice, 'parseVllmPromptLogprobs: options.choice', 0, 2 ** 31 - 1) ?? 0;
  let rows: unknown = undefined;
  let ids: unknown = undefined;
  let pos = 'prompt_logprobs';
  let idPos = 'prompt_token_ids';
  if (Array.isArray(doc.choices) && doc.choices.length > ci && isObj(doc.choices[ci])) {
    const c = doc.choices[ci] as Record<string, unknown>;
    if (c.prompt_logprobs !== undefined && c.prompt_logprobs !== null) {
      rows = c.prompt_logprobs;
      pos = `choices[${ci}].prompt_logprobs`;
    }
    if (c.prompt_token_ids !== undefined && c.prompt_token_ids !== null) {
      ids = c.prompt_token_ids;
      idPos = `choices[${ci}].prompt_token_ids`;
    }
  }
  rows ??= doc.prompt_logprobs;
  ids ??= doc.prompt_token_ids;
  if (rows === undefined || rows === null) bad('ERR_SHAPE', pos, 'prompt log-probs (request prompt_logprobs: k)', rows);
  const list = arr(rows, pos);
  let prompt: Int32Array;
  if (opts.promptTokenIds !== undefined) prompt = idArray(Array.from(opts.promptTokenIds as ArrayLike<unknown>), 'parseVllmPromptLogprobs: options.promptTokenIds');
  else if (ids === undefined || ids === null) {
    return bad('ERR_SHAPE', idPos, 'the prompt token ids (request return_token_ids: true, or pass options.promptTokenIds)', ids);
  } else prompt = idArray(ids, idPos);
  if (prompt.length !== list.length) bad('ERR_SHAPE', `${pos}.length`, `${prompt.length} (one entry per prompt token)`, list.length);
  const total = list.length;
  const length = intOpt(opts.length, 'parseVllmPromptLogprobs: options.length', 0, total);
  const start = intOpt(opts.start, 'parseVllmPromptLogprobs: options.start', 0, total) ?? (length !== undefined ? total - length : Math.min(1, total));
  const n = length ?? total - start;
  if (start + n > total) bad('ERR_SHAPE', 'parseVllmPromptLogprobs: options.start + options.length', `at most the ${total} prompt positions`, start + n);
  const k = o.topLogprobs ? keyedWidth(list, start, start + n) : -1;
  const b = builder(n, k, o.arena);
  const where = (ii: number) => `${pos}[${start + ii}]`;
  for (let i = 0; i < n; i++) {
    const r = list[start + i];
    if (r === null || r === undefined) bad('ERR_SHAPE', `${pos}[${start + i}]`, 'log-probs for this position (position 0 has none: start at 1 or later)', r);
    keyedRow(r, where, prompt[start + i]!, b, i, Math.max(k, 0));
  }
  return withMode({ index: 0, tokenIds: b.tokenIds, logprobs: b.logprobs, topK: done(b) }, o.mode ?? PROMPT_MODE);
}

/**
 * Parses vLLM's offline output (a `RequestOutput` as JSON: `{ outputs: [{ index, text, token_ids,
 * logprobs, finish_reason }] }`, or the `outputs` array itself): each sample's `token_ids` with its
 * `logprobs`, one `{ "<id>": { logprob, rank, decoded_token } }` map per token holding the sampled id
 * and the top-k (alternatives most likely first).
 *
 * @param output a parsed `RequestOutput` or its `outputs` array
 * @param options top-k switch
 * @returns one sequence per sample, in `index` order
 * @throws GearError `ERR_SHAPE`, `ERR_DTYPE`, `ERR_OPTION`, `ERR_TARGET_RANGE`, `ERR_NON_FINITE`
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 * const out = { outputs: [{ index: 0, text: 'ok', token_ids: [12],
 *   logprobs: [{ '12': { logprob: -0.3, rank: 1, decoded_token: 'ok' }, '4': { logprob: -1.4, rank: 2 } }] }] };
 * const [seq] = rl.parseVllmOutputs(out);
 * console.log(seq!.tokenIds[0], seq!.topK!.k); // 12 2
 * ```
 * @category Server ingestion
 */
export function parseVllmOutputs(output: unknown, options?: Pick<ParseOptions, 'topLogprobs' | 'mode'>): ServerSequence[] {
  const o = parseOptions(options, 'parseVllmOutputs');
  const outs = Array.isArray(output) ? output : arr(obj(output, 'output').outputs, 'outputs');
  const base = Array.isArray(output) ? 'output' : 'outputs';
  const seqs = outs.map((x, si): ServerSequence => {
    const p = `${base}[${si}]`;
    const s = obj(x, p);
    const ids = idArray(s.token_ids, `${p}.token_ids`);
    if (s.logprobs === undefined || s.logprobs === null) bad('ERR_SHAPE', `${p}.logprobs`, 'per-token log-probs (SamplingParams(logprobs=k))', s.logprobs);
    const rows = arr(s.logprobs, `${p}.logprobs`);
    if (rows.length !== ids.length) bad('ERR_SHAPE', `${p}.logprobs.length`, `${ids.length} (one per token id)`, rows.length);
    const k = o.topLogprobs ? keyedWidth(rows, 0, rows.length) : -1;
    const b = builder(ids.length, k, o.arena);
    const where = (ii: number) => `${p}.logprobs[${ii}]`;
    for (let i = 0; i < ids.length; i++) keyedRow(rows[i], where, ids[i]!, b, i, Math.max(k, 0));
    const index = s.index === undefined ? si : s.index;
    if (!isId(index)) bad('ERR_DTYPE', `${p}.index`, 'an integer >= 0', index);
    const seq: ServerSequence = { index, tokenIds: b.tokenIds, logprobs: b.logprobs, topK: done(b) };
    if (typeof s.text === 'string') seq.text = s.text;
    if (typeof s.finish_reason === 'string' || s.finish_reason === null) seq.finishReason = s.finish_reason as string | null;
    return seq;
  });
  return withMode(seqs.sort((a, b) => a.index - b.index), o.mode);
}

/**
 * Parses any vLLM response: the offline `RequestOutput` form (has `outputs`), a chat completion (or its
 * streamed chunks), or a text completion (or its chunks). vLLM's `token_ids` (`return_token_ids`) and
 * `token_id:N` strings (`return_tokens_as_token_ids`) give exact ids; without them pass a token map.
 *
 * @param response a parsed vLLM response, or an array of streamed chunks
 * @param options token map and top-k switch
 * @returns one sequence per choice / sample
 * @throws GearError as {@link parseOpenAIChat}
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 * const response = { object: 'chat.completion', choices: [{ index: 0, token_ids: [42],
 *   message: { role: 'assistant', content: 'x' },
 *   logprobs: { content: [{ token: 'token_id:42', logprob: -0.05, top_logprobs: [{ token: 'token_id:42', logprob: -0.05 }] }] } }] };
 * console.log(rl.parseVllm(response)[0]!.tokenIds[0]); // 42
 * ```
 * @category Server ingestion
 */
export function parseVllm(response: unknown, options?: ParseOptions): ServerSequence[] {
  const first = Array.isArray(response) ? response.find((c) => isObj(c) && Array.isArray(c.choices) && c.choices.length > 0) ?? response[0] : response;
  if (isObj(first) && first.outputs !== undefined && !Array.isArray(response)) return parseVllmOutputs(first, options);
  const obj0 = isObj(first) ? first : {};
  const c0 = Array.isArray(obj0.choices) && isObj(obj0.choices[0]) ? obj0.choices[0] as Record<string, unknown> : {};
  const chat = typeof obj0.object === 'string' ? obj0.object.startsWith('chat.') : c0.message !== undefined || c0.delta !== undefined;
  return chat ? parseOpenAIChat(response, options) : parseOpenAICompletion(response, options);
}
