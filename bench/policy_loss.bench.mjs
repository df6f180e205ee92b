// policyLoss (kind ppo): the fused native pass over logprob / oldLogprob / advantages / mask producing
// d loss / d logprob. It must move 4·3 bytes read + 1 mask byte + 4 gradient bytes written per token,
// so it should run near the memory floor. The peer is verl's compute_policy_loss_vanilla written in
// torch (CPU, float32, same thread count): forward + autograd backward on the same token count, padded
// (B, T) as verl lays it out.
import { packedRows } from './lib/packed.mjs';
export const name = 'policyLoss';

/** Packed rows of `tokens` tokens: per-row advantages, 80 % of tokens valid, ratios within about ±0.4 in log. */
export function policyBatch(tokens, seed = 1) {
  const { offsets, rows, n, rnd } = packedRows(tokens, seed);
  const logprob = new Float32Array(n);
  const oldLogprob = new Float32Array(n);
  const advantages = new Float32Array(n);
  const mask = new Uint8Array(n);
  for (let r = 0; r < rows; r++) {
    const a = rnd() * 4 - 2;
    for (let i = offsets[r]; i < offsets[r + 1]; i++) {
      oldLogprob[i] = -0.05 - rnd() * 3;
      logprob[i] = oldLogprob[i] + (rnd() * 2 - 1) * 0.4;
      advantages[i] = a;
      mask[i] = rnd() < 0.8 ? 1 : 0;
    }
  }
  return { offsets, logprob, oldLogprob, advantages, mask, rows, n };
}

const TORCH = `
import json, sys, time, torch
n, T, threads, reps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(threads)
B = (n + T - 1) // T
g = torch.Generator().manual_seed(0)
old = -0.05 - 3 * torch.rand(B, T, generator=g)
lp0 = old + (torch.rand(B, T, generator=g) * 2 - 1) * 0.4
adv = (torch.rand(B, 1, generator=g) * 4 - 2).expand(B, T).contiguous()
mask = (torch.rand(B, T, generator=g) < 0.8).float()
def step():
    lp = lp0.clone().requires_grad_(True)
    # verl compute_policy_loss_vanilla (token-mean), then backward for d loss / d log_prob
    nkl = torch.clamp(lp - old, min=-20.0, max=20.0)
    ratio = torch.exp(nkl)
    l1 = -adv * ratio
    l2 = -adv * torch.clamp(ratio, 1 - 0.2, 1 + 0.28)
    c1 = torch.maximum(l1, l2)
    l3 = -adv * 3.0
    c2 = torch.min(l3, c1)
    pg = torch.where(adv < 0, c2, c1)
    loss = (pg * mask).sum() / mask.sum()
    clipfrac = ((l2 > l1).float() * mask).sum() / (mask.sum() + 1e-8)
    loss.backward()
    return loss.item(), clipfrac.item(), lp.grad
step()
ts = []
for _ in range(reps):
    t0 = time.perf_counter(); step(); ts.append((time.perf_counter() - t0) * 1e3)
ts.sort()
print(json.dumps({"ms": ts[len(ts) // 2], "B": B, "T": T, "torch": torch.__version__}))
`;

export default async function run({ rl, quick, h }) {
  const N = quick ? 1_000_000 : 10_000_000;
  const b = policyBatch(N);
  const reps = quick ? 3 : 9;
  const shape = [b.n];
  const bytes = b.n * 17; // 3 float32 reads + 1 mask byte + 1 float32 gradient write
  const note = `${b.rows} rows, 80 % of tokens valid`;
  const args = { logprob: b.logprob, oldLogprob: b.oldLogprob, advantages: b.advantages, offsets: b.offsets, mask: b.mask, clipHigh: 0.28 };

  const torch = h.python(TORCH, [b.n, 2048, h.threads, quick ? 3 : 5]);
  const peer = torch.error ? `torch unavailable: ${torch.error}` : `torch ${torch.torch} CPU (verl vanilla, fwd+bwd, ${torch.B}x${torch.T} padded)`;

  let t = await h.time(() => rl.policyLoss({ ...args, agg: 'token-mean' }), { reps, localFloor: true });
  h.row({ op: 'policyLoss(ppo, token-mean)', dtype: 'float32', shape, ms: t.ms, time: t, bytes, peer, peerMs: torch.error ? undefined : torch.ms, note });
  // The same into a reused gradient array (a training loop's buffer): no allocation or page faults.
  const out = new Float32Array(b.n);
  t = await h.time(() => rl.policyLoss({ ...args, agg: 'token-mean', out }), { reps, localFloor: true });
  h.row({ op: 'policyLoss(ppo, token-mean, out)', dtype: 'float32', shape, ms: t.ms, time: t, bytes, note: `${note}, reused gradient array` });
  t = await h.time(() => rl.policyLoss({ ...args, agg: 'seq-mean-token-mean' }), { reps, localFloor: true });
  h.row({ op: 'policyLoss(ppo, seq-mean-token-mean)', dtype: 'float32', shape, ms: t.ms, time: t, bytes, note });

  // The float64 TypeScript path on a tenth of the tokens, for scale (it serves the other kinds).
  const m = Math.floor(b.n / 10);
  const r = b.offsets.findIndex((o) => o >= m);
  const nSmall = b.offsets[r];
  const small = {
    logprob: b.logprob.subarray(0, nSmall), oldLogprob: b.oldLogprob.subarray(0, nSmall), advantages: b.advantages.subarray(0, nSmall),
    offsets: b.offsets.subarray(0, r + 1), mask: b.mask.subarray(0, nSmall), clipHigh: 0.28, native: false,
  };
  t = await h.time(() => rl.policyLoss(small), { reps: quick ? 2 : 3 });
  h.row({ op: 'policyLoss(ppo, TS path)', dtype: 'float32', shape: [nSmall], ms: t.ms, bytes: nSmall * 17, note: 'float64 TypeScript path (other kinds use it)' });
}
