/**
 * Shared pieces of the inference-server parsers: the parsed-sequence and sparse top-k types, token
 * maps (strings or bytes to ids), and the checks that name the exact position of a bad field.
 *
 * @module
 */
import { describe, fail } from '../core/errors.js';
import * as v from '../core/validate.js';
import { arenaTake, isArena } from './arena.js';
import type { ParseArena } from './arena.js';
import type { SparseTopK } from '../ops/sparse_divergence.js';
import { readLogprobMode } from './mode.js';
import type { LogprobMode, LogprobModeInput } from './mode.js';

// The packed top-k layout is the sparse op's input type, declared with the op (ts/ops, below ts/server).
export type { SparseTopK } from '../ops/sparse_divergence.js';

/**
 * One generated (or scored) sequence read from a server response: one choice, one sample. The parsers
 * allocate a sequence's typed arrays as views of one `ArrayBuffer` (mind `byteOffset` when passing
 * `.buffer` on, and transfer a copy rather than the buffer).
 * @category Server ingestion
 */
export interface ServerSequence {
  /** The choice's `index` (its position when the server gives none). */
  index: number;
  /** Token ids exactly as the server sampled (or scored) them. */
  tokenIds: Int32Array;
  /** Log-prob of each token (finite, <= 0). */
  logprobs: Float32Array;
  /** Top-k alternatives per token, or `null` when the response has none (or they were not asked for). */
  topK: SparseTopK | null;
  /** Generated text, when the response has it. */
  text?: string;
  /** The server's finish reason, when given (`'stop'`, `'length'`, ...). */
  finishReason?: string | null;
  /**
   * How the log-probs were computed, as the parser was told (`options.mode`; the prompt-log-prob parsers
   * take raw at temperature 1, what servers compute for prompt positions, when none is given). Absent
   * when not stated.
   */
  mode?: LogprobMode;
}

/**
 * How to turn a token string into its id, for responses that carry no ids (OpenAI, llama.cpp's old
 * `probs`). A function receives the token string and its UTF-8 bytes (when the response has them) and
 * returns the id. A `Map` is looked up by key, built as {@link TokenKeys} says.
 * @category Server ingestion
 */
export type TokenMap = Map<string, number> | ((token: string, bytes: Uint8Array | null) => number | undefined);

/**
 * How a `Map` token map is keyed:
 * - `'text'` (default): the token's text; when the response gives `bytes`, the text is rebuilt from
 *   them (UTF-8). A token whose bytes split a UTF-8 character has no text of its own: a single byte is
 *   looked up as SentencePiece's byte token `<0xNN>`, anything else is an error (use `'bytes'` or a
 *   function).
 * - `'bytes'`: byte-level BPE keys as in a GPT-2 / Llama 3 / Qwen `tokenizer.json` vocabulary (each byte
 *   mapped to one printable character, e.g. a space to `Ġ`), rebuilt from the token's bytes, so tokens
 *   that split a character get their exact id.
 * @category Server ingestion
 */
export type TokenKeys = 'text' | 'bytes';

/**
 * Options shared by the parsers.
 * @category Server ingestion
 */
export interface ParseOptions {
  /** Maps token strings to ids where the response has no ids. */
  tokenMap?: TokenMap;
  /**
   * How a `Map` token map is keyed (default `'text'`).
   *
   * @defaultValue `'text'`
   */
  tokenKeys?: TokenKeys;
  /**
   * Read the top-k alternatives (default true). With false, `topK` is `null` and no map is needed for them.
   *
   * @defaultValue `true`
   */
  topLogprobs?: boolean;
  /**
   * How the server computed these log-probs (raw or processed, with the request's temperature, top-k and
   * top-p): recorded on every sequence as `mode`, so that a log-ratio or an importance ratio of two
   * sources can refuse to mix modes. A server does not say it in its response; docs/server.md lists what
   * each server and setting returns.
   *
   * @defaultValue unstated (the prompt-log-prob parsers: `{ kind: 'raw', temperature: 1 }`)
   */
  mode?: LogprobModeInput;
  /**
   * Allocate the sequence's arrays from this arena (from {@link createParseArena}) instead of a fresh
   * `ArrayBuffer`: a training loop that resets it each step reuses the same memory. The sequence is
   * valid until the arena's `reset()`.
   *
   * @defaultValue a fresh `ArrayBuffer` per sequence
   */
  arena?: ParseArena;
}

/** Throws a coded error at a field position ("pos: expected X, got Y"). @internal */
export function bad(code: 'ERR_DTYPE' | 'ERR_SHAPE' | 'ERR_TARGET_RANGE' | 'ERR_OPTION' | 'ERR_NON_FINITE',
  pos: string, expected: string, got: unknown): never {
  return fail(code, pos, expected, got);
}

/** Throws for a bad log-prob: NaN / infinities are `ERR_NON_FINITE`, positive numbers `ERR_OPTION`
 *  (out of range), anything else `ERR_DTYPE`. @internal */
export function badLp(pos: string, got: unknown): never {
  const c = typeof got !== 'number' ? 'ERR_DTYPE' : Number.isFinite(got) ? 'ERR_OPTION' : 'ERR_NON_FINITE';
  return fail(c, pos, LP, got);
}

/** The expected form of every log-prob field. @internal */
export const LP = 'a finite number ≤ 0';

/** True for a finite log-prob <= 0 (NaN and the infinities fail). @internal */
export function isLp(x: unknown): x is number {
  return typeof x === 'number' && x <= 0 && x > -Infinity;
}

/** True for an integer token id in [0, 2^31). @internal */
export function isId(x: unknown): x is number {
  return typeof x === 'number' && (x | 0) === x && x >= 0;
}

/** A plain (non-array) object. @internal */
export function isObj(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

/** Requires an object at `pos`. @internal */
export function obj(x: unknown, pos: string): Record<string, unknown> {
  if (!isObj(x)) bad('ERR_DTYPE', pos, 'an object', x);
  return x;
}

/** Requires an array at `pos`. @internal */
export function arr(x: unknown, pos: string): unknown[] {
  if (!Array.isArray(x)) bad('ERR_DTYPE', pos, 'an array', x);
  return x;
}

/** Reads an array of token ids at `pos` into an Int32Array. @internal */
export function idArray(x: unknown, pos: string): Int32Array {
  const a = arr(x, pos);
  const out = new Int32Array(a.length);
  for (let i = 0; i < a.length; i++) {
    const t = a[i];
    if (!isId(t)) bad(typeof t === 'number' && Number.isInteger(t) ? 'ERR_TARGET_RANGE' : 'ERR_DTYPE', `${pos}[${i}]`, 'an integer token id in [0, 2^31)', t);
    out[i] = t;
  }
  return out;
}

/** Allocates an `n x k` sparse block filled with padding. @internal */
export function sparse(n: number, k: number): SparseTopK {
  const ids = new Int32Array(n * k);
  const logprobs = new Float32Array(n * k);
  if (k > 0) {
    ids.fill(-1);
    logprobs.fill(-Infinity);
  }
  return { k, ids, logprobs };
}

/** Checks parser options and returns them resolved. @internal */
export function parseOptions(o: ParseOptions | undefined, what: string, extra: readonly string[] = []):
  Required<Omit<ParseOptions, 'tokenMap' | 'arena' | 'mode'>> & { tokenMap?: TokenMap; arena?: ParseArena; mode?: LogprobMode } {
  if (o === undefined) return { tokenKeys: 'text', topLogprobs: true };
  if (!isObj(o)) bad('ERR_OPTION', `${what}: options`, 'an options object', o);
  for (const key of Object.keys(o)) {
    if (!['tokenMap', 'tokenKeys', 'topLogprobs', 'arena', 'mode', ...extra].includes(key)) {
      bad('ERR_OPTION', `${what}: options.${key}`, 'a known option', key);
    }
  }
  const m = o.tokenMap;
  if (m !== undefined && !(m instanceof Map) && typeof m !== 'function') {
    bad('ERR_OPTION', `${what}: options.tokenMap`, 'a Map<string, number> or a function (token, bytes) => id', m);
  }
  const keys = o.tokenKeys ?? 'text';
  if (keys !== 'text' && keys !== 'bytes') bad('ERR_OPTION', `${what}: options.tokenKeys`, "'text' or 'bytes'", keys);
  const top = o.topLogprobs ?? true;
  if (typeof top !== 'boolean') bad('ERR_OPTION', `${what}: options.topLogprobs`, 'a boolean', top);
  if (o.arena !== undefined && !isArena(o.arena)) bad('ERR_OPTION', `${what}: options.arena`, 'an arena from createParseArena()', o.arena);
  const mode = o.mode === undefined ? undefined : readLogprobMode(o.mode, `${what}: options.mode`);
  return { tokenMap: m as TokenMap | undefined, tokenKeys: keys, topLogprobs: top, arena: o.arena, ...(mode ? { mode } : {}) };
}

/** The mode of prompt (input) log-probs when the caller states none: raw, at temperature 1. @internal */
export const PROMPT_MODE: LogprobMode = readLogprobMode({ kind: 'raw' }, 'mode');

/** Records `mode` on each sequence (when there is one) and returns them. @internal */
export function withMode<T extends ServerSequence | ServerSequence[]>(seqs: T, mode: LogprobMode | undefined): T {
  if (mode) for (const s of Array.isArray(seqs) ? seqs : [seqs]) s.mode = mode;
  return seqs;
}

// GPT-2 byte-level alphabet: printable bytes map to themselves, the rest to U+0100 onwards in order.
const BYTE_CHAR: string[] = (() => {
  const out = new Array<string>(256);
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    out[b] = String.fromCharCode(printable ? b : 256 + extra++);
  }
  return out;
})();

const UTF8 = new TextDecoder('utf-8', { fatal: true });
const UTF8_ENC = new TextEncoder();

/**
 * The byte-level BPE key of a byte string, as the vocabulary of a GPT-2 / Llama 3 / Qwen
 * `tokenizer.json` spells it (each byte one printable character: a space is `Ġ`, a newline `Ċ`).
 * Build a token map from such a vocabulary and parse with `tokenKeys: 'bytes'`.
 *
 * @param bytes the token's bytes (0..255 each)
 * @returns the vocabulary key
 * @throws GearError `ERR_DTYPE` unless `bytes` is an array (or typed array) of integers 0..255
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 * console.log(rl.byteLevelKey([32, 104, 105])); // 'Ġhi'
 * ```
 * @category Server ingestion
 */
export function byteLevelKey(bytes: ArrayLike<number>): string {
  if (!Array.isArray(bytes) && !(ArrayBuffer.isView(bytes) && !(bytes instanceof DataView))) {
    bad('ERR_DTYPE', 'byteLevelKey: bytes', 'an array of bytes (integers 0..255)', bytes);
  }
  if (!Array.isArray(bytes)) v.attached(bytes as unknown as ArrayBufferView, 'byteLevelKey: bytes');
  const a = bytes as ArrayLike<unknown>;
  let s = '';
  for (let i = 0; i < a.length; i++) {
    const b = a[i];
    if (typeof b !== 'number' || (b & 255) !== b) bad('ERR_DTYPE', `byteLevelKey: bytes[${i}]`, 'a byte (integer 0..255)', b);
    s += BYTE_CHAR[b]!;
  }
  return s;
}

/** Reads a `bytes` field (array of 0..255, or null) at `pos`. @internal */
export function bytesField(x: unknown, pos: string): Uint8Array | null {
  if (x === undefined || x === null) return null;
  const a = arr(x, pos);
  const out = new Uint8Array(a.length);
  for (let i = 0; i < a.length; i++) {
    const b = a[i];
    if (typeof b !== 'number' || (b & 255) !== b) bad('ERR_DTYPE', `${pos}[${i}]`, 'a byte (integer 0..255)', b);
    out[i] = b;
  }
  return out;
}

/** OpenAI writes a token that is not valid UTF-8 as `bytes:\xNN...`; returns its bytes, or null. */
function escapedBytes(token: string): Uint8Array | null {
  if (!token.startsWith('bytes:')) return null;
  const m = token.slice(6).match(/^(\\x[0-9a-fA-F]{2})+$/);
  if (!m) return null;
  const body = token.slice(6);
  const out = new Uint8Array(body.length / 4);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(body.slice(4 * i + 2, 4 * i + 4), 16);
  return out;
}

/** vLLM's `return_tokens_as_token_ids` writes tokens as `token_id:123`. Returns the id or -1.
 *  Reads char codes: no substring or regex garbage on the hot path. @internal */
export function tokenIdString(token: string): number {
  const n = token.length;
  // "token_id:" = 116 111 107 101 110 95 105 100 58
  if (n < 10 || n > 19 || token.charCodeAt(8) !== 58 || token.charCodeAt(0) !== 116 || token.charCodeAt(1) !== 111 ||
    token.charCodeAt(2) !== 107 || token.charCodeAt(3) !== 101 || token.charCodeAt(4) !== 110 || token.charCodeAt(5) !== 95 ||
    token.charCodeAt(6) !== 105 || token.charCodeAt(7) !== 100) return -1;
  let v = 0;
  for (let i = 9; i < n; i++) {
    const c = token.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return -1;
    v = v * 10 + c;
  }
  return v <= 0x7fffffff ? v : -1;
}

/** Spells the position of entry `i` (alternative `j`, or -1 for the entry itself); called only to
 *  report an error, so the hot loops build no strings. @internal */
export type PosFn = (i: number, j: number) => string;

/**
 * Resolves token strings to ids: `token_id:N` strings first, then the user's token map. Lookups are
 * memoised per (token, bytes) so that a long response costs one map lookup per distinct token.
 * @internal
 */
export class IdResolver {
  private readonly cache = new Map<string, number>();
  constructor(private readonly map: TokenMap | undefined, private readonly keys: TokenKeys, private readonly what: string) {}

  /** The id of `token` (with optional raw `bytes` field) at position `where(i, j)`; throws a coded
   *  error if none. */
  id(token: unknown, bytesRaw: unknown, where: PosFn, i: number, j: number): number {
    if (typeof token !== 'string') bad('ERR_DTYPE', `${where(i, j)}.token`, 'a token string', token);
    const direct = tokenIdString(token);
    if (direct >= 0) return direct;
    return this.mapped(token, bytesRaw, where(i, j));
  }

  /** The token map's id for `token` (slow path: no id in the response). */
  private mapped(token: string, bytesRaw: unknown, pos: string): number {
    const map = this.map;
    if (map === undefined) {
      bad('ERR_OPTION', `${pos}.token`, `a token id in the response (${this.what} has none: pass options.tokenMap, ` +
        `or ask the server for ids, e.g. vLLM's return_tokens_as_token_ids)`, token);
    }
    const memo = bytesRaw === undefined || bytesRaw === null ? token : Array.isArray(bytesRaw) ? `${token}\u0000${bytesRaw.join(',')}` : null;
    if (memo !== null) {
      const hit = this.cache.get(memo);
      if (hit !== undefined) return hit;
    }
    const bytes = bytesField(bytesRaw, `${pos}.bytes`) ?? escapedBytes(token);
    const id = this.lookup(map, token, bytes, pos);
    if (memo !== null) this.cache.set(memo, id);
    return id;
  }

  private lookup(map: TokenMap, token: string, bytes: Uint8Array | null, pos: string): number {
    let id: unknown;
    if (typeof map === 'function') {
      id = map(token, bytes);
    } else if (this.keys === 'bytes') {
      id = map.get(byteLevelKey(bytes ?? UTF8_ENC.encode(token)));
    } else if (bytes === null) {
      id = map.get(token);
    } else {
      let text: string | null;
      try {
        text = UTF8.decode(bytes);
      } catch {
        text = null;
      }
      if (text !== null) id = map.get(text);
      else if (bytes.length === 1) id = map.get(`<0x${bytes[0]!.toString(16).toUpperCase().padStart(2, '0')}>`);
      else {
        bad('ERR_OPTION', `${pos}.bytes`, "bytes that form whole UTF-8 characters for a text-keyed token map " +
          "(this token splits a character: use tokenKeys 'bytes' or a function map)", `[${Array.from(bytes).join(', ')}]`);
      }
    }
    if (id === undefined) bad('ERR_TARGET_RANGE', `${pos}.token`, 'a token in the token map', token);
    if (!isId(id)) bad('ERR_TARGET_RANGE', `${pos}.token`, `the token map to give an integer id in [0, 2^31) (it gave ${describe(id)})`, token);
    return id;
  }
}

/**
 * Builds one {@link ServerSequence} from per-token entries, in two passes: the first finds the top-k
 * width, the second fills the typed arrays. `read` fills position `i` and returns how many alternatives
 * it wrote. @internal
 */
export interface SequenceBuilder {
  tokenIds: Int32Array;
  logprobs: Float32Array;
  /** The top-k block, not yet padded: {@link done} pads each row past `counts[i]`. */
  topK: SparseTopK | null;
  /** Alternatives written per row. */
  counts: Int32Array | null;
}

/** Allocates the arrays of an `n`-token sequence with `k` alternatives (k < 0: no top-k). The top-k
 *  block is left unpadded: parsers record how many entries each row got and {@link done} pads the
 *  rest, which saves a pass over the whole block. @internal */
export function builder(n: number, k: number, arena?: ParseArena): SequenceBuilder {
  // One ArrayBuffer for all five arrays: every backing store adds to V8's external-memory accounting
  // and to the array-buffer sweeper's work, which dominate the cost while a large parsed response
  // is live (measured about 20% of parse + pack at 10^6 tokens, top-20).
  const kk = k < 0 ? 0 : k;
  const bytes = 4 * (2 * n + 2 * n * kk + (k > 0 ? n : 0));
  const [buf, at] = arena ? arenaTake(arena, bytes) : [new ArrayBuffer(bytes), 0];
  const topK = k < 0 ? null : { k, ids: new Int32Array(buf, at + 8 * n, n * kk), logprobs: new Float32Array(buf, at + 8 * n + 4 * n * kk, n * kk) };
  const counts = k > 0 ? new Int32Array(buf, at + 8 * n + 8 * n * kk, n) : null;
  // arena memory holds an earlier step's data; rows without alternatives rely on a zero count
  if (arena && counts) counts.fill(0);
  return { tokenIds: new Int32Array(buf, at, n), logprobs: new Float32Array(buf, at + 4 * n, n), topK, counts };
}

/** Top-k blocks a parser filled and checked (see {@link wasParsed}). */
const PARSED = new WeakSet<SparseTopK>();

/** True for a top-k block that a parser built and checked entry by entry: packing it again need not
 *  re-read 2·N·k entries (the kernels that consume a batch check what they read in any case). @internal */
export function wasParsed(t: SparseTopK): boolean {
  return PARSED.has(t);
}

/** Pads every row of the builder's top-k past its count (id -1, log-prob -Infinity). @internal */
export function done(b: SequenceBuilder): SparseTopK | null {
  const t = b.topK;
  const c = b.counts;
  if (t !== null) PARSED.add(t);
  if (t === null || c === null) return t;
  const K = t.k;
  for (let i = 0; i < c.length; i++) {
    for (let j = i * K + c[i]!, end = (i + 1) * K; j < end; j++) {
      t.ids[j] = -1;
      t.logprobs[j] = -Infinity;
    }
  }
  return t;
}
