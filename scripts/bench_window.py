"""Sliding-window forward on the GPU: the Gluon kernels (``hopper_fwd.window_config``: stage
C where the schedule runs C, else A; FLASHTILE_HOPPER_WINDOW=1) against the portable
kernel (=0), at model shapes.

    python scripts/bench_window.py [--rounds 3] [--softcap 50]

Shapes (bf16, causal, B1): hd 64 H32 at 16k with windows of 1024 and 4096 keys;
Mistral's attention (hd 128, H32 KV8, window 4096) at 16k and 32k; Gemma-2's sliding
layers (hd 256, H16 KV8, window 4096) at 8k and 16k. Per shape: flashtile with the Gluon
window path, the portable kernel, the other stage's window beside it (A beside C where
the window runs C, C beside A elsewhere), at hd 64 stage A without its 128-register cap,
and the same call without a window (full causal, Gluon) for scale. do_bench medians over
``--rounds`` interleaved rounds (median of rounds); then forward + backward with the
window path on and off (the Gluon backward at hd 64 / 128). TFLOPS count the (query, key)
pairs the window keeps: 4 * D per pair and head (3.5x that for forward + backward).
Each variant's out (gradients) is compared with the portable kernel's (max |difference|,
relative for gradients; MISMATCH above 2e-2). ``--softcap``: every call softcapped (the
Gluon kernels' softcap on, FLASHTILE_HOPPER_SOFTCAP=1; at hd 64 the forward dispatches to
the portable kernel, and stage A is timed beside it).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import statistics
import sys

import torch
import triton

SHAPES = [  # (label, heads, kv heads, head dim, seqlen, window)
    ("hd64 w1024", 32, 32, 64, 16384, 1024),
    ("hd64 w4096", 32, 32, 64, 16384, 4096),
    ("Mistral 16k", 32, 8, 128, 16384, 4096),
    ("Mistral 32k", 32, 8, 128, 32768, 4096),
    ("Gemma-2 8k", 16, 8, 256, 8192, 4096),
    ("Gemma-2 16k", 16, 8, 256, 16384, 4096),
]


@contextlib.contextmanager
def window_env(mode: str):
    """FLASHTILE_HOPPER_WINDOW=``mode`` around a call (read per call by the dispatch)."""
    os.environ["FLASHTILE_HOPPER_WINDOW"] = mode
    try:
        yield
    finally:
        os.environ.pop("FLASHTILE_HOPPER_WINDOW", None)


def direct_call(q, k, v, left, config, softcap=0.0):
    """A causal windowed call of the Gluon forward launched with ``config``, out of the
    dispatch's hands."""
    from flashtile.ops import hopper_fwd

    def fn():
        out = torch.empty_like(q)
        lse = torch.empty(1, q.shape[2], q.shape[1], device="cuda", dtype=torch.float32)
        return hopper_fwd.hopper_attention_forward(q, k, v, None, True, out, lse, config,
                                                   left, softcap)[0]
    return fn


def kept_pairs(n: int, left: int) -> int:
    """Pairs (i, j) with i - left <= j <= i over n rows."""
    full = min(n, left + 1)
    return full * (full + 1) // 2 + (n - full) * (left + 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--softcap", type=float, default=0.0,
                    help="every call with this softcap (> 0: FLASHTILE_HOPPER_SOFTCAP=1; "
                    "Gemma-2 uses 50)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_window: needs a GPU")
        return 2
    import flashtile
    from flashtile import configs
    from flashtile.ops import hopper_fwd

    cap = args.softcap
    if cap > 0:
        os.environ["FLASHTILE_HOPPER_SOFTCAP"] = "1"
    print(f"{torch.cuda.get_device_name()} torch {torch.__version__} triton "
          f"{triton.__version__}; bf16, B1, causal" + (f", softcap {cap:g}" if cap else ""))
    status = 0
    for label, h, hkv, d, n, left in SHAPES:
        gen = torch.Generator(device="cuda").manual_seed(n + d)
        q = torch.randn(1, n, h, d, device="cuda", dtype=torch.bfloat16, generator=gen)
        k, v = (torch.randn(1, n, hkv, d, device="cuda", dtype=torch.bfloat16, generator=gen)
                for _ in range(2))
        win = (left, 0)

        def windowed(mode, q=q, k=k, v=v, win=win):
            with window_env(mode):
                return flashtile.flash_attn_func(q, k, v, causal=True, window_size=win,
                                                 softcap=cap)

        def call(windowed=windowed):  # the Gluon window path (opt-in: window_mode)
            return windowed("1")

        def portable(windowed=windowed):
            return windowed("0")

        variants = {"gluon": call, "portable": portable}
        cfg = hopper_fwd.window_config(d, True, n, softcap=cap > 0)
        if cfg is not None and cfg.pingpong:  # stage C: stage A's window beside it
            variants["gluon stage A"] = direct_call(q, k, v, left,
                                                    configs.hopper_fwd_config(d, True, n), cap)
        elif cfg is not None:  # stage A: stage C's window beside it
            variants["gluon stage C"] = direct_call(q, k, v, left,
                                                    configs.hopper_fwd_config_c(d, True, n), cap)
        elif cap > 0:  # a softcap at hd 64 runs the portable forward: stage A beside it
            variants["gluon stage A"] = direct_call(q, k, v, left,
                                                    configs.hopper_fwd_config(d, True, n), cap)
        if cfg is not None and cfg.max_regs is not None:
            variants["gluon uncapped"] = direct_call(q, k, v, left,
                                                     dataclasses.replace(cfg, max_regs=None))
        variants["no window (causal)"] = (
            lambda q=q, k=k, v=v: flashtile.flash_attn_func(q, k, v, causal=True, softcap=cap))
        # forward + backward (the backward's window path: the two-kernel Gluon backward at
        # hd 64 / 128, the portable one at hd 256 either way)
        qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
        dout = torch.randn_like(q)

        def fwd_bwd(mode, qg=qg, kg=kg, vg=vg, dout=dout, win=win):
            with window_env(mode):
                out = flashtile.flash_attn_func(qg, kg, vg, causal=True, window_size=win,
                                                softcap=cap)
                return torch.autograd.grad(out, (qg, kg, vg), dout)

        variants["gluon fwd+bwd"] = lambda: fwd_bwd("1")
        variants["portable fwd+bwd"] = lambda: fwd_bwd("0")
        ref = portable()
        grads_ref = fwd_bwd("0")
        times: dict = {name: [] for name in variants}
        for _ in range(args.rounds):
            for name, fn in variants.items():
                times[name].append(triton.testing.do_bench(fn, warmup=10, rep=50,
                                                           return_mode="median"))
        flops = 4 * d * h * kept_pairs(n, left)
        full_flops = 4 * d * h * n * (n + 1) // 2
        for name, fn in variants.items():
            ms = statistics.median(times[name])
            f = full_flops if name.startswith("no window") else flops
            if name.endswith("fwd+bwd"):
                f = 3.5 * flops
            diff = ""
            if name.endswith("fwd+bwd"):
                err = max(float((a.float() - b.float()).abs().max() / b.float().abs().max())
                          for a, b in zip(fn(), grads_ref))
                diff = f"  rel|d| {err:.1e}" + ("  MISMATCH" if err > 2e-2 else "")
                status |= int(err > 2e-2)
            elif not name.startswith("no window"):
                err = float((fn().float() - ref.float()).abs().max())
                diff = f"  max|d| {err:.1e}" + ("  MISMATCH" if err > 2e-2 else "")
                status |= int(err > 2e-2)
            print(f"{label:<12} S{n:<6} H{h} KV{hkv} D{d} w{left:<5} {name:<19} {ms:8.3f} ms "
                  f"{f / ms / 1e9:7.1f} TFLOPS{diff}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
