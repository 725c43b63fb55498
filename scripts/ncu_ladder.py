"""ncu counters for the kernel ladder (docs/ladder.md's "bottleneck and evidence").

Two verbs:

    python scripts/ncu_ladder.py run --rung v1_naive [--seqlen 4096 --head-dim 64 --causal]
        one warm-up call of the rung (compiles; not profiled), then one call between
        cudaProfilerStart/Stop: run it under
        ncu --clock-control none --profile-from-start off --csv --page raw \
            --section SpeedOfLight --section ComputeWorkloadAnalysis \
            --section MemoryWorkloadAnalysis python scripts/ncu_ladder.py run ...
    python scripts/ncu_ladder.py run --backward [--seqlen ... --head-dim ... --causal]
                                     [--backend flashtile|sdpa-cudnn]
        the same for a backward: forward and one warm-up backward outside the range, then
        one backward (flashtile's preprocess, dK/dV and dQ kernels as dispatched, or
        SDPA's cuDNN backward kernels, to read their grid, block, registers and shared
        memory beside flashtile's)
    python scripts/ncu_ladder.py summarize DIR [--files A.csv B.csv ...]
        reads DIR/ncu_<rung>.csv (ncu's raw CSV; or the named files, labelled by their
        stem) and prints one row per kernel: duration, SM and DRAM throughput (% of
        peak), DRAM bytes, the busiest pipes (% of peak) and, where the WarpStateStats
        section was collected, the top warp stall reasons (cycles per issued instruction).

Shape: the DESIGN.md one (16k tokens, hidden 2048, bf16) at the given seqlen/head dim.
scripts/suites/ncu.sh runs it for every rung. The counters answer whether a rung is
bound by DRAM (v1/v2 write N x N), by the FMA pipe (the fp32 rungs) or by the tensor
pipe (v5 and up), instead of inferring it from timings alone.
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import sys
from pathlib import Path

COLUMNS = (  # (label, metric-name regex); first match wins; ms and GB in those units
    ("ms", r"^gpu__time_duration\.sum$"),
    ("SM %", r"^sm__throughput\.avg\.pct_of_peak_sustained_elapsed$"),
    ("DRAM %", r"^gpu__dram_throughput\.avg\.pct_of_peak_sustained_elapsed$"),
    ("DRAM GB", r"^dram__bytes\.sum$"),
    ("regs", r"^launch__registers_per_thread$"),  # LaunchStats section only
    ("occ %", r"^sm__warps_active\.avg\.pct_of_peak_sustained_active$"),  # Occupancy only
    ("grid", r"^launch__grid_size$"),  # LaunchStats, as are block and smem
    ("block", r"^launch__block_size$"),
    ("smem KB", r"^launch__shared_mem_per_block$"),
    ("L2 hit %", r"^lts__t_sector_hit_rate\.pct$"),  # MemoryWorkloadAnalysis only
    # spills: collected only with --metrics l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum,...
    ("local ld GB", r"^l1tex__t_bytes_pipe_lsu_mem_local_op_ld\.sum$"),
    ("local st GB", r"^l1tex__t_bytes_pipe_lsu_mem_local_op_st\.sum$"),
)
INTS = ("regs", "grid", "block")  # printed whole
STALL = re.compile(r"^smsp__average_warp(s_issue_stalled|_latency_issue_stalled)_([a-z_]+?)"
                   r"(_per_issue_active)?\.ratio$")
PIPE = re.compile(r"^sm__(inst_executed_)?pipe_([a-z0-9_]+?)(_cycles_active)?\.avg\.pct_of_peak_"
                  r"sustained_active$")


def run(args) -> int:
    import torch

    from flashtile.bench.flops import paper_shape
    from flashtile.bench.harness import make_inputs
    from flashtile.ladder import registry

    shape = paper_shape(args.seqlen, args.head_dim, args.causal)
    q, k, v, _ = make_inputs(shape, torch.device("cuda"))
    if args.backward:
        q, k, v = (t.detach().requires_grad_(True) for t in (q, k, v))
        if args.backend == "sdpa-cudnn":
            import torch.nn.functional as F
            from torch.nn.attention import SDPBackend, sdpa_kernel

            q, k, v = (t.detach().transpose(1, 2).contiguous().requires_grad_(True)
                       for t in (q, k, v))
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                out = F.scaled_dot_product_attention(q, k, v, is_causal=args.causal)
        else:
            from flashtile import flash_attn_func

            out = flash_attn_func(q, k, v, causal=args.causal)
        dout = torch.randn_like(out)
        out.backward(dout, retain_graph=True)  # compile + warm-up, outside the range
        fn = lambda: out.backward(dout, retain_graph=True)  # noqa: E731
        label = f"backward ({args.backend})"
    else:
        rung = registry()[args.rung].fn
        fn = lambda: rung(q, k, v, causal=args.causal)  # noqa: E731
        fn()  # compile + warm-up, outside the profiled range
        label = args.rung
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print(f"{label} {shape.label()} causal={args.causal}", file=sys.stderr)
    return 0


def _value(unit: str, raw: str) -> float:
    x = float(raw.replace(",", ""))
    scale = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3,
             "ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3,
             "byte": 1e-9, "Kbyte": 1e-6, "Mbyte": 1e-3, "Gbyte": 1.0, "Tbyte": 1e3,
             "byte/s": 1e-9, "Kbyte/s": 1e-6, "Mbyte/s": 1e-3, "Gbyte/s": 1.0,
             "Tbyte/s": 1e3}
    return x * scale.get(unit, 1.0)


def parse(path: Path) -> list[dict]:
    """ncu --csv --page raw: a header row of metric names, a row of units, then one row
    per kernel. Returns one dict per kernel: name, the COLUMNS, and the pipes."""
    text = path.read_text(errors="replace")
    start = text.find('"ID"')
    if start < 0:
        return []
    rows = list(csv.reader(io.StringIO(text[start:])))
    head, units, data = rows[0], rows[1], rows[2:]
    out = []
    for r in data:
        if len(r) != len(head):
            continue
        rec = {"kernel": r[head.index("Kernel Name")][:38]}
        for label, pat in COLUMNS:
            for i, name in enumerate(head):
                if re.match(pat, name) and r[i] not in ("", "n/a"):
                    # smem: bytes come out in GB ("byte"), or raw ("byte/block", ncu 2025)
                    unit = units[i].split("/")[0] if label == "smem KB" else units[i]
                    rec[label] = _value(unit, r[i])
                    if label == "smem KB":
                        rec[label] *= 1e6
                    break
        if "DRAM GB" not in rec and "ms" in rec:  # ncu 2025: a rate; GB = GB/s * s
            for i, name in enumerate(head):
                if name == "dram__bytes.sum.per_second" and r[i] not in ("", "n/a"):
                    rec["DRAM GB"] = _value(units[i], r[i]) * rec["ms"] / 1e3
        if "DRAM GB" not in rec:  # older sections: read + write apart
            parts = [_value(units[i], r[i]) for i, name in enumerate(head)
                     if name in ("dram__bytes_read.sum", "dram__bytes_write.sum")
                     and r[i] not in ("", "n/a")]
            if parts:
                rec["DRAM GB"] = sum(parts)
        pipes = {}
        for i, name in enumerate(head):
            m = PIPE.match(name)
            if m and r[i] not in ("", "n/a"):
                pipes[m.group(2)] = max(pipes.get(m.group(2), 0.0), float(r[i].replace(",", "")))
        top = sorted(pipes.items(), key=lambda kv: -kv[1])[:3]
        rec["pipes"] = ", ".join(f"{p} {v:.0f}%" for p, v in top)
        stalls = {}
        for i, name in enumerate(head):
            m = STALL.match(name)
            if m and m.group(3) and r[i] not in ("", "n/a"):
                stalls[m.group(2)] = float(r[i].replace(",", ""))
        top = sorted(stalls.items(), key=lambda kv: -kv[1])[:4]
        rec["stalls"] = ", ".join(f"{p} {v:.2g}" for p, v in top) or "-"
        out.append(rec)
    return out


def summarize(args) -> int:
    if args.files:
        runs = [(Path(f).stem, Path(args.dir) / f) for f in args.files]
    else:
        from flashtile.ladder import rung_names

        runs = [(rung, Path(args.dir) / f"ncu_{rung}.csv") for rung in rung_names()]
    labels = [c for c, _ in COLUMNS]
    print("| run | kernel | " + " | ".join(labels)
          + " | busiest pipes (% of peak, active) | top stalls (cycles per issue) |")
    print("|---" * (len(labels) + 4) + "|")
    found = 0
    for label, path in runs:
        if not path.exists():
            continue
        for rec in parse(path):
            found += 1
            cells = [("-" if c not in rec else f"{rec[c]:.0f}" if c in INTS
                      else f"{rec[c]:.3g}") for c, _ in COLUMNS]
            print(f"| {label} | {rec['kernel']} | " + " | ".join(cells)
                  + f" | {rec['pipes']} | {rec['stalls']} |")
    return 0 if found else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="verb", required=True)
    r = sub.add_parser("run")
    r.add_argument("--rung", default="production")
    r.add_argument("--backward", action="store_true",
                   help="profile flashtile's backward instead of a forward rung")
    r.add_argument("--backend", choices=("flashtile", "sdpa-cudnn"), default="flashtile",
                   help="whose backward --backward profiles")
    r.add_argument("--seqlen", type=int, default=4096)
    r.add_argument("--head-dim", type=int, default=64)
    r.add_argument("--causal", action="store_true")
    s = sub.add_parser("summarize")
    s.add_argument("dir")
    s.add_argument("--files", nargs="+", help="CSV names under DIR (default: ncu_<rung>.csv)")
    args = ap.parse_args(argv)
    return run(args) if args.verb == "run" else summarize(args)


if __name__ == "__main__":
    sys.exit(main())
