"""``flashtile bench --suite varlen``: variable-length batches vs dense and padded.

A batch of sequences with a spread of lengths (log-uniform in [128, max_len], seed 0)
filling ``--varlen-total`` tokens, bf16, ``nheads = 2048 / head_dim`` (DESIGN.md
section 6 shapes). Three ways to run the same tokens, forward and forward+backward:

    varlen   flash_attn_varlen_func on the packed batch; FLOPs = 4 * H * D * sum(len^2)
             (halved for causal): the work actually needed
    dense    flash_attn_func on an equal-length batch of the same total tokens (seqlen =
             the mean length rounded to 128): the dense kernel's rate on similar tiles
    padded   flash_attn_func on the batch padded to its longest sequence; reported on the
             useful FLOPs (padding is wasted work), and as time / varlen's time beside
             the FLOP ratio padding adds (B * max_len^2 / sum(len^2))

Backward counts 2.5x forward (bench.flops). Without a CUDA device: a tiny forward +
backward under the interpreter against the reference, and the notice that timings need
a GPU.
"""

from __future__ import annotations

import argparse
import math
import sys

HIDDEN = 2048


def configure_parser(parser: argparse.ArgumentParser) -> None:
    from .cli import parse_size

    g = parser.add_argument_group("varlen suite (--suite varlen)")
    g.add_argument("--varlen-total", type=parse_size, default=16384, metavar="N",
                   help="total tokens per batch (default: 16k)")
    g.add_argument("--varlen-max-lens", type=parse_size, nargs="+", default=[2048, 8192],
                   metavar="N", help="longest sequence of the spread (default: 2k 8k)")
    g.add_argument("--varlen-head-dims", type=int, nargs="+", default=[64, 128], metavar="D",
                   help="head dims (default: 64 128)")


def draw_lengths(total: int, max_len: int, seed: int = 0, min_len: int = 128) -> list[int]:
    """Log-uniform lengths in [min_len, max_len] until ``total`` tokens (the last one
    trimmed; the longest is max_len, so the padded batch is padded to max_len)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    lens = [max_len]
    lo, hi = math.log(min_len), math.log(max_len)
    while sum(lens) < total:
        u = float(torch.rand((), generator=gen))
        lens.append(int(math.exp(lo + u * (hi - lo))))
    lens[-1] -= sum(lens) - total
    return [n for n in lens if n > 0]


def run(args: argparse.Namespace) -> int:
    from .harness import gpu_or_smoke

    return gpu_or_smoke("varlen", "Running a CPU smoke check (interpreter) instead.",
                        _smoke, _run_gpu, args)


def _smoke() -> str:
    import itertools

    import torch

    from .. import reference
    from ..ops.varlen import flash_attn_varlen_func

    lens = [17, 0, 40, 5]
    cu = torch.tensor([0, *itertools.accumulate(lens)], dtype=torch.int32)
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(sum(lens), 2, 32, generator=gen).half().requires_grad_()
               for _ in range(3))
    out = flash_attn_varlen_func(q, k, v, cu, cu, 40, 40, causal=True)
    grads = torch.autograd.grad(out.float().sum(), (q, k, v))
    ref = reference.flash_attn_varlen_func(q.detach(), k.detach(), v.detach(), cu, cu, 40, 40,
                                           causal=True)
    err = (out.detach().double() - ref.double()).abs().max().item()
    if not err < 1e-2 or not all(torch.isfinite(g).all() for g in grads):
        raise RuntimeError(f"max|out - ref| = {err:.3e} or non-finite gradients")
    return (f"varlen smoke ok: lengths {lens}, causal, forward + backward, "
            f"max|out - ref64| = {err:.2e}")


def _run_gpu(args) -> int:
    from .harness import Record, Timing
    from .report import Env, _align, write_csv

    timing = Timing.quick() if args.quick else Timing()
    env = Env.collect(args.commit)
    records, table = [], [["D", "causal", "max len", "seqs", "mode", "varlen TFLOPS",
                           "dense TFLOPS", "varlen/dense", "padded useful TFLOPS",
                           "padded/varlen time", "padding FLOP ratio"]]
    for d in args.varlen_head_dims:
        for max_len in args.varlen_max_lens:
            lens = draw_lengths(args.varlen_total, max_len)
            for causal in (False, True):
                for mode, res in _measure(lens, d, causal, timing).items():
                    table.append([str(d), "yes" if causal else "no", str(max_len),
                                  str(len(lens)), mode, f"{res['varlen']:.1f}",
                                  f"{res['dense']:.1f}", f"{res['varlen'] / res['dense']:.2f}x",
                                  f"{res['padded']:.1f}", f"{res['time_ratio']:.2f}x",
                                  f"{res['flop_ratio']:.2f}x"])
                    for name in ("varlen", "dense", "padded"):
                        records.append(Record(f"varlen_max{max_len}", name, None,
                                              f"d{d}_{'causal' if causal else 'full'}_{mode}"
                                              "_tflops", res[name]))
                print(f"varlen: D{d} max {max_len} causal={causal} done", file=sys.stderr)
    if args.csv:
        write_csv(args.csv, records, env)
        print(f"wrote {args.csv}", file=sys.stderr)
    print(_align(table, left=5))
    print(f"{args.varlen_total} tokens per batch, bf16, nheads = {HIDDEN} / D; TFLOPS on "
          "sum(len^2) (varlen, padded) or B * S^2 (dense); backward counted 2.5x forward")
    print(env.line())
    return 0


def _measure(lens, d, causal, timing) -> dict:
    """{mode: {varlen, dense, padded TFLOPS, time_ratio, flop_ratio}} for fwd, fwd_bwd."""
    import itertools

    import torch

    from ..ops.flash import flash_attn_func
    from ..ops.varlen import flash_attn_varlen_func
    from .flops import BWD_FACTOR, tflops
    from .harness import median_ms

    dev, dt = torch.device("cuda"), torch.bfloat16
    h = HIDDEN // d
    total, max_len = sum(lens), max(lens)
    useful = 4.0 * h * d * sum(n * n for n in lens) / (2 if causal else 1)
    seq_dense = max(128, round(total / len(lens) / 128) * 128)
    b_dense = max(1, total // seq_dense)
    dense_flops = 4.0 * h * d * b_dense * seq_dense**2 / (2 if causal else 1)
    cu = torch.tensor([0, *itertools.accumulate(lens)], dtype=torch.int32, device=dev)

    def mk(*shape):
        return torch.randn(*shape, device=dev, dtype=dt, requires_grad=True)

    packed = [mk(total, h, d) for _ in range(3)]
    dense = [mk(b_dense, seq_dense, h, d) for _ in range(3)]
    padded = [mk(len(lens), max_len, h, d) for _ in range(3)]
    calls = dict(
        varlen=lambda x: flash_attn_varlen_func(*x, cu, cu, max_len, max_len, causal=causal),
        dense=lambda x: flash_attn_func(*x, causal=causal),
        padded=lambda x: flash_attn_func(*x, causal=causal),
    )
    inputs = dict(varlen=packed, dense=dense, padded=padded)
    flops = dict(varlen=useful, dense=dense_flops, padded=useful)
    out = {}
    for mode, factor in (("fwd", 1.0), ("fwd_bwd", 1.0 + BWD_FACTOR)):
        ms = {}
        for name, call in calls.items():
            x = inputs[name]
            if mode == "fwd":
                plain = [t.detach() for t in x]
                fn = lambda call=call, plain=plain: call(plain)
            else:
                o = call(x)
                dout = torch.randn_like(o)
                fn = lambda call=call, x=x, dout=dout: torch.autograd.grad(call(x), x, dout)
            fn()
            ms[name] = median_ms(fn, timing)
        res = {name: tflops(flops[name] * factor, ms[name]) for name in calls}
        res["time_ratio"] = ms["padded"] / ms["varlen"]
        res["flop_ratio"] = len(lens) * max_len**2 / sum(n * n for n in lens)
        out[mode] = res
    return out
