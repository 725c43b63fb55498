"""Two `flashtile bench --pairs` CSVs of the same cells, side by side.

    python scripts/pairs_compare.py A.csv B.csv

Per (shape, causal, mode) of flashtile: the round-median ratio to cuDNN
(``<mode>_vs_sdpa_cudnn``) in each run and how far apart the two are, then the same for
the paired ratio (``<mode>_paired_vs_sdpa_cudnn``, --pairs) and the sustained time and
energy per call (``<mode>_sustained_vs_sdpa_cudnn``, ``<mode>_energy_vs_sdpa_cudnn``,
--sustained), where the CSVs have them. The method whose two runs agree more closely is
the one to trust for a floor verdict.
"""

from __future__ import annotations

import csv
import statistics
import sys


def load(path: str, backend: str = "flashtile") -> dict[tuple, dict[str, float]]:
    """(head_dim, seqlen, causal) -> {metric: value} for ``backend``'s rows."""
    cells: dict[tuple, dict[str, float]] = {}
    with open(path) as f:
        for r in csv.DictReader(f):
            if r["backend"] == backend and r["head_dim"]:
                key = (int(r["head_dim"]), int(r["seqlen"]), r["causal"] in ("1", "True"))
                cells.setdefault(key, {})[r["metric"]] = float(r["value"])
    return cells


METHODS = ("rounds", "paired", "sustained", "energy")


def _methods(mode: str) -> list[tuple[str, str]]:
    """(method, metric) pairs: the round-median ratio, the paired one (--pairs), the
    sustained time and the energy per call (--sustained) to cuDNN."""
    return list(zip(METHODS, (f"{mode}_vs_sdpa_cudnn", f"{mode}_paired_vs_sdpa_cudnn",
                              f"{mode}_sustained_vs_sdpa_cudnn",
                              f"{mode}_energy_vs_sdpa_cudnn"), strict=True))


def compare(a: dict, b: dict) -> list[dict]:
    """One row per cell and mode present in both runs: the two ratios of each method and
    their relative difference |x / y - 1|."""
    rows = []
    for key in sorted(set(a) & set(b), key=lambda k: (k[2], k[0], k[1])):
        for mode in ("fwd", "fwd_bwd"):
            row = dict(head_dim=key[0], seqlen=key[1], causal=key[2], mode=mode)
            for method, metric in _methods(mode):
                x, y = a[key].get(metric), b[key].get(metric)
                row[f"{method}_a"], row[f"{method}_b"] = x, y
                row[f"{method}_diff"] = abs(x / y - 1) if x and y else None
            if any(row[f"{m}_diff"] is not None for m, _ in _methods(mode)):
                rows.append(row)
    return rows


def _fmt(x, spec):
    return "-".rjust(int(spec.split(".")[0])) if x is None else format(x, spec)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    rows = compare(load(argv[0]), load(argv[1]))
    if not rows:
        print("pairs_compare: no cell in both CSVs", file=sys.stderr)
        return 1
    shown = [m for m in METHODS if any(r[f"{m}_diff"] is not None for r in rows)]
    print(f"{'cell':<24}{'mode':<9}" + "".join(f"{m + ' A':>12}{'B':>8}{'diff':>7}"
                                               for m in shown))
    for r in rows:
        kind = "causal" if r["causal"] else "non-causal"
        cell = f"hd {r['head_dim']} {r['seqlen'] // 1024}k {kind}"
        print(f"{cell:<24}{r['mode']:<9}" + "".join(
            f"{_fmt(r[m + '_a'], '12.3f')}{_fmt(r[m + '_b'], '8.3f')}"
            f"{_fmt(r[m + '_diff'], '7.1%')}" for m in shown))
    for method in shown:
        diffs = [r[f"{method}_diff"] for r in rows if r[f"{method}_diff"] is not None]
        if diffs:
            print(f"{method}: A vs B median {statistics.median(diffs):.1%}, "
                  f"max {max(diffs):.1%} over {len(diffs)} cells")
    return 0


if __name__ == "__main__":
    sys.exit(main())
