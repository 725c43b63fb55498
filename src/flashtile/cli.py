"""``flashtile`` command line: validate, bench, ladder.

On a machine without a CUDA device, the kernels run under Triton's interpreter; that
must be decided before triton is imported, so this module imports nothing from
flashtile's kernels at the top.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def _use_interpreter_without_gpu() -> bool:
    """Set TRITON_INTERPRET=1 when there is no CUDA device; True if kernels are on GPU."""
    import torch

    if torch.cuda.is_available():
        return True
    os.environ.setdefault("TRITON_INTERPRET", "1")
    return False


def _progress(items, desc):
    try:
        from tqdm import tqdm

        return tqdm(items, desc=desc, file=sys.stderr, leave=False)
    except ImportError:  # tqdm is optional
        return items


# ----------------------------------------------------------------------------------
# validate
# ----------------------------------------------------------------------------------


def _configure_validate(p: argparse.ArgumentParser) -> None:
    p.add_argument("--grid", choices=("auto", "full", "covering"), default="auto",
                   help="full product (GPU default) or pairwise covering set (CPU default)")
    p.add_argument("--dtypes", default="float16,bfloat16", help="comma-separated dtypes")
    p.add_argument("--no-backward", action="store_true", help="check the forward only")
    p.add_argument("--limit", type=int, default=0, help="run only the first N cases")
    p.add_argument("--csv", metavar="PATH", help="write one row per check")
    p.add_argument("--verbose", action="store_true", help="print every check, not a summary")


def _run_validate(args) -> int:
    on_gpu = _use_interpreter_without_gpu()
    import torch

    from .validate import case_grid, run_case, with_

    dtypes = [getattr(torch, d.strip()) for d in args.dtypes.split(",") if d.strip()]
    full = args.grid == "full" or (args.grid == "auto" and on_gpu)
    cases = case_grid(full=full, small=not on_gpu, dtypes=dtypes)
    if on_gpu:
        cases = [with_(c, batch=2) for c in cases]
    if args.no_backward:
        cases = [with_(c, backward=False) for c in cases]
    if args.limit:
        cases = cases[: args.limit]
    device = torch.device("cuda" if on_gpu else "cpu")
    where = torch.cuda.get_device_name() if on_gpu else "CPU (Triton interpreter, small shapes)"
    print(f"flashtile validate: {len(cases)} cases on {where}", flush=True)
    rows, failed, t0 = [], [], time.time()
    for case in _progress(cases, "validate"):
        result = run_case(case, device)
        for c in result.checks:
            rows.append(dict(case=case.name, dtype=str(case.dtype).replace("torch.", ""),
                             seed=result.seed, check=c.name, max_error=c.err, bound=c.bound,
                             ratio=c.ratio, passed=c.ok))
        if not result.ok:
            failed.append(result)
    _print_validate_table(rows, verbose=args.verbose)
    if args.csv:
        from .bench.report import write_rows

        write_rows(args.csv, rows, None if rows else ["case"])
    for r in failed:
        print("FAIL", r.summary())
    n = len(cases)
    print(f"{n - len(failed)}/{n} cases passed ({len(rows)} checks) in {time.time() - t0:.0f}s")
    return 1 if failed else 0


def _print_validate_table(rows, verbose: bool) -> None:
    """Per check (out, lse, dq, dk, dv) and dtype: worst ratio error / bound."""
    print(f"{'case':<72} {'check':<5} {'max error':>10} {'bound':>10} {'ratio':>6} pass")
    if verbose:
        shown = rows
    else:  # the worst case of each (check, dtype)
        worst = {}
        for r in rows:
            key = (r["check"], r["dtype"])
            if key not in worst or r["ratio"] > worst[key]["ratio"]:
                worst[key] = r
        shown = sorted(worst.values(), key=lambda r: (r["dtype"], r["check"]))
        print("(worst case per check and dtype; --verbose prints every check)")
    for r in shown:
        print(f"{r['case'][:72]:<72} {r['check']:<5} {r['max_error']:>10.3e} "
              f"{r['bound']:>10.3e} {r['ratio']:>6.2f} {'yes' if r['passed'] else 'NO'}")


# ----------------------------------------------------------------------------------
# entry point
# ----------------------------------------------------------------------------------


def _lazy(module: str):
    """(configure_parser, run) of a subcommand module, imported only when used."""
    from importlib import import_module

    def configure(p):
        import_module(module).configure_parser(p)

    def run(args):
        _use_interpreter_without_gpu()
        return import_module(module).run(args)

    return configure, run


COMMANDS = {
    "validate": ("check every kernel path against the references (DESIGN.md tolerance rule)",
                 _configure_validate, _run_validate),
    "bench": ("TFLOPS of flashtile beside PyTorch SDPA backends and FlexAttention",
              *_lazy("flashtile.bench.cli")),
    "ladder": ("run the kernel ladder (v1 naive ... production) and plot it",
               *_lazy("flashtile.ladder.run")),
    "gpt2-check": ("GPT-2 on flashtile vs HuggingFace: hidden-state ladder, logits, argmax",
                   *_lazy("flashtile.models.gpt2_check")),
    "generate": ("stream GPT-2 text with a KV cache (greedy, temperature, top-k, top-p)",
                 *_lazy("flashtile.models.generate_cli")),
    "train": ("train MiniGPT on Tiny Shakespeare with flashtile forward + backward",
              *_lazy("flashtile.models.train")),
    "sample": ("sample text from a MiniGPT checkpoint (temperature, top-k, top-p)",
               *_lazy("flashtile.models.sample")),
}


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(prog="flashtile", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"flashtile {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (help_text, configure, run) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        try:
            configure(p)
        except ImportError as e:  # a subcommand whose optional deps are missing
            p.set_defaults(_import_error=str(e))
        p.set_defaults(_run=run)
    return parser


def main(argv=None) -> int:
    # decide interpreter vs GPU before any subcommand imports triton
    _use_interpreter_without_gpu()
    args = build_parser().parse_args(argv)
    if getattr(args, "_import_error", None):
        print(f"flashtile {args.command}: unavailable ({args._import_error})", file=sys.stderr)
        return 2
    return int(args._run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
