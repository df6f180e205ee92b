/**
 * The demo's policy: a small causal network over the token context, written by hand so it is fast on two
 * cores, deterministic and easy to check against finite differences.
 *
 * The logits at position t (the distribution of token t) are a two-layer tanh network of the prefix
 * `x_0 .. x_{t-1}`, each token embedded by a table specific to its absolute position, plus (with
 * `tokenEmbedding`) a position-independent table T shared by all positions:
 *
 *     a1 = b1 + sum_{p<t} (E[p, x_p] + T[x_p])      h1 = tanh(a1)
 *     a2 = W2 h1 + b2                     h2 = tanh(a2)
 *     logits = Wo h2 + bo
 *
 * It is an MLP over the one-hot encoded prefix (position-aware, like a language model with learned
 * absolute positions and no attention), which suffices for the short fixed-layout episodes of the demo.
 * Parameters are `Float32Array`s (what the library's optimizers step); the arithmetic runs in float64
 * and the logits are returned as float32 rows, one row per token position.
 *
 * @module
 */
import { Rng } from '../env/rng.js';

/** Shape of the network. */
export interface PolicyConfig {
  /** Vocabulary size. */
  vocab: number;
  /** Longest context (positions with their own embedding table). */
  positions: number;
  /** Width of the first hidden layer. */
  hidden1: number;
  /** Width of the second hidden layer. */
  hidden2: number;
  /**
   * Adds a position-independent token embedding T (vocab x hidden1) to every token's positional one, so
   * "token x occurred earlier" is one feature wherever x stood. Default false.
   */
  tokenEmbedding?: boolean;
}

/**
 * Which positions to compute logits for: sequence `s` yields rows for positions `from[s] .. to[s]-1`,
 * in order, sequences concatenated. Row for position t predicts token `seqs[s][t]`.
 */
export interface RowSpec {
  /** Token sequences. */
  seqs: ArrayLike<number>[];
  /** First position per sequence (>= 1). */
  from: number[];
  /** End position (exclusive) per sequence (<= sequence length). */
  to: number[];
}

/** What {@link Policy.forward} keeps for the backward pass. */
export interface ForwardCache {
  /** The rows computed. */
  spec: RowSpec;
  /** Row-major logits, rows x vocab. */
  logits: Float32Array;
  /** Number of rows. */
  rows: number;
  /** First-layer activations per row (rows x hidden1). */
  h1: Float64Array;
  /** Second-layer activations per row (rows x hidden2). */
  h2: Float64Array;
}

/** Incremental context for sampling one sequence token by token. */
export interface Context {
  /** First-layer pre-activation of the tokens pushed so far. */
  a1: Float64Array;
  /** Number of tokens pushed. */
  length: number;
}

/** The policy network; see the module comment for the equations. */
export class Policy {
  /** Parameter tensors in the order E, b1, W2, b2, Wo, bo (then T with `tokenEmbedding`). */
  readonly params: Float32Array[];
  /** Gradient accumulators, same shapes as {@link Policy.params}. */
  readonly grads: Float32Array[];
  private readonly h1Scratch: Float64Array;
  private readonly h2Scratch: Float64Array;

  /**
   * @param cfg network shape
   * @param params existing parameters to use (shared, not copied); fresh ones are drawn from `seed` when omitted
   * @param seed initialisation seed
   */
  constructor(readonly cfg: PolicyConfig, params?: Float32Array[], seed = 1) {
    const { vocab: V, positions: P, hidden1: H1, hidden2: H2 } = cfg;
    const sizes = [P * V * H1, H1, H2 * H1, H2, V * H2, V, ...(cfg.tokenEmbedding ? [V * H1] : [])];
    if (params) {
      if (params.length !== sizes.length || params.some((p, i) => p.length !== sizes[i])) {
        throw new Error(`Policy: expected ${sizes.length} tensors of sizes ${sizes.join(',')}, got ${params.map((p) => p.length).join(',')}`);
      }
      this.params = params;
    } else {
      const rng = new Rng(seed);
      const init = (n: number, std: number) => Float32Array.from({ length: n }, () => std * rng.normal());
      // Up to `positions` embeddings are summed, so each gets a small scale.
      this.params = [init(sizes[0]!, 0.25), new Float32Array(H1), init(sizes[2]!, 1 / Math.sqrt(H1)),
        new Float32Array(H2), init(sizes[4]!, 0.5 / Math.sqrt(H2)), new Float32Array(V)];
      if (cfg.tokenEmbedding) this.params.push(init(sizes[6]!, 0.1));
    }
    this.grads = sizes.map((n) => new Float32Array(n));
    this.h1Scratch = new Float64Array(H1);
    this.h2Scratch = new Float64Array(H2);
  }

  /** Total number of scalar parameters. */
  get size(): number {
    return this.params.reduce((s, p) => s + p.length, 0);
  }

  /** Copies the parameters (a checkpoint). */
  snapshot(): Float32Array[] {
    return this.params.map((p) => p.slice());
  }

  /** Overwrites the parameters with a checkpoint. */
  load(ckpt: Float32Array[]): void {
    ckpt.forEach((p, i) => this.params[i]!.set(p));
  }

  /** Zeroes the gradient accumulators. */
  zeroGrad(): void {
    for (const g of this.grads) g.fill(0);
  }

  /** An empty context (no tokens yet). */
  context(): Context {
    return { a1: Float64Array.from(this.params[1]!), length: 0 };
  }

  /** A copy of a context: both can be extended independently (rollouts from one prefix). */
  fork(ctx: Context): Context {
    return { a1: Float64Array.from(ctx.a1), length: ctx.length };
  }

  /** Appends token `x` at the context's next position. */
  push(ctx: Context, x: number): void {
    const { vocab: V, positions: P, hidden1: H1 } = this.cfg;
    if (ctx.length >= P) throw new Error(`Policy.push: context longer than ${P} positions`);
    if (!(x >= 0 && x < V)) throw new Error(`Policy.push: token id ${x} outside [0, ${V})`);
    const E = this.params[0]!;
    const base = (ctx.length * V + x) * H1;
    for (let j = 0; j < H1; j++) ctx.a1[j]! += E[base + j]!;
    const T = this.params[6];
    if (T) for (let j = 0, b = x * H1; j < H1; j++) ctx.a1[j]! += T[b + j]!;
    ctx.length++;
  }

  /** Logits of the next token given the context, written into `out` (length vocab) at `offset`. */
  next(ctx: Context, out: Float32Array, offset = 0): void {
    this.head(ctx.a1, out, offset, this.h1Scratch, 0, this.h2Scratch, 0);
  }

  private head(a1: Float64Array, out: Float32Array, outOff: number,
    h1: Float64Array, h1Off: number, h2: Float64Array, h2Off: number): void {
    const { vocab: V, hidden1: H1, hidden2: H2 } = this.cfg;
    const W2 = this.params[2]!, b2 = this.params[3]!, Wo = this.params[4]!, bo = this.params[5]!;
    for (let j = 0; j < H1; j++) h1[h1Off + j] = Math.tanh(a1[j]!);
    for (let k = 0; k < H2; k++) {
      let s = b2[k]!;
      const w = k * H1;
      for (let j = 0; j < H1; j++) s += W2[w + j]! * h1[h1Off + j]!;
      h2[h2Off + k] = Math.tanh(s);
    }
    for (let v = 0; v < V; v++) {
      let s = bo[v]!;
      const w = v * H2;
      for (let k = 0; k < H2; k++) s += Wo[w + k]! * h2[h2Off + k]!;
      out[outOff + v] = s;
    }
  }

  /** Logits for every requested row (see {@link RowSpec}), with the activations kept for {@link Policy.backward}. */
  forward(spec: RowSpec): ForwardCache {
    const { vocab: V, hidden1: H1, hidden2: H2 } = this.cfg;
    let rows = 0;
    spec.seqs.forEach((s, i) => {
      const from = spec.from[i]!, to = spec.to[i]!;
      if (!(from >= 1 && to >= from && to <= s.length)) throw new Error(`Policy.forward: bad row range [${from}, ${to}) for a sequence of ${s.length}`);
      rows += to - from;
    });
    const logits = new Float32Array(rows * V);
    const h1 = new Float64Array(rows * H1);
    const h2 = new Float64Array(rows * H2);
    let r = 0;
    spec.seqs.forEach((s, i) => {
      const ctx = this.context();
      for (let t = 0; t < spec.to[i]!; t++) {
        if (t >= spec.from[i]!) {
          this.head(ctx.a1, logits, r * V, h1, r * H1, h2, r * H2);
          r++;
        }
        if (t < spec.to[i]! - 1) this.push(ctx, s[t]!);
      }
    });
    return { spec, logits, rows, h1, h2 };
  }

  /**
   * Accumulates d loss / d parameters into {@link Policy.grads} from d loss / d logits (rows x vocab,
   * the rows of `cache`). Rows whose gradient is all zero (masked tokens) are skipped.
   */
  backward(cache: ForwardCache, dlogits: Float32Array): void {
    const { vocab: V, hidden1: H1, hidden2: H2 } = this.cfg;
    if (dlogits.length !== cache.rows * V) throw new Error(`Policy.backward: expected ${cache.rows * V} gradients, got ${dlogits.length}`);
    const W2 = this.params[2]!, Wo = this.params[4]!;
    const [gE, gb1, gW2, gb2, gWo, gbo] = this.grads as [Float32Array, Float32Array, Float32Array, Float32Array, Float32Array, Float32Array];
    const gT = this.grads[6];
    const da1 = new Float64Array(cache.rows * H1);
    const dh2 = new Float64Array(H2);
    const da2 = new Float64Array(H2);
    const H1a = cache.h1, H2a = cache.h2;
    for (let r = 0; r < cache.rows; r++) {
      const g = r * V;
      let any = false;
      for (let v = 0; v < V; v++) if (dlogits[g + v] !== 0) { any = true; break; }
      if (!any) continue;
      const h1o = r * H1, h2o = r * H2;
      dh2.fill(0);
      for (let v = 0; v < V; v++) {
        const d = dlogits[g + v]!;
        if (d === 0) continue;
        gbo[v]! += d;
        const w = v * H2;
        for (let k = 0; k < H2; k++) {
          gWo[w + k]! += d * H2a[h2o + k]!;
          dh2[k]! += d * Wo[w + k]!;
        }
      }
      for (let k = 0; k < H2; k++) {
        const h = H2a[h2o + k]!;
        const d = dh2[k]! * (1 - h * h);
        da2[k] = d;
        gb2[k]! += d;
      }
      for (let k = 0; k < H2; k++) {
        const d = da2[k]!;
        if (d === 0) continue;
        const w = k * H1;
        for (let j = 0; j < H1; j++) {
          gW2[w + j]! += d * H1a[h1o + j]!;
          da1[h1o + j]! += d * W2[w + j]!;
        }
      }
      for (let j = 0; j < H1; j++) {
        const h = H1a[h1o + j]!;
        const d = da1[h1o + j]! * (1 - h * h);
        da1[h1o + j] = d;
        gb1[j]! += d;
      }
    }
    // E[p, x_p] (and T[x_p]) feeds every row at a later position of the same sequence: a reverse running sum.
    const run = new Float64Array(H1);
    let r0 = 0;
    cache.spec.seqs.forEach((s, i) => {
      const from = cache.spec.from[i]!, to = cache.spec.to[i]!;
      run.fill(0);
      for (let p = to - 2; p >= 0; p--) {
        const row = p + 1; // rows at positions > p start with position p+1
        if (row >= from) {
          const o = (r0 + row - from) * H1;
          for (let j = 0; j < H1; j++) run[j]! += da1[o + j]!;
        }
        const base = (p * V + s[p]!) * H1;
        for (let j = 0; j < H1; j++) gE[base + j]! += run[j]!;
        if (gT) for (let j = 0, b = s[p]! * H1; j < H1; j++) gT[b + j]! += run[j]!;
      }
      r0 += to - from;
    });
  }
}
