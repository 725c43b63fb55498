"""Attention with dropout at MiniGPT's shapes: flashtile vs SDPA (cuDNN, flash), on the GPU.

    PYTHONPATH=src python scripts/bench_dropout.py [--shapes 64x256,16x1024] [--csv F]

Per (batch x ctx, dropout 0 / 0.2, backend), 6 heads of dim 64 (--heads, --head-dim),
causal, bf16: GPU time of the forward and of forward+backward (the attention kernels
only, summed from the torch profiler over ``--reps`` calls, per call), and wall time per
call (CUDA events around ``--reps`` back-to-back calls: this includes the host when the
host is slower than the kernels). Backward = forward+backward - forward. The numbers
that matter for the MiniGPT step are the GPU backward (dropout costs there three times:
forward, dK/dV and dQ kernels each redraw the mask) and the host wall time per call.

To compare dropout RNG variants, run it once per source tree (PYTHONPATH=<tree>/src).
"""

from __future__ import annotations

import argparse
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

from flashtile.bench.harness import events_us
from flashtile.bench.report import write_rows

BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}


def make_fn(backend, q, k, v, p, grad):
    """One attention call (and its backward when ``grad``)."""
    if backend == "flashtile":
        import flashtile

        def call():
            return flashtile.flash_attn_func(q, k, v, causal=True, dropout_p=p)
    else:
        qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))  # (B, H, S, D) views

        def call():
            with sdpa_kernel(BACKENDS[backend]):
                return F.scaled_dot_product_attention(qt, kt, vt, is_causal=True, dropout_p=p)
    if not grad:
        def fwd():
            with torch.no_grad():
                call()
        return fwd
    dout = None

    def fwd_bwd():
        nonlocal dout
        out = call()
        if dout is None:
            dout = torch.randn_like(out)
        torch.autograd.grad(out, (q, k, v), dout)
    return fwd_bwd


def gpu_us(fn, reps, per_kernel=None):
    """Device time per call: every CUDA kernel and memset the call ran. ``per_kernel``
    (a dict) receives each kernel's us per call by name."""
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    events = prof.key_averages()
    if per_kernel is not None:
        for e in events:
            if e.self_device_time_total > 0:
                per_kernel[e.key] = e.self_device_time_total / reps
    return sum(e.self_device_time_total for e in events) / reps


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="64x256,16x1024")
    ap.add_argument("--backends", default="flashtile,cudnn,flash")
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--tag", default="", help="a label for this tree (CSV column)")
    ap.add_argument("--csv")
    ap.add_argument("--kernels", action="store_true",
                    help="also print flashtile's forward+backward per kernel (us per call)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_dropout: needs a GPU")
        return 2
    rows = []
    print("| tree | shape | dropout | backend | fwd GPU us | bwd GPU us | fwd+bwd wall us |")
    print("|---|---|---|---|---|---|---|")
    for shape in args.shapes.split(","):
        b, s = map(int, shape.split("x"))
        for p in (0.0, 0.2):
            for backend in args.backends.split(","):
                torch.manual_seed(0)
                q, k, v = (torch.randn(b, s, args.heads, args.head_dim, device="cuda",
                                       dtype=torch.bfloat16, requires_grad=True)
                           for _ in range(3))
                try:
                    f, fb = make_fn(backend, q, k, v, p, False), make_fn(backend, q, k, v, p,
                                                                         True)
                    for _ in range(5):
                        f()
                        fb()
                    torch.cuda.synchronize()
                    split = {} if args.kernels and backend == "flashtile" else None
                    fwd, both = gpu_us(f, args.reps), gpu_us(fb, args.reps, split)
                    wall = events_us(fb, args.reps)
                except Exception as e:  # a backend without dropout support, say
                    print(f"| {args.tag} | {shape} | {p} | {backend} | failed: "
                          f"{type(e).__name__}: {str(e)[:80]} | | |")
                    continue
                rows.append(dict(tree=args.tag, shape=shape, heads=args.heads,
                                 head_dim=args.head_dim, dropout=p, backend=backend,
                                 fwd_gpu_us=round(fwd, 1), bwd_gpu_us=round(both - fwd, 1),
                                 fwd_bwd_wall_us=round(wall, 1)))
                print(f"| {args.tag} | {shape} | {p} | {backend} | {fwd:.1f} | "
                      f"{both - fwd:.1f} | {wall:.1f} |", flush=True)
                if split:
                    print("    per kernel (forward+backward, us per call): " + "; ".join(
                        f"{name[:40]} {us:.1f}" for name, us in
                        sorted(split.items(), key=lambda kv: -kv[1])), flush=True)
    if args.csv and rows:
        write_rows(args.csv, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
