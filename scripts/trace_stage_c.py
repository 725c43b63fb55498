"""Where a one-shot stage C program's time goes: each consumer warpgroup of the Gluon
forward's stage C (ops/hopper_fwd._c_consumer) stamps the global timer at its start, Q
ready, the prologue's softmax done, its loops done and its end (TRACE, off in every real
launch). Per shape this prints the medians over programs of each phase, the time per
step in the loops, the gap between one program's end and the next program's start on
the same SM, and what is left per program once the steps are counted at the loop's rate
(the fixed cost of a program). ``--persistent``: the same per work item of the
persistent stage C (HopperFwdConfig.persistent), its gaps between one item's end and the
program's next item.

    python scripts/trace_stage_c.py [--head-dims 128] [--seqlens 1024 4096 16384]
                                    [--causal 0] [--csv F]

DESIGN.md shapes (bf16, 16k tokens, hidden 2048). A measurement, not a test: the stamps
cost a few instructions each (the traced launch is timed beside the plain one)."""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys

import torch
import triton

from flashtile import configs
from flashtile.bench.flops import attn_flops, paper_shape, tflops
from flashtile.bench.report import write_rows
from flashtile.ops import hopper_fwd

PAIRED = False  # --paired: the persistent grid's causal items in the paired order
OVERRIDES = ""  # --overrides: config fields set on every traced config (o_lag=1, ...)
SLOTS = ("sm", "start", "q", "prologue", "loops", "end", "steps")


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def analyse(trace: torch.Tensor, persistent: bool = False) -> dict:
    """Phase medians (us) from the (items, 2, 8) int64 timeline: one item per program of
    the one-shot grid, grouped by SM for the gaps; the persistent grid's items grouped by
    their program (the last field)."""
    t = trace.view(-1, 2, 8).cpu().tolist()
    progs = []
    for wgs in t:
        if wgs[0][1] == 0:
            continue  # a program that never ran the consumer (none expected)
        progs.append(dict(sm=wgs[0][7] if persistent else wgs[0][0],
                          start=min(w[1] for w in wgs),
                          end=max(w[5] for w in wgs), wgs=wgs))
    per_wg = {k: [] for k in ("q_wait", "prologue", "loops", "tail", "per_step")}
    for p in progs:
        for w in p["wgs"]:
            _, start, q, pro, loops, end, steps, _ = w
            per_wg["q_wait"].append((q - start) / 1e3)
            if steps > 0 and loops > 0:
                per_wg["prologue"].append((pro - q) / 1e3)
                per_wg["loops"].append((loops - pro) / 1e3)
                per_wg["tail"].append((end - loops) / 1e3)
                per_wg["per_step"].append((loops - pro) / 1e3 / steps)
    gaps = []
    by_sm: dict = {}
    for p in progs:
        by_sm.setdefault(p["sm"], []).append(p)
    for ps in by_sm.values():
        ps.sort(key=lambda p: p["start"])
        gaps += [(b["start"] - a["end"]) / 1e3 for a, b in zip(ps, ps[1:])]
    t0 = min(p["start"] for p in progs)
    span = (max(p["end"] for p in progs) - t0) / 1e3
    # balance across SMs: the share of SM time in the span no program covers (items that
    # overlap on a persistent program count twice), and how long the last SM runs past
    # the median SM's end (the drain)
    busy = sum((p["end"] - p["start"]) / 1e3 for p in progs)
    last = sorted((max(p["end"] for p in ps) - t0) / 1e3 for ps in by_sm.values())
    step = med(per_wg["per_step"])
    program = med([(p["end"] - p["start"]) / 1e3 for p in progs])
    steps = med([max(w[6] for w in p["wgs"]) for p in progs])
    return dict(programs=len(progs), sms=len(by_sm), span_us=span, program_us=program,
                idle_pct=100.0 * (1.0 - busy / (span * len(by_sm))),
                drain_us=last[-1] - last[(len(last) - 1) // 2],
                steps=steps, step_us=step, fixed_us=program - steps * step,
                gap_us=med(gaps), **{k + "_us": med(v) for k, v in per_wg.items()
                                    if k != "per_step"})


def measure(hd: int, s: int, causal: bool, dev, persistent: bool = False,
            v_stages: int = 0, k_stages: int | None = None) -> dict:
    """One DESIGN.md shape: the plain and traced launch timed, then one traced launch
    analysed (``persistent``: stage C on the persistent grid; ``v_stages``: its split
    ring; ``k_stages``: the K ring's depth, the config's when None)."""
    shape = paper_shape(s, hd, causal)
    b, h = shape.batch, shape.nheads
    q, k, v = (torch.randn(b, s, h, hd, device=dev, dtype=torch.bfloat16) for _ in range(3))
    out = torch.empty_like(q)
    lse = torch.empty(b, h, s, device=dev)
    cfg = dataclasses.replace(configs.hopper_fwd_config_c(hd, causal, s).one_shot(),
                              persistent=persistent, v_stages=v_stages,
                              paired=persistent and causal and PAIRED)
    if k_stages:
        cfg = dataclasses.replace(cfg, num_stages=k_stages)
    cfg = dataclasses.replace(cfg, **configs.parse_overrides(OVERRIDES))
    n_prog = triton.cdiv(s, cfg.block_m) * b * h
    trace = torch.zeros(n_prog * 2 * 8, dtype=torch.int64, device=dev)

    def call(tr=None):
        hopper_fwd._launch(cfg, s, b, q, k, v, out, lse, (None,) * 6, s, s, None, causal,
                           trace=tr)

    plain = triton.testing.do_bench(call, warmup=25, rep=100, return_mode="median")
    traced = triton.testing.do_bench(lambda: call(trace), warmup=25, rep=100,
                                     return_mode="median")
    call(trace)
    torch.cuda.synchronize()
    return dict(head_dim=hd, causal=int(causal), seqlen=s, persistent=int(persistent),
                plain_ms=plain, traced_ms=traced,
                tflops=tflops(attn_flops(shape, "fwd"), plain), **analyse(trace, persistent))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--head-dims", type=int, nargs="+", default=[128])
    ap.add_argument("--seqlens", type=int, nargs="+", default=[1024, 4096, 16384])
    ap.add_argument("--causal", choices=("0", "1", "both"), default="0")
    ap.add_argument("--persistent", choices=("0", "1", "both"), default="0",
                    help="stage C one-shot (0), on the persistent grid (1), or both")
    ap.add_argument("--cp-epilogue", nargs="+", default=["tma"],
                    choices=("tma", "split", "k2v3"),
                    help="the persistent grid's epilogues to trace: O through the Q buffer "
                    "and TMA, or through its own buffer beside a V ring of 2 (v_stages=2; "
                    "k2v3: K ring 2, V ring 3)")
    ap.add_argument("--paired", action="store_true",
                    help="persistent causal rows in the paired item order (HopperFwdConfig."
                    "paired)")
    ap.add_argument("--overrides", default="",
                    help="config fields set on every traced config, as "
                    "FLASHTILE_HOPPER_FWD_OVERRIDES: 'o_lag=1,q_early=1' (session 43)")
    ap.add_argument("--csv")
    args = ap.parse_args()
    global PAIRED, OVERRIDES
    PAIRED = args.paired
    OVERRIDES = args.overrides
    dev = torch.device("cuda")
    print(f"{torch.cuda.get_device_name(dev)} torch {torch.__version__} triton "
          f"{triton.__version__}", flush=True)
    rows = []
    for causal in {"0": (False,), "1": (True,), "both": (False, True)}[args.causal]:
        for hd in args.head_dims:
            kinds = [(False, "")] * (args.persistent != "1") + [
                (True, e) for e in args.cp_epilogue] * (args.persistent != "0")
            for s, (pers, epi) in ((s, k) for s in args.seqlens for k in kinds):
                v_stages, k_stages = {"split": (2, None), "k2v3": (3, 2)}.get(epi, (0, None))
                row = dict(measure(hd, s, causal, dev, pers, v_stages, k_stages), epilogue=epi)
                rows.append(row)
                print(f"hd {hd} causal {int(causal)} {s:>6} p{int(pers)}{epi}: "
                      f"{row['plain_ms']:.3f} ms "
                      f"({row['tflops']:.0f} TFLOPS), traced {row['traced_ms']:.3f}; "
                      + ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                                  for k, v in row.items() if k.endswith("_us")
                                  or k in ("programs", "sms", "steps", "idle_pct")), flush=True)
                torch.cuda.empty_cache()
    print("\nper program, medians (us): q wait | prologue | loops (steps x step) | tail | "
          "fixed = program - steps x step | gap to the next program on the SM | SM time "
          "idle in the span | drain past the median SM's end")
    for r in rows:
        print(f"hd {r['head_dim']} c{r['causal']} {r['seqlen']:>6} p{r['persistent']}"
              f"{r['epilogue']}: "
              f"{r['q_wait_us']:.2f} | "
              f"{r['prologue_us']:.2f} | {r['loops_us']:.2f} ({r['steps']:.0f} x "
              f"{r['step_us']:.3f}) | {r['tail_us']:.2f} | fixed {r['fixed_us']:.2f} "
              f"({r['fixed_us'] / r['step_us']:.1f} steps) | gap {r['gap_us']:.2f} | "
              f"idle {r['idle_pct']:.1f}% | drain {r['drain_us']:.2f}")
    if args.csv:
        write_rows(args.csv, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
