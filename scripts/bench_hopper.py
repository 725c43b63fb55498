"""Forward TFLOPS of the Gluon Hopper kernels (stage B warp-specialised, stage A) against
the portable Triton kernel and SDPA's cuDNN backend, side by side in one process.

    python scripts/bench_hopper.py [--seqlens 1024 4096 16384] [--head-dims 64 128]
                                   [--csv out.csv]

Shapes of DESIGN.md section 6 (bf16, 16k tokens, hidden 2048). Before timing, each
Gluon output is compared with cuDNN's (max abs difference printed; a mismatch is
flagged and makes the exit status 1). Compile errors are printed in full. Short table
last.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import sys
import time
import traceback

import torch
import triton

from flashtile import configs
from flashtile.bench.backends import get_backend
from flashtile.bench.flops import attn_flops, paper_shape, tflops
from flashtile.ops import flash, hopper_fwd
from flashtile.ops._common import next_pow2

BACKENDS = ("gluon-B", "gluon-A", "portable", "sdpa-cudnn")


def closures(q, k, v, causal):
    """name -> zero-argument forward call (allocation included, as in a real call)."""
    b, s, h, d = q.shape
    cfg = configs.hopper_fwd_config(d, causal, s)

    def gluon(ws):
        c = dataclasses.replace(cfg, warp_specialize=ws)

        def fn():
            out = torch.empty_like(q)
            lse = torch.empty((b, h, s), dtype=torch.float32, device=q.device)
            return hopper_fwd.hopper_attention_forward(q, k, v, None, causal, out, lse, c)[0]

        return fn

    pcfg = configs.fwd_config(next_pow2(d), causal, q.dtype, q.device, s)
    cudnn = get_backend("sdpa-cudnn")(q, k, v, causal).fwd
    return {
        "gluon-B": gluon(True),
        "gluon-A": gluon(False),
        "portable": lambda: flash.attention_forward(q, k, v, causal=causal, config=pcfg)[0],
        "sdpa-cudnn": lambda: cudnn().transpose(1, 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seqlens", type=int, nargs="+", default=[1024, 4096, 16384])
    ap.add_argument("--head-dims", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--csv")
    args = ap.parse_args()
    dev = torch.device("cuda")
    print(f"{torch.cuda.get_device_name(dev)} torch {torch.__version__} triton "
          f"{triton.__version__}", flush=True)
    rows, status = [], 0
    for causal in (False, True):
        for hd in args.head_dims:
            for seqlen in args.seqlens:
                shape = paper_shape(seqlen, hd, causal)
                gen = torch.Generator(device=dev).manual_seed(seqlen + hd)
                q, k, v = (torch.randn(shape.batch, seqlen, shape.nheads, hd, device=dev,
                                       dtype=torch.bfloat16, generator=gen) for _ in range(3))
                flops = attn_flops(shape, "fwd")
                fns = closures(q, k, v, causal)
                ref = fns["sdpa-cudnn"]().float()
                row = dict(label=shape.label(), causal=causal)
                for name in BACKENDS:
                    t0 = time.perf_counter()
                    try:
                        got = fns[name]()
                        torch.cuda.synchronize()
                        first = time.perf_counter() - t0
                        diff = (got.float() - ref).abs().max().item()
                        flag = "" if diff <= 0.05 else "  MISMATCH"
                        if flag:
                            status = 1
                        ms = triton.testing.do_bench(fns[name], warmup=25, rep=100,
                                                     return_mode="median")
                        row[name] = tflops(flops, ms)
                        print(f"{row['label']} causal={int(causal)} {name:<10} {ms:8.3f} ms "
                              f"{row[name]:6.1f} TFLOPS  max|diff vs cudnn|={diff:.2e}  "
                              f"first call {first:.1f}s{flag}", flush=True)
                    except Exception:
                        status = 1
                        row[name] = float("nan")
                        print(f"{row['label']} causal={int(causal)} {name} FAILED:", flush=True)
                        traceback.print_exc(file=sys.stdout)
                rows.append(row)
                del q, k, v, ref, fns
                torch.cuda.empty_cache()
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["shape", "causal", "backend", "fwd_tflops"])
            for r in rows:
                for name in BACKENDS:
                    w.writerow([r["label"], r["causal"], name, f"{r[name]:.2f}"])
    print("\nforward TFLOPS (ratio to sdpa-cudnn)")
    print(f"{'shape':<22} {'causal':<6} " + " ".join(f"{n:>16}" for n in BACKENDS))
    for r in rows:
        base = r["sdpa-cudnn"]
        cells = [f"{r[n]:7.1f} ({r[n] / base:4.2f})" for n in BACKENDS]
        print(f"{r['label']:<22} {int(r['causal']):<6} " + " ".join(f"{c:>16}" for c in cells))
    return status


if __name__ == "__main__":
    sys.exit(main())
