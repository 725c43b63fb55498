"""Host microseconds per call of each layer of one flashtile forward+backward (GPU).

    PYTHONPATH=src python scripts/host_split.py [B,S,H,D,causal ...]
    PYTHONPATH=src python scripts/host_split.py --ab [B,S,H,D,causal ...]

Session 10: a forward+backward at B25 S640 H16 D128 causal spends ~1 ms of host time
against 550 us of kernels on the GPU machine (diag_fwd_bwd.py), 3-4x what the CPU box
measures with Triton's driver faked. Which layer holds it? Per shape, host time per call
(``time.perf_counter`` around 200 calls, no sync; the kernels are short enough that the
GPU keeps up only if the host is the bound, so this is the host's cost) of:

  launchers   attention_forward, then attention_backward (ops/flash.py: no autograd)
  fwd (grad)  flash_attn_func on inputs that require grad (autograd.Function forward)
  autograd    torch.autograd.grad of that output (engine + Function.backward + launchers)
  sdpa        the same forward and autograd.grad through SDPA's cuDNN backend

and, for the launchers, the Triton launch alone: ``kernel[grid]`` of a trivial kernel.
Then, per shape, the torch profiler over 20 autograd.grad calls of flashtile's backward
(ops sorted by CPU time, kernels by GPU time): the first run (5114cb8) read 983 us per
autograd.grad at B4 S256 H6 D64 against 109 us for attention_backward alone.
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from torch.nn.attention import SDPBackend, sdpa_kernel

from flashtile.bench.harness import cprofile_calls, host_us
from flashtile.ops import flash

SHAPES = [(2, 640, 16, 128, 1), (4, 256, 6, 64, 1)]  # small batches: host-bound


@triton.jit
def _noop(X, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(X + offs, tl.load(X + offs, mask=offs < n), mask=offs < n)


def _calls(b, s, h, d, causal) -> tuple[str, dict]:
    """The shape's name and its calls (zero-argument closures over random bf16 inputs):
    the forward and backward launchers, flash_attn_func on inputs that require grad, and
    autograd.grad of one kept graph."""
    causal = bool(causal)
    name = f"B{b} S{s} H{h} D{d}{' causal' if causal else ''}"
    q, k, v, dout = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
                     for _ in range(4))
    out, lse = flash.attention_forward(q, k, v, causal=causal)
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    o = flash.flash_attn_func(qg, kg, vg, causal=causal)
    return name, {
        "attention_forward": lambda: flash.attention_forward(q, k, v, causal=causal),
        "attention_backward": lambda: flash.attention_backward(dout, q, k, v, out, lse,
                                                               causal=causal),
        "flash_attn_func (grad)": lambda: flash.flash_attn_func(qg, kg, vg, causal=causal),
        "autograd.grad": lambda: torch.autograd.grad(o, (qg, kg, vg), dout,
                                                     retain_graph=True),
    }


def ab_rows(b, s, h, d, causal, rounds: int = 4) -> list[tuple[str, float]]:
    """The host paths off / on in one process, interleaved over ``rounds`` rounds: the
    cached Gluon launch (``_gluon_common.FAST_LAUNCH``, session 10) and the launch plans
    (``flash.USE_PLANS``: the portable kernels' since session 10, the Gluon calls' since
    session 42); median host us of the launchers and of
    autograd.grad per setting (the GPU machine's host speed moves 30% between runs, so
    only same-process A/B says what a change is worth)."""
    import statistics

    from flashtile.ops import _gluon_common

    name, calls = _calls(b, s, h, d, causal)
    del calls["flash_attn_func (grad)"]
    times: dict = {}
    for _ in range(rounds):
        for on in (False, True):
            _gluon_common.FAST_LAUNCH = flash.USE_PLANS = on
            for label, fn in calls.items():
                times.setdefault((label, on), []).append(host_us(fn))
    _gluon_common.FAST_LAUNCH = flash.USE_PLANS = True
    return [(f"{name}: {label}, host paths {'on' if on else 'off'}",
             statistics.median(ts)) for (label, on), ts in times.items()]


def main() -> int:
    if not torch.cuda.is_available():
        print("host_split: needs a GPU")
        return 2
    args = [a for a in sys.argv[1:] if a != "--ab"]
    if args and args[0] == "--cprofile":  # where the autograd path's extra host time goes
        for a in args[1:] or ["16,1024,16,128,1"]:
            cprofile_rows(*(int(x) for x in a.split(",")))
        return 0
    if args and args[0] == "--dropout":  # the training call with dropout, profiled
        p = float(args[1])
        shapes = [tuple(int(x) for x in a.split(",")) for a in args[2:]] or [SHAPES[1]]
        for shape in shapes:
            dropout_rows(*shape, p)
        return 0
    shapes = [tuple(int(x) for x in a.split(",")) for a in args] or SHAPES
    if "--ab" in sys.argv[1:]:
        rows = [r for shape in shapes for r in ab_rows(*shape)]
        print("| call | host us per call (median of 4 rounds) |")
        print("|---|---|")
        for n, us in sorted(rows):
            print(f"| {n} | {us:.1f} |")
        return 0
    x = torch.zeros(1024, device="cuda")
    rows = [("triton kernel[grid], trivial kernel", host_us(lambda: _noop[(4,)](x, 1024,
                                                                               BLOCK=256)))]
    for shape in shapes:
        rows += shape_rows(*shape)
    print("| call | host us per call |")
    print("|---|---|")
    for n, us in rows:
        print(f"| {n} | {us:.1f} |")
    return 0


def shape_rows(b, s, h, d, causal) -> list[tuple[str, float]]:
    """The rows of one shape (closures used at once, in this scope)."""
    rows = []
    causal = bool(causal)
    name = f"B{b} S{s} H{h} D{d}{' causal' if causal else ''}"
    q, k, v, dout = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
                     for _ in range(4))
    out, lse = flash.attention_forward(q, k, v, causal=causal)
    rows.append((f"{name}: attention_forward", host_us(
        lambda: flash.attention_forward(q, k, v, causal=causal))))
    rows.append((f"{name}: attention_backward", host_us(
        lambda: flash.attention_backward(dout, q, k, v, out, lse, causal=causal))))
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    rows.append((f"{name}: flash_attn_func fwd (grad)", host_us(
        lambda: flash.flash_attn_func(qg, kg, vg, causal=causal))))
    o = flash.flash_attn_func(qg, kg, vg, causal=causal)
    def grad():
        return torch.autograd.grad(o, (qg, kg, vg), dout, retain_graph=True)
    rows.append((f"{name}: autograd.grad (backward)", host_us(grad)))
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(50):
        grad()
    end.record()
    end.synchronize()
    rows.append((f"{name}: autograd.grad, GPU us per call (events)",
                 start.elapsed_time(end) * 1e3 / 50))
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(20):
            grad()
        torch.cuda.synchronize()
    avgs = prof.key_averages()
    for key, n in (("self_cpu_time_total", 12), ("self_device_time_total", 6)):
        print(f"== {name}: per autograd.grad call (20 profiled), top by {key}: "
              "self CPU us, CPU total us, self GPU us, calls")
        for e in sorted(avgs, key=lambda e: -getattr(e, key))[:n]:
            print(f"   {e.key[:48]:48s} {e.self_cpu_time_total / 20:8.1f} "
                  f"{e.cpu_time_total / 20:8.1f} {e.self_device_time_total / 20:8.1f} "
                  f"{e.count / 20:5.1f}")
    qt, kt, vt, dt = (t.transpose(1, 2) for t in (qg, kg, vg, dout))

    def sdpa():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
    rows.append((f"{name}: sdpa cuDNN fwd (grad)", host_us(sdpa)))
    so = sdpa()
    rows.append((f"{name}: sdpa cuDNN autograd.grad", host_us(
        lambda: torch.autograd.grad(so, (qg, kg, vg), dt, retain_graph=True))))
    return rows


def cprofile_rows(b, s, h, d, causal, n: int = 50, top: int = 25) -> None:
    """--cprofile B,S,H,D,causal: cProfile (cumulative time) of ``n`` calls each of the
    forward and backward launchers alone, flash_attn_func with grad and autograd.grad
    through FlashAttnFunction (session 31: 740 against 272 us of host time per call for
    the backward at B16 S1024 H16 D128 causal)."""
    name, calls = _calls(b, s, h, d, causal)
    for label, fn in calls.items():
        print(f"== {name}: {label}: {host_us(fn):.1f} us per call; cProfile over {n} calls")
        print(cprofile_calls(fn, n, top=top)[0])


def dropout_rows(b, s, h, d, causal, p, top: int = 30) -> None:
    """--dropout P: host us of one training call (flash_attn_func with dropout, then
    autograd.grad) against SDPA cuDNN's, its GPU us, and cProfile's top functions over 50
    calls (where flashtile's eager step spends its host time)."""
    causal = bool(causal)
    name = f"B{b} S{s} H{h} D{d}{' causal' if causal else ''} dropout {p}"
    q, k, v, dout = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
                     for _ in range(4))
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    qt, kt, vt, dt = (t.transpose(1, 2) for t in (qg, kg, vg, dout))

    def flashtile_call():
        o = flash.flash_attn_func(qg, kg, vg, causal=causal, dropout_p=p)
        return torch.autograd.grad(o, (qg, kg, vg), dout)

    def sdpa_call():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            o = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, dropout_p=p)
        return torch.autograd.grad(o, (qg, kg, vg), dt)

    from flashtile.bench.harness import events_us

    print(f"| {name} | host us per training call | GPU us per call (events) |")
    print("|---|---|---|")
    for label, fn in (("flashtile", flashtile_call), ("sdpa cuDNN", sdpa_call)):
        print(f"| {label} | {host_us(fn):.1f} | {events_us(fn):.1f} |")
    print(f"== {name}: cProfile over 50 flashtile training calls")
    print(cprofile_calls(flashtile_call, 50, ("cumulative", "tottime"), top)[0])


if __name__ == "__main__":
    sys.exit(main())
