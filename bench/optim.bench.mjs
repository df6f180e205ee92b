// Optimizer steps and gradient clipping over many float32 tensors. AdamW reads p, g, m, v and writes
// p, m, v: 28 bytes per parameter in one pass, so it should run near the memory floor. The peer is
// torch 1.13 CPU in the same run and thread count: torch.optim.AdamW single-tensor (foreach=False, the
// arithmetic gear-rl reproduces bit for bit) and foreach=True; 1.13 has no fused CPU AdamW (AdamW has
// no `fused` argument, Adam's fused path is CUDA only), so the best of the two is the ratio.
export const name = 'optim';

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// Parity: torch (foreach=False) steps seeded random tensors whose lengths exercise SIMD tails and
// several native blocks; the same inputs go through gear-rl and every float32 of the parameters and
// state is compared bit for bit.
const PARITY_SIZES = [100003, 7, 1, 0, 4099, 196613];
const PARITY = `
import sys, numpy as np, torch
out = sys.argv[1]
torch.manual_seed(0)
sizes = [${PARITY_SIZES.join(', ')}]
cases = [
    ("adamw", dict(lr=1e-3, weight_decay=0.01)),
    ("adamw", dict(lr=3e-3, betas=(0.8, 0.95), weight_decay=0.1, amsgrad=True, eps=1e-6)),
    ("adam", dict(lr=1e-3, weight_decay=0.01)),
    ("sgd", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("sgd", dict(lr=0.05, momentum=0.9, dampening=0.3)),
]
with open(out, "wb") as f:
    for kind, kw in cases:
        ps = [torch.nn.Parameter(torch.randn(n)) for n in sizes]
        chunks = [p.detach().clone() for p in ps]
        opt = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam, "sgd": torch.optim.SGD}[kind](ps, foreach=False, **kw)
        for s in range(3):
            gs = [torch.randn(n) * (s + 1) for n in sizes]
            for p, g in zip(ps, gs):
                p.grad = g.clone()
            opt.step()
            chunks += gs
        chunks += [p.detach() for p in ps]
        for p in ps:
            st = opt.state[p]
            chunks += [st["exp_avg"], st["exp_avg_sq"]] if kind != "sgd" else [st["momentum_buffer"]]
        # exact float32 bytes, grouped per kind as the reader expects
        for c in chunks:
            f.write(c.numpy().astype(np.float32).tobytes())
print('{"ok": true}')
`;
const PARITY_CASES = [
  { kind: 'adamw', make: (rl, p) => new rl.AdamW(p, { lr: 1e-3, weightDecay: 0.01 }) },
  { kind: 'adamw', make: (rl, p) => new rl.AdamW(p, { lr: 3e-3, betas: [0.8, 0.95], weightDecay: 0.1, amsgrad: true, eps: 1e-6 }) },
  { kind: 'adam', make: (rl, p) => new rl.Adam(p, { lr: 1e-3, weightDecay: 0.01 }) },
  { kind: 'sgd', make: (rl, p) => new rl.SGD(p, { lr: 0.05, momentum: 0.9, nesterov: true, weightDecay: 0.01 }) },
  { kind: 'sgd', make: (rl, p) => new rl.SGD(p, { lr: 0.05, momentum: 0.9, dampening: 0.3 }) },
];

function parity(rl, h) {
  const dir = mkdtempSync(join(tmpdir(), 'gear-optim-'));
  try {
    const file = join(dir, 'torch.bin');
    const r = h.python(PARITY, [file]);
    if (r.error) return { error: r.error };
    const buf = readFileSync(file);
    const all = new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4);
    let off = 0;
    const take = () => PARITY_SIZES.map((n) => { const a = all.slice(off, off + n); off += n; return a; });
    let values = 0, mismatches = 0;
    const cmp = (a, b) => a.forEach((x, t) => {
      const u = new Uint32Array(x.buffer), w = new Uint32Array(b[t].buffer);
      values += u.length;
      for (let i = 0; i < u.length; i++) if (u[i] !== w[i]) mismatches++;
    });
    for (const c of PARITY_CASES) {
      const p = take();
      const grads = [take(), take(), take()];
      const want = take();
      // state chunks are written per parameter: [m, v] pairs for Adam, one buffer for SGD
      const perParam = PARITY_SIZES.map((n) => (c.kind === 'sgd' ? [n] : [n, n]));
      const stateWant = perParam.map((lens) => lens.map((n) => { const a = all.slice(off, off + n); off += n; return a; }));
      const opt = c.make(rl, p);
      for (const g of grads) opt.step(g);
      cmp(p, want);
      const st = opt.state();
      if (c.kind === 'sgd') cmp(st.momentumBuffer, stateWant.map((x) => x[0]));
      else {
        cmp(st.expAvg, stateWant.map((x) => x[0]));
        cmp(st.expAvgSq, stateWant.map((x) => x[1]));
      }
    }
    return { values, mismatches };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const TORCH = `
import gc, json, sys, time, torch
N, T, threads, reps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(threads)
n = N // T
params = [torch.nn.Parameter(torch.full((n,), 0.5)) for _ in range(T)]
for p in params:
    p.grad = torch.full((n,), 0.01)
def timed(fn):
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter(); fn(); ts.append((time.perf_counter() - t0) * 1e3)
    ts.sort()
    return ts[len(ts) // 2]
out = {"torch": torch.__version__}
for name, make in [
    ("adamw_single", lambda: torch.optim.AdamW(params, lr=1e-3, foreach=False)),
    ("adamw_foreach", lambda: torch.optim.AdamW(params, lr=1e-3, foreach=True)),
    ("sgd_single", lambda: torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=False)),
    ("sgd_foreach", lambda: torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=True)),
]:
    opt = make()
    out[name] = timed(opt.step)
    del opt
    gc.collect()
# clip with the scale active every time (max_norm below the current norm)
out["clip"] = timed(lambda: torch.nn.utils.clip_grad_norm_(params, 1e-3))
print(json.dumps(out))
`;

export default async function run({ rl, quick, h }) {
  const par = parity(rl, h);
  h.row({ op: 'AdamW/Adam/SGD parity vs torch (3 steps)', dtype: 'float32', shape: [PARITY_SIZES.reduce((a, b) => a + b, 0)],
    peer: par.error ? `torch unavailable: ${par.error}` : `torch foreach=False`,
    note: par.error ? 'not checked' : `${par.mismatches} of ${par.values} float32 values differ (params and state, 5 configurations)` });

  const N = quick ? 1_000_000 : 100_000_000;
  const T = 100;
  const n = N / T;
  const reps = quick ? 3 : 5;
  const shape = [N];
  const note = `${T} tensors of ${n}`;
  const params = Array.from({ length: T }, () => new Float32Array(n).fill(0.5));
  const grads = Array.from({ length: T }, () => new Float32Array(n).fill(0.01));

  const torch = h.python(TORCH, [N, T, h.threads, reps]);
  const tv = torch.error ? undefined : torch.torch;
  const best = (a, b) => (torch.error ? undefined : Math.min(torch[a], torch[b]));
  const which = (a, b, label) => (torch.error ? `torch unavailable: ${torch.error}`
    : `torch ${tv} ${label} (${torch[a] <= torch[b] ? 'foreach=False' : 'foreach=True'} best; single ${torch[a].toFixed(1)} ms, foreach ${torch[b].toFixed(1)} ms)`);

  let opt = new rl.AdamW(params);
  let t = await h.time(() => opt.step(grads), { reps });
  h.row({ op: 'AdamW.step', dtype: 'float32', shape, ms: t.ms, bytes: 28 * N, peer: which('adamw_single', 'adamw_foreach', 'AdamW'),
    peerMs: best('adamw_single', 'adamw_foreach'), note });
  t = await h.time(() => opt.stepAsync(grads), { reps });
  h.row({ op: 'AdamW.stepAsync', dtype: 'float32', shape, ms: t.ms, bytes: 28 * N, note });
  opt = null;

  const sgd = new rl.SGD(params, { lr: 1e-3, momentum: 0.9 });
  t = await h.time(() => sgd.step(grads), { reps });
  // reads p, g, buf; writes p, buf
  h.row({ op: 'SGD.step (momentum)', dtype: 'float32', shape, ms: t.ms, bytes: 20 * N,
    peer: which('sgd_single', 'sgd_foreach', 'SGD(momentum=0.9)'), peerMs: best('sgd_single', 'sgd_foreach'), note });

  t = await h.time(() => rl.gradNorm(grads), { reps });
  h.row({ op: 'gradNorm', dtype: 'float32', shape, ms: t.ms, bytes: 4 * N, note });
  // Clipping active on every call: one read pass for the norm, one read+write pass for the scale.
  let maxNorm = rl.gradNorm(grads) / 2;
  t = await h.time(() => {
    maxNorm = rl.clipGradNorm(grads, maxNorm) / 2;
    if (maxNorm < 1e-20) grads.forEach((g) => g.fill(0.01));
  }, { reps });
  h.row({ op: 'clipGradNorm (clipping)', dtype: 'float32', shape, ms: t.ms, bytes: 12 * N,
    peer: torch.error ? `torch unavailable: ${torch.error}` : `torch ${tv} clip_grad_norm_`, peerMs: torch.error ? undefined : torch.clip, note });
}
