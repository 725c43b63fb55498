"""Where the HF Llama's training step spends its GPU time, per backend (issue 9).

``flashtile bench --suite hf`` gives one wall time per step; this splits the same step
(the same ~1.1B Llama of ``flashtile.bench.hf``, batch 1, bf16, forward + loss +
backward) into kernels with the torch profiler, and puts flashtile's and sdpa's side by
side: device us per step for each kernel class (attention forward, attention backward,
GQA partial sums, GEMMs, everything else) and the kernels with the largest difference.
Everything but attention is the same model, so what differs is what attention costs and
what it makes the rest of the step do (copies, layouts).

    python scripts/profile_hf_step.py --contexts 8192 32768 [--modes train fwd]
        [--steps 2] [--csv F]
"""

from __future__ import annotations

import argparse
import collections
import csv
import sys
import traceback
import warnings

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from flashtile.bench.clocks import ClockSampler

IDLE = "(GPU idle between kernels)"
GAPS = []  # per profiled (context, backend): idle us per step by the kernel before the gap
BIGGEST = []  # per profiled (context, backend): the largest single gaps (us, before, after)

# kernel class by a substring of the kernel's name, first match wins
CLASSES = (
    ("attn bwd", ("_bwd_dkdv", "_bwd_dq", "_delta", "_bwd_pre", "flash_bwd", "bwd_kernel",
                  "dgrad", "bprop", "dot_do_o", "convert_dq", "reduce_head", "fmha_bwd",
                  "_attn_bwd")),
    ("attn fwd", ("_fwd", "flash_fwd", "fmha", "cudnn", "_attn_fwd", "attention")),
    ("gemm", ("gemm", "sm90_xmma", "cutlass", "nvjet", "matmul")),
    ("reduce", ("reduce_kernel", "sum")),
    ("copy", ("copy", "cat", "elementwise_kernel_with_index", "direct_copy")),
)


def kernel_class(name: str) -> str:
    if name == IDLE:
        return "idle"
    low = name.lower()
    for cls, keys in CLASSES:
        if any(k.lower() in low for k in keys):
            return cls
    return "other"


def idle_us(prof) -> tuple[float, collections.Counter]:
    """us in which no kernel ran, from the first kernel's start to the last one's end:
    the span less the union of the kernels' intervals (launch gaps, host waits); and
    that idle time by the kernel after which each gap opened."""
    spans = sorted((e.time_range.start, e.time_range.end, e.name) for e in prof.events()
                   if e.device_type == DeviceType.CUDA)
    after = collections.Counter()
    if not spans:
        return 0.0, after
    idle, (_, hi, last), big = 0.0, spans[0], []
    for a, b, name in spans[1:]:
        if a > hi:
            idle += a - hi
            after[last[:90]] += a - hi
            big.append((a - hi, last[:45], name[:45]))
        if b >= hi:
            hi, last = b, name
    BIGGEST.append(sorted(big, reverse=True)[:6])
    return idle, after


def run_step(model, ids, train: bool) -> None:
    """One training step (forward, loss, backward; no optimizer) or no-grad forward."""
    if train:
        model.zero_grad(set_to_none=True)
        model(ids, labels=ids, use_cache=False).loss.backward()
    else:
        with torch.no_grad():
            model(ids, use_cache=False)


def step_kernels(model, ids, steps: int, train: bool = True) -> dict[str, float]:
    """us per training step of every CUDA kernel / memset / memcpy, by name; the GPU's
    idle us per step under the key IDLE."""
    run_step(model, ids, train)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            run_step(model, ids, train)
        torch.cuda.synchronize()
    model.zero_grad(set_to_none=True)
    out = {e.key: e.self_device_time_total / steps for e in prof.key_averages()
           if e.self_device_time_total > 0}
    idle, after = idle_us(prof)
    out[IDLE] = idle / steps
    GAPS.append({k: us / steps for k, us in after.most_common(6)})
    return out


def sync_sites(model, ids, name, train: bool) -> dict[str, collections.Counter]:
    """Per backend, the host-device synchronisations of one step
    (torch.cuda.set_sync_debug_mode), counted by the innermost transformers / flashtile
    source line on the stack that asked for them."""
    out = {}
    for backend in ("flashtile", "sdpa"):
        model.set_attn_implementation(name if backend == "flashtile" else "sdpa")
        sites = collections.Counter()
        real = warnings.showwarning

        def record(message, category, filename, lineno, file=None, line=None, sites=sites):
            frames = [f for f in traceback.extract_stack()[:-1]
                      if ("transformers" in f.filename or "flashtile" in f.filename)
                      and "profile_hf_step" not in f.filename]
            where = frames[-1] if frames else None
            sites[f"{where.filename.split('site-packages/')[-1]}:{where.lineno} "
                  f"{where.line}"[:140] if where else str(message)[:100]] += 1

        torch.cuda.synchronize()
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.showwarning = record
            torch.cuda.set_sync_debug_mode(1)
            try:
                run_step(model, ids, train)
            finally:
                torch.cuda.set_sync_debug_mode(0)
                warnings.showwarning = real
        torch.cuda.synchronize()
        model.zero_grad(set_to_none=True)
        out[backend] = sites
    return out


def clocks_per_backend(model, ids, name, steps: int, train: bool) -> dict[str, str]:
    """Each backend's steps under a ClockSampler, after one untimed step each."""
    out = {}
    for backend in ("flashtile", "sdpa"):
        model.set_attn_implementation(name if backend == "flashtile" else "sdpa")
        run_step(model, ids, train)  # warm: the same state for both
        torch.cuda.synchronize()
        with ClockSampler() as sampler:
            for _ in range(steps):
                run_step(model, ids, train)
            torch.cuda.synchronize()
        model.zero_grad(set_to_none=True)
        out[backend] = sampler.summary()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--contexts", type=int, nargs="+", default=[8192, 32768])
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--top", type=int, default=12, help="kernels listed by |difference|")
    ap.add_argument("--modes", nargs="+", choices=("train", "fwd"), default=["train"],
                    help="train: forward + loss + backward; fwd: the no-grad forward")
    ap.add_argument("--clock-steps", type=int, default=0,
                    help="also run this many steps per backend with nvidia-smi sampling "
                    "the SM clock and power (0: off)")
    ap.add_argument("--sync-debug", action="store_true",
                    help="also list each backend's host-device synchronisations per step")
    ap.add_argument("--csv", help="long rows: context, backend, kernel, class, us per step")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("profile_hf_step: needs a GPU")
        return 2
    import transformers

    from flashtile.bench.hf import MODELS
    from flashtile.integrations import hf

    name = hf.register()
    torch.manual_seed(0)
    config_cls, model_cls, fields, _ = MODELS["llama"]
    cfg = getattr(transformers, config_cls)(
        num_hidden_layers=args.layers, max_position_embeddings=max(args.contexts) + 1024,
        **fields)
    with torch.device("cuda"):
        model = getattr(transformers, model_cls)._from_config(
            cfg, attn_implementation="sdpa", dtype=torch.bfloat16)
    model.train()
    rows = []
    for ctx, mode in [(c, m) for c in args.contexts for m in args.modes]:
        ids = torch.randint(1, cfg.vocab_size, (1, ctx), device="cuda")
        per = {}
        for backend in ("flashtile", "sdpa"):
            model.set_attn_implementation(name if backend == "flashtile" else "sdpa")
            model.train(mode == "train")
            per[backend] = step_kernels(model, ids, args.steps, mode == "train")
            rows += [(ctx, mode, backend, k, kernel_class(k), us)
                     for k, us in per[backend].items()]
        what = "training step" if mode == "train" else "no-grad forward"
        print(f"\n## context {ctx}: device ms per {what}, by kernel class\n")
        print("| class | flashtile | sdpa | flashtile - sdpa |")
        print("|---|---|---|---|")
        sums = {b: collections.Counter() for b in per}
        for b, ks in per.items():
            for k, us in ks.items():
                sums[b][kernel_class(k)] += us
        for cls in [c for c, _ in CLASSES] + ["other", "idle"]:
            a, s = sums["flashtile"][cls], sums["sdpa"][cls]
            print(f"| {cls} | {a / 1e3:.2f} | {s / 1e3:.2f} | {(a - s) / 1e3:+.2f} |")
        ta, ts = sum(sums["flashtile"].values()), sum(sums["sdpa"].values())
        print(f"| total | {ta / 1e3:.2f} | {ts / 1e3:.2f} | {(ta - ts) / 1e3:+.2f} |")
        print("\n(idle: no kernel running, between the first kernel's start and the last "
              "one's end; total = kernels + idle, the step's GPU span)")
        for backend, gaps in zip(per, GAPS[-2:]):
            print(f"\nidle us per step after (largest, {backend}):")
            for k, us in gaps.items():
                print(f"  {us:9.0f}  {k}")
        for backend, big in zip(per, BIGGEST[-2:]):
            print(f"largest single gaps ({backend}, us: before -> after):")
            for us, before, nxt in big:
                print(f"  {us:9.0f}  {before} -> {nxt}")
        print("\nkernels with the largest difference (us per step, flashtile / sdpa):")
        names = set(per["flashtile"]) | set(per["sdpa"])
        diff = sorted(names, key=lambda k: -abs(per["flashtile"].get(k, 0)
                                                 - per["sdpa"].get(k, 0)))
        for k in diff[:args.top]:
            a, s = per["flashtile"].get(k, 0.0), per["sdpa"].get(k, 0.0)
            print(f"  {a:9.0f} {s:9.0f}  [{kernel_class(k)}] {k[:110]}")
        if args.sync_debug:
            for backend, sites in sync_sites(model, ids, name, mode == "train").items():
                print(f"syncs {backend}: {sum(sites.values())} per step")
                for site, n in sites.most_common(5):
                    print(f"  {n:4d}  {site}")
        if args.clock_steps:
            for backend, text in clocks_per_backend(model, ids, name, args.clock_steps,
                                                    mode == "train").items():
                print(f"clocks {backend:9}: {text}")
        del ids
        torch.cuda.empty_cache()
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["context", "mode", "backend", "kernel", "class", "us_per_step"])
            w.writerows(rows)
    print(f"\n{torch.cuda.get_device_name()}, torch {torch.__version__}, transformers "
          f"{transformers.__version__}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
