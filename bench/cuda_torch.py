# PyTorch on the GPU for bench/cuda.mjs: the same logits ops with the logits already on the device (the
# peers' home), eager and torch.compile, timed with CUDA events (median of 10 after a warm-up).
# Prints one JSON line. R, V from the environment.
import json, os, sys, time

try:
    import torch
except Exception as e:  # no torch: say so, measure nothing
    print(json.dumps({'error': f'no torch: {e}'}))
    sys.exit(0)

R, V = int(os.environ.get('R', 4096)), int(os.environ.get('V', 151936))
res = {'torch': torch.__version__, 'gpu': torch.cuda.get_device_name(), 'R': R, 'V': V}
torch.manual_seed(0)


def bench(fn, reps=10):
    fn(); torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]


z = (torch.rand(R, V, device='cuda') - 0.5) * 16
z2 = (torch.rand(R, V, device='cuda') - 0.5) * 16
t = torch.randint(0, V, (R,), device='cuda')
g = torch.full((R,), 1.0 / R, device='cuda')


def stats(z):  # log-prob of the target, entropy, logsumexp (verl's logprobs_from_logits + entropy_from_logits)
    lse = torch.logsumexp(z.float(), -1)
    lp = z.gather(-1, t[:, None]).squeeze(-1).float() - lse
    p = torch.softmax(z.float(), -1)
    ent = lse - (p * z.float()).sum(-1)
    return lp, ent, lse


def rkl(a, b):
    la, lb = torch.log_softmax(a.float(), -1), torch.log_softmax(b.float(), -1)
    return (la.exp() * (la - lb)).sum(-1)


def fkl(a, b):
    la, lb = torch.log_softmax(a.float(), -1), torch.log_softmax(b.float(), -1)
    return (lb.exp() * (lb - la)).sum(-1)


def jsd(a, b, beta=0.5):  # generalised JSD (TRL's GKD): beta KL(p_t || M) + (1 - beta) KL(p_s || M)
    la, lb = torch.log_softmax(a.float(), -1), torch.log_softmax(b.float(), -1)
    lm = torch.logsumexp(torch.stack([la + torch.log1p(torch.tensor(-beta)), lb + torch.log(torch.tensor(beta))]), 0)
    return beta * (lb.exp() * (lb - lm)).sum(-1) + (1 - beta) * (la.exp() * (la - lm)).sum(-1)


def stats_backward(z):  # d(sum g * logprob)/dz with the forward's lse: g (onehot - p)
    p = torch.softmax(z.float(), -1)
    out = -g[:, None] * p
    out.scatter_add_(-1, t[:, None], g[:, None])
    return out


def rkl_backward(a, b):  # d(sum g * KL)/da = g p (la - lb - KL)
    la, lb = torch.log_softmax(a.float(), -1), torch.log_softmax(b.float(), -1)
    p = la.exp()
    kl = (p * (la - lb)).sum(-1, keepdim=True)
    return g[:, None] * p * (la - lb - kl)


def fkl_backward(a, b):  # d(sum g * KL(p_t || p_s))/da = g (p_s - p_t)
    return g[:, None] * (torch.softmax(a.float(), -1) - torch.softmax(b.float(), -1))


def jsd_backward(a, b):  # autograd of jsd's sum, as a trainer without a fused kernel gets it
    x = a.detach().float().requires_grad_()
    (g * jsd(x, b)).sum().backward()
    return x.grad


ops = {}
for dn, dt in (('f32', torch.float32), ('bf16', torch.bfloat16), ('f16', torch.float16)):
    za, zb_ = z.to(dt), z2.to(dt)
    ops[f'tokenStats_{dn}'] = (stats, (za,))
    ops[f'reverseKL_{dn}'] = (rkl, (za, zb_))
    ops[f'forwardKL_{dn}'] = (fkl, (za, zb_))
    ops[f'jsd_{dn}'] = (jsd, (za, zb_))
for dn, dt in (('f32', torch.float32), ('bf16', torch.bfloat16), ('f16', torch.float16)):
    za, zb_ = z.to(dt), z2.to(dt)
    ops[f'tokenStatsBackward_{dn}'] = (stats_backward, (za,))
    ops[f'divergenceBackward_{dn}'] = (rkl_backward, (za, zb_))
    ops[f'forwardKLBackward_{dn}'] = (fkl_backward, (za, zb_))
    ops[f'jsdBackward_{dn}'] = (jsd_backward, (za, zb_))
# each op eager, then compiled (a time limit stops the list part-way with both figures for the ops before)
for name, (fn, xs) in ops.items():
    try:
        res[f'eager_{name}_ms'] = bench(lambda: fn(*xs))
    except Exception as e:
        res[f'eager_{name}_error'] = str(e)[:200]
    if fn is jsd_backward:  # autograd inside: torch.compile of it is not the comparison
        continue
    try:
        c = torch.compile(fn)
        t0 = time.time(); c(*xs); torch.cuda.synchronize()
        res[f'compile_{name}_s'] = round(time.time() - t0, 1)
        res[f'compile_{name}_ms'] = bench(lambda: c(*xs))
    except Exception as e:
        res[f'compile_{name}_error'] = str(e)[:200]
print(json.dumps(res), flush=True)
