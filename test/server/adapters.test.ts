// Tensor adapters (onnxruntime-node, TensorFlow.js) and the docs/adapters.md recipe that pushes
// tokenStatsBackward's gradient through a tfjs model: checked against tfjs's own autodiff of
// log-softmax and against float64 finite differences. Both runtimes are devDependencies: if one is
// missing, the import fails and so does this file (nothing is skipped).
import * as tf from '@tensorflow/tfjs';
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { throwsCode } from './helpers.js';

// --- the recipe, exactly as docs/adapters.md shows it ---------------------------------------------
/** Per-token log-probs of `targets` under `logits` (`[rows, vocab]`), differentiable in tfjs. */
function tokenLogprob(logits: tf.Tensor2D, targets: Int32Array, temperature = 1): tf.Tensor1D {
  const f = tf.customGrad((x, save) => {
    const stats = rl.tokenStats(rl.logitsFromTfjs(x as tf.Tensor), targets, { temperature });
    save([x as tf.Tensor]);
    return {
      value: tf.tensor1d(stats.logprob),
      gradFunc: (dy, saved) => {
        const g = rl.tokenStatsBackward(rl.logitsFromTfjs(saved[0]!), targets,
          { logprob: (dy as tf.Tensor).dataSync() as Float32Array }, { temperature, stats });
        return [tf.tensor(g, saved[0]!.shape)];
      },
    };
  });
  return f(logits) as tf.Tensor1D;
}
// ---------------------------------------------------------------------------------------------------

/** Deterministic pseudo-random values in [-1, 1). */
function values(n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = s / 2 ** 31 - 1;
  }
  return out;
}

describe('logitsFromTfjs', () => {
  it('views the tensor without copying; rows flatten leading dimensions; a row range is a subarray', () => {
    const t = tf.tensor3d(values(2 * 3 * 5, 1), [2, 3, 5]);
    const l = rl.logitsFromTfjs(t);
    expect([l.rows, l.vocab, l.dtype]).toEqual([6, 5, undefined]);
    expect(l.data).toBe(t.dataSync()); // the CPU backend's own array
    const part = rl.logitsFromTfjs(t, { vocab: 5, rows: { start: 2, count: 3 } });
    expect(part.rows).toBe(3);
    expect(part.data.buffer).toBe(l.data.buffer);
    expect(part.data.byteOffset).toBe(l.data.byteOffset + 2 * 5 * 4);
    expect(Array.from(part.data)).toEqual(Array.from(l.data.subarray(10, 25)));
    t.dispose();
  });

  it('coded errors for dtype, disposed tensors, shape and options', () => {
    const i = tf.tensor2d([[1, 2]], [1, 2], 'int32');
    throwsCode(() => rl.logitsFromTfjs(i), 'ERR_DTYPE', "logitsFromTfjs: tensor.dtype: expected 'float32', got \"int32\"");
    const f = tf.tensor2d([[1, 2]]);
    throwsCode(() => rl.logitsFromTfjs(f, { vocab: 3 }), 'ERR_SHAPE', 'logitsFromTfjs: vocab (last dimension): expected 3, got 2');
    throwsCode(() => rl.logitsFromTfjs(f, { rows: { start: 2 } }), 'ERR_OPTION', /rows\.start: expected an integer in \[0, 1\]/);
    throwsCode(() => rl.logitsFromTfjs(f, { other: 1 } as never), 'ERR_OPTION', /options\.other/);
    f.dispose();
    throwsCode(() => rl.logitsFromTfjs(f), 'ERR_DTYPE', /not disposed/);
    throwsCode(() => rl.logitsFromTfjs({} as never), 'ERR_DTYPE', /a tfjs Tensor/);
    i.dispose();
  });
});

describe('logitsFromOrt', () => {
  it('views float32 and float16 tensors without copying', () => {
    const data = values(2 * 4, 3);
    const t = new ort.Tensor('float32', data, [1, 2, 4]);
    const l = rl.logitsFromOrt(t);
    expect(l.data).toBe(data);
    expect([l.rows, l.vocab]).toEqual([2, 4]);
    const s = rl.tokenStats(l, new Int32Array([3, 0]));
    // float64 reference
    for (let r = 0; r < 2; r++) {
      const row = Array.from(data.subarray(r * 4, r * 4 + 4));
      const m = Math.max(...row);
      const lse = m + Math.log(row.reduce((a, x) => a + Math.exp(x - m), 0));
      expect(s.logprob[r]).toBeCloseTo(row[r === 0 ? 3 : 0]! - lse, 6);
    }
    // float16: 1.0 = 0x3c00, 0 = 0x0000, -1.0 = 0xbc00
    const words = new Uint16Array([0x3c00, 0x0000, 0xbc00]);
    const h = new ort.Tensor('float16', words, [1, 3]);
    const lh = rl.logitsFromOrt(h);
    expect(lh.data).toBe(words);
    expect(lh.dtype).toBe('float16');
    const lse = Math.log(Math.E + 1 + 1 / Math.E);
    expect(rl.tokenStats(lh, new Int32Array([0])).logprob[0]).toBeCloseTo(1 - lse, 6);
  });

  it('coded errors for element type, location and shape', () => {
    throwsCode(() => rl.logitsFromOrt(new ort.Tensor('int32', new Int32Array(2), [1, 2])), 'ERR_DTYPE', "logitsFromOrt: tensor.type: expected 'float32' or 'float16', got \"int32\"");
    throwsCode(() => rl.logitsFromOrt({ type: 'float32', dims: [2, 2], data: new Float32Array(3) }), 'ERR_SHAPE', /data\.length: expected the shape's 2 x 2 = 4, got 3/);
    throwsCode(() => rl.logitsFromOrt({ type: 'float32', dims: [2, 2], data: new Float32Array(4), location: 'gpu-buffer' }), 'ERR_DTYPE', /tensor\.location: expected 'cpu'/);
    throwsCode(() => rl.logitsFromOrt({ type: 'float32', dims: [2, -1], data: new Float32Array(4) }), 'ERR_SHAPE', /tensor\.dims\[1\]/);
    throwsCode(() => rl.logitsFromOrt({ type: 'float32', dims: [2, 0], data: new Float32Array(0) }), 'ERR_SHAPE', /vocab/);
  });
});

describe('docs/adapters.md recipe: tokenStatsBackward through a tfjs model', () => {
  const B = 4;
  const D = 3;
  const V = 6;
  const xData = values(B * D, 11);
  const wData = values(D * V, 12);
  const targets = new Int32Array([5, 0, 2, 2]);
  const adv = new Float32Array([1, -0.5, 0.25, 2]);
  const T = 0.7;

  /** Float64 loss -sum(adv * log softmax(xW / T)[target]) for finite differences. */
  function loss64(w: Float64Array): number {
    let total = 0;
    for (let b = 0; b < B; b++) {
      const z = new Float64Array(V);
      for (let v = 0; v < V; v++) {
        let s = 0;
        for (let d = 0; d < D; d++) s += xData[b * D + d]! * w[d * V + v]!;
        z[v] = s / T;
      }
      const m = Math.max(...z);
      let e = 0;
      for (let v = 0; v < V; v++) e += Math.exp(z[v]! - m);
      total -= adv[b]! * (z[targets[b]!]! - m - Math.log(e));
    }
    return total;
  }

  it('customGrad: gradient equals tfjs autodiff of log-softmax and float64 finite differences', () => {
    const x = tf.tensor2d(xData, [B, D]);
    const w = tf.variable(tf.tensor2d(wData, [D, V]), true, 'w_recipe');
    const a = tf.tensor1d(adv);
    const ours = tf.variableGrads(() => tf.neg(tf.sum(tf.mul(a, tokenLogprob(tf.matMul(x, w), targets, T)))) as tf.Scalar, [w]);
    const ref = tf.variableGrads(() => {
      const lsm = tf.logSoftmax(tf.div(tf.matMul(x, w), T));
      const picked = tf.sum(tf.mul(lsm, tf.oneHot(tf.tensor1d(targets, 'int32'), V)), 1);
      return tf.neg(tf.sum(tf.mul(a, picked))) as tf.Scalar;
    }, [w]);
    const g = ours.grads.w_recipe!.dataSync();
    const gr = ref.grads.w_recipe!.dataSync();
    expect(ours.value.dataSync()[0]).toBeCloseTo(ref.value.dataSync()[0]!, 5);
    expect(ours.value.dataSync()[0]).toBeCloseTo(loss64(Float64Array.from(wData)), 4);
    for (let i = 0; i < g.length; i++) expect(g[i]).toBeCloseTo(gr[i]!, 5);
    const w64 = Float64Array.from(wData);
    const h = 1e-5;
    for (let i = 0; i < w64.length; i++) {
      const p = Float64Array.from(w64);
      const m = Float64Array.from(w64);
      p[i]! += h;
      m[i]! -= h;
      expect(g[i]).toBeCloseTo((loss64(p) - loss64(m)) / (2 * h), 4);
    }
    tf.dispose([x, w, a, ours.value, ref.value, ours.grads.w_recipe!, ref.grads.w_recipe!]);
  });

  it('upstream gradient: sum(logits * dL/dlogits) has the same parameter gradient', () => {
    const x = tf.tensor2d(xData, [B, D]);
    const w = tf.variable(tf.tensor2d(wData, [D, V]), true, 'w_upstream');
    // dL/dlogprob = -adv, pushed to the logits by gear-rl, then into the model by tfjs
    const logits = tf.matMul(x, w);
    const dLogits = rl.tokenStatsBackward(rl.logitsFromTfjs(logits), targets, { logprob: adv.map((v) => -v) }, { temperature: T });
    const upstream = tf.tensor2d(dLogits, [B, V]);
    const { grads } = tf.variableGrads(() => tf.sum(tf.mul(tf.matMul(x, w), upstream)) as tf.Scalar, [w]);
    const g = grads.w_upstream!.dataSync();
    const w64 = Float64Array.from(wData);
    const h = 1e-5;
    for (let i = 0; i < w64.length; i++) {
      const p = Float64Array.from(w64);
      const m = Float64Array.from(w64);
      p[i]! += h;
      m[i]! -= h;
      expect(g[i]).toBeCloseTo((loss64(p) - loss64(m)) / (2 * h), 4);
    }
    tf.dispose([x, w, logits, upstream, grads.w_upstream!]);
  });
});
