"""A/B of environment settings on flashtile's public call, in one process, the way
`flashtile bench` times it: per shape (the DESIGN.md ones, 16k tokens, bf16) and per
variant (a set of environment variables, read by the dispatch on every call), the
forward+backward and the backward alone (autograd.grad on a kept graph), and with
`--measures fwd ...` the forward alone (no graph), each by
do_bench (L2 flushed before every call, as `flashtile bench` and bench_hopper_bwd.py do)
and by CUDA events around back-to-back calls (no flush). Rounds interleave the variants.

Written for session 28: `bench_hopper_bwd.py --ab "tile_major=0|tile_major=1"` measured
the tile-major order +3-8% on the backward at causal 4k / 8k (s27c, s27e), and the perf
table at 4e10906 read those two cells 8-10% below the head-major table at 7887446.

    python scripts/env_ab.py --ab "FLASHTILE_HOPPER_BWD_OVERRIDES=tile_major=0|" \
        --head-dims 128 64 --seqlens 4096 8192 --causal 1 [--rounds 5] [--csv F]

A variant is `VAR=VALUE[;VAR=VALUE...]`; an empty variant is the default (those
variables unset). `--nd` calls with deterministic=False, `--softcap X` with a softcap,
`--window L` with a sliding window of L keys to the left (window_size (L, 0) causal,
(L, -1) not; TFLOPS then count the unwindowed FLOPs: compare the ms).
`--sustained S` adds a third timing per round: the call back to back for S seconds
(flashtile.bench.energy.sustained) with NVML's energy counter read around it, so the
time and the millijoules per call at the GPU's power cap.
`--varlen` calls flash_attn_varlen_func instead, on packed sequences whose lengths
`flashtile bench --suite varlen`'s draw_lengths picks (the first seqlen long, the rest
log-uniform in [seqlen / 2, seqlen], seeded) up to the shape's 16k tokens, FLOPs counted
per sequence.
"""

import argparse
import os
import statistics

import torch
import triton

from flashtile import flash_attn_func, flash_attn_varlen_func
from flashtile.bench.energy import energy_counter, sustained
from flashtile.bench.flops import BWD_FACTOR, attn_flops, attn_fwd_flops, paper_shape, tflops
from flashtile.bench.harness import events_us
from flashtile.bench.report import write_rows
from flashtile.bench.varlen import draw_lengths


def parse_variant(text: str) -> dict:
    env = {}
    for item in filter(None, (s.strip() for s in text.split(";"))):
        name, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"variant item {item!r} is not VAR=VALUE")
        env[name] = value
    return env


def apply(env: dict, names: set) -> None:
    for name in names:
        os.environ.pop(name, None)
    os.environ.update(env)


def ab_shape(shape, variants, labels, names, rounds, rows, nd=False, varlen=False,
             softcap=0.0, window=0, measures=("fwd+bwd", "bwd"), sustained_s=0.0,
             counter=None) -> None:
    """Time one shape's variants in interleaved rounds; print the medians, append rows.
    ``sustained_s`` > 0 adds a third timing, ``energy.sustained`` (the call back to back
    for that long; with ``counter``, NVML's, millijoules per call too)."""
    causal = shape.causal
    torch.manual_seed(0)
    kw = dict(causal=causal, deterministic=False) if nd else dict(causal=causal)
    if softcap:
        kw["softcap"] = softcap
    if window:
        kw["window_size"] = (window, 0 if causal else -1)
    if varlen:
        lens = draw_lengths(shape.batch * shape.seqlen, shape.seqlen, seed=shape.seqlen,
                            min_len=shape.seqlen // 2)
        tokens = sum(lens)
        q, k, v, dout = (torch.randn(tokens, shape.nheads, shape.head_dim, device="cuda",
                                     dtype=torch.bfloat16) for _ in range(4))
        cu = torch.tensor([0] + lens, device="cuda").cumsum(0).to(torch.int32)
        kw.pop("deterministic", None)  # (the varlen backward has no racing mode)

        def attn(q_, k_, v_):
            return flash_attn_varlen_func(q_, k_, v_, cu, cu, max(lens), max(lens), **kw)

        fwd = sum(attn_fwd_flops(1, shape.nheads, n, n, shape.head_dim, causal) for n in lens)
        flops = {"fwd": fwd, "fwd+bwd": (1.0 + BWD_FACTOR) * fwd, "bwd": BWD_FACTOR * fwd}
        label = f"varlen {len(lens)} seqs {min(lens)}-{max(lens)} H{shape.nheads} D{shape.head_dim}"
    else:
        q, k, v, dout = (torch.randn(shape.batch, shape.seqlen, shape.nheads, shape.head_dim,
                                     device="cuda", dtype=torch.bfloat16) for _ in range(4))

        def attn(q_, k_, v_):
            return flash_attn_func(q_, k_, v_, **kw)

        flops = {"fwd": attn_flops(shape, "fwd"), "fwd+bwd": attn_flops(shape, "fwd_bwd"),
                 "bwd": attn_flops(shape, "bwd")}
        label = (shape.label() + (" nd" if nd else "") + (f" cap{softcap:g}" if softcap else "")
                 + (f" win{window}" if window else ""))
    q, k, v = (t.requires_grad_(True) for t in (q, k, v))

    def fwd_bwd():
        o = attn(q, k, v)
        torch.autograd.grad(o, (q, k, v), dout)

    out = attn(q, k, v)

    def bwd():
        torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)

    def fwd():
        with torch.no_grad():
            attn(q, k, v)

    fns = {m: {"fwd": fwd, "fwd+bwd": fwd_bwd, "bwd": bwd}[m] for m in measures}
    kinds = ("flush", "noflush") + (("sustained",) if sustained_s > 0 else ())
    times = {(i, m, t): [] for i in range(len(variants)) for m in fns for t in kinds}
    joules = {(i, m): [] for i in range(len(variants)) for m in fns}  # mJ per call
    grads = []
    for env in variants:  # compile + warm up, and each variant's gradients
        apply(env, names)
        grads.append(torch.autograd.grad(out, (q, k, v), dout, retain_graph=True))
        fwd_bwd()
    torch.cuda.synchronize()
    same = all(torch.equal(a, b) for g in grads[1:] for a, b in zip(grads[0], g))
    for _ in range(rounds):
        for i, env in enumerate(variants):
            apply(env, names)
            for m, fn in fns.items():
                times[i, m, "flush"].append(triton.testing.do_bench(
                    fn, warmup=5, rep=40, return_mode="median"))
                times[i, m, "noflush"].append(events_us(fn, 20) / 1e3)
                if sustained_s > 0:
                    run = sustained(fn, sustained_s, counter)
                    times[i, m, "sustained"].append(run.ms)
                    if run.mj_per_call is not None:
                        joules[i, m].append(run.mj_per_call)
    apply({}, names)
    print(f"\n{label} causal={int(causal)} gradients "
          f"{'bitwise equal' if same else 'DIFFER'} across variants")
    for m in fns:
        for t in kinds:
            med = [statistics.median(times[i, m, t]) for i in range(len(variants))]
            mj = [statistics.median(joules[i, m]) if t == "sustained" and joules[i, m]
                  else None for i in range(len(variants))]
            cells = []
            for i, ms in enumerate(med):
                tf = tflops(flops[m], ms)
                d = f" ({(med[0] / ms - 1) * 100:+.1f}%)" if i else ""
                if mj[i] is not None:  # energy per call, and its change (+: less energy)
                    d += f" {mj[i]:.0f} mJ" + (f" ({(mj[0] / mj[i] - 1) * 100:+.1f}%)"
                                               if i and mj[0] else "")
                cells.append(f"{ms:.3f} ms {tf:.1f} TF{d}")
                rows.append(dict(shape=label, causal=int(causal), variant=labels[i],
                                 measure=m, timing=t, ms=round(ms, 5), tflops=round(tf, 2),
                                 spread=round(max(times[i, m, t]) - min(times[i, m, t]), 5),
                                 mj=None if mj[i] is None else round(mj[i], 3)))
            print(f"  {m:<8} {t:<9} " + " | ".join(cells))


MEASURES = ("fwd", "fwd+bwd", "bwd")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ab", required=True, help="variants separated by |")
    p.add_argument("--head-dims", type=int, nargs="+", default=[128])
    p.add_argument("--seqlens", type=int, nargs="+", default=[4096])
    p.add_argument("--causal", type=int, nargs="+", default=[1])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--csv")
    p.add_argument("--measures", nargs="+", choices=MEASURES, default=["fwd+bwd", "bwd"],
                   help="what to time: the forward alone (no graph), forward+backward, the "
                   "backward alone (default: the last two)")
    p.add_argument("--nd", action="store_true", help="deterministic=False calls")
    p.add_argument("--softcap", type=float, default=0.0, help="a logit softcap")
    p.add_argument("--window", type=int, default=0, help="a sliding window's left size")
    p.add_argument("--sustained", type=float, default=0.0, metavar="SECONDS",
                   help="also time each call back to back for SECONDS per round "
                   "(flashtile.bench.energy.sustained), with its energy per call where "
                   "NVML answers: the speed and joules at the GPU's power cap")
    p.add_argument("--varlen", action="store_true",
                   help="flash_attn_varlen_func on packed sequences of seqlen / 2 .. seqlen")
    args = p.parse_args(argv)
    labels = args.ab.split("|")
    variants = [parse_variant(v) for v in labels]
    names = {n for v in variants for n in v}
    rows = []
    counter = energy_counter() if args.sustained > 0 else None
    if args.sustained > 0 and counter is None:
        print("env_ab: no NVML energy counter here; --sustained times only")
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton "
          f"{triton.__version__}; variants: " + " | ".join(repr(v) for v in labels))
    for head_dim in args.head_dims:
        for seqlen in args.seqlens:
            for causal in map(bool, args.causal):
                ab_shape(paper_shape(seqlen, head_dim, causal), variants, labels, names,
                         args.rounds, rows, args.nd, args.varlen, args.softcap,
                         args.window, tuple(args.measures), args.sustained, counter)
    if args.csv:
        write_rows(args.csv, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
