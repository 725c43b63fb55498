"""Where the host time of a MiniGPT training step goes, per attention backend (GPU).

    PYTHONPATH=src python scripts/profile_step_host.py [--shape 64x256] [--backends ...]

Per backend (shakespeare-char model, bf16 autocast, dropout 0.2, fused AdamW, as
``flashtile train --bench``): the wall time per step over ``--steps`` steps (CUDA events),
the host time per step (``time.perf_counter`` around each step's Python call, no sync:
when the step is host-bound the GPU never queues work ahead, so this is the host's own
cost), and a cProfile of ``--profile-steps`` steps: the functions with the most own time,
then flashtile's functions by cumulative time. The host cost of attention is the
difference between backends, the model around it being the same.

--gpu-time instead: the GPU's own time per step, from the torch profiler's kernel
records (sum of kernel durations over ``--steps`` steps, divided by the steps), with
the kernels that take the most of it, beside the wall time per step. Wall well above
kernel time means the host sets the step's pace; kernel time that differs between
backends is what their kernels cost.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time

import torch


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="64x256")
    ap.add_argument("--backends", default="flashtile,sdpa-cudnn")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--profile-steps", type=int, default=20)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--gpu-time", action="store_true",
                    help="kernel time per step (torch profiler) instead of the host profile")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("profile_step_host: needs a GPU")
        return 2
    from flashtile.models.train_bench import step_fn

    batch, ctx = map(int, args.shape.split("x"))
    if args.gpu_time:
        return gpu_time(step_fn, args.backends.split(","), batch, ctx, args.steps, args.top)
    summary = []
    for backend in args.backends.split(","):
        n = 5 + args.steps + args.profile_steps
        step = step_fn(backend, batch, ctx, n)
        for i in range(5):
            step(i)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        host = 0.0
        start.record()
        for i in range(5, 5 + args.steps):
            t0 = time.perf_counter()
            step(i)
            host += time.perf_counter() - t0
        end.record()
        end.synchronize()
        wall_ms = start.elapsed_time(end) / args.steps
        host_ms = host * 1e3 / args.steps
        prof = cProfile.Profile()
        torch.cuda.synchronize()
        prof.enable()
        for i in range(5 + args.steps, n):
            step(i)
        prof.disable()
        torch.cuda.synchronize()
        summary.append((backend, wall_ms, host_ms))
        print(f"\n== {backend} {args.shape}: wall {wall_ms:.2f} ms/step, host {host_ms:.2f} "
              f"ms/step (no profiler)", flush=True)
        for key, title in (("tottime", "own time"), ("cumulative", "cumulative")):
            buf = io.StringIO()
            st = pstats.Stats(prof, stream=buf).sort_stats(key)
            if key == "cumulative":
                st.print_stats("flashtile|autograd|function.py", args.top)
            else:
                st.print_stats(args.top)
            text = buf.getvalue()
            print(f"-- cProfile, {args.profile_steps} steps, by {title}")
            print(text[text.find("   ncalls"):].rstrip(), flush=True)
    print("\n| backend | shape | wall ms/step | host ms/step |")
    print("|---|---|---|---|")
    for b, w, h in summary:
        print(f"| {b} | {args.shape} | {w:.2f} | {h:.2f} |")
    return 0


def _wall_ms(step, first: int, steps: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for i in range(first, first + steps):
        step(i)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / steps


def gpu_time(step_fn, backends, batch: int, ctx: int, steps: int, top: int) -> int:
    """Per backend: wall ms per step (CUDA events, no profiler), then kernel ms per step
    (the profiler's CUDA kernel records over ``steps`` steps) and the ``top`` kernels by
    their share of it."""
    from torch.profiler import ProfilerActivity, profile

    rows = []
    for backend in backends:
        step = step_fn(backend, batch, ctx, 5 + 2 * steps)
        for i in range(5):
            step(i)
        wall = _wall_ms(step, 5, steps)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for i in range(5 + steps, 5 + 2 * steps):
                step(i)
            torch.cuda.synchronize()
        per_kernel: dict = {}
        for ev in prof.events():
            if ev.device_type == torch.autograd.DeviceType.CUDA:
                per_kernel[ev.name] = per_kernel.get(ev.name, 0.0) + ev.time_range.elapsed_us()
        busy = sum(per_kernel.values()) / 1e3 / steps  # us -> ms per step
        rows.append((backend, wall, busy))
        print(f"\n== {backend} {batch}x{ctx}: wall {wall:.2f} ms/step, kernels {busy:.2f} "
              f"ms/step ({100 * busy / wall:.0f}% of wall)", flush=True)
        for name, us in sorted(per_kernel.items(), key=lambda kv: -kv[1])[:top]:
            print(f"  {us / steps:9.1f} us/step  {name[:90]}")
    print("\n| backend | shape | wall ms/step | kernel ms/step | kernel / wall |")
    print("|---|---|---|---|---|")
    for b, w, k in rows:
        print(f"| {b} | {batch}x{ctx} | {w:.2f} | {k:.2f} | {k / w:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
