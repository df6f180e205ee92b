// CPU-vs-CUDA parity, as ggml's test-backend-ops does it: every device op against the CPU kernels in the
// same process and against the float64 references of test/helpers/reference.ts, on random inputs (every
// dtype, temperatures 1 and 0.7 (2 for finite masks), -Infinity masks, a spiked row, warp/block and chunk boundaries, vocab 1,
// rows 0), with their errors and NaN-filled outputs, device outputs, async calls, aborts, determinism and
// the device tensors' lifetime. Framework-free (node:assert): test/cuda/parity.test.ts runs the checks
// under vitest where a device exists, and test/cuda/run_parity.ts runs them on a GPU machine that has
// Node but no test runner (npm run test:cuda), some of them under compute-sanitizer.
import assert from 'node:assert/strict';
import * as rl from '../../ts/index.js';
import {
  encode, maxScaledError, randomLogits, refDivergence, refDivergenceGrad, refTokenStats, refTokenStatsGrad, rng,
  type DType, type Kind,
} from '../helpers/reference.js';
import { checkSingleLogit, singleLogitCases, ulp32 } from './single_logit.js';

/** One parity check; `small` checks run under compute-sanitizer too. */
export interface ParityCheck {
  name: string;
  small: boolean;
  run(): void | Promise<void>;
}

// The CPU suites' bounds: outputs |a - e| / max(1, |e|) <= 1e-5 against float64; the CPU and the device
// are each within that of float64, so within twice it of each other. JSD's backward: 1e-4 of the largest
// gradient entry against float64 (the CPU's is within 4e-7 on these cases, the host simulation's of the
// device code within 3e-7 with ex2 / lg2 at their worst), and 2e-5 against the CPU.
const TOL = 1e-5;
const GRAD_TOL = 1e-5;
const JSD_GRAD_TOL = 1e-4;
// Reference rows are computed in float64 in JavaScript: above this many entries only CPU-vs-device.
const REF_LIMIT = 4_000_000;

function close(got: ArrayLike<number>, want: ArrayLike<number>, tol: number, what: string): void {
  const e = maxScaledError(got, want);
  assert.ok(e <= tol, `${what}: largest scaled error ${e} > ${tol}`);
}

/** Largest |a - e| over the largest |e| (at least 1): a gradient's error relative to its scale. */
function closeToScale(got: ArrayLike<number>, want: ArrayLike<number>, tol: number, what: string): void {
  let scale = 1;
  for (let i = 0; i < want.length; i++) scale = Math.max(scale, Math.abs(want[i]!));
  let worst = 0, at = -1;
  for (let i = 0; i < want.length; i++) {
    const d = Math.abs(got[i]! - want[i]!) / scale;
    if (!(d <= worst)) worst = Number.isNaN(d) ? Infinity : d, at = i;
  }
  assert.ok(worst <= tol, `${what}: largest error ${worst} of the scale > ${tol} (entry ${at}: ${got[at]} vs ${want[at]}, scale ${scale})`);
}

function bitEqual(a: ArrayLike<number>, b: ArrayLike<number>, what: string): void {
  assert.equal(a.length, b.length, `${what}: lengths`);
  for (let i = 0; i < a.length; i++) {
    if (!Object.is(a[i], b[i])) assert.fail(`${what}: entry ${i} differs (${a[i]} vs ${b[i]})`);
  }
}

/** Every entry within its own bound: |got - want| <= bound[i] (a gradient given float32 statistics). */
function within(got: ArrayLike<number>, want: ArrayLike<number>, bound: ArrayLike<number>, what: string): void {
  for (let i = 0; i < want.length; i++) {
    const d = Math.abs(got[i]! - want[i]!);
    if (!(d <= bound[i]!)) assert.fail(`${what}: entry ${i}: ${got[i]} vs ${want[i]}, difference ${d} > its bound ${bound[i]}`);
  }
}

// A backward given the forward's float32 statistics computes p = exp(z/T - lse_f), and lse_f carries the
// float32 rounding of the logsumexp (|lse_f - lse| up to ulp(lse_f)/2: 6.1e-5 at lse ~ 1286, the spiked
// row at T = 0.7) plus the forward's own error. Every p then carries the relative error d = lse_f - lse,
// so the gradient moves by about d times its derivative in lse, whatever the kernel does: no bound
// independent of the statistics holds (it is the CPU's result too). So a backward given statistics is
// checked against the CPU given the same statistics and against float64 of the same statistics, tightly;
// and against the recomputed backward within the first-order bound these functions derive per entry.
/** How far a float32 statistic f may be from the exact value: its rounding, or the measured difference. */
function statError(f: number, exact: number | undefined): number {
  const e = exact === undefined ? 2e-6 * Math.max(1, Math.abs(f)) : Math.abs(f - exact);
  return Math.max(ulp32(f) / 2, e) * 1.01;
}

/**
 * tokenStatsBackward given float32 statistics (lse, entropy) in float64: the gradient of those statistics,
 * and the bound of its difference from the exact gradient per entry (base + |d lse| |dg/dlse| + |d H| |dg/dH|,
 * dg/dlse = -p (alpha + beta (1 + ln p)), dg/dH = -ge p / T).
 */
function tokenGradGiven(z: ArrayLike<number>, rows: number, vocab: number, targets: ArrayLike<number>, gl: ArrayLike<number>,
  ge: ArrayLike<number>, T: number, lse: ArrayLike<number>, ent: ArrayLike<number>, exact?: { logsumexp: ArrayLike<number>; entropy: ArrayLike<number> }) {
  const grad = new Float64Array(rows * vocab), bound = new Float64Array(rows * vocab);
  for (let r = 0; r < rows; r++) {
    const alpha = -(gl[r]! + ge[r]! * ent[r]!) / T, beta = -ge[r]! / T;
    const dl = statError(lse[r]!, exact?.logsumexp[r]), dh = statError(ent[r]!, exact?.entropy[r]);
    for (let v = 0; v < vocab; v++) {
      const i = r * vocab + v, x = z[i]!;
      const lp = x === -Infinity ? -Infinity : x / T - lse[r]!;
      const p = lp === -Infinity ? 0 : Math.exp(lp);
      grad[i] = (p === 0 ? 0 : p * (alpha + beta * lp)) + (v === targets[r] ? gl[r]! / T : 0);
      bound[i] = p === 0 ? 0 : dl * Math.abs(p * (alpha + beta * (1 + lp))) * Math.exp(dl) + dh * Math.abs(ge[r]! * p / T);
    }
  }
  return { grad, bound };
}

/**
 * divergenceBackward (reverse or forward KL) given float32 statistics (value D, both lse) in float64, and
 * the bound of its difference from the exact gradient per entry: with G = g / T, p_s, p_t and their logs
 * a, b, reverse KL G p_s (a - b - D) moves by G p_s (|d ls| |a - b - D + 1| + |d lt| + |d D|), forward KL
 * G (p_s - p_t) by G (p_s |d ls| + p_t |d lt|).
 */
function divGradGiven(zs: ArrayLike<number>, zt: ArrayLike<number>, rows: number, vocab: number, kind: Kind, T: number,
  g: ArrayLike<number>, st: { value: ArrayLike<number>; studentLogsumexp: ArrayLike<number>; teacherLogsumexp: ArrayLike<number> },
  exact?: { value: ArrayLike<number>; studentLogsumexp: ArrayLike<number>; teacherLogsumexp: ArrayLike<number> }) {
  const grad = new Float64Array(rows * vocab), bound = new Float64Array(rows * vocab);
  for (let r = 0; r < rows; r++) {
    const G = g[r]! / T, D = st.value[r]!, ls = st.studentLogsumexp[r]!, lt = st.teacherLogsumexp[r]!;
    const dD = statError(D, exact?.value[r]), dls = statError(ls, exact?.studentLogsumexp[r]), dlt = statError(lt, exact?.teacherLogsumexp[r]);
    for (let v = 0; v < vocab; v++) {
      const i = r * vocab + v;
      const a = zs[i] === -Infinity ? -Infinity : zs[i]! / T - ls, b = zt[i] === -Infinity ? -Infinity : zt[i]! / T - lt;
      const ps = a === -Infinity ? 0 : Math.exp(a), pt = b === -Infinity ? 0 : Math.exp(b);
      if (kind === 'reverse_kl') {
        grad[i] = ps === 0 ? 0 : G * ps * (a - b - D);
        bound[i] = ps === 0 ? 0 : Math.abs(G) * ps * (dls * Math.abs(a - b - D + 1) + dlt + dD) * Math.exp(dls);
      } else {
        grad[i] = G * (ps - pt);
        bound[i] = Math.abs(G) * (ps * dls * Math.exp(dls) + pt * dlt * Math.exp(dlt));
      }
    }
  }
  return { grad, bound };
}

function allNaN(a: ArrayLike<number>, what: string): void {
  for (let i = 0; i < a.length; i++) if (!Number.isNaN(a[i]!)) assert.fail(`${what}: entry ${i} is ${a[i]}, expected NaN`);
}

async function gearCode(f: () => unknown): Promise<{ code?: string; message?: string }> {
  try {
    await f();
  } catch (e) {
    assert.ok(e instanceof rl.GearError, `expected a GearError, got ${String(e)}`);
    return { code: e.code, message: e.message };
  }
  return {};
}

interface Case {
  rows: number;
  vocab: number;
  dtype: DType;
  z: Float64Array;
  decoded: Float64Array;
  host: rl.Logits;
  targets: Int32Array;
}

/** Random logits with masks (5%), a spike in row 2 (the rest underflows), row 1's first block masked. */
function makeCase(seed: number, rows: number, vocab: number, dtype: DType): Case {
  const z = randomLogits(seed, rows, vocab, 4);
  const r = rng(seed + 1);
  for (let i = 0; i < z.length; i++) if (r() < 0.05) z[i] = -Infinity;
  if (rows > 1 && vocab > 2100) for (let v = 0; v < 2048; v++) z[vocab + v] = -Infinity;
  if (rows > 2) z[2 * vocab + (vocab >> 1)] = 900;
  const targets = new Int32Array(rows);
  for (let i = 0; i < rows; i++) {
    let y = Math.floor(r() * vocab);
    for (let k = 0; k < vocab && z[i * vocab + y] === -Infinity; k++) y = (y + 1) % vocab;
    targets[i] = y;
  }
  const { data, decoded } = encode(z, dtype);
  const host = dtype === 'float32' ? { data, rows, vocab } : { data, rows, vocab, dtype };
  return { rows, vocab, dtype, z, decoded, host, targets };
}

/** The teacher of a case: its own random logits with the student's masks (finite KLs). */
function teacherOf(c: Case, seed: number): { host: rl.Logits; decoded: Float64Array } {
  const zt = randomLogits(seed, c.rows, c.vocab, 3).map((x, i) => (c.z[i] === -Infinity ? -Infinity : x));
  const { data, decoded } = encode(zt, c.dtype);
  return { host: c.dtype === 'float32' ? { data, rows: c.rows, vocab: c.vocab } : { data, rows: c.rows, vocab: c.vocab, dtype: c.dtype }, decoded };
}

const DTYPES: DType[] = ['float32', 'bfloat16', 'float16'];
// warp groups (vocab <= 2048), block groups, block boundaries, split rows (few rows, long vocab)
const SHAPES: [number, number, boolean][] = [
  [1, 1, true], [3, 7, true], [6, 33, true], [5, 2048, true], [5, 2049, true], [7, 3001, true], [3, 32000, false],
  [2, 151936, false], [257, 129, true], [9, 4099, true],
];

export function parityChecks(): ParityCheck[] {
  const checks: ParityCheck[] = [];
  const add = (name: string, small: boolean, run: () => void | Promise<void>) => checks.push({ name, small, run });

  for (const dtype of DTYPES) {
    for (const [rows, vocab, small] of SHAPES) {
      for (const T of [1, 0.7]) {
        const tag = `${dtype} ${rows}x${vocab} T=${T}`;
        const seed = rows * 131 + vocab + DTYPES.indexOf(dtype) * 7 + (T === 1 ? 0 : 3);
        const withRef = rows * vocab <= REF_LIMIT;

        add(`tokenStats ${tag}`, small, async () => {
          const c = makeCase(seed, rows, vocab, dtype);
          using dev = await rl.cuda.upload(c.host);
          const got = rl.tokenStats(dev, c.targets, { temperature: T });
          const cpu = rl.tokenStats(c.host, c.targets, { temperature: T });
          for (const k of ['logprob', 'entropy', 'logsumexp'] as const) close(got[k], cpu[k], 2 * TOL, `${k} vs CPU`);
          if (withRef) {
            const ref = refTokenStats(c.decoded, rows, vocab, c.targets, T);
            for (const k of ['logprob', 'entropy', 'logsumexp'] as const) close(got[k], ref[k], TOL, `${k} vs float64`);
          }
          // the same kernels whether the logits were uploaded, staged for the call, or the call was async; twice
          const staged = rl.tokenStats(c.host, c.targets, { temperature: T, device: 'cuda' });
          const again = await rl.tokenStatsAsync(dev, c.targets, { temperature: T });
          for (const k of ['logprob', 'entropy', 'logsumexp'] as const) {
            bitEqual(staged[k], got[k], `${k}: staged host arrays vs device tensor`);
            bitEqual(again[k], got[k], `${k}: async vs sync`);
          }
        });

        add(`tokenStatsPartial+merge ${tag}`, small, async () => {
          const c = makeCase(seed + 11, rows, vocab, dtype);
          const cut = Math.max(1, Math.floor(vocab / 3));
          const shard = async (v0: number, v1: number) => {
            const w = v1 - v0;
            const data = c.dtype === 'float32' ? new Float32Array(rows * w) : new Uint16Array(rows * w);
            for (let r = 0; r < rows; r++) data.set((c.host.data as Float32Array).subarray(r * vocab + v0, r * vocab + v1), r * w);
            const part = c.dtype === 'float32' ? { data, rows, vocab: w } : { data, rows, vocab: w, dtype: c.dtype };
            using dev = await rl.cuda.upload(part);
            const got = rl.tokenStatsPartial(dev, c.targets, { vocabStart: v0, temperature: T });
            const cpu = rl.tokenStatsPartial(part, c.targets, { vocabStart: v0, temperature: T });
            bitEqual(got.max, cpu.max, 'max');
            bitEqual(got.targetLogit, cpu.targetLogit, 'targetLogit');
            // float32 sums in different orders: the bound the tests state (about 1e-6 relative measured)
            for (let r = 0; r < rows; r++) {
              assert.ok(Math.abs(got.sumExp[r]! - cpu.sumExp[r]!) <= 2e-6 * Math.max(1, cpu.sumExp[r]!), `sumExp row ${r}`);
              assert.ok(Math.abs(got.sumExpX[r]! - cpu.sumExpX[r]!) <= 2e-6 * Math.max(1, cpu.sumExp[r]!), `sumExpX row ${r}`);
            }
            return got;
          };
          const merged = rl.mergeTokenStats(vocab > 1 ? [await shard(0, cut), await shard(cut, vocab)] : [await shard(0, vocab)]);
          close(merged.logprob, rl.tokenStats(c.host, c.targets, { temperature: T }).logprob, 2 * TOL, 'merged logprob vs CPU');
        });

        add(`tokenStatsBackward ${tag}`, small, async () => {
          const c = makeCase(seed + 23, rows, vocab, dtype);
          const gl = Float32Array.from({ length: rows }, (_, r) => Math.sin(r + 1));
          const ge = Float32Array.from({ length: rows }, (_, r) => Math.cos(r + 1) / 2);
          const grad = { logprob: gl, entropy: ge };
          using dev = await rl.cuda.upload(c.host);
          const stats = rl.tokenStats(dev, c.targets, { temperature: T });
          const cpu = rl.tokenStatsBackward(c.host, c.targets, grad, { temperature: T });
          using withStats = rl.tokenStatsBackward(dev, c.targets, grad, { temperature: T, stats });
          using recomputed = rl.tokenStatsBackward(dev, c.targets, grad, { temperature: T });
          const a = await withStats.download(), b = await recomputed.download();
          close(b, cpu, 2 * GRAD_TOL, 'recomputed vs CPU');
          if (withRef) close(b, refTokenStatsGrad(c.decoded, rows, vocab, c.targets, gl, ge, T), GRAD_TOL, 'recomputed vs float64');
          // given the forward's float32 statistics: the CPU's result given the same, float64 of the same, and
          // the recomputed one within the bound those statistics' errors allow
          close(a, rl.tokenStatsBackward(c.host, c.targets, grad, { temperature: T, stats }), 2 * GRAD_TOL,
            'with the forward statistics vs the CPU given the same');
          const exact = withRef ? refTokenStats(c.decoded, rows, vocab, c.targets, T) : undefined;
          const given = tokenGradGiven(c.decoded, rows, vocab, c.targets, gl, ge, T, stats.logsumexp, stats.entropy,
            exact && { logsumexp: exact.logsumexp, entropy: exact.entropy });
          if (withRef) close(a, given.grad, GRAD_TOL, 'with the forward statistics vs float64 of the same statistics');
          within(a, b, given.bound.map((x, i) => x + 2 * GRAD_TOL * Math.max(1, Math.abs(b[i]!))),
            'with the forward statistics vs recomputed (within the float32 statistics\' bound)');
          // a host out, a device out, and (float32) in place: the same bits
          const hostOut = rl.tokenStatsBackward(dev, c.targets, grad, { temperature: T, out: new Float32Array(rows * vocab) });
          bitEqual(hostOut, b, 'host out vs device result');
          using devOut = await rl.cuda.upload({ data: new Float32Array(rows * vocab), rows, vocab });
          assert.equal(rl.tokenStatsBackward(dev, c.targets, grad, { temperature: T, out: devOut }), devOut);
          bitEqual(await devOut.download(), b, 'device out vs new tensor');
          const staged = rl.tokenStatsBackward(c.host, c.targets, grad, { temperature: T, device: 'cuda' });
          bitEqual(staged, b, 'staged host arrays vs device tensor');
          if (dtype === 'float32') {
            using own = await rl.cuda.upload(c.host);
            assert.equal(rl.tokenStatsBackward(own, c.targets, grad, { temperature: T, inPlace: true }), own);
            bitEqual(await own.download(), b, 'in place vs new tensor');
          }
        });

        for (const [kind, beta] of [['reverse_kl', 0.5], ['forward_kl', 0.5], ['jsd', 0.3]] as [Kind, number][]) {
          add(`divergence ${kind} ${tag}`, small, async () => {
            const c = makeCase(seed + 37, rows, vocab, dtype);
            const t = teacherOf(c, seed + 41);
            using s = await rl.cuda.upload(c.host);
            using tt = await rl.cuda.upload(t.host);
            const opts = { kind, beta, temperature: T, targets: c.targets };
            const got = rl.divergence(s, tt, opts), cpu = rl.divergence(c.host, t.host, opts);
            const keys = ['value', 'studentEntropy', 'studentLogsumexp', 'teacherLogsumexp', 'studentLogprob', 'teacherLogprob'] as const;
            for (const k of keys) close(got[k]!, cpu[k]!, 2 * TOL, `${k} vs CPU`);
            if (withRef) {
              const ref = refDivergence(c.decoded, t.decoded, rows, vocab, kind, beta, T, c.targets);
              for (const k of keys) close(got[k]!, ref[k], TOL, `${k} vs float64`);
            }
            const capped = rl.divergence(s, tt, { ...opts, klCap: 0.05 });
            // the cap as a float32 output holds it: Math.fround(0.05)
            for (let r = 0; r < rows; r++) assert.equal(capped.value[r], Math.fround(Math.min(got.value[r]!, 0.05)), `capped row ${r}`);
            const staged = rl.divergence(c.host, t.host, { ...opts, device: 'cuda' });
            bitEqual(staged.value, got.value, 'staged host arrays vs device tensors');
          });

          add(`divergenceBackward ${kind} ${tag}`, small, async () => {
            const c = makeCase(seed + 53, rows, vocab, dtype);
            const t = teacherOf(c, seed + 59);
            const g = Float32Array.from({ length: rows }, (_, r) => 1 + (r % 3) / 2);
            using s = await rl.cuda.upload(c.host);
            using tt = await rl.cuda.upload(t.host);
            const opts = { kind, beta, temperature: T };
            using got = rl.divergenceBackward(s, tt, g, opts);
            const grad = await got.download();
            const cpu = rl.divergenceBackward(c.host, t.host, g, opts);
            const tol = kind === 'jsd' ? JSD_GRAD_TOL : GRAD_TOL;
            closeToScale(grad, cpu, 2 * GRAD_TOL, 'vs CPU');
            if (withRef) closeToScale(grad, refDivergenceGrad(c.decoded, t.decoded, rows, vocab, kind, beta, T, g), tol, 'vs float64');
            if (kind !== 'jsd') {
              // given the forward's float32 statistics: as for tokenStatsBackward above
              const stats = rl.divergence(s, tt, opts);
              using given = rl.divergenceBackward(s, tt, g, { ...opts, stats });
              const a = await given.download();
              closeToScale(a, rl.divergenceBackward(c.host, t.host, g, { ...opts, stats }), 2 * tol, 'with the forward statistics vs the CPU given the same');
              const exact = withRef ? refDivergence(c.decoded, t.decoded, rows, vocab, kind, beta, T, c.targets) : undefined;
              const ref = divGradGiven(c.decoded, t.decoded, rows, vocab, kind, T, g, stats,
                exact && { value: exact.value, studentLogsumexp: exact.studentLogsumexp, teacherLogsumexp: exact.teacherLogsumexp });
              if (withRef) closeToScale(a, ref.grad, tol, 'with the forward statistics vs float64 of the same statistics');
              let scale = 1;
              for (let i = 0; i < grad.length; i++) scale = Math.max(scale, Math.abs(grad[i]!));
              within(a, grad, ref.bound.map((x) => x + 2 * tol * scale), 'with the forward statistics vs recomputed (within the float32 statistics\' bound)');
            }
            bitEqual(rl.divergenceBackward(c.host, t.host, g, { ...opts, device: 'cuda' }), grad, 'staged host arrays vs device tensors');
          });
        }
      }
    }
  }

  // ---- edge cases and the two defects of the first device run ----
  add('rows 0: empty results, no launch', true, async () => {
    using dev = await rl.cuda.upload({ data: new Float32Array(0), rows: 0, vocab: 17 });
    assert.equal(rl.tokenStats(dev, new Int32Array(0)).logprob.length, 0);
    using g = rl.tokenStatsBackward(dev, new Int32Array(0), { logprob: new Float32Array(0) });
    assert.equal((await g.download()).length, 0);
    assert.equal(rl.divergence(dev, dev).value.length, 0);
  });

  // Rows with one finite logit: recomputed, the gradient is exactly 0; given the forward's float32
  // logsumexp, it is what that rounding makes it (test/cuda/single_logit.ts), the CPU's result. A failure
  // names its inputs.
  add('tokenStatsBackward on rows with one finite logit (1x1, one-hot): 0 recomputed; given statistics, the CPU\'s result within the float32 bound', false, async () => {
    const failures: string[] = [];
    const cases = singleLogitCases();
    for (const c of cases) {
      const { data } = encode(c.z, c.dtype);
      const host = { data, rows: 1, vocab: c.z.length, ...(c.dtype === 'float32' ? {} : { dtype: c.dtype }) } as rl.Logits;
      using dev = await rl.cuda.upload(host);
      const y = Int32Array.of(0);
      const grad = { logprob: Float32Array.of(c.gl), entropy: Float32Array.of(c.ge) };
      const opts = { temperature: c.T };
      const cs = rl.tokenStats(host, y, opts), ds = rl.tokenStats(dev, y, opts);
      const finite = Number.isFinite(cs.logsumexp[0]);
      using dg = finite ? rl.tokenStatsBackward(dev, y, grad, { ...opts, stats: cs }) : null;
      using dr = rl.tokenStatsBackward(dev, y, grad, opts);
      failures.push(...checkSingleLogit(c, {
        cpu: { lse: cs.logsumexp[0]!, entropy: cs.entropy[0]!, recomputed: rl.tokenStatsBackward(host, y, grad, opts),
          given: finite ? rl.tokenStatsBackward(host, y, grad, { ...opts, stats: cs }) : null },
        device: { lse: ds.logsumexp[0]!, entropy: ds.entropy[0]!, recomputed: await dr.download(), given: dg ? await dg.download() : null },
      }));
    }
    assert.deepEqual(failures.slice(0, 20), [], `${failures.length} of ${cases.length} rows failed`);
  });

  add('an uncapped +Infinity reverse KL is ERR_NON_FINITE as on the CPU; a finite klCap gives that row zeros', true, async () => {
    const s = { data: Float32Array.of(0, 1, 2, 0, 1, 2), rows: 2, vocab: 3 };
    const t = { data: Float32Array.of(0, 1, 2, 0, 1, -Infinity), rows: 2, vocab: 3 };
    using ds = await rl.cuda.upload(s);
    using dt = await rl.cuda.upload(t);
    const g = Float32Array.of(1, 1);
    const cpu = await gearCode(() => rl.divergenceBackward(s, t, g));
    const dev = await gearCode(() => rl.divergenceBackward(ds, dt, g));
    assert.equal(cpu.code, 'ERR_NON_FINITE');
    assert.deepEqual(dev, cpu);
    const stats = rl.divergence(ds, dt);
    assert.equal(stats.value[1], Infinity);
    assert.deepEqual(await gearCode(() => rl.divergenceBackward(ds, dt, g, { stats })), cpu);
    using capped = rl.divergenceBackward(ds, dt, g, { klCap: 5 });
    const out = await capped.download();
    bitEqual(out.subarray(3), [0, 0, 0], 'capped row');
    closeToScale(out.subarray(0, 3), rl.divergenceBackward(s, t, g, { klCap: 5 }).subarray(0, 3), 2 * GRAD_TOL, 'row 0');
  });

  add('bad logits: the CPU error, outputs NaN-filled (host arrays and device tensors)', true, async () => {
    const z = Float32Array.from({ length: 4 * 40 }, (_, i) => Math.sin(i));
    z[2 * 40 + 17] = NaN;
    const host = { data: z, rows: 4, vocab: 40 };
    using dev = await rl.cuda.upload(host);
    const y = Int32Array.of(1, 2, 3, 4);
    const out = { logprob: new Float32Array(4), entropy: new Float32Array(4), logsumexp: new Float32Array(4) };
    const e = await gearCode(() => rl.tokenStats(dev, y, { out }));
    assert.deepEqual(e, await gearCode(() => rl.tokenStats(host, y)));
    assert.equal(e.code, 'ERR_NON_FINITE');
    for (const k of ['logprob', 'entropy', 'logsumexp'] as const) allNaN(out[k], `out.${k}`);
    using devOut = await rl.cuda.upload({ data: new Float32Array(160), rows: 4, vocab: 40 });
    assert.deepEqual(await gearCode(() => rl.tokenStatsBackward(dev, y, { logprob: new Float32Array(4) }, { out: devOut })),
      await gearCode(() => rl.tokenStatsBackward(host, y, { logprob: new Float32Array(4) })));
    allNaN(await devOut.download(), 'device out');
    const teacher = { data: Float32Array.from(z, (x) => (Number.isNaN(x) ? 0 : x)), rows: 4, vocab: 40 };
    using dt = await rl.cuda.upload(teacher);
    assert.deepEqual(await gearCode(() => rl.divergence(dt, dev)), await gearCode(() => rl.divergence(teacher, host)));
    // argument errors come before any work, with the CPU's messages
    assert.deepEqual(await gearCode(() => rl.tokenStats(dev, Int32Array.of(1, 2, 40, 4))), await gearCode(() => rl.tokenStats(host, Int32Array.of(1, 2, 40, 4))));
    assert.equal((await gearCode(() => rl.tokenStats(dev, y, { temperature: 0 }))).code, 'ERR_OPTION');
  });

  add('finite masks (the dtype lowest, as torch.finfo(dtype).min) act as -Infinity at every temperature, as on the CPU', true, async () => {
    const rows = 5, vocab = 3001;
    const lowest = { float32: -3.4028234663852886e38, bfloat16: -3.3895313892515355e38 } as const;
    for (const dtype of ['float32', 'bfloat16'] as const) {
      for (const T of [1, 0.7, 2]) {  // above log2(e), (z - max) / T no longer overflows: the bound still masks
        const zs = randomLogits(7, rows, vocab, 4), zt = randomLogits(8, rows, vocab, 3);
        const ms = Float64Array.from(zs), mt = Float64Array.from(zt);  // the same with -Infinity
        for (let i = 0; i < zs.length; i += 5) zs[i] = zt[i] = lowest[dtype], ms[i] = mt[i] = -Infinity;
        // a student entry of small mass where only the teacher is masked: reverse KL +Infinity
        zs[vocab + 1] = -200, ms[vocab + 1] = -200, zt[vocab + 1] = lowest[dtype], mt[vocab + 1] = -Infinity;
        const L = (z: Float64Array): rl.Logits => {
          const { data } = encode(z, dtype);
          return dtype === 'float32' ? { data, rows, vocab } : { data, rows, vocab, dtype };
        };
        const [s, t, s2, t2] = [L(zs), L(zt), L(ms), L(mt)];
        using ds = await rl.cuda.upload(s);
        using dt = await rl.cuda.upload(t);
        const y = Int32Array.from({ length: rows }, (_, r) => 2 + r * 5);
        const tag = `${dtype} T=${T}`;
        const st = rl.tokenStats(ds, y, { temperature: T });
        for (const k of ['entropy', 'logsumexp'] as const) close(st[k], rl.tokenStats(s2, y, { temperature: T })[k], 2 * TOL, `${tag} tokenStats ${k}`);
        for (const [kind, beta] of [['reverse_kl', 0.5], ['forward_kl', 0.5], ['jsd', 0.3]] as [Kind, number][]) {
          const opts = { kind, beta, temperature: T, klCap: 50 };
          const got = rl.divergence(ds, dt, opts), cpu = rl.divergence(s, t, opts), masked = rl.divergence(s2, t2, opts);
          close(got.value, cpu.value, 2 * TOL, `${tag} ${kind} vs CPU`);
          close(cpu.value, masked.value, 2 * TOL, `${tag} ${kind} CPU: finite masks vs -Infinity`);
          if (kind === 'reverse_kl') assert.equal(got.value[1], 50, `${tag} reverse KL row 1 (support mismatch): capped +Infinity`);
          using g = rl.divergenceBackward(ds, dt, Float32Array.of(1, 1, 1, 1, 1), opts);
          closeToScale(await g.download(), rl.divergenceBackward(s, t, Float32Array.of(1, 1, 1, 1, 1), opts),
            2 * (kind === 'jsd' ? JSD_GRAD_TOL : GRAD_TOL), `${tag} ${kind} backward vs CPU`);
        }
        // a row of finite masks only: the CPU's error
        const only = Float64Array.from(zs);
        only.fill(lowest[dtype], 2 * vocab, 3 * vocab);
        const o = L(only);
        using dOnly = await rl.cuda.upload(o);
        const want = await gearCode(() => rl.divergence(o, t, { temperature: T }));
        assert.match(want.message!, /^student\[row 2\]: .*got only masks$/);
        assert.deepEqual(await gearCode(() => rl.divergence(dOnly, dt, { temperature: T })), want, `${tag} a row of masks only`);
      }
    }
  });

  add('both sides bad: the error names the side the CPU names (forward, backward, given statistics)', true, async () => {
    const V = 4500;
    for (const [sBad, tBad] of [[[3000, NaN], [5, Infinity]], [[4400, Infinity], [9, NaN]], [[5, NaN], [6, NaN]]] as const) {
      const sz = Float32Array.from({ length: 2 * V }, (_, i) => Math.sin(i) * 3);
      const tz = Float32Array.from({ length: 2 * V }, (_, i) => Math.cos(i) * 3);
      sz[V + sBad[0]] = sBad[1];
      tz[V + tBad[0]] = tBad[1];
      const s = { data: sz, rows: 2, vocab: V }, t = { data: tz, rows: 2, vocab: V };
      using ds = await rl.cuda.upload(s);
      using dt = await rl.cuda.upload(t);
      const g = Float32Array.of(1, 1);
      const stats = { value: new Float32Array(2), studentLogsumexp: new Float32Array(2), teacherLogsumexp: new Float32Array(2) };
      for (const kind of ['reverse_kl', 'forward_kl', 'jsd'] as const) {
        const want = await gearCode(() => rl.divergence(s, t, { kind }));
        assert.match(want.message!, new RegExp(`^student\\[row 1, entry ${sBad[0]}\\]`));
        assert.deepEqual(await gearCode(() => rl.divergence(ds, dt, { kind })), want, `${kind} forward`);
        assert.deepEqual(await gearCode(() => rl.divergenceBackward(ds, dt, g, { kind })), want, `${kind} backward`);
        assert.deepEqual(await gearCode(() => rl.divergenceBackward(s, t, g, { kind, device: 'cuda' })), want, `${kind} staged`);
      }
      assert.deepEqual(await gearCode(() => rl.divergenceBackward(ds, dt, g, { stats })),
        await gearCode(() => rl.divergenceBackward(s, t, g, { stats })), 'given statistics');
    }
  });

  add('tokenStatsBackward in place over a bad row: the CPU error (device tensor and staged host array)', true, async () => {
    const rows = 3, vocab = 4099;
    for (const [at, x] of [[17, NaN], [4000, Infinity]] as const) {
      const z = Float32Array.from({ length: rows * vocab }, (_, i) => Math.sin(i * 0.7) * 3);
      const y = Int32Array.of(1, 2, 3);
      const stats = rl.tokenStats({ data: z, rows, vocab }, y);
      z[vocab + at] = x;
      const grad = { logprob: Float32Array.of(1, 1, 1), entropy: Float32Array.of(0.5, 0.5, 0.5) };
      for (const given of [true, false]) {
        const opts = given ? { stats, inPlace: true } : { inPlace: true };
        const want = await gearCode(() => rl.tokenStatsBackward({ data: Float32Array.from(z), rows, vocab }, y, grad, opts));
        assert.match(want.message!, new RegExp(`^logits\\[row 1, entry ${at}\\]`));
        using dev = await rl.cuda.upload({ data: z, rows, vocab });
        assert.deepEqual(await gearCode(() => rl.tokenStatsBackward(dev, y, grad, opts)), want, `device tensor, stats given ${given}`);
        allNaN(await dev.download(), 'the logits after the failed in-place backward');
        const host = Float32Array.from(z);
        assert.deepEqual(await gearCode(() => rl.tokenStatsBackward({ data: host, rows, vocab }, y, grad, { ...opts, device: 'cuda' })),
          want, `staged host array, stats given ${given}`);
        allNaN(host, 'the host logits after the failed in-place backward');
      }
    }
  });

  add('staged host arrays over several chunks equal the device tensor (1024 x 151936 float32)', false, async () => {
    const rows = 1024, vocab = 151936;
    const z = new Float32Array(rows * vocab);
    for (let i = 0; i < z.length; i++) z[i] = ((i * 2654435761) % 1000) / 125 - 4;
    const host = { data: z, rows, vocab };
    const y = Int32Array.from({ length: rows }, (_, r) => (r * 7919) % vocab);
    using dev = await rl.cuda.upload(host);
    const a = rl.tokenStats(dev, y), b = rl.tokenStats(host, y, { device: 'cuda' }), cpu = rl.tokenStats(host, y);
    bitEqual(b.entropy, a.entropy, 'staged vs device tensor');
    close(a.entropy, cpu.entropy, 2 * TOL, 'vs CPU');
    const g = rl.tokenStatsBackward(host, y, { logprob: new Float32Array(rows).fill(1) }, { device: 'cuda' });
    using gd = rl.tokenStatsBackward(dev, y, { logprob: new Float32Array(rows).fill(1) });
    bitEqual(g.subarray(g.length - vocab), (await gd.download()).subarray(g.length - vocab), 'last row of the staged backward');
  });

  // ---- async, abort, determinism ----
  add('abort: before the call and during a large staged upload', true, async () => {
    const host = { data: new Float32Array(64 * 4096), rows: 64, vocab: 4096 };
    const before = AbortSignal.abort();
    assert.equal((await gearCode(() => rl.cuda.upload(host, { signal: before }))).code, 'ERR_ABORTED');
    assert.equal((await gearCode(() => rl.tokenStatsAsync(host, new Int32Array(64), { device: 'cuda', signal: before }))).code, 'ERR_ABORTED');
    const big = { data: new Float32Array(256 << 20), rows: 1 << 12, vocab: 1 << 16 };  // 1 GiB
    const ctl = new AbortController();
    const p = rl.cuda.upload(big, { signal: ctl.signal });
    setTimeout(() => ctl.abort(), 1);
    const r = await gearCode(async () => (await p).dispose());
    assert.ok(r.code === undefined || r.code === 'ERR_ABORTED', `aborted upload: ${JSON.stringify(r)}`);
  });

  add('bit-identical between runs and between host thread counts', true, async () => {
    const c = makeCase(5, 33, 5003, 'bfloat16');
    using dev = await rl.cuda.upload(c.host);
    const first = rl.divergence(dev, dev, { kind: 'jsd', targets: c.targets });
    const threads = rl.backend().threads;
    rl.setNumThreads(1);
    try {
      const second = rl.divergence(dev, dev, { kind: 'jsd', targets: c.targets });
      bitEqual(second.value, first.value, 'jsd value');
      bitEqual(second.studentEntropy, first.studentEntropy, 'entropy');
    } finally {
      rl.setNumThreads(threads);
    }
  });

  // ---- device tensors: lifetime, claims, devices, memory ----
  add('a disposed tensor is ERR_STATE; dispose twice is allowed; using releases it', true, async () => {
    const host = { data: new Float32Array(12), rows: 3, vocab: 4 };
    const dev = await rl.cuda.upload(host);
    const before = rl.cuda.memory().tensors;
    assert.equal(dev.disposed, false);
    dev.dispose();
    dev.dispose();
    assert.equal(dev.disposed, true);
    assert.equal(rl.cuda.memory().tensors, before - 1);
    assert.equal((await gearCode(() => rl.tokenStats(dev, new Int32Array(3)))).code, 'ERR_STATE');
    assert.equal((await gearCode(() => dev.download())).code, 'ERR_STATE');
    {
      using scoped = await rl.cuda.upload(host);
      assert.equal(rl.cuda.memory().tensors, before);
      assert.equal(scoped.disposed, false);
    }
    assert.equal(rl.cuda.memory().tensors, before - 1);
  });

  add('a tensor in use by a running async call: dispose and writes are ERR_BUSY, reads are allowed', false, async () => {
    const rows = 2048, vocab = 65536;
    const host = { data: new Float32Array(rows * vocab).fill(0.25), rows, vocab };
    using dev = await rl.cuda.upload(host);
    using other = await rl.cuda.upload({ data: new Float32Array(rows * vocab), rows, vocab });
    const running = rl.divergenceAsync(dev, other, { kind: 'jsd' });  // reads both, slowly
    assert.equal((await gearCode(() => dev.dispose())).code, 'ERR_BUSY');
    assert.equal(dev.disposed, false);
    assert.equal((await gearCode(() => rl.tokenStatsBackward(other, new Int32Array(rows), { logprob: new Float32Array(rows) }, { out: dev }))).code, 'ERR_BUSY');
    assert.equal((await gearCode(() => rl.tokenStatsBackward(dev, undefined, { entropy: new Float32Array(rows) }, { inPlace: true }))).code, 'ERR_BUSY');
    rl.tokenStats(dev, new Int32Array(rows));  // another reader
    await running;
    dev.dispose();  // free now
  });

  add('host arrays and device tensors, or tensors of two devices, in one call are ERR_DEVICE', true, async () => {
    const host = { data: new Float32Array(12), rows: 3, vocab: 4 };
    using dev = await rl.cuda.upload(host);
    assert.equal((await gearCode(() => rl.divergence(dev, host))).code, 'ERR_DEVICE');
    assert.equal((await gearCode(() => rl.divergence(host, dev))).code, 'ERR_DEVICE');
    assert.equal((await gearCode(() => rl.tokenStats(dev, new Int32Array(3), { device: 'cpu' }))).code, 'ERR_DEVICE');
    assert.equal((await gearCode(() => rl.tokenStatsBackward(host, new Int32Array(3), { logprob: new Float32Array(3) }, { out: dev as never }))).code, 'ERR_DEVICE');
    if (rl.cuda.devices().length > 1) {
      using other = await rl.cuda.upload(host, { device: 1 });
      assert.equal((await gearCode(() => rl.divergence(dev, other))).code, 'ERR_DEVICE');
      assert.equal((await gearCode(() => rl.tokenStats(other, new Int32Array(3), { device: 'cuda:0' }))).code, 'ERR_DEVICE');
    }
    assert.equal((await gearCode(() => rl.cuda.upload(host, { device: 64 }))).code, 'ERR_DEVICE');
  });

  add('uploads and downloads of pageable arrays through the staging ring (12 MiB) keep every bit', true, async () => {
    const rows = 768, vocab = 4096;  // above the size the driver's own staging takes
    const z = Float32Array.from({ length: rows * vocab }, (_, i) => Math.sin(i) * 1e3);
    using dev = await rl.cuda.upload({ data: z, rows, vocab });
    bitEqual(await dev.download(), z, 'round trip');
    const y = Int32Array.from({ length: rows }, (_, r) => (r * 31) % vocab);
    close(rl.tokenStats(dev, y).logsumexp, rl.tokenStats({ data: z, rows, vocab }, y).logsumexp, 2 * TOL, 'logsumexp vs CPU');
  });

  add('pinned host memory: uploads and downloads through allocHost equal the pageable ones', true, async () => {
    const n = 1 << 20;
    const pinned = new Float32Array(rl.cuda.allocHost(n * 4));
    for (let i = 0; i < n; i++) pinned[i] = Math.sin(i);
    const pageable = Float32Array.from(pinned);
    using a = await rl.cuda.upload({ data: pinned, rows: 256, vocab: 4096 });
    using b = await rl.cuda.upload({ data: pageable, rows: 256, vocab: 4096 });
    bitEqual(await a.download(), pageable, 'pinned upload');
    const back = new Float32Array(rl.cuda.allocHost(n * 4));
    await b.download({ out: back });
    bitEqual(back, pageable, 'pinned download');
  });

  add('out of device memory is ERR_OUT_OF_MEMORY naming the bytes; everything is freed after', false, async () => {
    const total = rl.cuda.memory().totalBytes;
    const gib = 1 << 30;
    const src = { data: new Float32Array(rl.cuda.allocHost(gib)), rows: 1 << 14, vocab: 1 << 14 };
    const held: rl.DeviceLogits[] = [];
    let err: { code?: string; message?: string } = {};
    try {
      for (let i = 0; i < Math.ceil(total / gib) + 2 && err.code === undefined; i++) {
        err = await gearCode(async () => held.push(await rl.cuda.upload(src)));
      }
    } finally {
      for (const t of held) t.dispose();
    }
    assert.equal(err.code, 'ERR_OUT_OF_MEMORY');
    assert.match(err.message!, /^device memory: expected 1073741824 bytes on cuda:0, got \d+ bytes free of \d+$/);
    rl.cuda.trim();
    assert.equal(rl.cuda.memory().tensors, 0);
  });

  add('a tensor nobody disposed is freed once collected', true, async () => {
    const gc = (globalThis as { gc?: () => void }).gc;
    if (!gc) return;  // needs node --expose-gc (the device runner passes it)
    const before = rl.cuda.memory().tensors;
    await (async () => {
      await rl.cuda.upload({ data: new Float32Array(64), rows: 4, vocab: 16 });
    })();
    for (let i = 0; i < 10 && rl.cuda.memory().tensors > before; i++) {
      gc();
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(rl.cuda.memory().tensors, before);
  });

  add("a worker's tensors are freed when it ends, disposed or not", true, async () => {
    // needs the compiled package (the device runner); under vitest the worker could not import the sources
    if (!import.meta.url.endsWith('.js')) return;
    const { Worker } = await import('node:worker_threads');
    const lib = new URL('../../ts/index.js', import.meta.url).href;
    const before = rl.cuda.memory().tensors;
    const w = new Worker(`import(${JSON.stringify(lib)}).then(async (rl) => {
      const kept = [];
      for (let i = 0; i < 4; i++) kept.push(await rl.cuda.upload({ data: new Float32Array(1 << 16), rows: 16, vocab: 4096 }));
      require('node:worker_threads').parentPort.postMessage(rl.cuda.memory().tensors);
      setInterval(() => {}, 1000);  // stays alive until terminated
    });`, { eval: true });
    const during = await new Promise<number>((res, rej) => { w.once('message', res); w.once('error', rej); });
    assert.equal(during, before + 4);
    await w.terminate();
    assert.equal(rl.cuda.memory().tensors, before);
  });

  add('gearFromLogits on device tensors equals it on host arrays', true, async () => {
    const rows = 12, vocab = 301;
    const c = makeCase(77, rows, vocab, 'float32');
    const t = teacherOf(c, 78);
    const offsets = Int32Array.of(0, 5, 12);
    const args = { advantages: Float64Array.of(1, -1), offsets, targets: c.targets };
    using s = await rl.cuda.upload(c.host);
    using tt = await rl.cuda.upload(t.host);
    const a = rl.gearFromLogits({ ...args, student: s, teacher: tt });
    const b = rl.gearFromLogits({ ...args, student: c.host, teacher: t.host });
    close(a.signals.divergence, b.signals.divergence, 2 * TOL, 'divergence');
    close(a.advantages, b.advantages, 1e-4, 'advantages');
  });

  return checks;
}
