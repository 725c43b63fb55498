"""``flashtile train --bench``: MiniGPT training-step time per attention backend.

One step = forward + backward + gradient clipping + fused AdamW, bf16 autocast, dropout
as in the preset (0.2), the shakespeare-char model (6 layers, 6 heads, 384 dims) at each
``BATCHxCTX`` shape. Batches are drawn beforehand, so the timed region holds only the
step. Per shape, every backend's model is built and warmed up first (``warmup`` untimed
steps: compilation, cuDNN plans); then ``rounds`` rounds each time ``steps / rounds``
steps of every backend in turn between two CUDA events. The step is host-bound on the
H200 machines and their hosts drift by up to 1.5x within a minute (session 9: cuDNN's
step 10.7 to 14.3 ms in one run, backends timed one after the other), so a backend's
time is the median of its round means, the ratio to SDPA cuDNN is the median of the
per-round ratios (each round times the backends within seconds of each other), and the
spread (max / min round mean) is printed beside it. tokens/s = batch * ctx / step time.

A backend named ``NAME:graph`` runs its step as a CUDA graph replay (models/graphed.py):
one launch per step instead of ~300, so the time is the GPU's. Its ratio is taken to
``sdpa-cudnn:graph`` when that runs too.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import statistics
import sys

import torch

from ..bench.report import write_rows
from .graphed import GraphStep
from .minigpt import MiniGPT
from .train import make_optimizer, preset, train_step

__all__ = ["bench_rounds", "bench_step", "run_bench", "step_fn"]


def step_fn(backend: str, batch: int, ctx: int, n_batches: int, seed: int = 0):
    """The shakespeare-char model and optimizer at (batch, ctx) on ``backend`` (``NAME``
    or ``NAME:graph``), with ``n_batches`` random batches drawn beforehand; returns
    ``step(i)``, one training step on batch i (nothing else in it, so timings hold only
    the step)."""
    name, _, mode = backend.partition(":")
    if mode not in ("", "graph"):
        raise ValueError(f"backend {backend!r}: the only mode is ':graph'")
    mc, tc = preset("shakespeare-char", backend=name, block_size=ctx, batch_size=batch,
                    seed=seed)
    tc = tc.resolved()
    torch.manual_seed(seed)
    model = MiniGPT(mc).to(tc.device).train()
    opt = make_optimizer(model, tc)
    data = torch.randint(mc.vocab_size, (n_batches, batch, ctx + 1), device=tc.device)
    if mode == "graph":
        graphed = GraphStep(model, opt, (batch, ctx), dtype=tc.dtype, grad_clip=tc.grad_clip)

        def step(i: int) -> None:
            graphed(data[i, :, :-1], data[i, :, 1:], tc.lr)
        return step

    def step(i: int) -> None:
        train_step(model, opt, data[i, :, :-1], data[i, :, 1:], tc.lr, tc)
    return step


def bench_step(backend: str, batch: int, ctx: int, steps: int = 50, warmup: int = 5,
               seed: int = 0) -> float:
    """Mean seconds of one training step of the shakespeare-char model at (batch, ctx)."""
    times, errors = bench_rounds([backend], batch, ctx, steps, 1, warmup, seed)
    if backend in errors:
        raise RuntimeError(f"{backend}: {errors[backend]}")
    return times[backend][0]


def bench_rounds(backends, batch: int, ctx: int, steps: int = 50, rounds: int = 5,
                 warmup: int = 5, seed: int = 0) -> dict:
    """({backend: [mean seconds per step in each round]}, {backend: error}): all backends
    built and warmed up first, then ``rounds`` rounds of ``max(1, steps // rounds)``
    steps per backend in turn. A backend that fails to build or run is left out of the
    times, its error's first line in the second dict."""
    per = max(1, steps // rounds)
    n = warmup + per * rounds
    fns, out, errors = {}, {}, {}
    for b in backends:
        try:
            with _env(b):
                fns[b] = step_fn(b.split("@")[0], batch, ctx, n, seed)
                for i in range(warmup):
                    fns[b](i)
                torch.cuda.synchronize()
        except Exception as e:  # e.g. no SDPA kernel for this case
            fns.pop(b, None)
            errors[b] = str(e).splitlines()[0] if str(e) else type(e).__name__
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for r in range(rounds):
        for b, step in fns.items():
            with _env(b):
                start.record()
                for i in range(warmup + r * per, warmup + (r + 1) * per):
                    step(i)
                end.record()
                end.synchronize()
            out.setdefault(b, []).append(start.elapsed_time(end) / 1e3 / per)
    return out, errors


@contextlib.contextmanager
def _env(backend: str):
    """A backend named ``NAME@VAR=VALUE[@VAR=VALUE...]`` runs NAME with those environment
    variables set (flashtile's dispatch switches are read per call), so variants of one
    backend are timed in the same interleaved rounds."""
    saved = {}
    for item in backend.split("@")[1:]:
        var, _, value = item.partition("=")
        saved[var] = os.environ.get(var)
        os.environ[var] = value
    try:
        yield
    finally:
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value


# the median of round means (the bench harness's statistics too)
_median = statistics.median


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
    rounds = max(1, getattr(args, "bench_rounds", 5))
    print(f"MiniGPT training step (6L/6H/384, bf16 autocast, dropout 0.2, fused AdamW) on "
          f"{gpu}, {args.bench_steps} steps per backend in {rounds} interleaved rounds: "
          f"median of the round means, ratio = median of the per-round ratios")
    print(f"{'batch x ctx':>12} {'backend':>18} {'ms/step':>9} {'tokens/s':>11} {'vs cuDNN':>9}"
          f" {'spread':>7}")
    for batch, ctx in shapes:
        res, errors = bench_rounds(backends, batch, ctx, steps=args.bench_steps,
                                   rounds=rounds)
        for b, err in errors.items():
            print(f"{batch:>5} x {ctx:<5} {b:>18} unavailable: {err}")
            failed = failed or b == "flashtile"
        for b in backends:
            if b not in res:
                continue
            graphed = b.split("@")[0].endswith(":graph")
            ref = res.get("sdpa-cudnn:graph" if graphed else "sdpa-cudnn")
            t = _median(res[b])
            ratio = _median([x / y for x, y in zip(ref, res[b])]) if ref else None
            spread = max(res[b]) / min(res[b])
            print(f"{batch:>5} x {ctx:<5} {b:>18} {1e3 * t:>9.2f} {batch * ctx / t:>11.4g} "
                  f"{(f'{ratio:.2f}x' if ratio else '-'):>9} {spread:>7.2f}")
            rows.append(dict(model="minigpt-6L384", backend=b, batch=batch, ctx=ctx,
                             ms_per_step=round(1e3 * t, 4), tokens_per_s=round(batch * ctx / t),
                             ratio_vs_cudnn=round(ratio, 4) if ratio else "",
                             spread=round(spread, 4), rounds=rounds,
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
