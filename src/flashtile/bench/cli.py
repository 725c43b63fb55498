"""``flashtile bench``: options and entry point (wired into ``flashtile.cli``).

Example (on the GPU machine)::

    flashtile bench --csv benchmarks/core.csv --plot benchmarks/figures/core.png
    flashtile bench --quick --backends flashtile sdpa-cudnn --head-dims 128
    flashtile bench --from-csv benchmarks/2026-12-04_perf_1b99241.csv \
        --ratio-plot ratios.png     # any machine: the table and figures of a saved run

Without a CUDA device, ``run`` says that timings need a GPU and runs a tiny smoke check
of flashtile's forward and backward under the Triton interpreter instead.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
import time

# the defaults when --quick is given without --seqlens / --head-dims
QUICK_SEQLENS = (1024, 4096)
QUICK_HEAD_DIMS = (128,)
SMOKE_SHAPE = dict(batch=1, seqlen=64, nheads=2, head_dim=64)

# Suites that are not attention-shape sweeps: name -> module with ``run(args) -> int``
# (and optionally ``configure_parser(parser)`` for suite-specific options, prefixed
# with the suite name, e.g. ``--decode-batches``).
MODULE_SUITES: dict[str, str] = {
    "decode": "flashtile.bench.decode",
    "varlen": "flashtile.bench.varlen",
    "gpt2": "flashtile.bench.gpt2",
    "ring": "flashtile.bench.ring",
    "hf": "flashtile.bench.hf",
}


def parse_size(text: str) -> int:
    """Parse ``4096`` or ``4k`` (k = 1024)."""
    text = text.strip().lower()
    try:
        return int(text[:-1]) * 1024 if text.endswith("k") else int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an integer such as 4096 or 4k, got {text!r}"
        ) from None


def configure_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``bench`` options to ``parser`` and return it."""
    from importlib import import_module

    from .backends import backend_names
    from .flops import HEAD_DIMS, SEQLENS, SUITES

    names = backend_names()
    parser.add_argument(
        "--suite",
        choices=sorted([*SUITES, *MODULE_SUITES]),
        default="core",
        help="what to measure; core = DESIGN.md section 6 attention shapes (default: core)",
    )
    parser.add_argument(
        "--seqlens",
        type=parse_size,
        nargs="+",
        metavar="N",
        help=f"sequence lengths, 4096 or 4k (default: {' '.join(map(str, SEQLENS))})",
    )
    parser.add_argument(
        "--head-dims",
        type=int,
        nargs="+",
        metavar="D",
        help=f"head dims (default: {' '.join(map(str, HEAD_DIMS))})",
    )
    parser.add_argument(
        "--causal",
        choices=("both", "yes", "no"),
        default="both",
        help="causal masking (default: both)",
    )
    parser.add_argument(
        "--backends",
        nargs="+",
        choices=names,
        default=names,
        metavar="NAME",
        help=f"backends to time, in order (default: all: {' '.join(names)})",
    )
    parser.add_argument("--no-bwd", action="store_true", help="time the forward only")
    parser.add_argument("--csv", metavar="PATH", help="write the long-format results CSV here")
    parser.add_argument(
        "--plot", metavar="PATH", help="write a TFLOPS-vs-seqlen figure here (needs matplotlib)"
    )
    parser.add_argument(
        "--ratio-plot", metavar="PATH",
        help="write a heatmap of flashtile's ratios to SDPA cuDNN here (needs matplotlib)",
    )
    parser.add_argument(
        "--from-csv", nargs="+", metavar="CSV",
        help="measure nothing: print the table and draw --plot / --ratio-plot from these "
        "CSVs (written by --csv; a later file's rows replace an earlier one's); no GPU needed",
    )
    parser.add_argument(
        "--commit",
        metavar="SHA",
        help="commit to record (default: git rev-parse HEAD, else 'unknown')",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="short do_bench budgets (5/25 ms), and unless given, seqlens "
        f"{' '.join(map(str, QUICK_SEQLENS))} and head dim "
        f"{' '.join(map(str, QUICK_HEAD_DIMS))} only",
    )
    parser.add_argument(
        "--settle-ms",
        type=int,
        default=0,
        metavar="MS",
        help="run each call back to back for MS ms before timing it (default 0; an A/B "
        "for clock ramp-up after a compile)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        metavar="N",
        help="time every backend of a shape N times, in turn, and report the median "
        "(and the spread, max / min - 1, in the CSV); default 1",
    )
    parser.add_argument(
        "--pairs",
        type=int,
        default=0,
        metavar="N",
        help="after the rounds, time each backend against sdpa-cudnn in N adjacent pairs "
        "(short timings, the order alternating) and add the median per-pair ratio to the "
        "table and CSV: the GPU's clock, which swings at its power cap, moves less of it "
        "(default 0: off)",
    )
    parser.add_argument(
        "--sustained",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="after the rounds, run each backend's call back to back for SECONDS (at most "
        "two in flight) and add the time per call, and where NVML answers its energy per "
        "call and power, with ratios to sdpa-cudnn (default 0: off)",
    )
    parser.add_argument(
        "--timing-log",
        metavar="PATH",
        help="write one JSON line per timing (backend, mode, round, local wall-clock start "
        "and end, ms) here, to join with a clock log (scripts/clock_join.py)",
    )
    for module in MODULE_SUITES.values():
        try:
            configure = getattr(import_module(module), "configure_parser", None)
        except ImportError:  # a suite whose optional dependencies are missing
            continue
        if configure is not None:
            configure(parser)
    return parser


def select_shapes(args: argparse.Namespace) -> list:
    """The shapes ``args`` ask for, in table order."""
    from .flops import HEAD_DIMS, SEQLENS, SUITES

    seqlens = args.seqlens or (QUICK_SEQLENS if args.quick else SEQLENS)
    head_dims = args.head_dims or (QUICK_HEAD_DIMS if args.quick else HEAD_DIMS)
    causal = {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]
    return SUITES[args.suite](seqlens=seqlens, head_dims=head_dims, causal=causal)


def run(args: argparse.Namespace) -> int:
    """Run the benchmark (GPU) or the CPU smoke check; return the exit status."""
    import torch

    if getattr(args, "from_csv", None):
        return _from_csv(args)
    if args.suite in MODULE_SUITES:
        from importlib import import_module

        return import_module(MODULE_SUITES[args.suite]).run(args)
    if not torch.cuda.is_available():
        print("flashtile bench: timings need a GPU, and no CUDA device was found.")
        print(
            "Running a CPU smoke check instead: flashtile forward + backward under the "
            "Triton interpreter, no timings."
        )
        return smoke_check()
    try:
        shapes = select_shapes(args)
    except ValueError as exc:
        print(f"flashtile bench: {exc}", file=sys.stderr)
        return 2
    return _run_gpu(args, shapes)


def _run_gpu(args: argparse.Namespace, shapes: list) -> int:
    """Measure, write the CSV and the figure, print the table last."""
    from .harness import Timing, run_benchmark
    from .report import Env, format_table, write_csv

    timing = Timing.quick() if args.quick else Timing()
    if getattr(args, "settle_ms", 0):
        timing = dataclasses.replace(timing, settle_ms=args.settle_ms)
    env = Env.collect(args.commit)
    print(
        f"flashtile bench: {len(shapes)} shapes x {len(args.backends)} backends on {env.gpu}",
        file=sys.stderr,
    )
    start = time.perf_counter()
    if getattr(args, "rounds", 1) < 1:
        raise SystemExit("flashtile bench: --rounds must be >= 1")
    if getattr(args, "pairs", 0) > 0 and "sdpa-cudnn" not in args.backends:
        print("flashtile bench: --pairs pairs each backend with sdpa-cudnn, which is not "
              "among --backends: no paired ratios", file=sys.stderr)
    log_path = getattr(args, "timing_log", None)
    with open(log_path, "w") if log_path else contextlib.nullcontext() as log_file:
        result = run_benchmark(
            shapes, args.backends, timing=timing, do_bwd=not args.no_bwd,
            rounds=getattr(args, "rounds", 1), pairs=getattr(args, "pairs", 0),
            sustained_s=getattr(args, "sustained", 0.0),
            timing_log=(lambda entry: print(json.dumps(entry), file=log_file, flush=True))
            if log_path else None)
    print(f"flashtile bench: done in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    if args.csv:
        write_csv(args.csv, result.records, env)
        print(f"wrote {args.csv}", file=sys.stderr)
    _write_plots(args, result, env.gpu, env.commit)
    print(format_table(result, env))
    return 0


def _write_plots(args, result, gpu: str, commit: str) -> None:
    """--plot and --ratio-plot; a missing matplotlib or nothing to draw is reported, not
    fatal."""
    wanted = [(p, kind) for p, kind in ((args.plot, "tflops"),
                                        (getattr(args, "ratio_plot", None), "ratios")) if p]
    if not wanted:
        return
    from .report import RATIO_FLOORS

    try:
        from .plots import plot_ratios, plot_tflops
    except ImportError:
        print("flashtile bench: figures need matplotlib (pip install flashtile[bench])",
              file=sys.stderr)
        return
    title = f"{gpu}, bf16, commit {commit}"
    for path, kind in wanted:
        try:
            if kind == "tflops":
                plot_tflops(result, path, title=title)
            else:
                plot_ratios(result, path, title=title, floors=RATIO_FLOORS)
        except (ImportError, ValueError) as exc:
            print(f"flashtile bench: no figure {path}: {exc}", file=sys.stderr)
            continue
        print(f"wrote {path}", file=sys.stderr)


def _from_csv(args) -> int:
    """--from-csv: the table and figures of saved runs."""
    from .report import format_table, read_csv

    try:
        result, envs = read_csv(args.from_csv)
    except (OSError, ValueError, KeyError) as exc:
        print(f"flashtile bench: {exc}", file=sys.stderr)
        return 2
    commits = " + ".join(dict.fromkeys(e.commit for e in envs)) or "unknown"
    gpu = envs[0].gpu if envs else "unknown GPU"
    _write_plots(args, result, gpu, commits)
    print(format_table(result))
    for path, env in zip(args.from_csv, envs):
        print(f"{path}: {env.line()}")
    return 0


def smoke_check(device: str = "cpu") -> int:
    """Run flashtile forward + backward on a tiny shape through the bench closures.

    On a CPU this needs Triton's interpreter; it is switched on here if the kernels
    have not been imported yet. Returns 0 when outputs and gradients are finite and
    the output matches the plain-PyTorch reference.
    """
    if device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        if "flashtile.ops.flash" in sys.modules:
            print(
                "smoke check skipped: flashtile's kernels were imported without "
                "TRITON_INTERPRET=1; set it before importing flashtile."
            )
            return 1
        os.environ["TRITON_INTERPRET"] = "1"
    try:
        lines = _smoke_lines(device)
    except Exception as exc:  # report any failure plainly; the exit status carries it
        print(f"smoke check FAILED: {type(exc).__name__}: {exc}")
        return 1
    print("\n".join(lines))
    return 0


def _smoke_lines(device: str) -> list[str]:
    """The smoke check proper; raises on any problem, returns what to print."""
    import torch

    from .. import reference
    from .backends import get_backend
    from .flops import Shape

    lines = []
    for causal in (False, True):
        shape = Shape(**SMOKE_SHAPE, causal=causal)
        gen = torch.Generator(device=device).manual_seed(0)
        dims = (shape.batch, shape.seqlen, shape.nheads, shape.head_dim)
        q, k, v, dout = (
            torch.randn(dims, dtype=torch.bfloat16, device=device, generator=gen) for _ in range(4)
        )
        closures = get_backend("flashtile")(q, k, v, causal, dout=dout)
        out, grads = closures.fwd(), closures.fwd_bwd()
        for name, t in zip(("out", "dq", "dk", "dv"), (out, *grads), strict=True):
            if t.shape != q.shape or not torch.isfinite(t).all():
                raise RuntimeError(f"{name}: shape {tuple(t.shape)} or non-finite values")
        ref = reference.flash_attn_func(q.double(), k.double(), v.double(), causal=causal)
        err = (out.double() - ref).abs().max().item()
        if err > 0.05:  # a sanity bound for a bf16 run; tests/test_flash.py holds the real rule
            raise RuntimeError(f"causal={causal}: max|out - ref| = {err:.3e} > 0.05")
        lines.append(
            f"smoke ok: {shape.label()} causal={causal}: forward + backward ran, "
            f"max|out - ref64| = {err:.2e}"
        )
    return lines
