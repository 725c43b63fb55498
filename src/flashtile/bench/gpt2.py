"""``flashtile bench --suite gpt2``: GPT-2 generation throughput, flashtile vs HuggingFace.

For GPT-2 124M and XL shapes (random bf16 weights, the same for both), greedy
generation of 64 new tokens after prompts of 16, 256 and 768 tokens at batch 1, and
at batch 8 and 32: tokens/s = batch * 64 / wall time of the whole call (prefill
included, as HuggingFace's ``generate()`` is timed), beside ``generate()`` with SDPA
attention on the same weights and prompts. Ours is ``flashtile.models.generate``:
packed prefill, KV-cache decode on ``flash_attn_with_kvcache``, the decode step
replayed as a CUDA graph.

Also reported: flashtile's decode-only rate (after prefill), and for batch 1 the
fraction of the weight-read ceiling: a decode step reads every weight once, so
``ceiling = copy bandwidth / weight bytes`` tokens/s (copy bandwidth measured in the same
run as (read + write) bytes / time of a 1 GiB ``copy_``).

Without a CUDA device: says so, and runs a tiny generation smoke under the interpreter.
"""

from __future__ import annotations

import argparse
import sys
import time

NEW_TOKENS = 64
SIZES = {"124m": "gpt2", "xl": "gpt2-xl"}
CASES = [(1, 16), (1, 256), (1, 768), (8, 16), (8, 256), (32, 16), (32, 256)]  # (batch, prompt)
COPY_BYTES = 1 << 30


def configure_parser(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("gpt2 suite (--suite gpt2)")
    g.add_argument("--gpt2-sizes", nargs="+", choices=sorted(SIZES), default=["124m", "xl"],
                   help="model shapes (default: 124m xl)")
    g.add_argument("--gpt2-reps", type=int, default=3, help="timed runs per case (median)")
    g.add_argument("--gpt2-no-hf", action="store_true", help="skip HuggingFace generate()")


def run(args: argparse.Namespace) -> int:
    from .harness import gpu_or_smoke

    return gpu_or_smoke("gpt2", "Running a tiny generation smoke check under the "
                        "interpreter instead.", _smoke, _run_gpu, args)


def _smoke() -> str:
    import os

    os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch

    from ..models.generate import Generator, generate_recompute
    from ..models.generate_cli import selftest_model

    model = selftest_model("flashtile", "cpu")
    prompts = [torch.arange(1, 6), torch.arange(1, 3)]
    t0 = time.perf_counter()
    out = Generator(model, 2, 16).generate(prompts, 4).tolist()
    want = [generate_recompute(model, p, 4) for p in prompts]
    if out != want:
        raise RuntimeError(f"cached {out} != recomputed {want}")
    return (f"smoke ok: tiny GPT-2, 2 prompts x 4 new tokens, KV cache == recompute "
            f"({time.perf_counter() - t0:.1f} s, no timings on a CPU)")


# ----------------------------------------------------------------------------------
# GPU
# ----------------------------------------------------------------------------------


def _run_gpu(args) -> int:
    import torch

    from ..models.gpt2_attention import decode_attention_name
    from .harness import Record
    from .report import Env, write_csv

    env = Env.collect(getattr(args, "commit", None))
    copy_gbs = _copy_bandwidth()
    print(f"gpt2: device copy {copy_gbs:.0f} GB/s; decode attention: "
          f"{decode_attention_name('flashtile')}", file=sys.stderr)
    records = [Record("copy_1GiB", "torch", None, "gbs", copy_gbs)]
    rows = []
    start = time.perf_counter()
    for size in args.gpt2_sizes:
        rows += _bench_size(SIZES[size], size, args, copy_gbs, records)
        torch.cuda.empty_cache()
    print(f"gpt2: measured in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    if getattr(args, "csv", None):
        write_csv(args.csv, records, env)
        print(f"wrote {args.csv}", file=sys.stderr)
    print(_format(rows, copy_gbs))
    print(env.line())
    return 0


def _copy_bandwidth() -> float:
    import torch
    from triton.testing import do_bench

    src = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = do_bench(lambda: dst.copy_(src), warmup=10, rep=50, return_mode="median")
    return 2 * COPY_BYTES / ms / 1e6


def _bench_size(name, label, args, copy_gbs, records) -> list[dict]:
    import torch

    from ..models.generate import Generator
    from ..models.gpt2 import config_for
    from ..models.gpt2_check import random_hf_model
    from ..models.weights import gpt2_from_hf
    from .harness import Record

    cfg = config_for(name)
    hf = random_hf_model(cfg, seed=0, device="cuda").to(torch.bfloat16)
    ours = gpt2_from_hf(hf)
    weight_bytes = cfg.num_params() * 2
    ceiling = copy_gbs * 1e9 / weight_bytes
    gen = torch.Generator().manual_seed(0)
    rows = []
    for batch, prompt_len in CASES:
        prompts = torch.randint(0, cfg.vocab_size, (batch, prompt_len), generator=gen).cuda()
        g = Generator(ours, batch, prompt_len + NEW_TOKENS)
        t_ours, toks = _time(lambda g=g, p=prompts: g.generate(list(p), NEW_TOKENS),
                             args.gpt2_reps)
        t_pre, _ = _time(lambda g=g, p=prompts: ours.prefill(list(p), g.cache), args.gpt2_reps)
        row = dict(model=label, batch=batch, prompt=prompt_len,
                   ours=batch * NEW_TOKENS / t_ours,
                   ours_decode=batch * (NEW_TOKENS - 1) / max(t_ours - t_pre, 1e-9),
                   ceiling=ceiling)
        if not args.gpt2_no_hf:
            t_hf, hf_toks = _time(lambda p=prompts: _hf_generate(hf, p), args.gpt2_reps)
            row["hf"] = batch * NEW_TOKENS / t_hf
            row["same"] = float((hf_toks[:, prompt_len:] == toks).float().mean())
        rows.append(row)
        kernel = f"gpt2-{label}_b{batch}_{prompt_len}->{prompt_len + NEW_TOKENS}"
        for key in ("ours", "ours_decode", "hf"):
            if key in row:
                backend = "hf-sdpa" if key == "hf" else "flashtile"
                metric = "decode_tok_s" if key == "ours_decode" else "tok_s"
                records.append(Record(kernel, backend, None, metric, row[key]))
        print(f"gpt2: {kernel}: {_fmt_row(row)}", file=sys.stderr, flush=True)
        del g
    return rows


def _hf_generate(hf, prompts):
    import torch

    return hf.generate(prompts, attention_mask=torch.ones_like(prompts),
                       max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False,
                       pad_token_id=hf.config.eos_token_id)


def _time(fn, reps: int):
    """(median seconds of ``reps`` runs after one warm-up, last result)."""
    import torch

    out = fn()
    times = []
    for _ in range(max(1, reps)):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2], out


def _fmt_row(row) -> str:
    hf = f"HF {row['hf']:.0f} tok/s, " if "hf" in row else ""
    return f"{hf}flashtile {row['ours']:.0f} tok/s (decode {row['ours_decode']:.0f})"


def _format(rows, copy_gbs) -> str:
    lines = [
        f"GPT-2 generation, bf16 random weights, greedy, {NEW_TOKENS} new tokens; tok/s = "
        "batch x new tokens / wall time incl. prefill",
        "",
        "| model | batch | context | HF generate() tok/s | flashtile tok/s | speed-up | "
        "flashtile decode tok/s | % of weight-read ceiling | tokens = HF |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        hf = f"{r['hf']:.0f}" if "hf" in r else "-"
        speed = f"{r['ours'] / r['hf']:.1f}x" if "hf" in r else "-"
        pct = f"{100 * r['ours_decode'] / r['ceiling']:.0f}%" if r["batch"] == 1 else ""
        same = f"{100 * r['same']:.0f}%" if "same" in r else "-"
        lines.append(
            f"| {r['model']} | {r['batch']} | {r['prompt']}->{r['prompt'] + NEW_TOKENS} | {hf} | "
            f"{r['ours']:.0f} | {speed} | {r['ours_decode']:.0f} | {pct} | {same} |"
        )
    ceilings = sorted({(r["model"], r["ceiling"]) for r in rows})
    lines.append("")
    lines.append("weight-read ceiling at batch 1 (copy bandwidth / bf16 weight bytes, "
                 f"{copy_gbs:.0f} GB/s): " + ", ".join(f"{m} {c:.0f} tok/s" for m, c in ceilings))
    return "\n".join(lines)
