import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';

const code = (f: () => unknown) => {
  try { f(); } catch (e) { expect(e).toBeInstanceOf(rl.GearError); return (e as rl.GearError).code; }
  return 'no error';
};

// A toy word-level tokenizer: every distinct word (with its leading space) gets the next id.
function toyTokenizer() {
  const vocab = new Map<string, number>();
  const encode = (text: string) => (text.match(/\s*\S+|\s+/g) ?? []).map((w) => {
    if (!vocab.has(w)) vocab.set(w, vocab.size + 10);
    return vocab.get(w)!;
  });
  return { encode, vocab };
}

describe('teacher context', () => {
  it('formatReference fills the default template (section 10.3) and custom ones', () => {
    expect(rl.formatReference('42')).toBe('\n\nReference answer: 42\nUse it only to check your reasoning; do not mention it.');
    expect(rl.DEFAULT_TEACHER_TEMPLATE).toContain('{ground_truth}');
    expect(rl.formatReference('x=2', ' [ref {ground_truth}; again {ground_truth}]')).toBe(' [ref x=2; again x=2]');
    expect(code(() => rl.formatReference('1', 'no placeholder'))).toBe('ERR_OPTION');
    expect(code(() => rl.formatReference(3 as unknown as string))).toBe('ERR_OPTION');
  });

  it('teacherMessages appends the reference to the last user message only, without mutating the input', () => {
    const msgs = [
      { role: 'system', content: 'You are helpful.' },
      { role: 'user', content: 'What is 6*7?' },
      { role: 'assistant', content: 'Let me think.' },
      { role: 'user', content: 'Answer in \\boxed{}.' },
    ];
    const copy = JSON.parse(JSON.stringify(msgs));
    const t = rl.teacherMessages(msgs, '42');
    expect(msgs).toEqual(copy);
    expect(t.slice(0, 3)).toEqual(msgs.slice(0, 3));
    expect(t[3]!.content).toBe('Answer in \\boxed{}.' + rl.formatReference('42'));
    expect(rl.teacherMessages(msgs, '42', ' <{ground_truth}>')[3]!.content).toBe('Answer in \\boxed{}. <42>');
    expect(code(() => rl.teacherMessages([{ role: 'system', content: 'x' }], '1'))).toBe('ERR_OPTION');
    expect(code(() => rl.teacherMessages([{ role: 'user' } as rl.ChatMessage], '1'))).toBe('ERR_OPTION');
  });

  it('teacherInput keeps the response aligned 1:1 (flat prompt + insertAt, and { before, after })', () => {
    const { encode } = toyTokenizer();
    // "<user> What is 6*7? </user> <assistant>" : the reference goes after "6*7?" (index 4)
    const prompt = [1, ...encode('What is 6*7?'), 2, 3];
    const insertAt = 4;
    const response = encode(' It is 42 .');
    const r = rl.teacherInput({ prompt, insertAt, response, reference: { groundTruth: '42', encode } });
    const refIds = encode(rl.formatReference('42'));
    expect(Array.from(r.referenceIds)).toEqual(refIds);
    expect(Array.from(r.studentIds)).toEqual([...prompt, ...response]);
    expect(Array.from(r.teacherIds)).toEqual([...prompt.slice(0, 4), ...refIds, ...prompt.slice(4), ...response]);
    expect(r.responseStart).toEqual({ student: prompt.length, teacher: prompt.length + refIds.length });
    response.forEach((y, j) => {
      expect(r.studentIds[r.studentRows[j]! + 1]).toBe(y);
      expect(r.teacherIds[r.teacherRows[j]! + 1]).toBe(y);
    });
    // same result from pre-split pieces and from reference ids
    const s = rl.teacherInput({ prompt: { before: prompt.slice(0, 4), after: prompt.slice(4) }, response, reference: refIds });
    expect(Array.from(s.teacherIds)).toEqual(Array.from(r.teacherIds));
    expect(Array.from(s.teacherRows)).toEqual(Array.from(r.teacherRows));
  });

  it('teacherInput rejects bad ids, a missing insertAt, an empty prompt and an out-of-range insertAt', () => {
    const base = { prompt: [1, 2, 3], insertAt: 2, response: [4, 5], reference: [9] };
    expect(code(() => rl.teacherInput(base))).toBe('no error');
    expect(code(() => rl.teacherInput({ ...base, response: [4, -1] }))).toBe('ERR_TARGET_RANGE');
    expect(code(() => rl.teacherInput({ ...base, response: [4, 1.5] }))).toBe('ERR_TARGET_RANGE');
    expect(code(() => rl.teacherInput({ ...base, vocab: 9 }))).toBe('ERR_TARGET_RANGE');
    expect(code(() => rl.teacherInput({ ...base, insertAt: undefined }))).toBe('ERR_OPTION');
    expect(code(() => rl.teacherInput({ ...base, insertAt: 4 }))).toBe('ERR_OPTION');
    expect(code(() => rl.teacherInput({ ...base, prompt: [], insertAt: 0 }))).toBe('ERR_SHAPE');
    expect(code(() => rl.teacherInput({ ...base, reference: { groundTruth: '1', encode: 5 } as never }))).toBe('ERR_OPTION');
    expect(code(() => rl.teacherInput({ ...base, reference: { groundTruth: '1', encode: () => [1], template: 'x' } }))).toBe('ERR_OPTION');
    expect(code(() => rl.teacherInput({ ...base, extra: 1 } as never))).toBe('ERR_OPTION');
  });

  it('gatherRows copies the selected rows (float32 and 16-bit)', () => {
    const l = { data: Float32Array.from({ length: 12 }, (_, i) => i), rows: 4, vocab: 3 };
    const g = rl.gatherRows(l, [3, 1]);
    expect(g.rows).toBe(2);
    expect(Array.from(g.data)).toEqual([9, 10, 11, 3, 4, 5]);
    const h = rl.gatherRows({ data: Uint16Array.from({ length: 6 }, (_, i) => i), rows: 3, vocab: 2, dtype: 'bfloat16' as const }, [2]);
    expect(h.data).toBeInstanceOf(Uint16Array);
    expect(h.dtype).toBe('bfloat16');
    expect(Array.from(h.data)).toEqual([4, 5]);
    expect(code(() => rl.gatherRows(l, [4]))).toBe('ERR_SHAPE');
    expect(code(() => rl.gatherRows({ ...l, rows: 5 }, [0]))).toBe('ERR_SHAPE');
  });
});
