/**
 * The study's policy: a token embedding, one GRU layer and a linear read-out, written by hand so that
 * it runs anywhere Node does and can be checked against finite differences. Unlike the demo's
 * policy (a function of the whole prefix), this one must carry what it has seen in its state: the code
 * digits and the first digit it will need at the end of a long episode.
 *
 * With x_t the embedding of token t and h_0 = 0 (PyTorch's GRU convention):
 *
 *     r = σ(Wi_r x + bi_r + Wh_r h + bh_r)
 *     z = σ(Wi_z x + bi_z + Wh_z h + bh_z)
 *     n = tanh(Wi_n x + bi_n + r ⊙ (Wh_n h + bh_n))
 *     h' = (1 − z) ⊙ n + z ⊙ h
 *     logits = Wo h' + bo        (the distribution of the NEXT token)
 *
 * Parameters are `Float32Array`s (what the library's optimizers step); the arithmetic runs in float64.
 *
 * @module
 */
import { Rng } from '../env/rng.js';

/** Shape of the network. */
export interface GruConfig {
  /** Vocabulary size. */
  vocab: number;
  /** Embedding width. */
  embed: number;
  /** Hidden state width. */
  hidden: number;
}

/**
 * The rows to compute: sequence `s` yields rows for positions `from[s] .. to[s]-1`, sequences
 * concatenated; the row of position t is the distribution of token `seqs[s][t]` given the tokens before.
 */
export interface GruRows {
  /** Token sequences. */
  seqs: ArrayLike<number>[];
  /** First position per sequence (≥ 1). */
  from: number[];
  /** End position (exclusive) per sequence (≤ its length). */
  to: number[];
}

/** What {@link Gru.forward} keeps for the backward pass. */
export interface GruCache {
  /** The rows computed. */
  spec: GruRows;
  /** Row-major logits, rows × vocab, in float64. */
  logits: Float64Array;
  /** Number of rows. */
  rows: number;
  /** Per sequence: the states and gates of every step (step t consumed token t). */
  steps: { h: Float64Array; r: Float64Array; z: Float64Array; n: Float64Array; hn: Float64Array }[];
}

const sigmoid = (x: number): number => 1 / (1 + Math.exp(-x));

/** The GRU policy; see the module comment for the equations. */
export class Gru {
  /** Parameters in the order E, Wi, bi, Wh, bh, Wo, bo. */
  readonly params: Float32Array[];
  /** Gradient accumulators, same shapes as {@link Gru.params}. */
  readonly grads: Float32Array[];

  /**
   * @param cfg network shape
   * @param seed initialisation seed (uniform ±1/√fan-in, as PyTorch's GRU)
   * @param params existing parameters to use (shared, not copied)
   */
  constructor(readonly cfg: GruConfig, seed = 1, params?: Float32Array[]) {
    const { vocab: V, embed: D, hidden: H } = cfg;
    const sizes = [V * D, 3 * H * D, 3 * H, 3 * H * H, 3 * H, V * H, V];
    if (params) {
      if (params.length !== sizes.length || params.some((p, i) => p.length !== sizes[i])) throw new Error('Gru: parameter shapes do not match the config');
      this.params = params;
    } else {
      const rng = new Rng(seed);
      const k = 1 / Math.sqrt(H);
      const scale = [1, k, k, k, k, k, 0];
      this.params = sizes.map((n, i) => Float32Array.from({ length: n }, () => (i === 0 ? rng.normal() * 0.5 : (2 * rng.next() - 1) * scale[i]!)));
    }
    this.grads = sizes.map((n) => new Float32Array(n));
  }

  /** A copy with its own parameters. */
  clone(): Gru {
    return new Gru(this.cfg, 0, this.params.map((p) => p.slice()));
  }

  /** Sets every gradient to 0. */
  zeroGrad(): void {
    for (const g of this.grads) g.fill(0);
  }

  /** One step: the state after consuming `token` from state `h` (written into the returned gates). */
  private cell(token: number, h: Float64Array) {
    const { embed: D, hidden: H } = this.cfg;
    const [E, Wi, bi, Wh, bh] = this.params as [Float32Array, Float32Array, Float32Array, Float32Array, Float32Array];
    const r = new Float64Array(H), z = new Float64Array(H), n = new Float64Array(H), hn = new Float64Array(H), out = new Float64Array(H);
    const xo = token * D;
    for (let j = 0; j < H; j++) {
      let ar = bi[j]! + bh[j]!, az = bi[H + j]! + bh[H + j]!, an = bi[2 * H + j]!, ahn = bh[2 * H + j]!;
      const ir = j * D, iz = (H + j) * D, inn = (2 * H + j) * D;
      for (let d = 0; d < D; d++) {
        const x = E[xo + d]!;
        ar += Wi[ir + d]! * x; az += Wi[iz + d]! * x; an += Wi[inn + d]! * x;
      }
      const hr = j * H, hz = (H + j) * H, hnn = (2 * H + j) * H;
      for (let k = 0; k < H; k++) {
        const hk = h[k]!;
        ar += Wh[hr + k]! * hk; az += Wh[hz + k]! * hk; ahn += Wh[hnn + k]! * hk;
      }
      r[j] = sigmoid(ar); z[j] = sigmoid(az); hn[j] = ahn;
      n[j] = Math.tanh(an + r[j]! * ahn);
      out[j] = (1 - z[j]!) * n[j]! + z[j]! * h[j]!;
    }
    return { h: out, r, z, n, hn };
  }

  /** Logits of the next token from state `h`, written into `dst` at `off`. */
  private readout(h: Float64Array, dst: Float64Array | Float32Array, off: number): void {
    const { vocab: V, hidden: H } = this.cfg;
    const Wo = this.params[5]!, bo = this.params[6]!;
    for (let v = 0; v < V; v++) {
      let a = bo[v]!;
      for (let k = 0; k < H; k++) a += Wo[v * H + k]! * h[k]!;
      dst[off + v] = a;
    }
  }

  /** A fresh state for token-by-token sampling. */
  start(): Float64Array {
    return new Float64Array(this.cfg.hidden);
  }

  /** Consumes `token` from state `h`; returns the new state and writes the next-token logits into `logits`. */
  step(h: Float64Array, token: number, logits: Float64Array): Float64Array {
    const s = this.cell(token, h).h;
    this.readout(s, logits, 0);
    return s;
  }

  /** Logits of the rows in `spec`, with what the backward pass needs. */
  forward(spec: GruRows): GruCache {
    const V = this.cfg.vocab;
    let rows = 0;
    for (let s = 0; s < spec.seqs.length; s++) rows += spec.to[s]! - spec.from[s]!;
    const logits = new Float64Array(rows * V);
    const steps: GruCache['steps'] = [];
    let row = 0;
    for (let s = 0; s < spec.seqs.length; s++) {
      const seq = spec.seqs[s]!, from = spec.from[s]!, to = spec.to[s]!;
      if (!(from >= 1 && to <= seq.length && from <= to)) throw new Error(`Gru.forward: bad row range for sequence ${s}`);
      let h = this.start();
      for (let t = 0; t + 1 < to; t++) {
        const g = this.cell(seq[t]!, h);
        steps.push(g);
        h = g.h;
        if (t + 1 >= from) this.readout(h, logits, (row++) * V);
      }
    }
    return { spec, logits, rows, steps };
  }

  /** Adds d(loss)/d(params) to {@link Gru.grads}, given d(loss)/d(logits) for the rows of `cache`. */
  backward(cache: GruCache, dlogits: ArrayLike<number>): void {
    const { vocab: V, embed: D, hidden: H } = this.cfg;
    const [, Wi, , Wh, , Wo] = this.params as [Float32Array, Float32Array, Float32Array, Float32Array, Float32Array, Float32Array];
    const [gE, gWi, gbi, gWh, gbh, gWo, gbo] = this.grads as [Float32Array, Float32Array, Float32Array, Float32Array, Float32Array, Float32Array, Float32Array];
    // Accumulate in float64, add to the float32 grads once at the end.
    const acc = this.grads.map((g) => new Float64Array(g.length));
    const [aE, aWi, abi, aWh, abh, aWo, abo] = acc as [Float64Array, Float64Array, Float64Array, Float64Array, Float64Array, Float64Array, Float64Array];
    const { spec, steps } = cache;
    let stepBase = 0, rowBase = 0;
    const gi = new Float64Array(3 * H), gh = new Float64Array(3 * H);
    for (let s = 0; s < spec.seqs.length; s++) {
      const seq = spec.seqs[s]!, from = spec.from[s]!, to = spec.to[s]!;
      const nSteps = Math.max(0, to - 1);
      let dh = new Float64Array(H);
      for (let t = nSteps - 1; t >= 0; t--) {
        const g = steps[stepBase + t]!;
        // The read-out of the row this step produced (position t + 1).
        if (t + 1 >= from) {
          const row = rowBase + (t + 1 - from);
          for (let v = 0; v < V; v++) {
            const dl = dlogits[row * V + v]!;
            if (dl === 0) continue;
            abo[v] += dl;
            for (let k = 0; k < H; k++) { aWo[v * H + k] += dl * g.h[k]!; dh[k] += dl * Wo[v * H + k]!; }
          }
        }
        const hPrev = t > 0 ? steps[stepBase + t - 1]!.h : null;
        const dPrev = new Float64Array(H);
        for (let j = 0; j < H; j++) {
          const hp = hPrev ? hPrev[j]! : 0;
          const z = g.z[j]!, n = g.n[j]!, r = g.r[j]!;
          const dz = dh[j]! * (hp - n), dn = dh[j]! * (1 - z);
          dPrev[j] = dh[j]! * z;
          const dnPre = dn * (1 - n * n);
          const dr = dnPre * g.hn[j]!;
          gi[j] = dr * r * (1 - r); gi[H + j] = dz * z * (1 - z); gi[2 * H + j] = dnPre;
          gh[j] = gi[j]!; gh[H + j] = gi[H + j]!; gh[2 * H + j] = dnPre * r;
        }
        const xo = seq[t]! * D;
        const E = this.params[0]!;
        for (let q = 0; q < 3 * H; q++) {
          const a = gi[q]!, b = gh[q]!;
          abi[q] += a; abh[q] += b;
          for (let d = 0; d < D; d++) { aWi[q * D + d] += a * E[xo + d]!; aE[xo + d] += a * Wi[q * D + d]!; }
          if (hPrev) for (let k = 0; k < H; k++) { aWh[q * H + k] += b * hPrev[k]!; dPrev[k] += b * Wh[q * H + k]!; }
        }
        dh = dPrev;
      }
      stepBase += nSteps;
      rowBase += to - from;
    }
    const out = [gE, gWi, gbi, gWh, gbh, gWo, gbo];
    for (let i = 0; i < out.length; i++) { const o = out[i]!, a = acc[i]!; for (let k = 0; k < o.length; k++) o[k] += a[k]!; }
  }
}
