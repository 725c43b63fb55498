"""Reporting: the long-format CSV and the human table.

CSV columns (one number per row)::

    kernel, backend, batch, seqlen, nheads, head_dim, causal, dtype, metric, value,
    gpu, torch, triton, commit, date

Shape columns are empty for rows that have no attention shape (the matmul ceiling).
"""

from __future__ import annotations

import csv
import subprocess
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from .harness import ATTN_KERNEL, MATMUL_N, REFERENCE_BACKEND, BenchResult, Record

CSV_COLUMNS = (
    "kernel",
    "backend",
    "batch",
    "seqlen",
    "nheads",
    "head_dim",
    "causal",
    "dtype",
    "metric",
    "value",
    "gpu",
    "torch",
    "triton",
    "commit",
    "date",
)


@dataclass(frozen=True)
class Env:
    """Where and when the numbers were taken."""

    gpu: str
    torch: str
    triton: str
    commit: str
    date: str

    @classmethod
    def collect(cls, commit: str | None = None) -> Env:
        """Describe this machine; ``commit`` overrides ``git rev-parse HEAD``."""
        import torch
        import triton

        gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
        return cls(
            gpu=gpu,
            torch=torch.__version__,
            triton=triton.__version__,
            commit=commit or git_commit(),
            date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        )

    def line(self) -> str:
        """The one-line footer every table ends with."""
        return (f"{self.gpu}, torch {self.torch}, triton {self.triton}, commit {self.commit}, "
                f"{self.date}")


def git_commit() -> str:
    """The checkout's HEAD (read-only ``git rev-parse``), or "unknown"."""
    try:
        proc = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parent,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return proc.stdout.strip() if proc.returncode == 0 and proc.stdout.strip() else "unknown"


def csv_row(record: Record, env: Env) -> dict:
    """One CSV row (a dict keyed by ``CSV_COLUMNS``)."""
    s = record.shape
    row = dict(kernel=record.kernel, backend=record.backend, metric=record.metric)
    row.update(
        batch=s.batch if s else "",
        seqlen=s.seqlen if s else "",
        nheads=s.nheads if s else "",
        head_dim=s.head_dim if s else "",
        causal=int(s.causal) if s else "",
        dtype=s.dtype if s else "bfloat16",
        value=f"{record.value:.6g}",
    )
    row.update(gpu=env.gpu, torch=env.torch, triton=env.triton, commit=env.commit, date=env.date)
    return row


def write_rows(path: str | Path, rows: list[dict], fieldnames=None) -> None:
    """Write ``rows`` (dicts) as a CSV with a header, columns ``fieldnames`` or the first
    row's keys (overwrites ``path``): the wide tables of validate, tune and the scripts."""
    with Path(path).open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fieldnames or list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def write_csv(path: str | Path, records: list[Record], env: Env) -> None:
    """Write ``records`` as a long-format CSV with a header (overwrites ``path``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(csv_row(r, env) for r in records)


def read_csv(paths) -> tuple[BenchResult, list[Env]]:
    """Load long-format CSVs written by ``write_csv`` back into one ``BenchResult``.

    With several files, a later file's row replaces an earlier one's for the same
    (kernel, backend, shape, metric): e.g. a run at one head dim on top of a full table.
    Ratios come as written (each to the reference measured in its own run). Returns the
    result and each file's ``Env`` (from its first row)."""
    from .flops import Shape

    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    rows: dict[tuple, Record] = {}
    backends: list[str] = []
    envs, matmul = [], None
    for path in paths:
        with Path(path).open(newline="") as f:
            reader = csv.DictReader(f)
            missing = set(CSV_COLUMNS) - set(reader.fieldnames or ())
            if missing:
                raise ValueError(f"{path}: not a flashtile bench CSV (no {sorted(missing)})")
            env = None
            for row in reader:
                env = env or Env(row["gpu"], row["torch"], row["triton"], row["commit"],
                                 row["date"])
                shape = None
                if row["seqlen"]:
                    shape = Shape(int(row["batch"]), int(row["seqlen"]), int(row["nheads"]),
                                  int(row["head_dim"]), bool(int(row["causal"])),
                                  row["dtype"] or "bfloat16")
                rec = Record(row["kernel"], row["backend"], shape, row["metric"],
                             float(row["value"]))
                if rec.kernel == ATTN_KERNEL:
                    rows[(rec.kernel, rec.backend, shape, rec.metric)] = rec
                    if rec.backend not in backends:
                        backends.append(rec.backend)
                elif rec.metric == "tflops" and matmul is None:
                    matmul = rec.value
            if env is not None:
                envs.append(env)
    return BenchResult(records=list(rows.values()), backends=backends,
                       matmul_tflops=matmul), envs


# ----------------------------------------------------------------------------------
# human table
# ----------------------------------------------------------------------------------

_TABLE = (  # (header, metric, format)
    ("fwd TFLOPS", "fwd_tflops", "{:.1f}"),
    ("fwd+bwd TFLOPS", "fwd_bwd_tflops", "{:.1f}"),
    ("fwd/cuDNN", "fwd_vs_sdpa_cudnn", "{:.2f}x"),
    ("fwd+bwd/cuDNN", "fwd_bwd_vs_sdpa_cudnn", "{:.2f}x"),
    ("fwd %mm", "fwd_pct_of_matmul", "{:.0f}%"),
    ("fwd+bwd %mm", "fwd_bwd_pct_of_matmul", "{:.0f}%"),
    ("peak MiB", "fwd_bwd_peak_mem_mib", "{:.0f}"),
    ("1st call s", "first_call_s", "{:.1f}"),
)
# shown where a run has them: paired ratios (flashtile bench --pairs), sustained calls
# and their energy (--sustained)
_OPTIONAL = (
    ("fwd paired", "fwd_paired_vs_sdpa_cudnn", "{:.3f}x"),
    ("fwd+bwd paired", "fwd_bwd_paired_vs_sdpa_cudnn", "{:.3f}x"),
    ("fwd sust.", "fwd_sustained_vs_sdpa_cudnn", "{:.3f}x"),
    ("fwd+bwd sust.", "fwd_bwd_sustained_vs_sdpa_cudnn", "{:.3f}x"),
    ("fwd+bwd W", "fwd_bwd_sustained_watts", "{:.0f}"),
    ("fwd+bwd energy", "fwd_bwd_energy_vs_sdpa_cudnn", "{:.3f}x"),
)


def _cells(result: BenchResult) -> dict[tuple, dict[str, float]]:
    """(shape, backend) -> {metric: value}, in measurement order; first-call times summed."""
    cells: dict[tuple, dict[str, float]] = {}
    for r in result.records:
        if r.kernel != ATTN_KERNEL:
            continue
        cell = cells.setdefault((r.shape, r.backend), {})
        cell[r.metric] = r.value
        if r.metric.endswith("_first_call_s"):
            cell["first_call_s"] = cell.get("first_call_s", 0.0) + r.value
    for key in result.notes:
        cells.setdefault(key, {})
    return cells


def _align(rows: list[list[str]], left: int) -> str:
    """Plain-text columns: the first ``left`` left-aligned, the rest right-aligned."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        cells = [
            c.ljust(w) if i < left else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def format_table(result: BenchResult, env: Env | None = None) -> str:
    """The human table: one line per (shape, backend), then notes and the ceiling."""
    cells = _cells(result)
    table = _TABLE + tuple(col for col in _OPTIONAL
                           if any(col[1] in metrics for metrics in cells.values()))
    header = ["shape", "causal", "backend", *(h for h, _, _ in table)]
    rows = [header]
    rank = {b: i for i, b in enumerate(dict.fromkeys([*result.backends, *(b for _, b in cells)]))}
    by_shape = lambda key: (key[0].causal, key[0].head_dim, key[0].seqlen, rank[key[1]])
    for shape, backend in sorted(cells, key=by_shape):
        metrics = cells[(shape, backend)]
        line = [shape.label(), "yes" if shape.causal else "no", backend]
        for _, metric, fmt in table:
            value = metrics.get(metric)
            line.append("-" if value is None else fmt.format(value))
        rows.append(line)
    parts = [_align(rows, left=3)]
    parts.extend(_note_lines(result.notes))
    if result.matmul_tflops is not None:
        parts.append(f"bf16 matmul {MATMUL_N}^3: {result.matmul_tflops:.1f} TFLOPS (ceiling, %mm)")
    parts.append(f"ratios are to {REFERENCE_BACKEND} on the same shape, measured in the same run")
    parts.extend(floor_lines(result))
    if env is not None:
        parts.append(env.line())
    return "\n".join(parts)


# issue 4's floor: at hd 64 / 128 from 4k keys, forward >= 1.0x cuDNN and forward+backward
# >= 0.95x, measured in the same run
RATIO_FLOORS = {"fwd": 1.0, "fwd_bwd": 0.95}
FLOOR_HEAD_DIMS = (64, 128)
FLOOR_MIN_SEQLEN = 4096
# how a ratio was measured -> its metric's infix (rounds: the median over --rounds;
# paired: --pairs; sustained: --sustained, the steadiest between runs, session 46)
_FLOOR_METHODS = (("rounds", ""), ("paired", "_paired"), ("sustained", "_sustained"))


def floor_lines(result: BenchResult, backend: str = "flashtile") -> list[str]:
    """Issue 4's floor verdict for ``backend``: per way of measuring the ratio to cuDNN
    present in ``result``, how many of the floor's cells (hd 64 / 128, seqlen >= 4k)
    meet it, and the ones that miss with their ratios. Empty when the run has no such
    cell."""
    cells = {shape: metrics for (shape, b), metrics in _cells(result).items()
             if b == backend and shape.head_dim in FLOOR_HEAD_DIMS
             and shape.seqlen >= FLOOR_MIN_SEQLEN}
    if not cells:
        return []
    floors = ", ".join(f"{_mode_name(m)} >= {v:.2f}x" for m, v in RATIO_FLOORS.items())
    dims = " / ".join(str(d) for d in FLOOR_HEAD_DIMS)
    lines = [f"issue 4 floor for {backend} (hd {dims}, seqlen >= {FLOOR_MIN_SEQLEN // 1024}k; "
             f"{floors}):"]
    for method, infix in _FLOOR_METHODS:
        counts, misses = [], []
        for mode, floor in RATIO_FLOORS.items():
            metric = f"{mode}{infix}_vs_{REFERENCE_BACKEND.replace('-', '_')}"
            seen = {shape: m[metric] for shape, m in cells.items() if metric in m}
            if not seen:
                continue
            counts.append(f"{_mode_name(mode)} {sum(v >= floor for v in seen.values())}"
                          f"/{len(seen)}")
            misses.extend(f"{_floor_cell(shape)} {_mode_name(mode)} {_below(v, floor)}x"
                          for shape, v in sorted(seen.items(), key=_floor_order)
                          if v < floor)
        if counts:
            below = f"; below: {', '.join(misses)}" if misses else ""
            lines.append(f"  {method:<9}  {'  '.join(counts)}{below}")
    return lines


def _mode_name(mode: str) -> str:
    """``fwd_bwd`` -> ``fwd+bwd``."""
    return mode.replace("_", "+")


def _below(value: float, floor: float) -> str:
    """A ratio under ``floor`` to 3 decimals, or 4 where 3 would round it up to the floor
    (0.9497 -> "0.9497", not "0.950")."""
    text = f"{value:.3f}"
    return text if float(text) < floor else f"{value:.4f}"


def _floor_cell(shape) -> str:
    """``hd 128 4k causal``: a floor cell's short name."""
    n = shape.seqlen
    length = f"{n // 1024}k" if n % 1024 == 0 else str(n)
    return f"hd {shape.head_dim} {length} {'causal' if shape.causal else 'non-causal'}"


def _floor_order(item) -> tuple:
    shape = item[0]
    return shape.causal, shape.head_dim, shape.seqlen


def _note_lines(notes: dict) -> list[str]:
    """One line per (backend, reason), with how many shapes it covers."""
    grouped: dict[tuple[str, str], int] = {}
    for (_, backend), reason in notes.items():
        grouped[(backend, reason)] = grouped.get((backend, reason), 0) + 1
    return [f"{backend}: {reason} ({n} shape(s))" for (backend, reason), n in grouped.items()]
