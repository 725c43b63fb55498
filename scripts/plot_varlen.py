"""Varlen forward+backward against dense, with the Gluon and the portable varlen
backward, from two `flashtile bench --suite varlen` CSVs of one tree (the Gluon varlen
backward forced on, then off):

    python scripts/plot_varlen.py benchmarks/2026-11-30_varlenbwd_on_30970b9.csv \\
        benchmarks/2026-11-30_varlenbwd_off_30970b9.csv --out docs/figures/varlen_bwd.png

One group per (head dim, mask, longest sequence): TFLOPS on the work done (sum of
per-sequence lengths squared) for varlen with each backward and for the same tokens as
dense sequences; the dense bar is the first CSV's.
"""

from __future__ import annotations

import argparse
import csv
import re


def read(path):
    """{(max_len, d, mask): {backend: fwd_bwd tflops}}."""
    out = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            m = re.fullmatch(r"d(\d+)_(full|causal)_fwd_bwd_tflops", r["metric"])
            if not m:
                continue
            key = (int(r["kernel"].split("max")[1]), int(m.group(1)), m.group(2))
            out.setdefault(key, {})[r["backend"]] = float(r["value"])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gluon_csv")
    ap.add_argument("portable_csv")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    on, off = read(args.gluon_csv), read(args.portable_csv)
    keys = sorted(on, key=lambda k: (k[1], k[2] != "full", k[0]))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = [("varlen, Gluon backward", [on[k]["varlen"] for k in keys]),
              ("varlen, portable backward", [off[k]["varlen"] for k in keys]),
              ("dense, same tokens", [on[k]["dense"] for k in keys])]
    fig, ax = plt.subplots(figsize=(10, 4.2))
    width = 0.8 / len(series)
    for i, (label, values) in enumerate(series):
        ax.bar([x + (i - 1) * width for x in range(len(keys))], values, width, label=label)
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([f"hd {d} {mask}\nmax {n // 1024}k" for n, d, mask in keys])
    ax.set_ylabel("forward+backward TFLOPS (work done)")
    ax.set_title("Varlen batches (16k tokens, bf16, H200): Gluon vs portable varlen backward")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
