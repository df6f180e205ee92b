/**
 * An exact port of Python's `difflib.SequenceMatcher(None, a, b).ratio()` for strings, and the
 * greedy similarity clustering verl-agent's GiGPO builds its step groups with.
 *
 * The ratio is `2·M / (|a| + |b|)` (1.0 for two empty strings) where M is the number of characters in
 * the Ratcliff-Obershelp matching blocks: `find_longest_match` (the first longest block in a-then-b
 * order, with no junk function) applied recursively left and right of each block. Exactly as difflib,
 * when `|b| >= 200` the autojunk heuristic drops every character occurring more than `⌊|b|/100⌋ + 1`
 * times in b from the index used to seed matches (such characters can still extend a match). Lengths
 * and characters are Unicode code points, as Python strings. The ratio is therefore NOT symmetric.
 *
 * Speed without changing any result: characters are interned to small integers; each cluster
 * representative's index (`b2j`) and character counts are built once and reused; the `j2len` maps are
 * stamped arrays instead of dictionaries; and a threshold test first checks difflib's own upper bounds
 * (`real_quick_ratio`, `quick_ratio`) and stops the block recursion as soon as the outcome is decided
 * (M only grows, and the unexplored ranges bound how much it can still grow).
 *
 * @module
 */
import { fail } from '../core/errors.js';
import * as v from '../core/validate.js';

// Global character interning: code point -> small id. Ids only ever grow.
const bmpIds = new Int32Array(65536).fill(-1);
const astralIds = new Map<number, number>();
let alphabet = 0;

function internCode(c: number): number {
  if (c < 65536) {
    let id = bmpIds[c]!;
    if (id < 0) {
      id = alphabet++;
      bmpIds[c] = id;
    }
    return id;
  }
  let id = astralIds.get(c);
  if (id === undefined) {
    id = alphabet++;
    astralIds.set(c, id);
  }
  return id;
}

// The last string given to codes() and its result: clustering interns an observation, then prepares
// the same string as a new representative when no cluster takes it.
let lastText: string | undefined;
let lastCodes: Int32Array = new Int32Array(0);

/** Interned code points of a string (surrogate pairs combined, as Python's str indexing). */
function codes(s: string): Int32Array {
  if (s === lastText) return lastCodes;
  const out = internAll(s);
  lastText = s;
  lastCodes = out;
  return out;
}

function internAll(s: string): Int32Array {
  const out = new Int32Array(s.length);
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    let c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        i++;
      }
    }
    // Characters seen before (nearly all of them) are a table load.
    const known = c < 65536 ? bmpIds[c]! : -1;
    out[n++] = known >= 0 ? known : internCode(c);
  }
  return n === s.length ? out : out.slice(0, n);
}

/**
 * A sequence prepared as difflib's `b`: interned codes, `b2j` (CSR, popular chars removed), counts.
 *
 * @example
 * ```ts
 * import { PreparedText, quickRatio, sequenceMatcherRatio } from 'gear-rl/similarity';
 *
 * // prepare the representative once when it is compared with many strings
 * const rep = new PreparedText('You are in the kitchen. There is a knife.');
 * for (const obs of ['You are in the kitchen. There is a fork.', 'You are in the hall.']) {
 *   console.log(quickRatio(obs, rep), sequenceMatcherRatio(obs, rep));
 * }
 * console.log(rep.text);
 * ```
 * @category Advantages
 */
export class PreparedText {
  /** The original string. */
  readonly text: string;
  /** Interned code points. @internal */
  readonly seq: Int32Array;
  /** CSR `b2j`: positions of interned char c are `pos[start[c] .. start[c+1])`, ascending. @internal */
  readonly start: Int32Array;
  /** @internal */
  readonly pos: Int32Array;
  /** Full character counts (popular characters included), for `quick_ratio`. @internal */
  readonly counts: Int32Array;

  /** @param text the string to prepare */
  constructor(text: string) {
    textArg(text, 'text');
    this.text = text;
    const seq = codes(text);
    this.seq = seq;
    // Tables span the ids present in this text only (the global alphabet can be much larger).
    let A = 0;
    for (let j = 0; j < seq.length; j++) if (seq[j]! >= A) A = seq[j]! + 1;
    const counts = new Int32Array(A);
    for (let j = 0; j < seq.length; j++) counts[seq[j]!]!++;
    this.counts = counts;
    const n = seq.length;
    const ntest = Math.floor(n / 100) + 1;
    const start = new Int32Array(A + 1);
    for (let c = 0; c < A; c++) {
      const keep = n >= 200 && counts[c]! > ntest ? 0 : counts[c]!;
      start[c + 1] = start[c]! + keep;
    }
    const pos = new Int32Array(start[A]!);
    const fill = start.slice(0, A);
    for (let j = 0; j < n; j++) {
      const c = seq[j]!;
      if (n >= 200 && counts[c]! > ntest) continue;
      pos[fill[c]!++] = j;
    }
    this.start = start;
    this.pos = pos;
  }
}

// Scratch buffers for find_longest_match (two stamped j2len arrays) and quick_ratio.
let lenA = new Int32Array(256);
let lenB = new Int32Array(256);
let stampA = new Int32Array(256);
let stampB = new Int32Array(256);
let epoch = 0;
let avail = new Int32Array(256);
let availStamp = new Int32Array(256);
let availEpoch = 0;

/** A fresh stamp for the per-character scratch (`avail` sized to the alphabet; stamps reset on wrap). */
function nextAvailEpoch(): number {
  if (avail.length < alphabet) {
    avail = new Int32Array(Math.max(alphabet, avail.length * 2));
    availStamp = new Int32Array(avail.length);
    availEpoch = 0;
  }
  if (availEpoch > 0x3fffffff) {
    availStamp.fill(0);
    availEpoch = 0;
  }
  return ++availEpoch;
}

function ensureScratch(lb: number): void {
  if (lenA.length < lb + 1) {
    const n = Math.max(lb + 1, lenA.length * 2);
    lenA = new Int32Array(n);
    lenB = new Int32Array(n);
    stampA = new Int32Array(n);
    stampB = new Int32Array(n);
    epoch = 0;
  }
  if (epoch > 0x3fffffff) {
    stampA.fill(0);
    stampB.fill(0);
    epoch = 0;
  }
}

// Result registers of findLongest (avoids allocating a tuple per call).
let mI = 0;
let mJ = 0;
let mK = 0;

/**
 * difflib's `find_longest_match(alo, ahi, blo, bhi)` (result in mI, mJ, mK). With `enough` it may
 * stop at the first block of at least that size, which is then not the longest: the caller only
 * needs to know that the matches reach its threshold (the longest block is at least as long).
 */
function findLongest(
  a: Int32Array, rel: Int32Array, nrel: number, B: PreparedText, alo: number, ahi: number, blo: number, bhi: number,
  enough: number,
): void {
  const b = B.seq;
  const start = B.start;
  const pos = B.pos;
  let besti = alo;
  let bestj = blo;
  let bestsize = 0;
  // Only positions of a whose character has entries in b2j can seed or continue a match (`rel`,
  // ascending); an i without entries leaves difflib's j2len empty, so the next i starts afresh.
  let q = 0;
  let hiq = nrel;
  while (q < hiq) {
    const mid = (q + hiq) >>> 1;
    if (rel[mid]! < alo) q = mid + 1;
    else hiq = mid;
  }
  let prevEpoch = -1;
  let prevI = -2;
  for (; q < nrel; q++) {
    const i = rel[q]!;
    if (i >= ahi) break;
    if (i !== prevI + 1) prevEpoch = -1;
    const cur = ++epoch;
    const odd = (i & 1) === 1;
    const curLen = odd ? lenB : lenA;
    const curStamp = odd ? stampB : stampA;
    const prevLen = odd ? lenA : lenB;
    const prevStamp = odd ? stampA : stampB;
    const c = a[i]!;
    let p = start[c]!;
    const e = start[c + 1]!;
    // Skip positions before blo (binary search; difflib skips them one by one, same result).
    if (pos[p]! < blo) {
      let lo = p;
      let hi = e;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (pos[mid]! < blo) lo = mid + 1;
        else hi = mid;
      }
      p = lo;
    }
    for (; p < e; p++) {
      const j = pos[p]!;
      if (j >= bhi) break;
      // j2len is indexed by j + 1 so that j - 1 = -1 maps to slot 0.
      const k = (prevStamp[j] === prevEpoch ? prevLen[j]! : 0) + 1;
      curLen[j + 1] = k;
      curStamp[j + 1] = cur;
      if (k > bestsize) {
        besti = i - k + 1;
        bestj = j - k + 1;
        bestsize = k;
        if (k >= enough) {
          mI = besti;
          mJ = bestj;
          mK = k;
          return;
        }
      }
    }
    prevEpoch = cur;
    prevI = i;
  }
  // Extend with equal characters (difflib's junk-free extension; popular characters extend here).
  while (besti > alo && bestj > blo && a[besti - 1] === b[bestj - 1]) {
    besti--;
    bestj--;
    bestsize++;
  }
  while (besti + bestsize < ahi && bestj + bestsize < bhi && a[besti + bestsize] === b[bestj + bestsize]) bestsize++;
  mI = besti;
  mJ = bestj;
  mK = bestsize;
}

const stack: number[] = [];
let relBuf = new Int32Array(256);

/**
 * Matched characters M of `SequenceMatcher(None, a, b)`; with `need` >= 0 it may stop early and
 * return a value that is only guaranteed to be on the same side of `need` as M (see
 * {@link ratioAtLeast}).
 */
function matches(a: Int32Array, B: PreparedText, need = -1): number {
  const la = a.length;
  const lb = B.seq.length;
  ensureScratch(lb);
  if (relBuf.length < la) relBuf = new Int32Array(Math.max(la, relBuf.length * 2));
  const rel = relBuf;
  let nrel = 0;
  const start = B.start;
  const A = start.length - 1;
  for (let i = 0; i < la; i++) {
    const c = a[i]!;
    if (c < A && start[c]! < start[c + 1]!) rel[nrel++] = i;
  }
  stack.length = 0;
  stack.push(0, la, 0, lb);
  let m = 0;
  let pending = Math.min(la, lb);
  while (stack.length > 0) {
    const bhi = stack.pop()!;
    const blo = stack.pop()!;
    const ahi = stack.pop()!;
    const alo = stack.pop()!;
    pending -= Math.min(ahi - alo, bhi - blo);
    // A block that alone completes the needed matches decides the test (see findLongest).
    findLongest(a, rel, nrel, B, alo, ahi, blo, bhi, need >= 0 ? need - m : Infinity);
    const i = mI;
    const j = mJ;
    const k = mK;
    if (k > 0) {
      m += k;
      if (alo < i && blo < j) {
        stack.push(alo, i, blo, j);
        pending += Math.min(i - alo, j - blo);
      }
      if (i + k < ahi && j + k < bhi) {
        stack.push(i + k, ahi, j + k, bhi);
        pending += Math.min(ahi - i - k, bhi - j - k);
      }
    }
    if (need >= 0 && (m >= need || m + pending < need)) return m;
  }
  return m;
}

function ratioOf(m: number, length: number): number {
  return length ? (2.0 * m) / length : 1.0;
}

function textArg(x: unknown, what: string): string {
  if (typeof x !== 'string') fail('ERR_DTYPE', what, 'a string', x);
  return x;
}

/**
 * Python's `difflib.SequenceMatcher(None, a, b).ratio()`, bit for bit (autojunk included).
 *
 * @param a first string (difflib's `a`)
 * @param b second string (difflib's `b`; the autojunk heuristic looks at this one)
 * @returns the similarity ratio in [0, 1]
 * @example
 * ```ts
 * import { sequenceMatcherRatio } from 'gear-rl/similarity';
 *
 * console.log(sequenceMatcherRatio('abcd', 'bcde')); // 0.75, as Python's SequenceMatcher(None, a, b).ratio()
 * ```
 * @category Advantages
 */
export function sequenceMatcherRatio(a: string, b: string | PreparedText): number {
  const sa = codes(textArg(a, 'a'));
  const B = b instanceof PreparedText ? b : new PreparedText(textArg(b, 'b'));
  return ratioOf(matches(sa, B), sa.length + B.seq.length);
}

/**
 * difflib's `quick_ratio()`: an upper bound of the ratio from character multiset intersection.
 *
 * @param a first string
 * @param b second string
 * @returns the upper bound
 * @example
 * ```ts
 * import { quickRatio } from 'gear-rl/similarity';
 *
 * console.log(quickRatio('abcd', 'dcba')); // 1: same characters, an upper bound of the ratio
 * ```
 * @category Advantages
 */
export function quickRatio(a: string, b: string | PreparedText): number {
  const sa = codes(textArg(a, 'a'));
  const B = b instanceof PreparedText ? b : new PreparedText(textArg(b, 'b'));
  return ratioOf(quickMatches(sa, B), sa.length + B.seq.length);
}

/**
 * difflib's `real_quick_ratio()`: `2·min(|a|, |b|) / (|a| + |b|)`, the cheapest upper bound.
 *
 * @param a first string
 * @param b second string
 * @returns the upper bound
 * @example
 * ```ts
 * import { realQuickRatio } from 'gear-rl/similarity';
 *
 * console.log(realQuickRatio('abc', 'abcdefg')); // 0.6 = 2 * 3 / 10
 * ```
 * @category Advantages
 */
export function realQuickRatio(a: string, b: string): number {
  const la = codes(textArg(a, 'a')).length;
  const lb = codes(textArg(b, 'b')).length;
  return ratioOf(Math.min(la, lb), la + lb);
}

function quickMatches(a: Int32Array, B: PreparedText): number {
  const full = B.counts;
  const ep = nextAvailEpoch();
  let m = 0;
  for (let i = 0; i < a.length; i++) {
    const c = a[i]!;
    let numb: number;
    if (availStamp[c] === ep) numb = avail[c]!;
    else numb = c < full.length ? full[c]! : 0;
    avail[c] = numb - 1;
    availStamp[c] = ep;
    if (numb > 0) m++;
  }
  return m;
}

/** The distinct characters of a sequence and how often each occurs. @internal */
export interface CharCounts {
  /** Interned characters, each once. */
  ids: Int32Array;
  /** Occurrences of each. */
  counts: Int32Array;
}

/** {@link CharCounts} of interned codes. @internal */
export function charCounts(a: Int32Array): CharCounts {
  const ep = nextAvailEpoch();
  // avail[c] holds the slot of c in `ids` while counting; at most one slot per position of a.
  const ids = new Int32Array(a.length);
  const counts = new Int32Array(a.length);
  let k = 0;
  for (let i = 0; i < a.length; i++) {
    const c = a[i]!;
    if (availStamp[c] === ep) counts[avail[c]!]!++;
    else {
      availStamp[c] = ep;
      avail[c] = k;
      ids[k] = c;
      counts[k++] = 1;
    }
  }
  return { ids: ids.subarray(0, k), counts: counts.subarray(0, k) };
}

/**
 * The matches of difflib's `quick_ratio` from counts: its scan of `a` against the remaining counts of
 * `b` matches `min(count in a, count in b)` copies of each character, so summing that over a's
 * distinct characters gives the same number without walking `a`.
 */
function quickMatchesCounted(ac: CharCounts, B: PreparedText): number {
  const full = B.counts;
  const ids = ac.ids;
  const counts = ac.counts;
  let m = 0;
  for (let k = 0; k < ids.length; k++) {
    const c = ids[k]!;
    const nb = c < full.length ? full[c]! : 0;
    const na = counts[k]!;
    m += na < nb ? na : nb;
  }
  return m;
}

/**
 * Exactly `SequenceMatcher(None, a, b).ratio() >= threshold`, usually much faster: rejects by
 * `real_quick_ratio` and `quick_ratio` first, and stops the matching as soon as the outcome is known.
 *
 * @param a first string, as interned codes
 * @param B the prepared second string
 * @param threshold the similarity threshold
 * @param ac the {@link charCounts} of `a`, when `a` is compared with several texts
 * @internal
 */
export function ratioAtLeast(a: Int32Array, B: PreparedText, threshold: number, ac?: CharCounts): boolean {
  const length = a.length + B.seq.length;
  if (length === 0) return 1.0 >= threshold;
  if (ratioOf(Math.min(a.length, B.seq.length), length) < threshold) return false;
  if (ratioOf(ac ? quickMatchesCounted(ac, B) : quickMatches(a, B), length) < threshold) return false;
  // The fewest matches that reach the threshold, found with the very expression the verdict uses
  // (ratioOf is non-decreasing in m), so that the early exits of matches() agree with it exactly.
  let need = Math.min(length, Math.max(0, Math.ceil((threshold * length) / 2)));
  while (need > 0 && ratioOf(need - 1, length) >= threshold) need--;
  while (need <= length && ratioOf(need, length) < threshold) need++;
  const m = matches(a, B, need);
  return ratioOf(m, length) >= threshold;
}


/**
 * verl-agent's similarity clustering of one episode group's observations: in row order, each
 * observation joins the FIRST existing cluster (in creation order) whose representative (the
 * observation that opened it) has `SequenceMatcher(None, obs, rep).ratio() >= threshold`, else opens a
 * new cluster. Identical observations short-cut to the cluster their first copy joined (the scan would
 * reach the same cluster).
 *
 * @param texts the observations, in row order
 * @param threshold in (0, 1)
 * @returns the cluster index of each observation (clusters numbered in creation order)
 * @example
 * ```ts
 * import { similarityClusters } from 'gear-rl/similarity';
 *
 * const obs = ['hp 10, room 1', 'hp 9, room 1', 'inventory: sword', 'hp 10, room 1'];
 * console.log(similarityClusters(obs, 0.8)); // Int32Array [0, 0, 1, 0]
 * ```
 * @category Advantages
 */
export function similarityClusters(texts: readonly string[], threshold: number): Int32Array {
  v.list(texts, 'texts', 'an array of strings');
  // each text read once and checked; the copy is what is clustered
  const list: string[] = [];
  for (let i = 0; i < texts.length; i++) list.push(textArg(texts[i], `texts[${i}]`));
  if (threshold === undefined) fail('ERR_OPTION', 'threshold', 'a number in (0, 1)', threshold);
  v.numOpt(threshold, 'threshold', 0, { min: 0, max: 1, minOpen: true, maxOpen: true });
  const out = new Int32Array(list.length);
  const reps: PreparedText[] = [];
  const seen = new Map<string, number>();
  for (let i = 0; i < list.length; i++) {
    const s = list[i]!;
    const known = seen.get(s);
    if (known !== undefined) {
      out[i] = known;
      continue;
    }
    const a = codes(s);
    const ac = charCounts(a);
    let found = -1;
    for (let c = 0; c < reps.length; c++) {
      if (ratioAtLeast(a, reps[c]!, threshold, ac)) {
        found = c;
        break;
      }
    }
    if (found < 0) {
      found = reps.length;
      reps.push(new PreparedText(s));
    }
    seen.set(s, found);
    out[i] = found;
  }
  return out;
}
