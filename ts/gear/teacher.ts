/**
 * The teacher side of GEAR-proposed self-distillation: the same model, prompted with the ground-truth
 * answer. These helpers build the teacher context from the student's chat prompt and keep the response
 * tokens aligned 1:1, so per-position logits of the two passes can be compared directly.
 *
 * The reference text is inserted at the end of the last user message (before its end-of-turn tokens);
 * the assistant prefix and the sampled response are reused token for token. Because the response ids are
 * copied rather than re-tokenised, the alignment holds for any tokenizer.
 *
 * @module
 */
import { fail } from '../core/errors.js';
import * as v from '../core/validate.js';
import { checkLogits } from '../core/logits.js';

/**
 * Default reference template of the GEAR-proposed design (docs/gear.md; ours: the paper's
 * teacher prompt is not public). `{ground_truth}` is replaced by the answer.
 *
 * @category GEAR
 */
export const DEFAULT_TEACHER_TEMPLATE =
  '\n\nReference answer: {ground_truth}\nUse it only to check your reasoning; do not mention it.';

/**
 * A chat message (OpenAI / Hugging Face chat-template shape).
 *
 * @category GEAR
 */
export interface ChatMessage {
  /** `'system'`, `'user'`, `'assistant'`, `'tool'`, ... */
  role: string;
  /** Message text. */
  content: string;
}

/**
 * Fills the reference template with the ground-truth answer.
 *
 * @param groundTruth the answer (or reference) text
 * @param template text containing `{ground_truth}` (default {@link DEFAULT_TEACHER_TEMPLATE})
 * @returns the text to append to the last user message
 * @throws GearError `ERR_OPTION` when the template lacks `{ground_truth}` or an argument is not a string
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * console.log(rl.formatReference('42'));                          // the default template, filled in
 * console.log(rl.formatReference('42', '\nThe answer is {ground_truth}.'));
 * ```
 * @category GEAR
 */
export function formatReference(groundTruth: string, template: string = DEFAULT_TEACHER_TEMPLATE): string {
  if (typeof groundTruth !== 'string') fail('ERR_OPTION', 'groundTruth', 'a string', groundTruth);
  if (typeof template !== 'string' || !template.includes('{ground_truth}')) {
    fail('ERR_OPTION', 'template', 'a string containing {ground_truth}', template);
  }
  return template.split('{ground_truth}').join(groundTruth);
}

/**
 * Builds the teacher's chat messages: a copy of the student's messages with the formatted reference
 * appended to the last user message. Render both lists with the same chat template (with the generation
 * prompt) and tokenise; then use {@link teacherInput} to align the response.
 *
 * @param messages the student's messages
 * @param groundTruth the ground-truth answer
 * @param template reference template (default {@link DEFAULT_TEACHER_TEMPLATE})
 * @returns new message objects (the input is not modified)
 * @throws GearError `ERR_OPTION` when there is no user message
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const messages = [
 *   { role: 'system', content: 'You are a careful solver.' },
 *   { role: 'user', content: 'What is 6 * 7?' },
 * ];
 * const teacher = rl.teacherMessages(messages, '42');
 * console.log(teacher[1]!.content); // 'What is 6 * 7?' followed by the reference text
 * ```
 * @category GEAR
 */
export function teacherMessages(messages: readonly ChatMessage[], groundTruth: string, template?: string): ChatMessage[] {
  if (!Array.isArray(messages)) fail('ERR_OPTION', 'messages', 'an array of { role, content }', messages);
  v.list(messages, 'messages', 'an array of { role, content }');
  // each message copied once (every field read once), then checked: the copy is what is returned
  const out: ChatMessage[] = [];
  for (let i = 0; i < messages.length; i++) {
    const m: unknown = messages[i];
    const c = typeof m === 'object' && m !== null ? { ...m } as ChatMessage : undefined;
    if (c === undefined || typeof c.role !== 'string' || typeof c.content !== 'string') {
      fail('ERR_OPTION', `messages[${i}]`, '{ role: string, content: string }', m);
    }
    out.push(c);
  }
  let last = -1;
  for (let i = out.length - 1; i >= 0; i--) if (out[i]!.role === 'user') { last = i; break; }
  if (last < 0) fail('ERR_OPTION', 'messages', 'at least one user message', `${out.length} messages, none from the user`);
  out[last]!.content += formatReference(groundTruth, template);
  return out;
}

/**
 * The reference to insert: token ids, or text with a tokenizer callback.
 *
 * @category GEAR
 */
export type TeacherReference =
  | ArrayLike<number>
  | {
      /** The ground-truth answer. */
      groundTruth: string;
      /** Tokenizer callback: text to token ids, without special tokens. */
      encode: (text: string) => ArrayLike<number>;
      /** Reference template (default {@link DEFAULT_TEACHER_TEMPLATE}). */
      template?: string;
    };

/**
 * Arguments of {@link teacherInput}.
 *
 * @category GEAR
 */
export interface TeacherInputArgs {
  /**
   * The student's prompt token ids, rendered with the chat template including the assistant prefix — or
   * already split as `{ before, after }` around the insertion point.
   */
  prompt: ArrayLike<number> | { before: ArrayLike<number>; after: ArrayLike<number> };
  /** With a flat `prompt`: the index where the reference goes (end of the last user message's content). */
  insertAt?: number;
  /** The sampled response token ids. */
  response: ArrayLike<number>;
  /** The reference: ids, or `{ groundTruth, encode, template? }`. */
  reference: TeacherReference;
  /** Optional vocabulary size: every id must be < vocab. */
  vocab?: number;
}

/**
 * Result of {@link teacherInput}: both sequences and the logits rows that score each response token.
 *
 * @category GEAR
 */
export interface TeacherInput {
  /** Student sequence: prompt ++ response. */
  studentIds: Int32Array;
  /** Teacher sequence: prompt[0, insertAt) ++ reference ++ prompt[insertAt, end) ++ response. */
  teacherIds: Int32Array;
  /** The reference token ids that were inserted. */
  referenceIds: Int32Array;
  /** Index of the first response token in the student / teacher sequence. */
  responseStart: { student: number; teacher: number };
  /** Per response token j: the student position whose logits predict it (`responseStart.student - 1 + j`). */
  studentRows: Int32Array;
  /** Per response token j: the teacher position whose logits predict it (`responseStart.teacher - 1 + j`). */
  teacherRows: Int32Array;
}

function ids(x: unknown, what: string, vocab: number | undefined): Int32Array {
  const a = v.numArray(x, what);
  const out = new Int32Array(a.length);
  for (let i = 0; i < a.length; i++) {
    const t = a[i]!;
    if (!Number.isInteger(t) || t < 0 || t > 2147483647 || (vocab !== undefined && t >= vocab)) {
      fail('ERR_TARGET_RANGE', `${what}[${i}]`, vocab === undefined ? 'an integer token id >= 0' : `an integer token id in [0, ${vocab})`, t);
    }
    out[i] = t;
  }
  return out;
}

/**
 * Builds the ground-truth-conditioned teacher input at the token level and the position mapping that
 * keeps the response aligned 1:1 with the student's: response token j is predicted by student logits row
 * `studentRows[j]` and teacher logits row `teacherRows[j]` of the respective full-sequence forward passes
 * (causal LM: the logits at position p predict token p+1).
 *
 * @param a prompt (flat + `insertAt`, or `{ before, after }`), response ids and the reference
 * @returns both sequences, the inserted ids and the row mapping
 * @throws GearError `ERR_TARGET_RANGE` on a bad token id, `ERR_SHAPE` on an empty prompt or `insertAt`
 *   out of range, `ERR_OPTION` on a missing `insertAt` or a bad reference / template
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * // token ids from your tokenizer; the reference goes at the end of the user message (index 3)
 * const encode = (text: string) => Array.from(text, (c) => c.charCodeAt(0) % 100);
 * const t = rl.teacherInput({
 *   prompt: [1, 10, 11, 12, 2, 3], insertAt: 4,
 *   response: [20, 21, 22],
 *   reference: { groundTruth: '42', encode, template: ' answer: {ground_truth}' },
 * });
 * console.log(t.studentIds, t.teacherIds);   // prompt ++ response; prompt with the reference ++ response
 * console.log(t.studentRows, t.teacherRows); // the rows of each forward that predict the response tokens
 * ```
 * @category GEAR
 */
export function teacherInput(a: TeacherInputArgs): TeacherInput {
  if (typeof a !== 'object' || a === null) fail('ERR_OPTION', 'teacherInput(a)', 'an object', a);
  v.knownKeys(a, 'teacherInput(a)', ['prompt', 'insertAt', 'response', 'reference', 'vocab']);
  // Each argument and each field of `prompt` and `reference` read once, in a fixed order, before the
  // token ids are checked and copied (`reference.encode` runs once, after the reads).
  const { prompt: p, insertAt, response: response0, reference: r, vocab: vocab0 } = a as { [K in keyof TeacherInputArgs]: unknown };
  let pp: { before: unknown; after: unknown } | undefined;
  if (typeof p === 'object' && p !== null && !Array.isArray(p) && !ArrayBuffer.isView(p)) {
    v.knownKeys(p, 'prompt', ['before', 'after']);
    const { before: b, after: af } = p as { before: unknown; after: unknown };
    pp = { before: b, after: af };
  }
  let rr: { groundTruth: unknown; encode: unknown; template: unknown } | undefined;
  if (typeof r === 'object' && r !== null && !Array.isArray(r) && !ArrayBuffer.isView(r)) {
    v.knownKeys(r, 'reference', ['groundTruth', 'encode', 'template']);
    const { groundTruth, encode, template } = r as { groundTruth: unknown; encode: unknown; template?: unknown };
    rr = { groundTruth, encode, template };
  }
  const vocab = vocab0 === undefined ? undefined : v.numOpt(vocab0, 'vocab', 0, { min: 1, int: true, max: 2147483647 });
  let before: Int32Array, after: Int32Array;
  if (pp !== undefined) {
    if (insertAt !== undefined) fail('ERR_OPTION', 'insertAt', 'undefined with a { before, after } prompt', insertAt);
    before = ids(pp.before, 'prompt.before', vocab);
    after = ids(pp.after, 'prompt.after', vocab);
  } else {
    const flat = ids(p, 'prompt', vocab);
    if (insertAt === undefined) fail('ERR_OPTION', 'insertAt', 'the index of the end of the last user message', undefined);
    const at = v.numOpt(insertAt, 'insertAt', 0, { min: 0, max: flat.length, int: true });
    before = flat.subarray(0, at);
    after = flat.subarray(at);
  }
  const response = ids(response0, 'response', vocab);
  let ref: Int32Array;
  if (rr !== undefined) {
    const encode = rr.encode;
    if (typeof encode !== 'function') fail('ERR_OPTION', 'reference.encode', 'a function (text) => token ids', encode);
    const text = formatReference(rr.groundTruth as string, (rr.template ?? DEFAULT_TEACHER_TEMPLATE) as string);
    ref = ids((encode as (t: string) => ArrayLike<number>)(text), 'reference.encode(text)', vocab);
  } else {
    ref = ids(r, 'reference', vocab);
  }
  const sp = before.length + after.length;
  if (sp === 0) fail('ERR_SHAPE', 'prompt.length', 'at least 1 token (the first response token needs a predicting position)', 0);
  const tp = sp + ref.length;
  const studentIds = new Int32Array(sp + response.length);
  studentIds.set(before, 0);
  studentIds.set(after, before.length);
  studentIds.set(response, sp);
  const teacherIds = new Int32Array(tp + response.length);
  teacherIds.set(before, 0);
  teacherIds.set(ref, before.length);
  teacherIds.set(after, before.length + ref.length);
  teacherIds.set(response, tp);
  return {
    studentIds, teacherIds, referenceIds: ref,
    responseStart: { student: sp, teacher: tp },
    studentRows: Int32Array.from(response, (_, j) => sp - 1 + j),
    teacherRows: Int32Array.from(response, (_, j) => tp - 1 + j),
  };
}

/**
 * Row-major logits as in the rest of the library (`rows x vocab`; Float32Array, or Uint16Array + dtype).
 *
 * @category GEAR
 */
export interface LogitsRows {
  /** `rows * vocab` elements. */
  data: Float32Array | Uint16Array;
  /** Number of rows. */
  rows: number;
  /** Row length. */
  vocab: number;
  /** `'float32'`, `'bfloat16'` or `'float16'`. */
  dtype?: 'float32' | 'bfloat16' | 'float16';
}

/**
 * Copies the selected rows of a logits matrix, in order — e.g. the rows of a full-sequence forward pass
 * that predict the response tokens ({@link TeacherInput.studentRows} / {@link TeacherInput.teacherRows}),
 * so student and teacher logits line up for `divergence`.
 *
 * @param logits the full logits
 * @param rows row indices in `[0, logits.rows)`
 * @returns a new logits object with `rows.length` rows, same vocab and dtype
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * // full-sequence logits (6 positions, vocab 4); keep the rows that predict the response
 * const full = { data: Float32Array.from({ length: 6 * 4 }, (_, i) => i), rows: 6, vocab: 4 };
 * const picked = rl.gatherRows(full, Int32Array.of(3, 4, 5));
 * console.log(picked.rows, picked.data.slice(0, 4)); // 3  Float32Array [12, 13, 14, 15]
 * ```
 * @category GEAR
 */
export function gatherRows<L extends LogitsRows>(logits: L, rows: ArrayLike<number>): L {
  // the logits read once, by the one reader of logits; then the row indices (read and copied): a getter
  // of theirs cannot reach the logits fields, only the buffer, which the second check looks at again
  const l = checkLogits(logits, 'logits');
  if (l.data === null) fail('ERR_DEVICE', 'logits', 'host logits (gatherRows copies rows of host arrays)', String(logits));
  const idx = v.numArray(rows, 'rows');
  const { data, vocab, rows: n } = checkLogits(l.logits, 'logits');
  const out = new (data!.constructor as { new (n: number): Float32Array | Uint16Array })(idx.length * vocab);
  for (let j = 0; j < idx.length; j++) {
    const r = idx[j]!;
    if (!Number.isInteger(r) || r < 0 || r >= n) fail('ERR_SHAPE', `rows[${j}]`, `a row index in [0, ${n})`, r);
    out.set(data!.subarray(r * vocab, (r + 1) * vocab), j * vocab);
  }
  return { data: out, rows: idx.length, vocab, ...(l.dtype === 'float32' ? {} : { dtype: l.dtype }) } as L;
}
