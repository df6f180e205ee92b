// Optimizer steps and gradient clipping over many float32 tensors. AdamW reads p, g, m, v and writes
// p, m, v: 28 bytes per parameter in one pass, so it should run near the memory floor. The peer is
// torch 1.13 CPU in the same run and thread count: torch.optim.AdamW single-tensor (foreach=False, the
// arithmetic gear-rl reproduces bit for bit) and foreach=True; 1.13 has no fused CPU AdamW (AdamW has
// no `fused` argument, Adam's fused path is CUDA only), so the best of the two is the ratio.
export const name = 'optim';

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
