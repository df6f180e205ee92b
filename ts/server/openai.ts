/**
 * OpenAI-compatible responses (OpenAI, vLLM, SGLang's and llama.cpp's `/v1` endpoints, any compatible
 * server): chat completions' `logprobs.content[]` with `top_logprobs` (token strings and `bytes`), and
 * the legacy completions' `logprobs` (`tokens` / `token_logprobs` / `top_logprobs` maps). Whole
 * responses or the chunks of a streamed one (an array of parsed SSE chunk objects).
 *
 * vLLM's extensions are read too: `choices[i].token_ids` (`return_token_ids`) and `token_id:N` token
 * strings (`return_tokens_as_token_ids`). Without ids, token strings go through the caller's token map.
 *
 * @module
 */
import {
  arr, bad, badLp, builder, done, idArray, IdResolver, isId, isLp, isObj, obj, parseOptions, PROMPT_MODE, tokenIdString, withMode,
} from './common.js';
import type { ParseOptions, ServerSequence } from './common.js';
import type { ParseArena } from './arena.js';

/** One choice's merged fields. */
interface ChoiceAcc {
  index: number;
  /** Per-token entries (chat: content objects; completions: positions into the arrays below). */
  entries: unknown[];
  /** Position (for messages) of each entry, only for streamed input. */
  entryPos: string[] | null;
  /** Legacy completions arrays. */
  tokens: unknown[];
  tokenLogprobs: unknown[];
  topMaps: unknown[];
  /** vLLM token ids. */
  tokenIds: unknown[] | null;
  tokenIdsPos: string;
  text: string;
  finishReason: string | null;
  /** Position of the choice's logprobs object. */
  pos: string;
  /** Whether any logprobs object was seen. */
  hasLogprobs: boolean;
}

function newAcc(index: number, pos: string): ChoiceAcc {
  return { index, entries: [], entryPos: null, tokens: [], tokenLogprobs: [], topMaps: [], tokenIds: null,
    tokenIdsPos: `${pos}.token_ids`, text: '', finishReason: null, pos, hasLogprobs: false };
}

function choiceIndex(c: Record<string, unknown>, j: number, pos: string): number {
  const ix = c.index ?? j;
  if (typeof ix !== 'number' || !Number.isInteger(ix) || ix < 0) bad('ERR_DTYPE', `${pos}.index`, 'an integer >= 0', ix);
  return ix;
}

/** Collects the choices of a response or of streamed chunks, merged by `index`, in index order. */
function collect(input: unknown, what: string, kind: 'chat' | 'completion'): ChoiceAcc[] {
  const byIndex = new Map<number, ChoiceAcc>();
  const streamed = Array.isArray(input);
  const docs = streamed ? input : [input];
  docs.forEach((d, di) => {
    const pfx = streamed ? `chunks[${di}].` : '';
    const doc = obj(d, streamed ? `chunks[${di}]` : what);
    if (doc.error !== undefined) bad('ERR_OPTION', `${pfx}error`, 'a response without an error', JSON.stringify(doc.error));
    const choices = arr(doc.choices, `${pfx}choices`);
    choices.forEach((c0, j) => {
      const cpos = `${pfx}choices[${j}]`;
      const c = obj(c0, cpos);
      const index = choiceIndex(c, j, cpos);
      let acc = byIndex.get(index);
      if (acc === undefined) byIndex.set(index, acc = newAcc(index, cpos));
      if (typeof c.finish_reason === 'string') acc.finishReason = c.finish_reason;
      if (kind === 'chat') {
        const m = (streamed ? c.delta : c.message) as Record<string, unknown> | undefined;
        if (isObj(m) && typeof m.content === 'string') acc.text += m.content;
      } else if (typeof c.text === 'string') acc.text += c.text;
      if (c.token_ids !== undefined && c.token_ids !== null) {
        const ids = arr(c.token_ids, `${cpos}.token_ids`);
        if (acc.tokenIds === null) {
          acc.tokenIds = streamed ? [...ids] : ids;
          acc.tokenIdsPos = `${cpos}.token_ids`;
        } else for (const t of ids) acc.tokenIds.push(t);
      }
      const lp = c.logprobs;
      if (lp === undefined || lp === null) return;
      const lpos = `${cpos}.logprobs`;
      const l = obj(lp, lpos);
      acc.hasLogprobs = true;
      if (kind === 'chat') {
        let content = l.content;
        let field = 'content';
        if ((content === null || content === undefined) && Array.isArray(l.refusal)) {
          content = l.refusal;
          field = 'refusal';
        }
        if (content === null || content === undefined) return;
        const list = arr(content, `${lpos}.${field}`);
        if (!streamed) {
          acc.entries = list;
          acc.pos = `${lpos}.${field}`;
        } else {
          acc.entryPos ??= [];
          for (let i = 0; i < list.length; i++) {
            acc.entries.push(list[i]);
            acc.entryPos.push(`${lpos}.${field}[${i}]`);
          }
        }
      } else {
        const tokens = arr(l.tokens, `${lpos}.tokens`);
        const tlp = arr(l.token_logprobs, `${lpos}.token_logprobs`);
        if (tlp.length !== tokens.length) bad('ERR_SHAPE', `${lpos}.token_logprobs.length`, `${tokens.length} (one per token)`, tlp.length);
        let tops: unknown[] | null = null;
        if (l.top_logprobs !== undefined && l.top_logprobs !== null) {
          tops = arr(l.top_logprobs, `${lpos}.top_logprobs`);
          if (tops.length !== tokens.length) bad('ERR_SHAPE', `${lpos}.top_logprobs.length`, `${tokens.length} (one per token)`, tops.length);
        }
        acc.entryPos ??= [];
        for (let i = 0; i < tokens.length; i++) {
          acc.tokens.push(tokens[i]);
          acc.tokenLogprobs.push(tlp[i]);
          acc.topMaps.push(tops ? tops[i] : null);
          acc.entryPos.push(`${lpos}[${i}]`);
        }
        acc.pos = lpos;
      }
    });
  });
  return [...byIndex.values()].sort((a, b) => a.index - b.index);
}

function requireLogprobs(acc: ChoiceAcc, kind: 'chat' | 'completion'): void {
  if (!acc.hasLogprobs) {
    bad('ERR_SHAPE', `${acc.pos}.logprobs`, kind === 'chat'
      ? 'per-token log-probs (request logprobs: true, and top_logprobs: k for alternatives)'
      : 'per-token log-probs (request logprobs: k)', null);
  }
}

/** Response ids (vLLM `token_ids`), aligned to `n` logprob entries; echo puts prompt tokens first. */
function responseIds(acc: ChoiceAcc, n: number): Int32Array | null {
  if (acc.tokenIds === null) return null;
  const ids = idArray(acc.tokenIds, acc.tokenIdsPos);
  if (ids.length !== n) bad('ERR_SHAPE', `${acc.tokenIdsPos}.length`, `${n} (one id per log-prob entry)`, ids.length);
  return ids;
}

function sameBytes(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return a == null && b == null;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Chat: `logprobs.content[i] = { token, logprob, bytes, top_logprobs: [{ token, logprob, bytes }] }`. */
function chatSequence(acc: ChoiceAcc, res: IdResolver, top: boolean, arena?: ParseArena): ServerSequence {
  requireLogprobs(acc, 'chat');
  const entries = acc.entries;
  const n = entries.length;
  const posOf = (i: number) => (acc.entryPos ? acc.entryPos[i]! : `${acc.pos}[${i}]`);
  const given = responseIds(acc, n);
  let k = top ? 0 : -1;
  for (let i = 0; i < n; i++) {
    const e = entries[i];
    if (!isObj(e)) bad('ERR_DTYPE', posOf(i), 'a log-prob entry { token, logprob, top_logprobs }', e);
    if (top) {
      const t = e.top_logprobs;
      if (Array.isArray(t)) {
        if (t.length > k) k = t.length;
      } else if (t !== undefined && t !== null) bad('ERR_DTYPE', `${posOf(i)}.top_logprobs`, 'an array', t);
    }
  }
  const b = builder(n, k, arena);
  const K = Math.max(k, 0);
  const where = (i: number, j: number) => (j < 0 ? posOf(i) : `${posOf(i)}.top_logprobs[${j}]`);
  for (let i = 0; i < n; i++) {
    const e = entries[i] as Record<string, unknown>;
    const lp = e.logprob;
    if (!isLp(lp)) badLp(`${posOf(i)}.logprob`, lp);
    let id: number;
    if (given) {
      id = given[i]!;
      const s = typeof e.token === 'string' ? tokenIdString(e.token) : -1;
      if (s >= 0 && s !== id) bad('ERR_TARGET_RANGE', `${posOf(i)}.token`, `token_id:${id} (as in token_ids)`, e.token);
    } else if (e.id !== undefined) {
      // llama.cpp's /v1 endpoints add the id to each entry
      if (!isId(e.id)) bad('ERR_TARGET_RANGE', `${posOf(i)}.id`, 'an integer token id in [0, 2^31)', e.id);
      id = e.id;
    } else id = res.id(e.token, e.bytes, where, i, -1);
    b.tokenIds[i] = id;
    b.logprobs[i] = lp;
    if (k > 0) {
      const t = e.top_logprobs as unknown[] | null | undefined;
      if (!t) continue;
      const tk = b.topK!;
      const base = i * K;
      for (let j = 0; j < t.length; j++) {
        const a = t[j];
        if (!isObj(a)) bad('ERR_DTYPE', where(i, j), 'an entry { token, logprob }', a);
        const alp = a.logprob;
        if (!isLp(alp)) badLp(`${where(i, j)}.logprob`, alp);
        let aid: number;
        const at = a.token;
        if (a.id !== undefined) {
          if (!isId(a.id)) bad('ERR_TARGET_RANGE', `${where(i, j)}.id`, 'an integer token id in [0, 2^31)', a.id);
          aid = a.id;
        } else if (typeof at === 'string' && (aid = tokenIdString(at)) >= 0) {
          // vLLM's token_id:N
        } else if (at === e.token && typeof at === 'string' && sameBytes(a.bytes, e.bytes)) {
          aid = id;
        } else aid = res.id(at, a.bytes, where, i, j);
        tk.ids[base + j] = aid;
        tk.logprobs[base + j] = alp;
      }
      b.counts![i] = t.length;
    }
  }
  const seq: ServerSequence = { index: acc.index, tokenIds: b.tokenIds, logprobs: b.logprobs, topK: done(b), text: acc.text };
  if (acc.finishReason !== null) seq.finishReason = acc.finishReason;
  return seq;
}

/** Legacy completions: parallel `tokens` / `token_logprobs` / `top_logprobs` (maps token -> log-prob). */
function completionSequence(acc: ChoiceAcc, res: IdResolver, top: boolean, arena?: ParseArena): ServerSequence {
  requireLogprobs(acc, 'completion');
  let first = 0;
  const total = acc.tokens.length;
  // vLLM with echo: the logprobs cover prompt + completion while token_ids holds the completion only.
  if (acc.tokenIds !== null && acc.tokenIds.length < total) first = total - acc.tokenIds.length;
  const n = total - first;
  return legacyEntries(acc, res, top, arena, first, n, responseIds(acc, n));
}

/** Entries `[first, first + n)` of a legacy completion's merged arrays as a sequence (ids from `given` when known). */
function legacyEntries(acc: ChoiceAcc, res: IdResolver, top: boolean, arena: ParseArena | undefined, first: number, n: number,
  given: Int32Array | null): ServerSequence {
  const posOf = (i: number) => acc.entryPos![first + i]!;
  let k = top ? 0 : -1;
  if (top) {
    for (let i = 0; i < n; i++) {
      const m = acc.topMaps[first + i];
      if (m === null || m === undefined) continue;
      if (!isObj(m)) bad('ERR_DTYPE', `${posOf(i).replace(/\[(\d+)\]$/, '.top_logprobs[$1]')}`, 'an object mapping token -> log-prob', m);
      const c = Object.keys(m).length;
      if (c > k) k = c;
    }
  }
  const b = builder(n, k, arena);
  const K = Math.max(k, 0);
  // entry i of the merged arrays sits at `<logprobs>[k]`; fields are spelled `<logprobs>.<field>[k]`
  const field = (i: number, name: string) => {
    const p = posOf(i);
    const at = p.lastIndexOf('[');
    return `${p.slice(0, at)}.${name}${p.slice(at)}`;
  };
  const keys: string[][] = [];
  const where = (i: number, j: number) => (j < 0 ? field(i, 'tokens') : `${field(i, 'top_logprobs')}[${JSON.stringify(keys[i]![j])}]`);
  for (let i = 0; i < n; i++) {
    const tok = acc.tokens[first + i];
    const lp = acc.tokenLogprobs[first + i];
    if (!isLp(lp)) badLp(field(i, 'token_logprobs'), lp);
    let id: number;
    if (given) {
      id = given[i]!;
      const s = typeof tok === 'string' ? tokenIdString(tok) : -1;
      if (s >= 0 && s !== id) bad('ERR_TARGET_RANGE', field(i, 'tokens'), `token_id:${id} (as in token_ids)`, tok);
    } else {
      id = res.id(tok, undefined, where, i, -1);
    }
    b.tokenIds[i] = id;
    b.logprobs[i] = lp;
    if (k > 0) {
      const m = acc.topMaps[first + i] as Record<string, unknown> | null | undefined;
      if (!m) continue;
      let j = 0;
      const ks = Object.keys(m);
      keys[i] = ks;
      for (; j < ks.length; j++) {
        const key = ks[j]!;
        const alp = m[key];
        if (!isLp(alp)) badLp(where(i, j), alp);
        const aid = key === tok && tokenIdString(key) < 0 ? id : res.id(key, undefined, where, i, j);
        b.topK!.ids[i * K + j] = aid;
        b.topK!.logprobs[i * K + j] = alp;
      }
      b.counts![i] = ks.length;
    }
  }
  const seq: ServerSequence = { index: acc.index, tokenIds: b.tokenIds, logprobs: b.logprobs, topK: done(b), text: acc.text };
  if (acc.finishReason !== null) seq.finishReason = acc.finishReason;
  return seq;
}

/**
 * Options of {@link parseOpenAIPromptLogprobs}.
 * @category Server ingestion
 */
export interface OpenAIPromptOptions extends ParseOptions {
  /**
   * First echoed position to read (default: `end - length` when `length` is given, else 1; `end` is the
   * last prompt position: the echoed entries less the generated ones, known from vLLM's `token_ids`, else
   * none, as with `max_tokens: 0`).
   *
   * @defaultValue `end - length`, or 1
   */
  start?: number;
  /**
   * Number of positions to read (default: to the end of the prompt).
   *
   * @defaultValue to the end of the prompt
   */
  length?: number;
  /**
   * Which choice to read (default 0).
   *
   * @defaultValue `0`
   */
  choice?: number;
}

/**
 * Reads the prompt log-probs of an OpenAI-style legacy completion requested with `echo: true` and
 * `logprobs: k`: the scores a model gave to the tokens it was fed, the third way (after vLLM's
 * `prompt_logprobs` and SGLang's `input_token_logprobs`) to get a teacher's log-probs of the student's
 * tokens. Send the teacher's prompt followed by the student's tokens, with `echo: true`, `logprobs: k`
 * and `max_tokens: 0` where the server allows it (vLLM does; otherwise 1, and the generated token is
 * left out through vLLM's `token_ids` or `options.start`), and read the last `length` positions. The
 * first echoed position has no log-prob (`null`): it cannot be read. Ids come from vLLM's `token_id:N`
 * strings, the response's `prompt_token_ids`, or `options.tokenMap`. The default mode is raw at
 * temperature 1 (prompt positions are not sampled).
 *
 * @param response a parsed legacy completion (not streamed)
 * @param options positions to read, which choice, token map, top-k switch, mode
 * @returns the scored positions as one sequence (`index` 0)
 * @throws GearError `ERR_SHAPE` (no log-probs, a range outside the echoed prompt, position 0),
 *   `ERR_DTYPE`, `ERR_OPTION`, `ERR_TARGET_RANGE`, `ERR_NON_FINITE`
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 * const response = { choices: [{ index: 0, text: 'Say hi hi', logprobs: {
 *   tokens: ['token_id:9', 'token_id:12', 'token_id:12'], token_logprobs: [null, -0.4, -2.5],
 *   top_logprobs: [null, { 'token_id:12': -0.4 }, { 'token_id:7': -0.2, 'token_id:12': -2.5 }] } }] };
 * const teacher = rl.parseOpenAIPromptLogprobs(response, { length: 2 });
 * console.log(Array.from(teacher.tokenIds), Array.from(teacher.logprobs)); // [12, 12] [-0.4000000059604645, -2.5]
 * ```
 * @category Server ingestion
 */
export function parseOpenAIPromptLogprobs(response: unknown, options?: OpenAIPromptOptions): ServerSequence {
  const o = parseOptions(options, 'parseOpenAIPromptLogprobs', ['start', 'length', 'choice']);
  const opts = (options ?? {}) as OpenAIPromptOptions;
  if (Array.isArray(response)) bad('ERR_DTYPE', 'response', 'one completion object (echoed prompts are not streamed)', 'an array');
  const int = (x: unknown, name: string, max: number): number | undefined => {
    if (x === undefined) return undefined;
    if (typeof x !== 'number' || !Number.isInteger(x) || x < 0 || x > max) bad('ERR_OPTION', `parseOpenAIPromptLogprobs: options.${name}`, `an integer in [0, ${max}]`, x);
    return x;
  };
  const ci = int(opts.choice, 'choice', 2 ** 31 - 1) ?? 0;
  const accs = collect(response, 'response', 'completion');
  const acc = accs.find((a) => a.index === ci);
  if (!acc) return bad('ERR_SHAPE', `choices (index ${ci})`, `a choice with index ${ci}`, `${accs.length} choices`);
  requireLogprobs(acc, 'completion');
  const total = acc.tokens.length;
  // the echoed prompt ends where the generated tokens (vLLM's token_ids) begin
  const end = acc.tokenIds !== null && acc.tokenIds.length <= total ? total - acc.tokenIds.length : total;
  const length = int(opts.length, 'length', end);
  const start = int(opts.start, 'start', end) ?? (length !== undefined ? end - length : Math.min(1, end));
  const n = length ?? end - start;
  if (start + n > end) bad('ERR_SHAPE', 'parseOpenAIPromptLogprobs: options.start + options.length', `at most the ${end} echoed prompt positions`, start + n);
  for (let i = start; i < start + n; i++) {
    if (acc.tokenLogprobs[i] === null) bad('ERR_SHAPE', `${acc.entryPos![i]!.replace(/\[(\d+)\]$/, '.token_logprobs[$1]')}`, 'a log-prob for this position (the first echoed position has none: start at 1 or later)', null);
  }
  // the prompt's ids when the response carries them (vLLM's prompt_token_ids, per choice or top level)
  const doc = response as Record<string, unknown>;
  const choice = (Array.isArray(doc.choices) ? doc.choices.find((c) => isObj(c) && (c.index ?? 0) === ci) : undefined) as Record<string, unknown> | undefined;
  const pids = choice?.prompt_token_ids ?? doc.prompt_token_ids;
  let given: Int32Array | null = null;
  if (pids !== undefined && pids !== null) {
    const all = idArray(pids, choice?.prompt_token_ids !== undefined ? `choices[${ci}].prompt_token_ids` : 'prompt_token_ids');
    if (all.length !== end) bad('ERR_SHAPE', 'prompt_token_ids.length', `${end} (one id per echoed prompt position)`, all.length);
    given = all.subarray(start, start + n);
  }
  const res = new IdResolver(o.tokenMap, o.tokenKeys, 'the response');
  const seq = legacyEntries(acc, res, o.topLogprobs, o.arena, start, n, given);
  delete seq.text;
  delete seq.finishReason;
  return withMode(seq, o.mode ?? PROMPT_MODE);
}

/**
 * Parses an OpenAI-compatible chat completion (or the chunks of a streamed one) into one
 * {@link ServerSequence} per choice, in `index` order (`n > 1` gives several; an empty `choices` gives
 * none). Token ids come from vLLM's `token_ids` or `token_id:N` token strings when present, else from
 * `options.tokenMap` (keyed by text, or by bytes so that tokens splitting a UTF-8 character get their
 * exact id). Errors name the field: e.g. `choices[0].logprobs.content[17].top_logprobs[3].logprob:
 * expected a finite number ≤ 0, got 0.5`; nothing partial is returned.
 *
 * @param response a parsed chat completion, or an array of parsed `chat.completion.chunk` objects
 * @param options token map and top-k switch
 * @returns one sequence per choice
 * @throws GearError `ERR_DTYPE`, `ERR_SHAPE`, `ERR_OPTION`, `ERR_TARGET_RANGE`, `ERR_NON_FINITE`
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 * const response = {
 *   choices: [{ index: 0, message: { content: 'Hi' }, logprobs: { content: [
 *     { token: 'Hi', logprob: -0.1, bytes: [72, 105], top_logprobs: [{ token: 'Hi', logprob: -0.1, bytes: [72, 105] }] },
 *   ] } }],
 * };
 * const [seq] = rl.parseOpenAIChat(response, { tokenMap: new Map([['Hi', 17]]) });
 * console.log(seq!.tokenIds[0], seq!.topK!.k); // 17 1
 * ```
 * @category Server ingestion
 */
export function parseOpenAIChat(response: unknown, options?: ParseOptions): ServerSequence[] {
  const o = parseOptions(options, 'parseOpenAIChat');
  const res = new IdResolver(o.tokenMap, o.tokenKeys, 'the response');
  return withMode(collect(response, 'response', 'chat').map((acc) => chatSequence(acc, res, o.topLogprobs, o.arena)), o.mode);
}

/**
 * Parses an OpenAI-compatible (legacy) text completion, or the chunks of a streamed one, into one
 * {@link ServerSequence} per choice: `logprobs.tokens`, `token_logprobs` and the `top_logprobs` maps
 * (token string -> log-prob; key order as the parsed JSON object gives it). vLLM's `token_ids` and
 * `token_id:N` strings give the ids; with `echo`, the prompt's entries before the completion are
 * dropped. Otherwise `options.tokenMap` maps token strings (the legacy format has no `bytes`; tokens
 * written as `bytes:\xNN` are decoded).
 *
 * @param response a parsed `text_completion`, or an array of its streamed chunks
 * @param options token map and top-k switch
 * @returns one sequence per choice
 * @throws GearError `ERR_DTYPE`, `ERR_SHAPE`, `ERR_OPTION`, `ERR_TARGET_RANGE`, `ERR_NON_FINITE`
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 * const response = { choices: [{ index: 0, text: ' a', logprobs: {
 *   tokens: [' a'], token_logprobs: [-0.5], top_logprobs: [{ ' a': -0.5, ' b': -1.2 }], text_offset: [0] } }] };
 * const [seq] = rl.parseOpenAICompletion(response, { tokenMap: new Map([[' a', 3], [' b', 4]]) });
 * console.log(Array.from(seq!.topK!.ids)); // [3, 4]
 * ```
 * @category Server ingestion
 */
export function parseOpenAICompletion(response: unknown, options?: ParseOptions): ServerSequence[] {
  const o = parseOptions(options, 'parseOpenAICompletion');
  const res = new IdResolver(o.tokenMap, o.tokenKeys, 'the response');
  return withMode(collect(response, 'response', 'completion').map((acc) => completionSequence(acc, res, o.topLogprobs, o.arena)), o.mode);
}
