"""Backward TFLOPS of the Gluon Hopper backward (ops/hopper_bwd.py) against the portable
Triton backward and SDPA's cuDNN backend, side by side in one process.

    python scripts/bench_hopper_bwd.py [--seqlens 1024 4096 16384] [--head-dims 64 128]
                                       [--causal 0 1] [--config block_m=32,num_stages=3]
                                       [--csv out.csv]

Shapes of DESIGN.md section 6 (bf16, 16k tokens, hidden 2048). FLOPs: backward 2.5x
forward, forward+backward 3.5x (flashtile.bench.flops). Timed, per shape:
    gluon-bwd      hopper_attention_backward (preprocess + dK/dV + dQ kernels)
    gluon-reduce   the same, deterministic=False's one-kernel tiles
                   (configs.hopper_bwd_reduce_config: dQ by racing TMA reduce-adds in the
                   dK/dV kernel; zeroing and casting the fp32 dQ included)
    ft-fwd+reduce  the dispatched forward + gluon-reduce
    portable-bwd   flash.attention_backward with the portable kernels
    ft-fwd+gluon   the dispatched forward (Gluon on sm_90) + the Gluon backward
    ft-fwd+port    the same forward + the portable backward
    cudnn-fwd+bwd  SDPA cuDNN forward + autograd backward; cudnn-bwd = that minus
                   cuDNN's forward alone (derived, not timed on its own)
Before timing, the Gluon gradients are compared with the portable ones (max |diff| /
max |portable| per gradient printed; above 2e-2 is flagged MISMATCH and makes the exit
status 1). ``--config`` overrides fields of configs.hopper_bwd_config for A/B runs
(configs.parse_overrides: ints, "none"); ``--batch --nheads --nheads-kv`` replace the
DESIGN.md shape (GQA when nheads-kv < nheads).
Short table last.

``--ab "A|B|..."`` instead times the Gluon backward under each override set (on top of
``--config``; an empty set is the shipped config) in one process, in ``--rounds``
interleaved rounds (each a short do_bench per variant), and prints per shape the median
of each variant's round times and its change against the first: machine-to-machine and
process-to-process drift (up to 7% on these machines) cancels out of that change.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import sys
import time
import traceback

import torch
import triton

from flashtile import configs
from flashtile.bench.backends import get_backend
from flashtile.bench.flops import attn_flops, paper_shape, tflops
from flashtile.ops import flash, hopper_bwd
from flashtile.ops._common import next_pow2

TIMED = ("gluon-bwd", "gluon-reduce", "fused-det", "fused-nd", "fused-det-dfr",
         "fused-nd-dfr", "portable-bwd", "ft-fwd+gluon", "ft-fwd+reduce",
         "ft-fwd+fused", "ft-fwd+port", "cudnn-fwd", "cudnn-fwd+bwd")
MODE = {"gluon-bwd": "bwd", "gluon-reduce": "bwd", "fused-det": "bwd", "fused-nd": "bwd",
        "fused-det-dfr": "bwd", "fused-nd-dfr": "bwd", "portable-bwd": "bwd",
        "cudnn-fwd": "fwd", "cudnn-bwd": "bwd"}
# the fused kernels, deterministic (ordered adds) or not: name -> (config, deterministic)
# (-dfr: with HopperBwdConfig.dq_defer, each step's dQ GEMMs issued ahead of its S^T)
FUSED = {"fused-det": True, "fused-nd": False, "fused-det-dfr": True, "fused-nd-dfr": False}


def closures(q, k, v, dout, causal, overrides):
    """name -> zero-argument call (gradient allocation included, as in a real call)."""
    b, s, h, d = q.shape
    cfg = dataclasses.replace(configs.hopper_bwd_config(d, causal, s, h // k.shape[2]),
                              **overrides)
    pcfg = configs.bwd_config(next_pow2(d), causal, q.dtype, q.device, s)
    out, lse = flash.attention_forward(q, k, v, causal=causal)

    def gluon_bwd(o=out, l_=lse):
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        return hopper_bwd.hopper_attention_backward(dout, q, k, v, o, l_, None, causal, dq,
                                                    dk, dv, config=cfg)

    # deterministic=False's one-kernel tiles (dQ by TMA reduce-adds; None at hd 256), with
    # the --config overrides that apply to them
    rcfg = configs.hopper_bwd_reduce_config(d, causal, s, h // k.shape[2])
    if rcfg is not None:
        rcfg = dataclasses.replace(rcfg, **{
            k_: v_ for k_, v_ in overrides.items() if k_ in ("num_stages", "gqa_expand")})

    def reduce_bwd(o=out, l_=lse):
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        return hopper_bwd.hopper_attention_backward(dout, q, k, v, o, l_, None, causal, dq,
                                                    dk, dv, config=rcfg, deterministic=False)

    fcfg = configs.hopper_bwd_fused_config(d, causal)  # None: no fused tiles (hd 256)
    if fcfg is not None:
        fcfg = dataclasses.replace(fcfg, **{
            k_: v_ for k_, v_ in overrides.items()
            if k_ in ("num_stages", "load_regs", "writer_warps")})

    def fused(deterministic, defer=False):
        fc = dataclasses.replace(fcfg, dq_defer=True) if defer else fcfg

        def fn(o=out, l_=lse):
            dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
            return hopper_bwd.hopper_attention_backward(
                dout, q, k, v, o, l_, None, causal, dq, dk, dv, config=fc,
                deterministic=deterministic)

        return fn

    def portable_bwd(o=out, l_=lse):
        return flash.attention_backward(dout, q, k, v, o, l_, causal=causal, config=pcfg)

    def fwd_then(bwd):
        def fn():
            o, l_ = flash.attention_forward(q, k, v, causal=causal)
            return bwd(o, l_)

        return fn

    try:
        cudnn = get_backend("sdpa-cudnn")(q, k, v, causal, dout=dout)
        ref = {"cudnn-fwd": cudnn.fwd, "cudnn-fwd+bwd": cudnn.fwd_bwd}
    except Exception as exc:  # e.g. a GQA shape this torch's cuDNN path refuses
        print(f"sdpa-cudnn unavailable here: {type(exc).__name__}: {exc}", flush=True)
        ref = {}
    fused_fns = {} if fcfg is None else {
        "fused-det": fused(True), "fused-nd": fused(False),
        "fused-det-dfr": fused(True, True), "fused-nd-dfr": fused(False, True),
        "ft-fwd+fused": fwd_then(fused(True))}
    reduce_fns = {} if rcfg is None else {"gluon-reduce": reduce_bwd,
                                          "ft-fwd+reduce": fwd_then(reduce_bwd)}
    return cfg, {
        "gluon-bwd": gluon_bwd,
        **reduce_fns,
        "portable-bwd": portable_bwd,
        "ft-fwd+gluon": fwd_then(gluon_bwd),
        "ft-fwd+port": fwd_then(portable_bwd),
        **fused_fns,
        **ref,
    }


def compare(fns, timed=TIMED) -> tuple[str, bool]:
    """Gluon (split, fused) vs portable gradients: relative max |diff| per gradient; the
    deterministic fused backward twice (bitwise equal?), the racing one twice."""
    ref = fns["portable-bwd"]()
    msgs, ok = [], True
    for kind in ("gluon-bwd", "gluon-reduce") + tuple(FUSED):
        if kind not in timed or kind not in fns:
            continue
        got = fns[kind]()
        torch.cuda.synchronize()
        parts = []
        for name, a, r in zip(("dq", "dk", "dv"), got, ref):
            rel = (a.float() - r.float()).abs().max().item() / max(
                r.float().abs().max().item(), 1e-6)
            ok &= rel <= 2e-2
            parts.append(f"{name} {rel:.1e}")
        if kind != "gluon-bwd":
            again = fns[kind]()
            same = all(torch.equal(a, b) for a, b in zip(got, again))
            if FUSED.get(kind, False):  # the deterministic one must repeat bitwise
                ok &= same
            parts.append("repeat bitwise " + ("equal" if same else "DIFFERENT"))
        msgs.append(f"{kind}: " + ", ".join(parts))
    return "rel|x - portable|: " + "; ".join(msgs), ok


def _inputs(seqlen, hd, causal, dev, batch=None, nheads=None, nheads_kv=None):
    """(shape, label, (q, k, v, dout)): the DESIGN.md shape at (seqlen, hd), its batch /
    query heads replaced when given, K / V with ``nheads_kv`` heads (GQA), bf16 randn."""
    shape = paper_shape(seqlen, hd, causal)
    shape = dataclasses.replace(shape, batch=batch or shape.batch,
                                nheads=nheads or shape.nheads)
    hkv = nheads_kv or shape.nheads
    gen = torch.Generator(device=dev).manual_seed(seqlen + hd)
    qkvo = tuple(torch.randn(shape.batch, seqlen, shape.nheads if i in (0, 3) else hkv, hd,
                             device=dev, dtype=torch.bfloat16, generator=gen)
                 for i in range(4))
    return shape, shape.label() + (f" KV{hkv}" if hkv != shape.nheads else ""), qkvo


def bench_shape(seqlen, hd, causal, overrides, dev, timed=TIMED, batch=None, nheads=None,
                nheads_kv=None) -> tuple[dict, int]:
    shape, label, (q, k, v, dout) = _inputs(seqlen, hd, causal, dev, batch, nheads,
                                            nheads_kv)
    row = dict(label=label, causal=causal)
    status = 0
    t0 = time.perf_counter()
    cfg, fns = closures(q, k, v, dout, causal, overrides)
    msg, ok = compare(fns, timed)
    print(f"{row['label']} causal={int(causal)} {cfg}\n    {msg}  first calls "
          f"{time.perf_counter() - t0:.1f}s{'' if ok else '  MISMATCH'}", flush=True)
    status |= not ok
    for name in TIMED:
        if name not in timed or name not in fns:
            row[name + "_ms"] = float("nan")
            continue
        try:
            ms = triton.testing.do_bench(fns[name], warmup=25, rep=100, return_mode="median")
        except Exception:
            status = 1
            ms = float("nan")
            print(f"{row['label']} causal={int(causal)} {name} FAILED:", flush=True)
            traceback.print_exc(file=sys.stdout)
        row[name + "_ms"] = ms
    row["cudnn-bwd_ms"] = row["cudnn-fwd+bwd_ms"] - row["cudnn-fwd_ms"]
    for name in TIMED + ("cudnn-bwd",):
        row[name] = tflops(attn_flops(shape, MODE.get(name, "fwd_bwd")), row[name + "_ms"])
        print(f"    {name:<14} {row[name + '_ms']:8.3f} ms {row[name]:6.1f} TFLOPS", flush=True)
    return row, status


def ab_shape(seqlen, hd, causal, variants, dev, rounds, batch=None, nheads=None,
             nheads_kv=None) -> list[dict]:
    """The Gluon backward under each override dict of ``variants``, interleaved rounds;
    rows {label, causal, variant, ms, tflops, change} (change against variants[0])."""
    shape, label, (q, k, v, dout) = _inputs(seqlen, hd, causal, dev, batch, nheads,
                                            nheads_kv)
    fns = [closures(q, k, v, dout, causal, over)[1]["gluon-bwd"] for over in variants]
    first = [f() for f in fns]  # compile; every variant's gradients equal the first's?
    same = [all(torch.equal(a, b) for a, b in zip(first[0], g)) for g in first]
    times = [[] for _ in fns]
    for _ in range(rounds):
        for i, f in enumerate(fns):
            times[i].append(triton.testing.do_bench(f, warmup=5, rep=30, return_mode="median"))
    flops = attn_flops(shape, "bwd")
    med = [sorted(t)[len(t) // 2] for t in times]
    return [dict(label=label, causal=int(causal), variant=i, ms=m, tflops=tflops(flops, m),
                 change=med[0] / m - 1.0, bitwise=same[i]) for i, m in enumerate(med)]


def run_ab(args, dev) -> int:
    base = configs.parse_overrides(args.config)
    texts = args.ab.split("|")
    variants = [{**base, **configs.parse_overrides(t)} for t in texts]
    rows = []
    for causal in map(bool, args.causal):
        for hd in args.head_dims:
            for seqlen in args.seqlens:
                rows += ab_shape(seqlen, hd, causal, variants, dev, args.rounds, args.batch,
                                 args.nheads, args.nheads_kv)
                torch.cuda.empty_cache()
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["shape", "causal", "variant", "ms", "tflops", "change", "bitwise"])
            for r in rows:
                w.writerow([r["label"], r["causal"], texts[r["variant"]] or "shipped",
                            f"{r['ms']:.4f}", f"{r['tflops']:.2f}", f"{r['change']:.4f}",
                            int(r["bitwise"])])
    print(f"\nGluon backward TFLOPS, {args.rounds} interleaved rounds, median; change "
          f"against the first variant; '=' the gradients bitwise equal to its")
    print(f"{'shape':<22} {'causal':<6} " + " ".join(f"{t or 'shipped':>24}" for t in texts))
    for i in range(0, len(rows), len(texts)):
        cells = [f"{r['tflops']:6.1f} ({100 * r['change']:+5.1f}%){'=' if r['bitwise'] else '!'}"
                 for r in rows[i:i + len(texts)]]
        print(f"{rows[i]['label']:<22} {rows[i]['causal']:<6} "
              + " ".join(f"{c:>24}" for c in cells))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seqlens", type=int, nargs="+", default=[1024, 4096, 16384])
    ap.add_argument("--head-dims", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--causal", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--config", help="override hopper_bwd_config fields: block_m=32,...")
    ap.add_argument("--only", nargs="+", choices=TIMED, default=list(TIMED),
                    help="time these only (cudnn-fwd and cudnn-fwd+bwd are always timed)")
    ap.add_argument("--batch", type=int, help="batch (default: 16k tokens / seqlen)")
    ap.add_argument("--nheads", type=int, help="query heads (default: 2048 / head dim)")
    ap.add_argument("--nheads-kv", type=int, help="key/value heads (GQA; default: nheads)")
    ap.add_argument("--csv")
    ap.add_argument("--ab", help="'A|B|...': Gluon backward override sets, interleaved A/B")
    ap.add_argument("--rounds", type=int, default=7, help="--ab: interleaved rounds")
    args = ap.parse_args()
    timed = set(args.only) | {"cudnn-fwd", "cudnn-fwd+bwd", "portable-bwd"}
    dev = torch.device("cuda")
    print(f"{torch.cuda.get_device_name(dev)} torch {torch.__version__} triton "
          f"{triton.__version__}", flush=True)
    if args.ab:
        return run_ab(args, dev)
    overrides = configs.parse_overrides(args.config)
    rows, status = [], 0
    for causal in map(bool, args.causal):
        for hd in args.head_dims:
            for seqlen in args.seqlens:
                row, st = bench_shape(seqlen, hd, causal, overrides, dev, timed, args.batch,
                                      args.nheads, args.nheads_kv)
                rows.append(row)
                status |= st
                torch.cuda.empty_cache()
    names = TIMED + ("cudnn-bwd",)
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["shape", "causal", "backend", "ms", "tflops"])
            for r in rows:
                for name in names:
                    w.writerow([r["label"], r["causal"], name, f"{r[name + '_ms']:.4f}",
                                f"{r[name]:.2f}"])
    print("\nbackward TFLOPS (2.5x fwd FLOPs) and fwd+bwd TFLOPS (3.5x); ratios to cuDNN")
    # the short table: every timed backend, TFLOPS (ratio to cuDNN's backward, or to its
    # forward+backward for the ft-fwd+* rows)
    cols = [n for n in names if n != "cudnn-fwd"
            and any(r[n] == r[n] for r in rows)]  # NaN: not timed
    print(f"{'shape':<20} {'causal':<6} " + " ".join(f"{n:>16}" for n in cols))
    for r in rows:
        cells = []
        for n in cols:
            base = "cudnn-bwd" if MODE.get(n) == "bwd" else "cudnn-fwd+bwd"
            cells.append(f"{r[n]:7.1f} ({r[n] / r[base]:4.2f})")
        print(f"{r['label']:<20} {int(r['causal']):<6} " + " ".join(f"{c:>16}" for c in cells))
    return status


if __name__ == "__main__":
    sys.exit(main())
