"""Grouped bars of backward TFLOPS per shape from a scripts/bench_hopper_bwd.py CSV (long
format: shape, causal, backend, ms, tflops), one bar per backend, cuDNN's backward as a
tick over each group.

    python scripts/plot_bwd.py benchmarks/2026-11-30_fusedbwd_aed4ef9.csv \
        --out docs/figures/bwd_fused.png [--backends gluon-bwd fused-det fused-nd]

Backends with no timing in the CSV (nan) are left out.
"""

from __future__ import annotations

import argparse
import csv
import math
from collections import defaultdict

LABELS = {"gluon-bwd": "two-kernel Gluon (shipped)", "fused-det": "fused, ordered dQ adds",
          "fused-nd": "fused, racing dQ adds", "portable-bwd": "portable Triton",
          "cudnn-bwd": "SDPA cuDNN"}


def read(path):
    """{(shape, causal): {backend: tflops}} in file order."""
    rows = defaultdict(dict)
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            value = float(r["tflops"])
            if not math.isnan(value):
                rows[(r["shape"], r["causal"] in ("True", "1"))][r["backend"]] = value
    return rows


def plot(rows, backends, out, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = list(rows)
    backends = [b for b in backends if any(b in rows[g] for g in groups)]
    width = 0.8 / len(backends)
    fig, ax = plt.subplots(figsize=(12, 4.5))
    for i, b in enumerate(backends):
        xs = [g + (i - (len(backends) - 1) / 2) * width for g in range(len(groups))]
        ax.bar(xs, [rows[k].get(b, 0.0) for k in groups], width, label=LABELS.get(b, b))
    for g, k in enumerate(groups):  # cuDNN's backward: a tick across the group
        if "cudnn-bwd" in rows[k]:
            ax.plot([g - 0.45, g + 0.45], [rows[k]["cudnn-bwd"]] * 2, color="black", lw=2,
                    label="SDPA cuDNN" if g == 0 else None)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([f"{s.replace(' ', chr(10))}\n{'causal' if c else 'full'}"
                        for s, c in groups], fontsize=7)
    ax.set_ylabel("backward TFLOPS (2.5x forward FLOPs)")
    ax.set_title(title)
    top = max(v for k in groups for v in rows[k].values())
    ax.set_ylim(0, 1.3 * top)  # room for the legend above the bars
    ax.legend(fontsize=8, ncol=5, loc="upper left")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--out", required=True)
    ap.add_argument("--backends", nargs="+",
                    default=["gluon-bwd", "fused-det", "fused-nd", "portable-bwd"])
    ap.add_argument("--title", default="Backward on the H200, bf16, 16k tokens")
    args = ap.parse_args()
    print("wrote", plot(read(args.csv), args.backends, args.out, args.title))


if __name__ == "__main__":
    main()
