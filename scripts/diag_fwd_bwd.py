"""Which kernels one flashtile forward+backward runs, and how long each takes (torch
profiler), beside the do_bench medians of the forward and of forward+backward. Written
for the hd 128 causal 1k shape that benches slower inside the full 18-shape run than
alone (benchmarks/results.md, session 4).

    python scripts/diag_fwd_bwd.py [B,S,H,D,causal ...]

(session 9: also the varlen bench's dense baseline at 640 tokens, hd 128, which read
94-125 TFLOPS forward+backward where its kernels bench at ~260.)

Session 29: the kernels as one line each (GPU us per call), none left out.

Session 30: DIAG_BACKENDS=flashtile,sdpa-cudnn (any flashtile bench backends, comma
separated) runs each in turn on the same inputs; DIAG_HOST=0 leaves out the host profile.

Session 10: per shape also the host's own time per forward+backward call (perf_counter
around 50 calls, no sync) and a cProfile of 20 calls by own time: where the host time of
the short, launch-bound shapes goes on the GPU machine's CPU.
"""

import os
import sys
import time

import torch
import triton

from flashtile.bench.backends import get_backend
from flashtile.bench.harness import cprofile_calls

SHAPES = [(16, 1024, 16, 128, True), (16, 1024, 16, 128, False), (4, 4096, 16, 128, True)]


def main() -> None:
    torch.manual_seed(0)
    shapes = [tuple(int(x) for x in a.split(",")) for a in sys.argv[1:]] or SHAPES
    for batch, seqlen, heads, head_dim, causal in shapes:
        causal = bool(causal)
        q, k, v, dout = (torch.randn(batch, seqlen, heads, head_dim, device="cuda",
                                     dtype=torch.bfloat16) for _ in range(4))
        acts = [torch.profiler.ProfilerActivity.CUDA, torch.profiler.ProfilerActivity.CPU]
        for name in os.environ.get("DIAG_BACKENDS", "flashtile").split(","):
            be = get_backend(name)(q, k, v, causal, dout=dout)
            fb = triton.testing.do_bench(be.fwd_bwd, warmup=25, rep=100, return_mode="median")
            f = triton.testing.do_bench(be.fwd, warmup=25, rep=100, return_mode="median")
            with torch.profiler.profile(activities=acts) as prof:
                for _ in range(3):
                    be.fwd_bwd()
                torch.cuda.synchronize()
            print(f"{name} B{batch} S{seqlen} H{heads} D{head_dim} causal={causal}: "
                  f"fwd {f * 1e3:.0f} us, fwd+bwd {fb * 1e3:.0f} us")
            print_kernels(prof, calls=3)
            print_gaps(prof, calls=3)
            if os.environ.get("DIAG_HOST", "1") != "0":
                host_profile(be.fwd_bwd)


def print_kernels(prof, calls: int) -> None:
    """One line per GPU kernel: its name, GPU microseconds per fwd+bwd call, launches
    per call, most expensive first (small kernels included: no row limit)."""
    rows = [(e.self_device_time_total / calls, e.count / calls, e.key)
            for e in prof.key_averages() if e.self_device_time_total > 0]
    total = sum(r[0] for r in rows)
    for us, n, name in sorted(rows, reverse=True):
        print(f"  {us:9.1f} us {us / total * 100:5.1f}%  x{n:g}  {name[:90]}")
    print(f"  {total:9.1f} us in kernels per fwd+bwd")


def print_gaps(prof, calls: int, top: int = 6) -> None:
    """GPU idle time inside the profiled calls: the gaps between one kernel's end and the
    next one's start (device timestamps), per call, the largest with the kernels around
    them; and the CUDA runtime calls that can stall the host or the device
    (synchronisations, copies, allocations), with their counts and host time."""
    from torch.autograd import DeviceType

    gpu = sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA
                  and e.time_range.elapsed_us() > 0), key=lambda e: e.time_range.start)
    gaps, end, prev = [], None, None
    for e in gpu:
        if end is not None and e.time_range.start > end:
            gaps.append((e.time_range.start - end, prev, e.name))
        if end is None or e.time_range.end > end:
            end, prev = e.time_range.end, e.name
    total = sum(g[0] for g in gaps)
    span = (end - gpu[0].time_range.start) if gpu else 0
    print(f"  GPU idle between kernels: {total / calls:.1f} us per call "
          f"({len(gaps) / calls:g} gaps; span {span / calls:.1f} us per call)")
    for us, a, b in sorted(gaps, reverse=True)[:top]:
        print(f"    {us:8.1f} us after {a[:50]} before {b[:50]}")
    api = {}
    for e in prof.key_averages():
        if e.key.startswith("cuda") and any(w in e.key for w in (
                "Synchronize", "Memcpy", "Malloc", "Free", "Memset", "Query")):
            api[e.key] = (e.count / calls, e.cpu_time_total / calls)
    for key, (n, us) in sorted(api.items(), key=lambda kv: -kv[1][1]):
        print(f"    {key[:40]:<40} x{n:g} per call, {us:.1f} us host")


def host_profile(fn, calls: int = 50, profiled: int = 20, top: int = 22) -> None:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    host_us = (time.perf_counter() - t0) * 1e6 / calls
    torch.cuda.synchronize()
    wall_us = (time.perf_counter() - t0) * 1e6 / calls
    print(f"host {host_us:.0f} us per fwd+bwd call (no sync), wall {wall_us:.0f} us")
    print(f"-- cProfile, {profiled} calls")
    print(cprofile_calls(fn, profiled, ("tottime",), top)[0], flush=True)


if __name__ == "__main__":
    main()
