// divergence / divergenceBackward against the float64 reference (test/helpers/reference.ts), finite
// differences and TRL's SDPO vectors, on every ISA path and dtype.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { ISAS, restoreBackendAfterAll } from '../helpers/isa.js';
import { data, expectClose, loadPeer } from '../helpers/peer.js';
import {
  type DType, type Kind, encode, maxScaledError, randomLogits, refDivergence, refDivergenceGrad, rng,
} from '../helpers/reference.js';

const DTYPES: DType[] = ['float32', 'bfloat16', 'float16'];
const TOL = 1e-5;
const KINDS: [Kind, number][] = [['reverse_kl', 0.5], ['forward_kl', 0.5], ['jsd', 0.5], ['jsd', 0.1], ['jsd', 1], ['jsd', 0]];

restoreBackendAfterAll();

/** Student/teacher pairs with masked entries on both sides (same support), single-entry rows, +-1e4. */
function makePair(seed: number, rows: number, vocab: number, studentOnlyMask = true) {
  const zs = randomLogits(seed, rows, vocab);
  const zt = randomLogits(seed + 1, rows, vocab);
  for (let i = 0; i < zt.length; i++) zt[i] = 0.6 * zt[i]! + 0.4 * zs[i]!; // related distributions
  const r = rng(seed + 2);
  if (rows > 0 && vocab > 3) {
    for (let v = 0; v < vocab; v += 3) { zs[v] = -Infinity; zt[v] = -Infinity; } // shared mask
    // student-only mask: teacher mass where the student has none (forward KL +Infinity)
    if (studentOnlyMask) for (let v = 1; v < vocab; v += 5) zs[v] = -Infinity;
  }
  if (rows > 1) {
    const k = Math.floor(r() * vocab);
    // with studentOnlyMask the teacher keeps its full support (forward KL +Infinity), else it is one-hot too
    for (let v = 0; v < vocab; v++) { zs[vocab + v] = -Infinity; zt[vocab + v] = v === k ? 1 : studentOnlyMask ? zt[vocab + v]! : -Infinity; }
    zs[vocab + k] = 2; // student one-hot inside the teacher's support
  }
  if (rows > 2) {
    for (let v = 0; v < vocab; v++) {
      zs[2 * vocab + v] = (r() * 2 - 1) * 1e4;
      zt[2 * vocab + v] = (r() * 2 - 1) * 1e4;
    }
  }
  const targets = new Int32Array(rows);
  for (let i = 0; i < rows; i++) {
    let y = Math.floor(r() * vocab);
    for (let k = 0; k < vocab && zs[i * vocab + y] === -Infinity; k++) y = (y + 1) % vocab;
    targets[i] = y;
  }
  return { zs, zt, targets };
}

function L(d: Float32Array | Uint16Array, rows: number, vocab: number, dtype: DType): rl.Logits {
  return dtype === 'float32' ? { data: d, rows, vocab } : { data: d, rows, vocab, dtype };
}

const SHAPES: [number, number][] = [[0, 7], [1, 1], [5, 1], [64, 2], [5, 7], [64, 33], [5, 1000], [3, 32000], [2, 151936]];

describe('divergence vs the float64 reference', () => {
  for (const isa of ISAS) {
    for (const dtype of DTYPES) {
      it(`${isa} / ${dtype}: every kind, shape, temperature and edge row`, () => {
        rl.setIsa(isa);
        for (const [rows, vocab] of SHAPES) {
          const { zs, zt, targets } = makePair(rows * 131 + vocab, rows, vocab);
          const s = encode(zs, dtype);
          const t = encode(zt, dtype);
          for (const [kind, beta] of vocab > 10000 ? KINDS.slice(0, 3) : KINDS) {
            const T = vocab > 10000 ? 1 : beta === 0.1 ? 1.7 : 0.8;
            const got = rl.divergence(L(s.data, rows, vocab, dtype), L(t.data, rows, vocab, dtype),
              { kind, beta, temperature: T, targets });
            const want = refDivergence(s.decoded, t.decoded, rows, vocab, kind, beta, T, targets);
            const ctx = `${isa} ${dtype} ${rows}x${vocab} ${kind}(${beta}) T=${T}`;
            expect(maxScaledError(got.value, want.value), `${ctx} value`).toBeLessThanOrEqual(TOL);
            expect(maxScaledError(got.studentEntropy, want.studentEntropy), `${ctx} H`).toBeLessThanOrEqual(TOL);
            expect(maxScaledError(got.studentLogsumexp, want.studentLogsumexp), `${ctx} lse_s`).toBeLessThanOrEqual(TOL);
            expect(maxScaledError(got.teacherLogsumexp, want.teacherLogsumexp), `${ctx} lse_t`).toBeLessThanOrEqual(TOL);
            expect(maxScaledError(got.studentLogprob!, want.studentLogprob), `${ctx} lp_s`).toBeLessThanOrEqual(TOL);
            expect(maxScaledError(got.teacherLogprob!, want.teacherLogprob), `${ctx} lp_t`).toBeLessThanOrEqual(TOL);
          }
        }
      });
    }
  }

  it('support mismatch: +Infinity only where the weighting side has mass the other side lacks; klCap caps it', () => {
    for (const isa of ISAS) {
      rl.setIsa(isa);
      const s = new Float32Array([0, 1, 2, -1, /* row 1 */ 0, -Infinity, 2, 0.5]);
      const t = new Float32Array([0, -Infinity, 2, 0.5, /* row 1 */ 0, 1, 2, -1]);
      const S = { data: s, rows: 2, vocab: 4 };
      const Tt = { data: t, rows: 2, vocab: 4 };
      const rev = rl.divergence(S, Tt, { kind: 'reverse_kl' });
      expect(rev.value[0]).toBe(Infinity); // teacher -inf where the student has mass
      expect(Number.isFinite(rev.value[1])).toBe(true); // student -inf: 0 log 0
      const fwd = rl.divergence(S, Tt, { kind: 'forward_kl' });
      expect(Number.isFinite(fwd.value[0])).toBe(true);
      expect(fwd.value[1]).toBe(Infinity);
      const jsd = rl.divergence(S, Tt, { kind: 'jsd', beta: 0.3 });
      expect(Array.from(jsd.value).every(Number.isFinite)).toBe(true);
      const capped = rl.divergence(S, Tt, { kind: 'reverse_kl', klCap: 20 });
      expect(capped.value[0]).toBe(20);
      expect(capped.value[1]).toBe(rev.value[1]);
    }
  });

  it('finite masks (the dtype lowest, as torch.finfo(dtype).min) give the bits of -Infinity masks at every temperature', () => {
    const rows = 4, vocab = 3001;
    const lowest = { float32: -3.4028234663852886e38, bfloat16: -3.3895313892515355e38 } as const;
    for (const isa of ISAS) {
      rl.setIsa(isa);
      for (const dtype of ['float32', 'bfloat16'] as const) {
        for (const T of [1, 0.7, 1.5, 2]) { // above log2(e) = 1.44, (z - max) / T no longer overflows
          const { zs, zt } = makePair(31, rows, vocab, false);
          const fs = Float64Array.from(zs), ft = Float64Array.from(zt);
          for (let i = 0; i < zs.length; i++) {
            if (zs[i] === -Infinity) fs[i] = lowest[dtype];
            if (zt[i] === -Infinity) ft[i] = lowest[dtype];
          }
          // a student entry of small mass where only the teacher is masked: reverse KL +Infinity either way
          zs[3 * vocab + 1] = fs[3 * vocab + 1] = -200;
          zt[3 * vocab + 1] = -Infinity, ft[3 * vocab + 1] = lowest[dtype];
          const [a, b, c, d] = [zs, zt, fs, ft].map((z) => L(encode(z, dtype).data, rows, vocab, dtype)) as [rl.Logits, rl.Logits, rl.Logits, rl.Logits];
          const g = Float32Array.of(1, 0.5, 2, 1);
          for (const [kind, beta] of KINDS) {
            const opts = { kind, beta, temperature: T, klCap: 40 };
            const want = rl.divergence(a, b, opts), got = rl.divergence(c, d, opts);
            const tag = `${isa} ${dtype} T=${T} ${kind} ${beta}`;
            for (const k of ['value', 'studentEntropy', 'studentLogsumexp', 'teacherLogsumexp'] as const) {
              expect(Array.from(got[k]!), `${tag} ${k}`).toEqual(Array.from(want[k]!));
            }
            if (kind === 'reverse_kl') expect(got.value[3], tag).toBe(40);
            expect(Array.from(rl.divergenceBackward(c, d, g, opts)), `${tag} backward`).toEqual(Array.from(rl.divergenceBackward(a, b, g, opts)));
            const withTargets = { ...opts, targets: Int32Array.of(0, 1, 2, 3) }; // entry 0 is masked in rows 0, 2 and 3
            expect(Array.from(rl.divergence(c, d, withTargets).studentLogprob!), `${tag} logprob`)
              .toEqual(Array.from(rl.divergence(a, b, withTargets).studentLogprob!));
          }
          // a row of finite masks only is a row without a logit, as a row of -Infinity is
          const only = Float64Array.from(fs);
          only.fill(lowest[dtype], 0, vocab);
          expect(() => rl.divergence(L(encode(only, dtype).data, rows, vocab, dtype), d, { temperature: T }))
            .toThrow(/^student\[row 0\]: expected at least one logit that is not a mask \(-Infinity or below -1e38\), got only masks$/);
        }
      }
    }
  });

  it('identical rows have divergence 0 and equal logsumexps', () => {
    const z = Float32Array.from(randomLogits(4, 8, 700));
    for (const kind of ['reverse_kl', 'forward_kl', 'jsd'] as const) {
      const d = rl.divergence({ data: z, rows: 8, vocab: 700 }, { data: z.slice(), rows: 8, vocab: 700 }, { kind });
      for (let r = 0; r < 8; r++) expect(Math.abs(d.value[r]!)).toBeLessThanOrEqual(2e-6);
      expect(Array.from(d.studentLogsumexp)).toEqual(Array.from(d.teacherLogsumexp));
    }
  });
});

describe('divergenceBackward', () => {
  it('matches the closed-form reference on every ISA, dtype and kind (with and without forward stats)', () => {
    for (const isa of ISAS) {
      rl.setIsa(isa);
      for (const dtype of DTYPES) {
        for (const [rows, vocab] of [[2, 7], [2, 33], [2, 3001]] as [number, number][]) {
          const { zs, zt } = makePair(rows * 7 + vocab, rows, vocab, false);
          const s = encode(zs, dtype);
          const t = encode(zt, dtype);
          const g = Float32Array.from({ length: rows }, (_, i) => 0.5 + i);
          for (const [kind, beta] of KINDS) {
            const T = 0.9;
            // reverse KL: row 1 of makePair has the student inside the teacher's support (finite)
            const S = L(s.data, rows, vocab, dtype);
            const Tt = L(t.data, rows, vocab, dtype);
            const ref = refDivergenceGrad(s.decoded, t.decoded, rows, vocab, kind, beta, T, g);
            const got = rl.divergenceBackward(S, Tt, g, { kind, beta, temperature: T });
            const ctx = `${isa} ${dtype} ${rows}x${vocab} ${kind}(${beta})`;
            expectClose(got, ref, { atol: 3e-6, rtol: 2e-5, what: ctx });
            const stats = rl.divergence(S, Tt, { kind, beta, temperature: T });
            const got2 = rl.divergenceBackward(S, Tt, g, { kind, beta, temperature: T, stats });
            expectClose(got2, ref, { atol: 3e-6, rtol: 2e-5, what: `${ctx} stats` });
          }
        }
      }
    }
  });

  it('equals central finite differences of the float64 forward for every kind', () => {
    const rows = 2;
    const vocab = 6;
    const zs = Float64Array.from(Float32Array.from(randomLogits(21, rows, vocab, 1.5)));
    const zt = Float64Array.from(Float32Array.from(randomLogits(22, rows, vocab, 1.5)));
    zs[3] = -Infinity;
    zt[3] = -Infinity;
    const g = [0.8, -1.3];
    const T = 1.2;
    for (const [kind, beta] of KINDS) {
      const loss = (x: Float64Array) => {
        const d = refDivergence(x, zt, rows, vocab, kind, beta, T).value;
        return g[0]! * d[0]! + g[1]! * d[1]!;
      };
      const got = rl.divergenceBackward({ data: Float32Array.from(zs), rows, vocab }, { data: Float32Array.from(zt), rows, vocab },
        Float32Array.from(g), { kind, beta, temperature: T });
      const h = 1e-6;
      for (let i = 0; i < zs.length; i++) {
        if (zs[i] === -Infinity) {
          expect(got[i]).toBe(0);
          continue;
        }
        const p = Float64Array.from(zs);
        const m = Float64Array.from(zs);
        p[i]! += h;
        m[i]! -= h;
        const fd = (loss(p) - loss(m)) / (2 * h);
        expect(Math.abs(got[i]! - fd), `${kind}(${beta}) entry ${i}`).toBeLessThanOrEqual(3e-6 + 2e-5 * Math.abs(fd));
      }
    }
  });

  it('rejects an uncapped +Infinity divergence; a finite klCap gives capped rows a zero gradient', () => {
    const s = new Float32Array([0, 1, 2, -1, /* row 1 */ 0.5, 0.1, 2, 0.5]);
    const t = new Float32Array([0, -Infinity, 2, 0.5, /* row 1 */ 0, 1, 2, -1]);
    const S = { data: s, rows: 2, vocab: 4 };
    const Tt = { data: t, rows: 2, vocab: 4 };
    const g = new Float32Array([1, 1]);
    expect(() => rl.divergenceBackward(S, Tt, g)).toThrow(expect.objectContaining({ code: 'ERR_NON_FINITE', message: expect.stringContaining('row 0') }));
    const out = new Float32Array(8);
    expect(() => rl.divergenceBackward(S, Tt, g, { out })).toThrow(rl.GearError);
    expect(Array.from(out).every(Number.isNaN)).toBe(true); // nothing left looking valid
    const got = rl.divergenceBackward(S, Tt, g, { klCap: 20 });
    expect(Array.from(got.subarray(0, 4))).toEqual([0, 0, 0, 0]);
    const ref = refDivergenceGrad(s, t, 2, 4, 'reverse_kl', 0.5, 1, g);
    expectClose(got.subarray(4), ref.subarray(4), { atol: 2e-6, rtol: 1e-5 });
    // a cap below a finite divergence also zeroes that row
    const d = rl.divergence(S, Tt, { klCap: 20 }).value[1]!;
    const cappedAll = rl.divergenceBackward(S, Tt, g, { klCap: d / 2 });
    expect(Array.from(cappedAll).every((x) => x === 0)).toBe(true);
  });
});

describe('divergence vs TRL SDPO vectors (trl_sdpo_divergence.json)', () => {
  it('full-vocabulary reverse KL (alpha 1), forward KL (alpha 0), JSD (alpha 0.5 / 0.1) and gradients', () => {
    const peer = loadPeer('trl_sdpo_divergence.json');
    let checked = 0;
    for (const c of peer.cases) {
      if (c.function !== 'compute_full_logit_self_distillation_loss') continue;
      const alpha = c.params.distillation_alpha as number;
      const zs = data(c.inputs.student_logits) as number[];
      const zt = data(c.inputs.teacher_logits) as number[];
      const shape = c.inputs.student_logits.shape as number[];
      const vocab = shape[shape.length - 1]!;
      const rows = zs.length / vocab;
      const S = { data: Float32Array.from(zs), rows, vocab };
      const Tt = { data: Float32Array.from(zt), rows, vocab };
      const kind = 'jsd' as const; // TRL's alpha is our beta; 1 and 0 are reverse / forward KL
      const got = rl.divergence(S, Tt, { kind, beta: alpha });
      const peerD = data(c.outputs!.divergence) as number[];
      const peerG = data(c.outputs!.grad_student_logits) as number[];
      const ref = refDivergence(S.data, Tt.data, rows, vocab, kind, alpha);
      const ones = new Float32Array(rows).fill(1);
      for (let r = 0; r < rows; r++) {
        if (Number.isNaN(peerD[r]!)) {
          // F.kl_div(log_target=True) gives NaN for a -inf log-prob on the target side; ours is the
          // defined value with 0 log 0 = 0.
          expect(Number.isFinite(got.value[r]!), c.name).toBe(true);
          expect(Math.abs(got.value[r]! - ref.value[r]!), c.name).toBeLessThanOrEqual(TOL);
        } else {
          expect(maxScaledError([got.value[r]!], [peerD[r]!]), `${c.name}[${r}]`).toBeLessThanOrEqual(TOL);
        }
      }
      const finiteRows = Array.from(got.value).every(Number.isFinite);
      if (finiteRows) {
        const grad = rl.divergenceBackward(S, Tt, ones, { kind, beta: alpha });
        if (peerG.every(Number.isFinite)) {
          expectClose(grad, peerG, { atol: 2e-6, rtol: 1e-5, what: c.name });
        } else {
          // the peer's gradient is NaN / inf where its forward was NaN; ours follows the defined value
          expectClose(grad, refDivergenceGrad(S.data, Tt.data, rows, vocab, kind, alpha, 1, ones), { atol: 2e-6, rtol: 1e-5, what: c.name });
        }
      } else {
        // +Infinity divergence (support mismatch): undefined gradient, rejected
        expect(() => rl.divergenceBackward(S, Tt, ones, { kind, beta: alpha })).toThrow(expect.objectContaining({ code: 'ERR_NON_FINITE' }));
      }
      checked++;
    }
    expect(checked).toBe(24);
  });
});
