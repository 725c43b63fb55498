"""Where the host time of a MiniGPT training step goes, per attention backend (GPU).

    PYTHONPATH=src python scripts/profile_step_host.py [--shape 64x256] [--backends ...]

Per backend (shakespeare-char model, bf16 autocast, dropout 0.2, fused AdamW, as
``flashtile train --bench``): the wall time per step over ``--steps`` steps (CUDA events),
the host time per step (``time.perf_counter`` around each step's Python call, no sync:
when the step is host-bound the GPU never queues work ahead, so this is the host's own
cost), and a cProfile of ``--profile-steps`` steps: the functions with the most own time,
then flashtile's functions by cumulative time. The host cost of attention is the
difference between backends, the model around it being the same.
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
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("profile_step_host: needs a GPU")
        return 2
    from flashtile.models.train_bench import step_fn

    batch, ctx = map(int, args.shape.split("x"))
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


if __name__ == "__main__":
    sys.exit(main())
