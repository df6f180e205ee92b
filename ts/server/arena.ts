/**
 * Reusable memory for parsed server sequences. A fresh `ArrayBuffer` costs a page fault per 4 KiB the
 * first time it is written (about 1 ms per MiB on a virtual machine), and parsing 10^6 tokens with
 * top-20 allocates 160 MiB; an arena keeps its slabs between training steps so that the next step
 * writes into memory that is already mapped.
 *
 * @module
 */
import { fail } from '../core/errors.js';

/**
 * Options of {@link createParseArena}.
 * @category Server ingestion
 */
export interface ParseArenaOptions {
  /**
   * Size of each slab in bytes (default 32 MiB). A sequence larger than a slab gets a slab of its own,
   * kept for reuse like the others.
   *
   * @defaultValue `33554432`
   */
  slabBytes?: number;
}

/**
 * Memory the parsers allocate sequences from (their `arena` option), reused across steps. Sequences
 * parsed from an arena are views of its slabs and stay valid until {@link ParseArena.reset}: after it,
 * the next parses overwrite them. Pack them (which copies) or copy them before resetting.
 * @category Server ingestion
 */
export interface ParseArena {
  /** Makes every slab free for the next parses; earlier sequences from this arena become invalid. */
  reset(): void;
  /** Bytes held in slabs (what the arena keeps mapped between steps). */
  readonly capacity: number;
  /** Bytes handed out since the last reset. */
  readonly used: number;
  /** Drops the slabs (their memory is returned at the next garbage collection); the arena stays usable. */
  release(): void;
}

interface ArenaState {
  slabBytes: number;
  slabs: ArrayBuffer[];
  slab: number;
  at: number;
  used: number;
}

const STATE = new WeakMap<object, ArenaState>();

/**
 * Creates a {@link ParseArena}: pass it as the parsers' `arena` option and call `reset()` once the
 * parsed sequences of a step have been packed.
 *
 * @param options slab size
 * @returns an empty arena
 * @throws GearError `ERR_OPTION` for a bad slab size
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 * const arena = rl.createParseArena();
 * for (let step = 0; step < 2; step++) {
 *   const response = { meta_info: { output_token_logprobs: [[-0.5, 11, null], [-0.1, 12, null]] } };
 *   const [seq] = rl.parseSglang(response, { arena });
 *   const batch = rl.packServerRollouts({ trajectories: [{ group: 0, turns: [{ role: 'assistant', response: seq! }] }] });
 *   console.log(batch.logprobs[0]); // -0.5
 *   arena.reset(); // the batch is a copy: the next step may reuse the memory
 * }
 * ```
 * @category Server ingestion
 */
export function createParseArena(options?: ParseArenaOptions): ParseArena {
  if (options !== undefined && (typeof options !== 'object' || options === null || Array.isArray(options))) {
    fail('ERR_OPTION', 'createParseArena: options', 'an options object', options);
  }
  for (const key of Object.keys(options ?? {})) {
    if (key !== 'slabBytes') fail('ERR_OPTION', `createParseArena: options.${key}`, 'a known option', key);
  }
  const slabBytes = options?.slabBytes ?? 32 * 1024 * 1024;
  if (typeof slabBytes !== 'number' || !Number.isInteger(slabBytes) || slabBytes < 4096 || slabBytes > 2 ** 31) {
    fail('ERR_OPTION', 'createParseArena: options.slabBytes', 'an integer in [4096, 2^31]', slabBytes);
  }
  const s: ArenaState = { slabBytes, slabs: [], slab: 0, at: 0, used: 0 };
  const arena: ParseArena = {
    reset() {
      s.slab = 0;
      s.at = 0;
      s.used = 0;
    },
    get capacity() {
      return s.slabs.reduce((a, b) => a + b.byteLength, 0);
    },
    get used() {
      return s.used;
    },
    release() {
      s.slabs = [];
      s.slab = 0;
      s.at = 0;
      s.used = 0;
    },
  };
  STATE.set(arena, s);
  return Object.freeze(arena);
}

/** True for an arena made by {@link createParseArena}. @internal */
export function isArena(x: unknown): x is ParseArena {
  return typeof x === 'object' && x !== null && STATE.has(x);
}

/**
 * `bytes` (rounded up to 8) from the arena: the slab and the byte offset. Slabs that are too small
 * for the request are skipped (they serve later, smaller requests after the next reset). @internal
 */
export function arenaTake(arena: ParseArena, bytes: number): [ArrayBuffer, number] {
  const s = STATE.get(arena)!;
  const need = Math.ceil(bytes / 8) * 8;
  while (s.slab < s.slabs.length && s.slabs[s.slab]!.byteLength - s.at < need) {
    s.slab++;
    s.at = 0;
  }
  if (s.slab === s.slabs.length) s.slabs.push(new ArrayBuffer(Math.max(s.slabBytes, need)));
  const at = s.at;
  s.at += need;
  s.used += need;
  return [s.slabs[s.slab]!, at];
}
