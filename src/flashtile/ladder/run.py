"""``flashtile ladder``: every rung on the GPU at the DESIGN.md shapes, with the table,
a long-format CSV and four figures (wired into ``flashtile.cli``).

Example (on the GPU machine)::

    flashtile ladder --csv benchmarks/ladder.csv --figures benchmarks/figures
    flashtile ladder --quick --rungs v5_fa2_tensorcore v6_tuned production

For every rung and shape (bf16, 16k tokens, hidden 2048: ``nheads = 2048 / head_dim``,
``batch = 16384 / seqlen``): the median time of ``triton.testing.do_bench``, TFLOPS of
the useful work (``4 B H S^2 D``, halved for causal, the same count for every rung,
whatever it actually computes), the speed-up over v1, the HBM bytes of the rung's
design (``bytes_model``) and the bandwidth they imply, arithmetic intensity (FLOPs per
model byte), and the peak memory allocated during one call
(``torch.cuda.max_memory_allocated``, inputs included): the O(N^2) -> O(N) memory
story, measured. Before timing, every rung is checked by the DESIGN.md rule at
seqlen 1023 for each (head dim, causal). The bf16 matmul (8192^3) and device-copy
ceilings are measured in the same run, for the roofline.

Without a CUDA device it says that timings need a GPU and runs every rung once on a
tiny shape under Triton's interpreter, checked against the reference.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from ..bench.cli import parse_size
from ..bench.flops import Shape, attn_fwd_flops, paper_shape, tflops
from ..bench.harness import MATMUL_N, Record, Timing, matmul_ceiling, median_ms
from ..bench.report import CSV_COLUMNS, Env, csv_row
from . import rung_names

SEQLENS = (512, 1024, 2048, 4096, 8192, 16384)
HEAD_DIMS = (64, 128)
QUICK_SEQLENS = (1024, 4096)
QUICK_HEAD_DIMS = (128,)
BASELINE = "v1_naive"
VALIDATE_SEQLEN = 1023  # odd: ragged last tiles in every rung
SMOKE_SHAPE = dict(batch=1, seqlen_q=19, seqlen_k=37, nheads=2, head_dim=32)
FIGURES = ("ladder_latency.png", "ladder_tflops.png", "ladder_memory.png",
           "ladder_roofline.png")
GiB = 2**30


# ==================================================================================
# command line
# ==================================================================================


def _split(values) -> list[str]:
    """Accept ``a b c`` and ``a,b,c`` alike."""
    return [p for v in values or () for p in str(v).split(",") if p.strip()]


def configure_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``ladder`` options to ``parser`` and return it."""
    names = rung_names()
    parser.add_argument("--seqlens", nargs="+", metavar="N",
                        help=f"sequence lengths, 4096 or 4k (default: {_join(SEQLENS)})")
    parser.add_argument("--head-dims", nargs="+", metavar="D",
                        help=f"head dims (default: {_join(HEAD_DIMS)})")
    parser.add_argument("--causal", choices=("both", "yes", "no"), default="both",
                        help="causal masking (default: both)")
    parser.add_argument("--rungs", nargs="+", metavar="NAME",
                        help=f"rungs to run, in ladder order (default: all: {_join(names)})")
    parser.add_argument("--csv", metavar="PATH", default="benchmarks/ladder.csv",
                        help="long-format results CSV (default: benchmarks/ladder.csv)")
    parser.add_argument("--figures", metavar="DIR", default="benchmarks/figures",
                        help=f"write {', '.join(FIGURES)} here (default: benchmarks/figures)")
    parser.add_argument("--quick", action="store_true",
                        help="short do_bench budgets and, unless given, seqlens "
                        f"{_join(QUICK_SEQLENS)} and head dim {_join(QUICK_HEAD_DIMS)}")
    parser.add_argument("--commit", metavar="SHA",
                        help="commit to record (default: git rev-parse HEAD, else 'unknown')")
    return parser


def _join(values) -> str:
    return " ".join(map(str, values))


def selection(args) -> tuple[list[str], list[int], list[int], list[bool]]:
    """(rungs, seqlens, head dims, causal flags) asked for; ValueError names a bad one."""
    known = rung_names()
    names = _split(args.rungs) or known
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown rung(s) {', '.join(unknown)}; known: {', '.join(known)}")
    names = [n for n in known if n in names]  # ladder order
    try:
        seqlens = [parse_size(s) for s in _split(args.seqlens)]
        head_dims = [int(d) for d in _split(args.head_dims)]
    except (argparse.ArgumentTypeError, ValueError) as exc:
        raise ValueError(str(exc)) from None
    seqlens = seqlens or list(QUICK_SEQLENS if args.quick else SEQLENS)
    head_dims = head_dims or list(QUICK_HEAD_DIMS if args.quick else HEAD_DIMS)
    for d in head_dims:
        if d % 8 or not 8 <= d <= 256 or 2048 % d:
            raise ValueError(f"head dim must be a multiple of 8 in [8, 256] dividing 2048, got {d}")
    if any(s < 1 for s in seqlens):
        raise ValueError(f"seqlens must be >= 1, got {seqlens}")
    causal = {"both": [False, True], "yes": [True], "no": [False]}[args.causal]
    return names, seqlens, head_dims, causal


def run(args: argparse.Namespace) -> int:
    """The ladder on the GPU, or the CPU smoke run; returns the exit status."""
    try:
        names, seqlens, head_dims, causal = selection(args)
    except ValueError as exc:
        print(f"flashtile ladder: {exc}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("flashtile ladder: timings need a GPU, and no CUDA device was found.")
        print("Running every rung once on a tiny shape under Triton's interpreter instead "
              "(correctness only, no timings).")
        return cpu_smoke(names)
    return run_gpu(args, names, seqlens, head_dims, causal)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="flashtile ladder", description=__doc__.split("\n")[0])
    return run(configure_parser(parser).parse_args(argv))


# ==================================================================================
# models: bytes and workspace
# ==================================================================================


def bytes_model(rung: str, batch: int, nheads: int, seqlen_q: int, seqlen_k: int,
                head_dim: int, elem: int = 2) -> float:
    """HBM bytes a rung moves by design, for the achieved bandwidth and the roofline.

    Every rung reads q, k, v once and writes out and lse (``io``); K/V tiles re-read
    by the FA2 rungs (v4, v5, v6, portable, production: once per query tile) are counted once,
    assuming concurrent programs of the same head share them through L2. On top:

        v1   the fp32 N x N matrix crosses HBM four times: S written, S read, P
             written, P read (16 bytes per score)
        v2   S written once and read twice (row statistics, then P V): 12 bytes
        v3   no N x N; for every K/V tile, each query tile is read (input dtype)
             and its fp32 O row plus m and l are read and written back, then a
             final pass reads O, m, l (FA1's O(N^2 D / BLOCK_N) traffic)

    Causal masking does not change these counts: only v6, portable and production skip masked
    tiles, and they skip compute, not compulsory traffic. v3's count uses its GPU
    BLOCK_N. ``elem`` is the input dtype's size.
    """
    bh = batch * nheads
    io = bh * (2 * seqlen_q * head_dim + 2 * seqlen_k * head_dim) * elem + bh * seqlen_q * 4
    nn = bh * seqlen_q * seqlen_k * 4
    if rung == "v1_naive":
        return float(io + 4 * nn)
    if rung == "v2_fused_softmax":
        return float(io + 3 * nn)
    if rung == "v3_fa1":
        from .v3_fa1 import config

        n_kv = math.ceil(seqlen_k / config(head_dim, torch.device("cuda")).block_n)
        per_kv = seqlen_q * head_dim * elem + 2 * seqlen_q * (head_dim + 2) * 4
        return float(io + bh * (n_kv * per_kv + seqlen_q * (head_dim + 2) * 4))
    return float(io)


def workspace_bytes(rung: str, batch: int, nheads: int, seqlen_q: int, seqlen_k: int,
                    head_dim: int) -> int:
    """Device memory a rung allocates besides out and lse (checked before launch)."""
    bh = batch * nheads
    if rung == "v1_naive":
        return 2 * bh * seqlen_q * seqlen_k * 4  # S and P, fp32
    if rung == "v2_fused_softmax":
        return bh * seqlen_q * seqlen_k * 4  # S
    if rung == "v3_fa1":
        return bh * seqlen_q * (head_dim + 2) * 4  # O, m, l in fp32
    return 0


# ==================================================================================
# measuring
# ==================================================================================


@dataclass
class Row:
    """One rung on one shape. ``status`` is "ok", "skipped: ..." or "error: ..."."""

    rung: str
    batch: int
    seqlen: int
    nheads: int
    head_dim: int
    causal: bool
    status: str = "ok"
    valid: str = ""  # the correctness check of this (rung, head dim, causal)
    time_ms: float | None = None
    tflops: float | None = None
    speedup_vs_v1: float | None = None
    hbm_gb: float | None = None  # bytes_model / 1e9
    hbm_tbps: float | None = None
    flop_per_byte: float | None = None
    peak_mem_gib: float | None = None
    workspace_gib: float | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


METRICS = ("time_ms", "tflops", "speedup_vs_v1", "hbm_gb", "hbm_tbps", "flop_per_byte",
           "peak_mem_gib", "workspace_gib")


class CudaMeter:
    """How the GPU run measures: do_bench medians and the caching allocator's counters."""

    def __init__(self, device: torch.device, timing: Timing):
        self.device, self.timing = device, timing

    def available_bytes(self) -> int:
        free, _ = torch.cuda.mem_get_info(self.device)
        cached = torch.cuda.memory_reserved(self.device) - torch.cuda.memory_allocated(self.device)
        return int(free + cached)

    def time_ms(self, fn: Callable[[], object]) -> float:
        return median_ms(fn, self.timing)

    def peak_bytes(self, fn: Callable[[], object]) -> tuple[int, int]:
        """(peak allocated during one call, allocated before it)."""
        torch.cuda.synchronize(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        before = torch.cuda.memory_allocated(self.device)
        fn()
        torch.cuda.synchronize(self.device)
        return torch.cuda.max_memory_allocated(self.device), before

    def release(self) -> None:
        torch.cuda.synchronize(self.device)
        torch.cuda.empty_cache()


def measure(name: str, fn, q, k, v, shape: Shape, meter) -> Row:
    """Time one rung on one shape; a rung that does not fit or fails becomes a note."""
    b, s, h, d = shape.batch, shape.seqlen, shape.nheads, shape.head_dim
    row = Row(name, b, s, h, d, shape.causal)
    need = workspace_bytes(name, b, h, s, s, d) + q.numel() * q.element_size() + b * h * s * 4
    avail = meter.available_bytes()
    if need > 0.9 * avail - GiB // 2:  # do_bench's 256 MB L2 flush buffer, and slack
        row.status = f"skipped: needs {need / GiB:.1f} GiB ({avail / GiB:.1f} GiB free)"
        return row
    call = lambda: fn(q, k, v, causal=shape.causal)
    try:
        call()  # compile and warm up, outside the timed region
        peak, before = meter.peak_bytes(call)
        row.time_ms = meter.time_ms(call)
    except torch.cuda.OutOfMemoryError:
        row.status = f"skipped: out of memory (needs ~{need / GiB:.1f} GiB)"
        return row
    except Exception as exc:  # one rung failing must not end the run
        first = (str(exc).strip().splitlines() or [""])[0][:120]
        row.status = f"error: {type(exc).__name__}: {first}"
        return row
    finally:
        meter.release()
    flops = attn_fwd_flops(b, h, s, s, d, shape.causal)
    nbytes = bytes_model(name, b, h, s, s, d, q.element_size())
    row.tflops = tflops(flops, row.time_ms)
    row.hbm_gb = nbytes / 1e9
    row.hbm_tbps = nbytes / (row.time_ms * 1e-3) / 1e12
    row.flop_per_byte = flops / nbytes
    row.peak_mem_gib = peak / GiB
    row.workspace_gib = (peak - before) / GiB
    return row


def fill_speedups(rows: list[Row], baseline: str = BASELINE) -> None:
    """speedup_vs_v1 = time(v1) / time(rung) on the same shape, where both ran."""
    base = {(r.seqlen, r.head_dim, r.causal): r.time_ms for r in rows
            if r.rung == baseline and r.ok}
    for r in rows:
        t = base.get((r.seqlen, r.head_dim, r.causal))
        if r.ok and t:
            r.speedup_vs_v1 = t / r.time_ms


def validate(names, head_dim: int, causal: bool, device, seqlen: int = VALIDATE_SEQLEN,
             nheads: int = 2) -> dict[str, str]:
    """name -> "ok" or "FAIL out ... " from the DESIGN.md rule (``check_rung``) on a
    ``late_spike`` bf16 input with ragged tiles."""
    from ..validate import make_qkv
    from . import check_rung

    q, k, v = make_qkv(1, seqlen, seqlen, nheads, nheads, head_dim, torch.bfloat16, device,
                       "late_spike", "contiguous", seed=seqlen + head_dim + int(causal))
    verdicts = {}
    for name in names:
        try:
            checks = check_rung(name, q, k, v, causal=causal)
        except Exception as exc:  # reported in the table; the run goes on
            verdicts[name] = f"FAIL {type(exc).__name__}"
            continue
        bad = [f"{c.name} ratio {c.ratio:.2f}" for c in checks if not c.ok]
        verdicts[name] = "ok" if not bad else "FAIL " + ", ".join(bad)
    return verdicts


def measure_grid(names, seqlens, head_dims, causals, device, meter,
                 shape_fn=paper_shape, validate_seqlen=VALIDATE_SEQLEN, log=None) -> list[Row]:
    """Validate, then measure every rung on every shape; rows in table order."""
    from . import registry

    rungs = registry()
    rows = []
    for head_dim in head_dims:
        for causal in causals:
            verdicts = validate(names, head_dim, causal, device, validate_seqlen)
            for seqlen in seqlens:
                shape = shape_fn(seqlen, head_dim, causal)
                gen = torch.Generator(device=device).manual_seed(seqlen * 1000 + head_dim)
                dims = (shape.batch, shape.seqlen, shape.nheads, shape.head_dim)
                q, k, v = (torch.randn(dims, generator=gen, device=device,
                                       dtype=torch.bfloat16) for _ in range(3))
                for name in names:
                    row = measure(name, rungs[name].fn, q, k, v, shape, meter)
                    row.valid = verdicts[name]
                    rows.append(row)
                    if log:
                        log(_progress_line(row))
                del q, k, v
                meter.release()
    fill_speedups(rows)
    return rows


def measure_ceilings(device: torch.device, timing: Timing) -> dict[str, float]:
    """bf16 matmul TFLOPS (8192^3) and device-copy TB/s (1 GiB read + 1 GiB written)."""
    copy_tbps = _copy_tbps(device, timing)
    return {"matmul_tflops": matmul_ceiling(device, timing), "copy_tbps": copy_tbps}


def _copy_tbps(device: torch.device, timing: Timing) -> float:
    src = torch.empty(GiB // 4, dtype=torch.float32, device=device).normal_()
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), timing)
    return 2 * src.numel() * src.element_size() / (ms * 1e-3) / 1e12


def run_gpu(args, names, seqlens, head_dims, causals, *, device=None, meter=None,
            ceilings=None, **grid_kw) -> int:
    """Measure, write the CSV and the figures, print the tables last (the log's tail).
    Exit status 1 when a rung failed its check or raised. ``device``, ``meter``,
    ``ceilings`` and ``grid_kw`` (``measure_grid``'s) replace the GPU's in tests."""
    device = device or torch.device("cuda", torch.cuda.current_device())
    timing = Timing.quick() if args.quick else Timing()
    env = Env.collect(args.commit)
    log = lambda line: print(line, file=sys.stderr, flush=True)
    log(f"flashtile ladder: {len(names)} rungs x {len(seqlens)} seqlens x {len(head_dims)} "
        f"head dims x {len(causals)} masks on {env.gpu}")
    start = time.perf_counter()
    ceilings = ceilings or measure_ceilings(device, timing)
    log(f"ceilings: bf16 matmul {ceilings['matmul_tflops']:.0f} TFLOPS, "
        f"device copy {ceilings['copy_tbps']:.2f} TB/s")
    rows = measure_grid(names, seqlens, head_dims, causals, device,
                        meter or CudaMeter(device, timing), log=log, **grid_kw)
    log(f"flashtile ladder: done in {time.perf_counter() - start:.0f} s")
    if args.csv:
        write_csv(args.csv, rows, env, ceilings)
        log(f"wrote {args.csv}")
    if args.figures:
        try:
            paths = write_figures(args.figures, rows, ceilings, title=_title(env))
            log("wrote " + ", ".join(str(p) for p in paths))
        except ImportError as exc:
            log(f"no figures: {exc} (pip install flashtile[bench])")
    print(format_table(rows))
    print()
    print(format_pivot(rows, "tflops", "{:.1f}", "TFLOPS"))
    print(format_headline(rows, names[-1]))
    print(f"ceilings: bf16 matmul {MATMUL_N}^3 {ceilings['matmul_tflops']:.1f} TFLOPS, "
          f"device copy {ceilings['copy_tbps']:.2f} TB/s")
    print(_title(env))
    failed = [r for r in rows if r.status.startswith("error") or r.valid.startswith("FAIL")]
    return 1 if failed else 0


def _title(env: Env) -> str:
    return env.line()


# ==================================================================================
# CPU: the smoke run under the interpreter
# ==================================================================================


def cpu_smoke(names: Sequence[str]) -> int:
    """Run each rung once on ``SMOKE_SHAPE`` (causal, seqlen_q != seqlen_k) under the
    interpreter and check it; 0 when every check passes. The interpreter must be on
    before triton kernels are defined, so without TRITON_INTERPRET=1 this re-runs
    itself in a child process that has it."""
    from ..ops._common import is_interpreting

    if not is_interpreting():
        return _smoke_in_child(names)
    from ..validate import make_qkv
    from . import check_rung, registry

    sh = SMOKE_SHAPE
    q, k, v = make_qkv(sh["batch"], sh["seqlen_q"], sh["seqlen_k"], sh["nheads"],
                       sh["nheads"], sh["head_dim"], torch.bfloat16, "cpu", "late_spike")
    rungs = registry()
    status = 0
    for name in names:
        try:
            checks = check_rung(name, q, k, v, causal=True)
        except Exception as exc:  # report any failure plainly; the exit status carries it
            print(f"{name:<18} FAILED: {type(exc).__name__}: {exc}")
            status = 1
            continue
        ok = all(c.ok for c in checks)
        status |= 0 if ok else 1
        print(f"{name:<18} {rungs[name].precision:<5} {'ok  ' if ok else 'FAIL'} "
              + "; ".join(str(c) for c in checks))
    shape = ", ".join(f"{key}={val}" for key, val in sh.items())
    print(f"(bf16, causal, late_spike, {shape}; interpreter, no timings)")
    return status


def _smoke_in_child(names: Sequence[str]) -> int:
    src = str(Path(__file__).resolve().parents[2])  # the directory holding flashtile/
    env = dict(os.environ, TRITON_INTERPRET="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    code = ("import sys; from flashtile.ladder.run import cpu_smoke; "
            f"sys.exit(cpu_smoke({list(names)!r}))")
    cmd = [sys.executable, "-c", code]
    sys.stdout.flush()
    return subprocess.run(cmd, env=env, check=False).returncode


# ==================================================================================
# reporting: table, CSV, figures
# ==================================================================================


def _fmt(value, spec: str) -> str:
    return "-" if value is None else spec.format(value)


def _progress_line(r: Row) -> str:
    what = (f"{r.time_ms:9.3f} ms {r.tflops:7.1f} TFLOPS {r.peak_mem_gib:6.2f} GiB"
            if r.ok else r.status)
    return (f"  {r.rung:<18} S={r.seqlen:<6} D={r.head_dim:<4} "
            f"{'causal' if r.causal else 'full  '} {what}")


_COLUMNS = (  # header, attribute, format
    ("ms", "time_ms", "{:.3f}"), ("TFLOPS", "tflops", "{:.1f}"),
    ("vs v1", "speedup_vs_v1", "{:.1f}x"), ("HBM GB", "hbm_gb", "{:.2f}"),
    ("TB/s", "hbm_tbps", "{:.2f}"), ("FLOP/B", "flop_per_byte", "{:.0f}"),
    ("peak GiB", "peak_mem_gib", "{:.2f}"),
)


def format_table(rows: Sequence[Row]) -> str:
    """A markdown table, one line per (shape, rung); skipped and failed rows say why."""
    head = ["rung", "B", "S", "H", "D", "causal", *(c[0] for c in _COLUMNS), "valid"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r.rung, str(r.batch), str(r.seqlen), str(r.nheads), str(r.head_dim),
                 "yes" if r.causal else "no"]
        if r.ok:
            cells += [_fmt(getattr(r, attr), spec) for _, attr, spec in _COLUMNS]
        else:
            cells += [r.status] + [""] * (len(_COLUMNS) - 1)
        lines.append("| " + " | ".join(cells + [r.valid or "-"]) + " |")
    return "\n".join(lines)


def format_pivot(rows: Sequence[Row], attr: str, spec: str, label: str) -> str:
    """One block per (head dim, causal): rungs down, seqlens across."""
    blocks = []
    keys = list(dict.fromkeys((r.head_dim, r.causal) for r in rows))
    for head_dim, causal in keys:
        sel = [r for r in rows if r.head_dim == head_dim and r.causal == causal]
        seqlens = sorted({r.seqlen for r in sel})
        names = list(dict.fromkeys(r.rung for r in sel))
        cell = {(r.rung, r.seqlen): r for r in sel}
        out = [f"{label}, head dim {head_dim}, {'causal' if causal else 'not causal'}",
               f"{'rung':<18}" + "".join(f"{s:>10}" for s in seqlens)]
        for name in names:
            vals = []
            for s in seqlens:
                r = cell.get((name, s))
                if r is None:
                    vals.append("")
                elif r.ok:
                    vals.append(_fmt(getattr(r, attr), spec))
                else:
                    vals.append("skip" if r.status.startswith("skipped") else "error")
            out.append(f"{name:<18}" + "".join(f"{v:>10}" for v in vals))
        blocks.append("\n".join(out))
    return "\n\n".join(blocks)


def format_headline(rows: Sequence[Row], top: str, seqlens=(4096, 16384)) -> str:
    """Speed-up of the top rung over v1 at the README's headline shapes."""
    parts = []
    for r in rows:
        if r.rung == top and r.seqlen in seqlens and r.speedup_vs_v1 is not None:
            parts.append(f"S={r.seqlen} D={r.head_dim} {'causal' if r.causal else 'full'}: "
                         f"{r.speedup_vs_v1:.1f}x")
    if not parts:
        return f"headline: no {top} / {BASELINE} pair measured at seqlen {_join(seqlens)}"
    return f"headline, {top} over {BASELINE}: " + "; ".join(parts)


def write_csv(path, rows: Sequence[Row], env: Env, ceilings: dict | None = None) -> Path:
    """Long format, one number per line (``flashtile.bench.report`` columns + ``note``):
    kernel "ladder", backend = rung. A skipped or failed rung gets one line with metric
    "status" and the reason in ``note``; ``note`` also carries the validity verdict."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=(*CSV_COLUMNS, "note"))
        writer.writeheader()
        for name, value in (ceilings or {}).items():
            kernel = f"matmul_{MATMUL_N}^3_bf16" if name == "matmul_tflops" else "device_copy"
            rec = Record(kernel, "torch", None, name, float(value))
            writer.writerow(dict(csv_row(rec, env), note=""))
        for r in rows:
            shape = Shape(r.batch, r.seqlen, r.nheads, r.head_dim, r.causal)
            if not r.ok:
                row = csv_row(Record("ladder", r.rung, shape, "status", math.nan), env)
                writer.writerow(dict(row, value="", note=r.status))
                continue
            for metric in METRICS:
                value = getattr(r, metric)
                if value is not None:
                    rec = Record("ladder", r.rung, shape, metric, float(value))
                    writer.writerow(dict(csv_row(rec, env), note=f"valid: {r.valid or '-'}"))
    return path


def _panels(fig, rows):
    """Axes grid: head dims down, (not causal, causal) across."""
    head_dims = sorted({r.head_dim for r in rows})
    causals = sorted({r.causal for r in rows})
    axes = fig.subplots(len(head_dims), len(causals), squeeze=False)
    for i, d in enumerate(head_dims):
        for j, c in enumerate(causals):
            yield axes[i][j], d, c


def _series(rows, head_dim, causal, attr):
    """rung -> ([seqlen], [value]) over ok rows, in ladder order."""
    out = {}
    for r in rows:
        if r.ok and r.head_dim == head_dim and r.causal == causal and getattr(r, attr):
            xs, ys = out.setdefault(r.rung, ([], []))
            xs.append(r.seqlen)
            ys.append(getattr(r, attr))
    return out


def _color(rung: str) -> str:
    """One colour per rung in every figure, whatever rungs a panel holds."""
    names = rung_names()
    return f"C{names.index(rung) % 10}" if rung in names else "k"


def _seqlen_axis(ax, seqlens) -> None:
    ax.set_xscale("log", base=2)
    ticks = sorted(set(seqlens))
    if ticks:
        ax.set_xticks(ticks, [f"{s // 1024}k" if s % 1024 == 0 else str(s) for s in ticks])
        ax.minorticks_off()


def _line_figure(rows, attr, ylabel, logy, title, ceiling=None):
    from matplotlib.figure import Figure

    ncols = len({r.causal for r in rows})
    nrows = len({r.head_dim for r in rows})
    fig = Figure(figsize=(5.2 * ncols, 3.8 * nrows), layout="constrained")
    for ax, d, c in _panels(fig, rows):
        for rung, (xs, ys) in _series(rows, d, c, attr).items():
            ax.plot(xs, ys, marker="o", label=rung, color=_color(rung))
        if ceiling:
            ax.axhline(ceiling[1], ls="--", c="grey", lw=1, label=ceiling[0])
        _seqlen_axis(ax, [r.seqlen for r in rows if r.head_dim == d and r.causal == c])
        ax.set_yscale("log" if logy else "linear")
        ax.set_title(f"head dim {d}, {'causal' if c else 'not causal'}")
        ax.set_xlabel("seqlen (batch = 16k / seqlen)")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize="x-small")
    fig.suptitle(title, fontsize="small")
    return fig


def _roofline(rows, ceilings, title):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 5), layout="constrained")
    ax = fig.subplots()
    pts = [r for r in rows if r.ok and r.flop_per_byte and r.tflops]
    peak, bw = ceilings.get("matmul_tflops"), ceilings.get("copy_tbps")
    lo = min([r.flop_per_byte for r in pts] + [1.0]) / 2
    hi = max([r.flop_per_byte for r in pts] + [1e4]) * 2
    if peak and bw:
        xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
        ax.plot(xs, [min(peak, x * bw) for x in xs], c="k", lw=1.5,
                label=f"roofline: {peak:.0f} TFLOPS, {bw:.2f} TB/s")
        ax.axvline(peak / bw, c="grey", ls=":", lw=1)
    for name in dict.fromkeys(r.rung for r in pts):
        for causal, marker in ((False, "o"), (True, "^")):
            sel = [r for r in pts if r.rung == name and r.causal == causal]
            if sel:
                ax.scatter([r.flop_per_byte for r in sel], [r.tflops for r in sel],
                           marker=marker, s=22, color=_color(name),
                           label=None if causal else name)
    for causal, marker in ((False, "o"), (True, "^")):  # marker key
        ax.scatter([], [], marker=marker, color="grey", label="causal" if causal else "full")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per model HBM byte)")
    ax.set_ylabel("TFLOPS")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize="x-small", ncol=2)
    ax.set_title(title, fontsize="small")
    return fig


def write_figures(directory, rows: Sequence[Row], ceilings: dict, title: str = "") -> list[Path]:
    """The four PNGs in ``FIGURES`` order; raises ImportError without matplotlib."""
    import matplotlib  # noqa: F401  (a clear ImportError before any work)

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    mm = ceilings.get("matmul_tflops")
    figs = [
        _line_figure(rows, "time_ms", "time (ms)", True, f"ladder latency, bf16. {title}"),
        _line_figure(rows, "tflops", "TFLOPS (log: the rungs span 100x)", True,
                     f"ladder TFLOPS, bf16. {title}",
                     ceiling=("bf16 matmul", mm) if mm else None),
        _line_figure(rows, "peak_mem_gib", "peak allocated (GiB)", True,
                     f"peak memory per call (inputs included). {title}"),
        _roofline(rows, ceilings, f"ladder roofline. {title}"),
    ]
    paths = []
    for fig, name in zip(figs, FIGURES, strict=True):
        fig.savefig(directory / name, dpi=120)
        paths.append(directory / name)
    return paths


if __name__ == "__main__":
    sys.exit(main())
