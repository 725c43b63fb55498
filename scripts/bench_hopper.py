"""Forward TFLOPS of the Gluon Hopper kernels (stage C ping-pong, opt-in; stage B
warp-specialised; stage A) against the portable Triton kernel and SDPA's cuDNN backend,
side by side in one process.

    python scripts/bench_hopper.py [--seqlens 1024 4096 16384] [--head-dims 64 128]
                                   [--csv out.csv] [--c-stages 2] [--rounds 3]
                                   [--only gluon-C gluon-Cp]

Shapes of DESIGN.md section 6 (bf16, 16k tokens, hidden 2048). Before timing, each
Gluon output is compared with cuDNN's (max abs difference printed; a mismatch is
flagged and makes the exit status 1). Compile errors are printed in full. The configs
each Gluon column used are printed per shape (and in the CSV). Short table last.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import statistics
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

BACKENDS = ("gluon-C", "gluon-Cp", "gluon-Cs", "gluon-Cs*", "gluon-B", "gluon-A", "gluon-A*",
            "portable", "sdpa-cudnn")


C_STAGES = None  # --c-stages: override stage C's ring depth (e.g. 2 at hd 128)
A_FIELDS: dict = {}  # --a-config: override fields of the gluon-A column's config
C_FIELDS: dict = {}  # --c-config: the same for the gluon-C column
CS_FIELDS: dict = {}  # --cs-config: the gluon-Cs* column, gluon-Cs with these fields


def gluon_configs(d, causal, s):
    """Gluon column -> its config: the shipped config forced to stage A / B, and stage
    C's own (configs.hopper_fwd_config_c, ring depth from --c-stages if given)."""
    cfg = configs.hopper_fwd_config(d, causal, s)
    cfg_c = configs.hopper_fwd_config_c(d, causal, s)
    if C_STAGES:
        cfg_c = dataclasses.replace(cfg_c, num_stages=C_STAGES)
    cfg_c = dataclasses.replace(cfg_c, **C_FIELDS)
    # stage C on its one-shot grid, and on the persistent one (HopperFwdConfig.persistent)
    # with K and V in one ring and the round robin order
    out = {"gluon-C": cfg_c.one_shot(),
           "gluon-Cp": dataclasses.replace(cfg_c.one_shot(), persistent=True),
           # and with the split ring (K ring 3, V's own ring 2 deep, an O staging buffer;
           # hd <= 128) and, causal, the paired item order
           "gluon-Cs": dataclasses.replace(cfg_c.one_shot(), persistent=True, paired=causal,
                                           v_stages=2 if d <= 128 else 1),
           "gluon-B": dataclasses.replace(cfg, warp_specialize=True),
           "gluon-A": dataclasses.replace(cfg, warp_specialize=False, **A_FIELDS)}
    # the split ring with other fields (--cs-config, e.g. num_stages=2,v_stages=3)
    out["gluon-Cs*"] = dataclasses.replace(out["gluon-Cs"], **CS_FIELDS)
    if "gluon-A*" in BACKENDS:
        # stage A with the compiler's register choice / capped at 128 (two programs per
        # SM), whichever the shipped config is not
        out["gluon-A*"] = dataclasses.replace(cfg, warp_specialize=False,
                                              max_regs=None if cfg.max_regs else 128)
    return {name: c for name, c in out.items() if name in BACKENDS}


def closures(q, k, v, causal):
    """name -> zero-argument forward call (allocation included, as in a real call)."""
    b, s, h, d = q.shape
    gcfg = gluon_configs(d, causal, s)

    def gluon(c):
        def fn():
            out = torch.empty_like(q)
            lse = torch.empty((b, h, s), dtype=torch.float32, device=q.device)
            return hopper_fwd.hopper_attention_forward(q, k, v, None, causal, out, lse, c)[0]

        return fn

    pcfg = configs.fwd_config(next_pow2(d), causal, q.dtype, q.device, s)
    cudnn = get_backend("sdpa-cudnn")(q, k, v, causal).fwd
    return {
        **{name: gluon(c) for name, c in gcfg.items()},
        "portable": lambda: flash.attention_forward(q, k, v, causal=causal, config=pcfg)[0],
        "sdpa-cudnn": lambda: cudnn().transpose(1, 2),
    }


def main() -> int:
    global C_STAGES, BACKENDS
    ap = argparse.ArgumentParser()
    ap.add_argument("--seqlens", type=int, nargs="+", default=[1024, 4096, 16384])
    ap.add_argument("--head-dims", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--csv")
    ap.add_argument("--c-stages", type=int, help="stage C ring depth (default: its config)")
    ap.add_argument("--causal", choices=("0", "1", "both"), default="both")
    ap.add_argument("--a-config", help="override gluon-A config fields, e.g. "
                    "block_m=64,num_warps=4,block_n=64,num_stages=3,max_regs=128")
    ap.add_argument("--c-config", help="override gluon-C config fields, e.g. "
                    "block_n=64,num_stages=2")
    ap.add_argument("--cs-config", help="the gluon-Cs* column: gluon-Cs with these fields, "
                    "e.g. num_stages=2,v_stages=3")
    ap.add_argument("--rounds", type=int, default=1,
                    help="time every column in turn this many times per shape; medians")
    ap.add_argument("--only", nargs="+", choices=BACKENDS,
                    help="these columns only (sdpa-cudnn is always timed: the reference)")
    args = ap.parse_args()
    C_STAGES = args.c_stages
    for text, fields in ((args.a_config, A_FIELDS), (args.c_config, C_FIELDS),
                         (args.cs_config, CS_FIELDS)):
        for item in filter(None, (text or "").split(",")):
            name, value = item.split("=")
            fields[name] = None if value == "None" else int(value)
    if args.only:
        BACKENDS = tuple(b for b in BACKENDS if b in args.only or b == "sdpa-cudnn")
    dev = torch.device("cuda")
    print(f"{torch.cuda.get_device_name(dev)} torch {torch.__version__} triton "
          f"{triton.__version__}", flush=True)
    rows, status = [], 0
    for causal in {"0": (False,), "1": (True,), "both": (False, True)}[args.causal]:
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
                gcfg = gluon_configs(hd, causal, seqlen)
                for name, c in gcfg.items():
                    print(f"{row['label']} causal={int(causal)} {name} config {c}", flush=True)
                times = {}
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
                        times[name] = []
                        print(f"{row['label']} causal={int(causal)} {name:<10} "
                              f"max|diff vs cudnn|={diff:.2e}  first call {first:.1f}s{flag}",
                              flush=True)
                    except Exception:
                        status = 1
                        row[name] = float("nan")
                        print(f"{row['label']} causal={int(causal)} {name} FAILED:", flush=True)
                        traceback.print_exc(file=sys.stdout)
                for _ in range(args.rounds):  # every column in turn, each round
                    for name in times:
                        times[name].append(triton.testing.do_bench(
                            fns[name], warmup=25, rep=100, return_mode="median"))
                for name, ms_all in times.items():
                    ms = statistics.median(ms_all)
                    row[name] = tflops(flops, ms)
                    print(f"{row['label']} causal={int(causal)} {name:<10} {ms:8.3f} ms "
                          f"{row[name]:6.1f} TFLOPS (median of {len(ms_all)}: "
                          f"{min(ms_all):.3f}-{max(ms_all):.3f} ms)", flush=True)
                row["configs"] = {name: repr(c) for name, c in gcfg.items()}
                rows.append(row)
                del q, k, v, ref, fns
                torch.cuda.empty_cache()
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["shape", "causal", "backend", "fwd_tflops", "config"])
            for r in rows:
                for name in BACKENDS:
                    w.writerow([r["label"], r["causal"], name, f"{r[name]:.2f}",
                                r["configs"].get(name, "")])
    print("\nforward TFLOPS (ratio to sdpa-cudnn)")
    print(f"{'shape':<22} {'causal':<6} " + " ".join(f"{n:>16}" for n in BACKENDS))
    for r in rows:
        base = r["sdpa-cudnn"]
        cells = [f"{r[n]:7.1f} ({r[n] / base:4.2f})" for n in BACKENDS]
        print(f"{r['label']:<22} {int(r['causal']):<6} " + " ".join(f"{c:>16}" for c in cells))
    return status


if __name__ == "__main__":
    sys.exit(main())
