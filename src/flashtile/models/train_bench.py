"""``flashtile train --bench``: MiniGPT training-step time per attention backend.

One step = forward + backward + gradient clipping + fused AdamW, bf16 autocast, dropout
as in the preset (0.2), the shakespeare-char model (6 layers, 6 heads, 384 dims) at each
``BATCHxCTX`` shape. Batches are drawn beforehand, so the timed region holds only the
step. Per backend and shape: ``warmup`` untimed steps (compilation, cuDNN plans), then
``steps`` steps between two CUDA events; the mean is reported as ms/step and
tokens/s = batch * ctx / step time. Backends run side by side in one process, so the
ratio to SDPA cuDNN is the number to read (DESIGN.md section 6).
"""

from __future__ import annotations

import datetime
import sys

import torch

from ..bench.report import write_rows
from .minigpt import MiniGPT
from .train import make_optimizer, preset, train_step

__all__ = ["bench_step", "run_bench", "step_fn"]


def step_fn(backend: str, batch: int, ctx: int, n_batches: int, seed: int = 0):
    """The shakespeare-char model and optimizer at (batch, ctx) on ``backend``, with
    ``n_batches`` random batches drawn beforehand; returns ``step(i)``, one training step
    on batch i (nothing else in it, so timings hold only the step)."""
    mc, tc = preset("shakespeare-char", backend=backend, block_size=ctx, batch_size=batch,
                    seed=seed)
    tc = tc.resolved()
    torch.manual_seed(seed)
    model = MiniGPT(mc).to(tc.device).train()
    opt = make_optimizer(model, tc)
    data = torch.randint(mc.vocab_size, (n_batches, batch, ctx + 1), device=tc.device)

    def step(i: int) -> None:
        train_step(model, opt, data[i, :, :-1], data[i, :, 1:], tc.lr, tc)
    return step


def bench_step(backend: str, batch: int, ctx: int, steps: int = 50, warmup: int = 5,
               seed: int = 0) -> float:
    """Mean seconds of one training step of the shakespeare-char model at (batch, ctx)."""
    n = warmup + steps
    step = step_fn(backend, batch, ctx, n, seed)
    for i in range(warmup):
        step(i)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for i in range(warmup, n):
        step(i)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / steps


def profile_step(backend: str, batch: int, ctx: int, steps: int = 3, top: int = 12) -> str:
    """torch.profiler table of ``steps`` training steps (after warm-up): the CUDA kernels
    by total device time, so a slow backend shows which kernel (or host gap) costs."""
    from torch.profiler import ProfilerActivity, profile

    step = step_fn(backend, batch, ctx, steps + 3)
    for i in range(3):
        step(i)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(3, steps + 3):
            step(i)
        torch.cuda.synchronize()
    return prof.key_averages().table(sort_by="cuda_time_total", row_limit=top,
                                     max_name_column_width=60)


def run_bench(args) -> int:
    if not torch.cuda.is_available():
        print("flashtile train --bench: needs a CUDA device", file=sys.stderr)
        return 2
    backends = [b.strip() for b in args.bench_backends.split(",") if b.strip()]
    shapes = [tuple(int(x) for x in s.lower().split("x")) for s in args.bench_shapes.split(",")]
    gpu = torch.cuda.get_device_name()
    rows, failed = [], False
    print(f"MiniGPT training step (6L/6H/384, bf16 autocast, dropout 0.2, fused AdamW) on "
          f"{gpu}, mean of {args.bench_steps} steps")
    print(f"{'batch x ctx':>12} {'backend':>12} {'ms/step':>9} {'tokens/s':>11} {'vs cuDNN':>9}")
    for batch, ctx in shapes:
        times = {}
        for b in backends:
            try:
                times[b] = bench_step(b, batch, ctx, steps=args.bench_steps)
            except Exception as e:  # e.g. no SDPA kernel for this case
                print(f"{batch:>5} x {ctx:<5} {b:>12} unavailable: {str(e).splitlines()[0]}")
                failed = failed or b == "flashtile"
        ref = times.get("sdpa-cudnn")
        for b, t in times.items():
            ratio = f"{ref / t:.2f}x" if ref else "-"
            print(f"{batch:>5} x {ctx:<5} {b:>12} {1e3 * t:>9.2f} {batch * ctx / t:>11.4g} "
                  f"{ratio:>9}")
            rows.append(dict(model="minigpt-6L384", backend=b, batch=batch, ctx=ctx,
                             ms_per_step=round(1e3 * t, 4), tokens_per_s=round(batch * ctx / t),
                             gpu=gpu, torch=torch.__version__,
                             date=datetime.date.today().isoformat()))
    if getattr(args, "bench_profile", False):
        batch, ctx = shapes[0]
        for b in backends:
            print(f"\nprofile: {b}, {batch} x {ctx}, 3 steps")
            try:
                print(profile_step(b, batch, ctx))
            except Exception as e:  # the profiler is a diagnostic: never fail the bench
                print(f"profile failed: {type(e).__name__}: {e}")
    if args.csv and rows:
        write_rows(args.csv, rows)
    return 1 if failed else 0
