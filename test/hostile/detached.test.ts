// A typed array whose buffer was detached (transferred to a worker, `transfer()`ed) reads as empty.
// Passed directly, it is refused with ERR_SHAPE ("expected an attached buffer, got a detached one")
// wherever an array is taken, an empty one included: before, it passed as an empty array in most
// places and threw a TypeError from inside in others (an iteration or a copy of it). Each call below
// accepts its empty inputs; each of its typed arrays in turn is detached and the call must refuse it.
// The raw addon refuses one too.
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import * as diagnostics from '../../ts/diagnostics.js';
import * as report from '../../ts/report.js';
import * as similarity from '../../ts/similarity.js';

type Call = () => [(...a: never[]) => unknown, unknown[]];

const f32 = (...x: number[]) => Float32Array.from(x);
const f64 = (...x: number[]) => Float64Array.from(x);
const i32 = (...x: number[]) => Int32Array.from(x);
const u8 = (...x: number[]) => Uint8Array.from(x);
const fn = <F>(f: F) => f as unknown as (...a: never[]) => unknown;
const detach = (x: ArrayBufferView) => { structuredClone(x.buffer, { transfer: [x.buffer as ArrayBuffer] }); };
const emptyLogits = () => ({ data: f32(), rows: 0, vocab: 4 });

/** Calls that accept zero tokens, zero rows or empty lists. */
function table(): [string, Call][] {
  const T: [string, Call][] = [];
  const add = (name: string, make: Call) => T.push([name, make]);
  const zero = () => ({ logprob: f32(), oldLogprob: f32(), advantages: f32(), offsets: i32(0), mask: u8() });
  add('policyLoss', () => [fn(rl.policyLoss), [zero()]]);
  add('policyLoss gspo f64', () => [fn(rl.policyLoss), [{ ...zero(), logprob: f64(), oldLogprob: f64(), advantages: f64(), kind: 'gspo', out: f64() }]]);
  add('trlLoss', () => [fn(rl.trlLoss), [{ ...zero(), advantages: f64(), refLogprob: f32(), entropy: f32(), beta: 0.1, entropyCoef: 0.1 }]]);
  add('klPenalty', () => [fn(rl.klPenalty), [{ logprob: f32(), refLogprob: f32(), estimator: 'k3' }]]);
  add('klLoss', () => [fn(rl.klLoss), [{ logprob: f32(), refLogprob: f32(), offsets: i32(0), mask: u8() }]]);
  add('applyKlPenalty', () => [fn(rl.applyKlPenalty), [{
    tokenRewards: f32(), oldLogprob: f32(), refLogprob: f32(), offsets: i32(0), mask: u8(), controller: new rl.FixedKlController(0.1),
  }]]);
  add('aggregate', () => [fn(rl.aggregate), [f32(), i32(0), u8(), 'token-mean']]);
  add('effectiveRowWeights', () => [fn(diagnostics.effectiveRowWeights), [i32(0), u8(), 'seq-mean-token-mean']]);
  add('entropyBonus', () => [fn(rl.entropyBonus), [f32(), i32(0), u8(), 0.1]]);
  add('lossGradToLogits', () => [fn(rl.lossGradToLogits), [{
    logits: emptyLogits(), targets: i32(), gradLogprob: f32(), gradEntropy: f32(), entropyCoef: 0.1, offsets: i32(0), mask: u8(), out: f32(),
  }]]);
  add('segmentReduce', () => [fn(rl.segmentReduce), [f32(), i32(0), 'sum', u8()]]);
  add('segmentBroadcast', () => [fn(rl.segmentBroadcast), [f64(), i32(0), u8(), { out: f32() }]]);
  add('tokenStats', () => [fn(rl.tokenStats), [emptyLogits(), i32(), { out: { logprob: f32(), entropy: f32() } }]]);
  add('divergence', () => [fn(rl.divergence), [emptyLogits(), emptyLogits(), { kind: 'jsd', targets: i32() }]]);
  add('gatherRows', () => [fn(rl.gatherRows), [emptyLogits(), f64()]]);
  add('sampledTokenKl', () => [fn(rl.sampledTokenKl), [{ studentLogprob: f32(), teacherLogprob: f64() }]]);
  add('maskedMean', () => [fn(diagnostics.maskedMean), [f64(), u8()]]);
  add('maskedRowMean', () => [fn(diagnostics.maskedRowMean), [f32(), i32(0), u8()]]);
  add('quantileLinear', () => [fn(diagnostics.quantileLinear), [f64(), 0.5]]);
  add('groupIndex', () => [fn(diagnostics.groupIndex), [i32()]]);
  for (const precision of ['float64', 'float32'] as const) {
    add(`grpo ${precision}`, () => [fn(rl.grpo), [{ rewards: f64(), groups: i32(), precision }]]);
    add(`grpo ${precision}, list groups`, () => [fn(rl.grpo), [{ rewards: f32(), groups: [], precision }]]);
  }
  add('rloo', () => [fn(rl.rloo), [{ rewards: f64(), groups: i32() }]]);
  add('opo', () => [fn(rl.opo), [{ rewards: f64(), groups: [], lengths: f64() }]]);
  add('gigpo', () => [fn(rl.gigpo), [{ episodeRewards: f64(), stepRewards: f64(), trajectories: i32(), groups: i32(), anchors: i32() }]]);
  add('stepGroups', () => [fn(rl.stepGroups), [i32(), i32()]]);
  add('anchorIds', () => [fn(similarity.anchorIds), [i32()]]);
  add('remax', () => [fn(rl.remax), [{ tokenRewards: f64(), offsets: i32(0), mask: u8(), baselines: f64() }]]);
  add('rowLengths', () => [fn(rl.rowLengths), [i32(0), u8()]]);
  add('lastTokenValues', () => [fn(rl.lastTokenValues), [f64(), i32(0), u8()]]);
  const batch = () => ({
    advantages: f64(), offsets: i32(0), divergence: f32(), entropy: f32(), mask: u8(), logratio: f32(),
  });
  add('gear', () => [fn(rl.gear), [{ ...batch(), out: { advantages: f32(), weights: f32(), segmentId: i32() } }]]);
  const withResult = () => {
    const b = batch();
    return { ...b, result: { ...rl.gear(batch()), anchors: i32() } };
  };
  add('toSavedBatch', () => [fn(report.toSavedBatch), [withResult()]]);
  add('saveBatch', () => [fn(report.saveBatch), [join(tmpdir(), `gear-detached-${process.pid}.json`), withResult()]]);
  add('renderReport', () => [fn(report.renderReport), [withResult()]]);
  add('renderReport without a result', () => [fn(report.renderReport), [batch()]]);
  add('zeroGrad', () => [fn(rl.zeroGrad), [[f32()]]]);
  add('gradNorm', () => [fn(rl.gradNorm), [[f32()]]]);
  add('clipGradNorm', () => [fn(rl.clipGradNorm), [[f32()], 1]]);
  add('SGD', () => [fn((p: Float32Array[]) => new rl.SGD(p, { lr: 0.1 })), [[f32()]]]);
  add('AdamW step', () => [fn((g: Float32Array[]) => new rl.AdamW([f32()]).step(g)), [[f32()]]]);
  add('logitsFromOrt', () => [fn(rl.logitsFromOrt), [{ type: 'float32', dims: [0, 4], data: f32(), location: 'cpu' }]]);
  add('byteLevelKey', () => [fn(rl.byteLevelKey), [u8()]]);
  return T;
}

/** Every typed array of an argument tree, by path. */
function arrays(x: unknown, pre: string[] = [], out: string[][] = []): string[][] {
  if (ArrayBuffer.isView(x)) out.push(pre);
  else if (x !== null && typeof x === 'object' && (Array.isArray(x) || Object.getPrototypeOf(x) === Object.prototype)) {
    for (const k of Object.keys(x)) arrays((x as Record<string, unknown>)[k], [...pre, k], out);
  }
  return out;
}

function at(args: unknown[], path: string[]): ArrayBufferView {
  let o: unknown = args;
  for (const k of path) o = (o as Record<string, unknown>)[k];
  return o as ArrayBufferView;
}

/** The call's outcome: 'ok', a GearError's code and message, or what else it threw. */
function outcome(f: (...a: never[]) => unknown, args: unknown[]): string {
  try {
    f(...(args as never[]));
    return 'ok';
  } catch (e) {
    if (e instanceof rl.GearError) return `${e.code} ${e.message}`;
    return `${(e as Error)?.constructor?.name}: ${(e as Error)?.message}`;
  }
}

describe('a detached typed array passed where an empty one is accepted', () => {
  for (const [name, make] of table()) {
    it(name, () => {
      const [f0, a0] = make();
      expect(outcome(f0, a0), 'the call accepts its empty inputs').toBe('ok');
      const paths = arrays(a0);
      expect(paths.length).toBeGreaterThan(0);
      const found: string[] = [];
      for (const p of paths) {
        const [f, args] = make();
        detach(at(args, p));
        const got = outcome(f, args);
        if (!/^ERR_SHAPE .*: expected an attached buffer, got a detached one$/.test(got)) found.push(`${p.join('.')} detached: ${got}`);
      }
      expect(found).toEqual([]);
    });
  }

  it('an array whose resizable buffer shrank below it is refused too', () => {
    const buf = new ArrayBuffer(16, { maxByteLength: 16 });
    const x = new Float64Array(buf, 8, 1);
    buf.resize(4); // x now lies past the end of its buffer: it reads as empty, and iterating it throws
    expect(x.length).toBe(0);
    expect(outcome(fn(diagnostics.quantileLinear), [x, 0.5])).toBe('ERR_SHAPE values: expected an array within its buffer, got one its resizable buffer shrank below');
    expect(outcome(fn(rl.grpo), [{ rewards: x, groups: [] }])).toMatch(/^ERR_SHAPE grpo: rewards: expected an array within its buffer/);
    // a length-tracking view of a buffer shrunk to nothing is an empty array like any other
    const y = new Float64Array(new ArrayBuffer(8, { maxByteLength: 8 }));
    (y.buffer as ArrayBuffer).resize(0);
    expect(outcome(fn(diagnostics.quantileLinear), [y, 0.5])).toBe('ok');
  });

  it('the raw addon refuses a detached array of length 0 as it refuses one of the wrong length', () => {
    const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
    const NATIVE = pathToFileURL(join(ROOT, 'dist', 'core', 'addon.js')).href;
    const code = `import { native } from ${JSON.stringify(NATIVE)};
const err = (f) => { try { f(); return 'no error'; } catch (e) { return e.code + ' ' + e.message; } };
const gone = () => { const a = new Float32Array(0); structuredClone(a.buffer, { transfer: [a.buffer] }); return a; };
console.log(JSON.stringify({
  reduce: err(() => native.segmentReduce({ values: gone(), offsets: Int32Array.of(0), mask: null, op: 0 })),
  norm: err(() => native.gradNorm({ grads: [gone()] })),
  empty: err(() => native.segmentReduce({ values: new Float32Array(0), offsets: Int32Array.of(0), mask: null, op: 0 })),
}));`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
    expect(r.status, r.stderr).toBe(0);
    const got = JSON.parse(r.stdout.trim().split('\n').pop()!) as Record<string, string>;
    expect(got.reduce).toBe('ERR_SHAPE values: expected an attached buffer, got a detached one');
    expect(got.norm).toMatch(/^ERR_SHAPE grads\[0\]: expected an attached buffer, got a detached one$/);
    expect(got.empty).toBe('no error');
  });
});
