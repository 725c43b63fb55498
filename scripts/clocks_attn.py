"""SM clock and power while each backend's attention runs back to back (GPU).

Session 17 (`s17d`): in the HF Llama's training step at 32k the SM clock averaged 1655
MHz with flashtile's attention against 1776 with cuDNN's (656 / 633 W), and the same
GEMMs ran 4-6.5% slower in flashtile's step. This asks the same of the attention kernels
alone at the DESIGN.md shapes: per (head dim, causal, seqlen) and backend, ``--seconds``
of back-to-back calls under flashtile.bench.clocks.ClockSampler: ms per call (CUDA
events over the window), TFLOPS, mean SM clock and power, and TFLOPS per GHz (the work a
clock cycle does: what the kernel would deliver at any clock).

    python scripts/clocks_attn.py [--head-dims 64 128] [--seqlens 4096 16384]
        [--modes fwd fwd_bwd] [--backends flashtile sdpa-cudnn] [--csv F]
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys

import torch

from flashtile.bench.backends import get_backend
from flashtile.bench.clocks import ClockSampler
from flashtile.bench.flops import attn_flops, paper_shape, tflops
from flashtile.bench.harness import make_inputs


def run_window(fn, seconds: float) -> tuple[float, ClockSampler]:
    """ms per call of ``fn`` over about ``seconds`` of back-to-back calls, sampled."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()  # warm (compiles)
    torch.cuda.synchronize()
    s = torch.cuda.Event(enable_timing=True)
    e = torch.cuda.Event(enable_timing=True)
    s.record()
    fn()
    e.record()
    e.synchronize()
    one = max(s.elapsed_time(e), 1e-3)
    n = max(3, int(seconds * 1e3 / one))
    with ClockSampler() as sampler:
        start.record()
        for _ in range(n):
            fn()
        end.record()
        end.synchronize()
    return start.elapsed_time(end) / n, sampler


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--head-dims", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--seqlens", type=int, nargs="+", default=[4096, 16384])
    ap.add_argument("--causal", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--modes", nargs="+", default=["fwd", "fwd_bwd"])
    ap.add_argument("--backends", nargs="+", default=["flashtile", "sdpa-cudnn"])
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--csv")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("clocks_attn: needs a GPU")
        return 2
    rows = []
    print("| hd | causal | seqlen | mode | backend | ms | TFLOPS | SM MHz | W | TFLOPS/GHz "
          "| clock reasons |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for hd in args.head_dims:
        for causal in map(bool, args.causal):
            for seqlen in args.seqlens:
                shape = paper_shape(seqlen, hd, causal)
                inputs = make_inputs(shape, torch.device("cuda"))
                q, k, v, dout = inputs
                for mode in args.modes:
                    for backend in args.backends:
                        fns = get_backend(backend)(q, k, v, causal, dout=dout)
                        ms, sampler = run_window(getattr(fns, mode), args.seconds)
                        clocks = [c for c, _ in sampler.samples] or [float("nan")]
                        watts = [w for _, w in sampler.samples] or [float("nan")]
                        mhz, w = statistics.mean(clocks), statistics.mean(watts)
                        tf = tflops(attn_flops(shape, mode), ms)
                        why = " ".join(f"{n} {100 * x:.0f}%"
                                       for n, x in sampler.reason_shares().items()) \
                            if sampler.reasons else "-"
                        rows.append((hd, int(causal), seqlen, mode, backend, ms, tf, mhz, w,
                                     tf / (mhz / 1e3), why))
                        print(f"| {hd} | {int(causal)} | {seqlen} | {mode} | {backend} | "
                              f"{ms:.3f} | {tf:.1f} | {mhz:.0f} | {w:.0f} | "
                              f"{tf / (mhz / 1e3):.1f} | {why} |", flush=True)
                del inputs, q, k, v, dout
                torch.cuda.empty_cache()
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["head_dim", "causal", "seqlen", "mode", "backend", "ms", "tflops",
                        "sm_mhz", "watts", "tflops_per_ghz", "clock_reasons"])
            w.writerows(rows)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
