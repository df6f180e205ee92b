// The contract every public async op shares (one path, ts/core/invoke.ts): while a call is pending its
// outputs cannot be used and its inputs cannot be written by another call (ERR_BUSY); a signal that has
// already fired rejects with ERR_ABORTED before anything runs; a signal that fires while the call is in
// flight rejects with ERR_ABORTED and leaves every supplied output NaN-filled or untouched.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';

const ROWS = 64;
const VOCAB = 4096;

/** Rejection (or synchronous throw) of `f`'s call, as its error code; 'ok' when it settles normally. */
async function outcome(f: () => unknown): Promise<string> {
  try {
    await f();
    return 'ok';
  } catch (e) {
    return e instanceof rl.GearError ? e.code : `not a GearError: ${String(e)}`;
  }
}

function wave(n: number, seed: number): Float32Array {
  return Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37 + seed) * 3);
}

interface Case {
  /** Starts the op with `signal`. */
  start(signal?: AbortSignal): Promise<unknown>;
  /** Buffers the call writes: outputs the caller supplied (or tensors updated in place). */
  writes: ArrayBufferView[];
  /** Buffers the call reads. */
  reads: ArrayBufferView[];
  /** The same op again, reusing a pending call's output (ops with outputs to supply). */
  again?: () => unknown;
  /** The same op reading (a view on) `buf` (ops without outputs to supply). */
  readerOf?: (buf: ArrayBuffer) => unknown;
}

function logits(seed: number) {
  return { data: wave(ROWS * VOCAB, seed), rows: ROWS, vocab: VOCAB };
}
const targets = () => Int32Array.from({ length: ROWS }, (_, r) => (r * 97) % VOCAB);
const f32s = (n: number, fill = 7) => new Float32Array(n).fill(fill);
/** Top-8 lists of ROWS * 64 tokens (distinct ids, probabilities summing to 0.8) for the sparse divergence. */
const topk = (seed: number) => ({
  ids: Int32Array.from({ length: ROWS * 64 * 8 }, (_, i) => (i % 8) * 11 + ((Math.floor(i / 8) + seed) % 7)),
  logprobs: new Float32Array(ROWS * 64 * 8).fill(Math.log(0.1)), k: 8,
});
const one = () => ({ ids: Int32Array.from({ length: 8 }, (_, j) => j), logprobs: new Float32Array(8).fill(-3), k: 8 });
const packed = () => {
  const per = 1024;
  const offsets = Int32Array.from({ length: ROWS + 1 }, (_, r) => r * per);
  return { offsets, n: ROWS * per };
};

const CASES: Record<string, () => Case> = {
  tokenStatsAsync: () => {
    const l = logits(1), t = targets();
    const out = { logprob: f32s(ROWS), entropy: f32s(ROWS), logsumexp: f32s(ROWS) };
    return {
      start: (signal) => rl.tokenStatsAsync(l, t, { out, signal }),
      writes: [out.logprob, out.entropy, out.logsumexp], reads: [l.data, t],
      again: () => rl.tokenStatsAsync(l, t, { out: { entropy: out.entropy } }),
    };
  },
  tokenStatsBackwardAsync: () => {
    const l = logits(2), t = targets(), g = f32s(ROWS, 0.5), out = f32s(ROWS * VOCAB);
    return {
      start: (signal) => rl.tokenStatsBackwardAsync(l, t, { logprob: g }, { out, signal }),
      writes: [out], reads: [l.data, t, g],
      again: () => rl.tokenStatsBackwardAsync(logits(3), t, { logprob: g }, { out }),
    };
  },
  tokenStatsPartialAsync: () => {
    const l = logits(4), t = targets();
    return {
      start: (signal) => rl.tokenStatsPartialAsync(l, t, { vocabStart: 0, signal }),
      writes: [], reads: [l.data, t],
      readerOf: (buf) => rl.tokenStatsPartialAsync({ data: new Float32Array(buf, 0, ROWS * 4), rows: ROWS, vocab: 4 }, t,
        { vocabStart: 0 }),
    };
  },
  mergeTokenStatsAsync: () => {
    const l = logits(5), t = targets();
    const half = (k: number) => {
      const d = new Float32Array(ROWS * (VOCAB / 2));
      for (let r = 0; r < ROWS; r++) d.set(l.data.subarray(r * VOCAB + k * (VOCAB / 2), r * VOCAB + (k + 1) * (VOCAB / 2)), r * (VOCAB / 2));
      return rl.tokenStatsPartial({ data: d, rows: ROWS, vocab: VOCAB / 2 }, t, { vocabStart: k * (VOCAB / 2) });
    };
    const parts = [half(0), half(1)];
    return {
      start: (signal) => rl.mergeTokenStatsAsync(parts, { signal }),
      writes: [], reads: parts.flatMap((p) => [p.max, p.sumExp, p.sumExpX, p.targetLogit]),
      readerOf: (buf) => rl.mergeTokenStatsAsync([{ ...parts[0]!, vocab: VOCAB, max: new Float64Array(buf, 0, ROWS) }]),
    };
  },
  divergenceAsync: () => {
    const s = logits(6), te = logits(7);
    const out = { value: f32s(ROWS), studentEntropy: f32s(ROWS), studentLogsumexp: f32s(ROWS), teacherLogsumexp: f32s(ROWS) };
    return {
      start: (signal) => rl.divergenceAsync(s, te, { out, signal }),
      writes: Object.values(out), reads: [s.data, te.data],
      again: () => rl.divergenceAsync(s, te, { out: { value: out.value } }),
    };
  },
  divergenceBackwardAsync: () => {
    const s = logits(8), te = logits(9), g = f32s(ROWS, 1), out = f32s(ROWS * VOCAB);
    return {
      start: (signal) => rl.divergenceBackwardAsync(s, te, g, { out, signal }),
      writes: [out], reads: [s.data, te.data, g],
      again: () => rl.divergenceBackwardAsync(logits(10), logits(11), g, { out }),
    };
  },
  sparseDivergenceAsync: () => {
    const st = topk(30), te = topk(31);
    return {
      start: (signal) => rl.sparseDivergenceAsync(st, te, { kind: 'jsd', signal }),
      writes: [], reads: [st.ids, st.logprobs, te.ids, te.logprobs],
      readerOf: (buf) => rl.sparseDivergenceAsync({ ids: new Int32Array(buf, 0, 8), logprobs: new Float32Array(8).fill(-3), k: 8 }, one()),
    };
  },
  sparseDivergenceBackwardAsync: () => {
    const st = topk(32), te = topk(33), g = f32s(ROWS * 64, 1);
    return {
      start: (signal) => rl.sparseDivergenceBackwardAsync(st, te, g, { signal }),
      writes: [], reads: [st.ids, st.logprobs, te.ids, te.logprobs, g],
      readerOf: (buf) => rl.sparseDivergenceBackwardAsync(one(), one(), new Float32Array(buf, 0, 1)),
    };
  },
  segmentReduceAsync: () => {
    const { offsets, n } = packed();
    const values = wave(n, 12);
    return {
      start: (signal) => rl.segmentReduceAsync(values, offsets, 'sum', undefined, { signal }),
      writes: [], reads: [values, offsets],
      readerOf: (buf) => rl.segmentReduceAsync(new Float32Array(buf, 0, 4), Int32Array.of(0, 4), 'sum'),
    };
  },
  segmentBroadcastAsync: () => {
    const { offsets, n } = packed();
    const vals = Float64Array.from({ length: ROWS }, (_, r) => r - 30), out = f32s(n);
    return {
      start: (signal) => rl.segmentBroadcastAsync(vals, offsets, undefined, { out, signal }),
      writes: [out], reads: [vals, offsets],
      again: () => rl.segmentBroadcastAsync(vals, offsets, undefined, { out }),
    };
  },
  policyLossAsync: () => {
    const { offsets, n } = packed();
    const logprob = wave(n, 13).map((x) => -Math.abs(x)), oldLogprob = wave(n, 14).map((x) => -Math.abs(x));
    const advantages = wave(n, 15), out = f32s(n);
    const a = { logprob, oldLogprob, advantages, offsets, out };
    return {
      start: (signal) => rl.policyLossAsync(a, { signal }),
      writes: [out], reads: [logprob, oldLogprob, advantages, offsets],
      again: () => rl.policyLossAsync({ ...a, logprob: logprob.slice() }),
    };
  },
  clipGradNormAsync: () => {
    const grads = [wave(ROWS * VOCAB, 16), wave(1000, 17)];
    return {
      start: (signal) => rl.clipGradNormAsync(grads, 0.5, { signal }),
      writes: grads, reads: [],
      again: () => rl.clipGradNormAsync([grads[1]!], 0.5),
    };
  },
  'AdamW.stepAsync': () => {
    const params = [wave(ROWS * VOCAB, 18), wave(100, 19)], grads = [wave(ROWS * VOCAB, 20), wave(100, 21)];
    const opt = new rl.AdamW(params, { lr: 1e-3 });
    return {
      start: (signal) => opt.stepAsync(grads, { signal }),
      writes: params, reads: grads,
      again: () => new rl.AdamW(params, { lr: 1e-3 }).stepAsync(grads),
    };
  },
  'Adam.stepAsync': () => {
    const params = [wave(ROWS * VOCAB, 22)], grads = [wave(ROWS * VOCAB, 23)];
    const opt = new rl.Adam(params, { lr: 1e-3, amsgrad: true });
    return {
      start: (signal) => opt.stepAsync(grads, { signal }),
      writes: params, reads: grads,
      again: () => new rl.Adam(params, { lr: 1e-3 }).stepAsync(grads),
    };
  },
  'SGD.stepAsync': () => {
    const params = [wave(ROWS * VOCAB, 24)], grads = [wave(ROWS * VOCAB, 25)];
    const opt = new rl.SGD(params, { lr: 0.1, momentum: 0.9 });
    return {
      start: (signal) => opt.stepAsync(grads, { signal }),
      writes: params, reads: grads,
      again: () => new rl.SGD(params, { lr: 0.1 }).stepAsync(grads),
    };
  },
};

/** Logits for the calls that keep the libuv workers busy (read only: shared by every blocker). */
const BLOCKER = { data: wave(256 * 20000, 0), rows: 256, vocab: 20000 };

/** A Float32Array on the same memory as `b` (ERR_BUSY is per buffer). */
const viewOf = (b: ArrayBufferView) => new Float32Array(b.buffer, 0, 1);

/** Every output all NaN, or bit-identical to its snapshot (never half written). */
function nanOrUntouched(bufs: ArrayBufferView[], before: Uint8Array[]) {
  bufs.forEach((b, i) => {
    const bytes = new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
    const same = Buffer.from(bytes).equals(Buffer.from(before[i]!));
    const nan = Array.from(b as Float32Array).every(Number.isNaN);
    expect(same || nan, `output ${i}: ${same ? 'untouched' : nan ? 'NaN' : 'partly written'}`).toBe(true);
  });
}
const snapshot = (bufs: ArrayBufferView[]) => bufs.map((b) => new Uint8Array(b.buffer, b.byteOffset, b.byteLength).slice());

describe('every public async op: ERR_BUSY and abort through one path', () => {
  it('the list covers every exported …Async function', () => {
    const exported = Object.keys(rl).filter((k) => k.endsWith('Async')).sort();
    expect(exported).toEqual(Object.keys(CASES).filter((k) => !k.includes('.')).sort());
  });

  for (const [name, make] of Object.entries(CASES)) {
    describe(name, () => {
      it('a pending call\'s outputs and inputs are ERR_BUSY for other calls', async () => {
        const c = make();
        const p = c.start();
        const got: Record<string, string> = {};
        // writers and readers of what it writes, writers of what it reads
        for (const [i, w] of c.writes.entries()) {
          got[`write over output ${i}`] = await outcome(() => rl.segmentBroadcast([1], Int32Array.of(0, 1), undefined, { out: viewOf(w) }));
          got[`read output ${i}`] = await outcome(() => rl.segmentReduce(viewOf(w), Int32Array.of(0, 1), 'sum'));
        }
        for (const [i, r] of c.reads.entries()) {
          if (r.byteLength < 4) continue;
          got[`write over input ${i}`] = await outcome(() => rl.segmentBroadcast([1], Int32Array.of(0, 1), undefined, { out: viewOf(r) }));
        }
        if (c.again) got['the same op reusing an output'] = await outcome(c.again);
        await p;
        for (const [what, code] of Object.entries(got)) expect(code, what).toBe('ERR_BUSY');
        // released once settled
        if (c.writes[0]) expect(await outcome(() => rl.segmentReduce(viewOf(c.writes[0]!), Int32Array.of(0, 1), 'sum'))).toBe('ok');
      });

      if (make().readerOf) {
        it('reading a buffer a pending call writes is ERR_BUSY', async () => {
          const c = make();
          const out = new Float32Array(ROWS * 8);
          const w = rl.segmentBroadcastAsync(new Float64Array(1), Int32Array.of(0, out.length), undefined, { out });
          const code = await outcome(() => c.readerOf!(out.buffer as ArrayBuffer));
          await w;
          expect(code).toBe('ERR_BUSY');
        });
      }

      it('a signal that already fired rejects with ERR_ABORTED and touches nothing', async () => {
        const c = make();
        const before = snapshot(c.writes);
        const ac = new AbortController();
        ac.abort();
        expect(await outcome(() => c.start(ac.signal))).toBe('ERR_ABORTED');
        c.writes.forEach((b, i) => expect(Buffer.from(new Uint8Array(b.buffer, b.byteOffset, b.byteLength)).equals(Buffer.from(before[i]!))).toBe(true));
      });

      it('a signal that fires in flight rejects with ERR_ABORTED, outputs NaN-filled or untouched', async () => {
        // Calls queued ahead on every libuv worker keep this one in flight (queued or running) when the
        // signal fires, whatever the machine's speed.
        const c = make();
        const before = snapshot(c.writes);
        const ac = new AbortController();
        const workers = Number(process.env.UV_THREADPOOL_SIZE ?? 4);
        const blockers = Array.from({ length: 8 * workers }, () => rl.tokenStatsAsync(BLOCKER, new Int32Array(256)));
        const t0 = performance.now();
        const p = c.start(ac.signal);
        ac.abort();
        const gap = performance.now() - t0;
        const o = await outcome(() => p);
        if (o === 'ok' && gap > 5) {
          // The main thread was descheduled between the call and abort() (a loaded machine) long enough for
          // the 8 x workers queued calls (over 20 ms of work) and this one to finish: an abort after the
          // work's last check leaves the call's complete result, never a partial one.
          c.writes.forEach((b, i) => {
            expect(Array.from(b as Float32Array).some(Number.isNaN), `output ${i} after a late abort`).toBe(false);
          });
        } else {
          expect(o, `abort fired ${gap.toFixed(2)} ms after the call`).toBe('ERR_ABORTED');
          nanOrUntouched(c.writes, before);
        }
        await Promise.all(blockers);
      });
    });
  }
});

describe('an op without an async form claims through the same path: gear', () => {
  const offsets = Int32Array.of(0, 4, 7);
  const args = () => ({ advantages: [1, -1], offsets, divergence: Float32Array.of(0.01, 3.5, 0.02, 0.01, 0.2, 0, 4),
    entropy: Float32Array.of(0.3, 2, 0.1, 0.1, 1.5, 0, 0.2) });

  it('reading a buffer a pending call writes is ERR_BUSY', async () => {
    const a = args();
    const w = rl.segmentBroadcastAsync([1], Int32Array.of(0, 7), undefined, { out: a.divergence });
    const code = await outcome(() => rl.gearAdvantages(a));
    await w;
    expect(code).toBe('ERR_BUSY');
  });

  it('writing a buffer a pending call reads is ERR_BUSY', async () => {
    const weights = new Float32Array(7);
    const r = rl.segmentReduceAsync(weights, offsets, 'sum');
    const code = await outcome(() => rl.gearAdvantages({ ...args(), out: { weights } }));
    await r;
    expect(code).toBe('ERR_BUSY');
    expect(await outcome(() => rl.gearAdvantages({ ...args(), out: { weights } }))).toBe('ok');
  });
});
