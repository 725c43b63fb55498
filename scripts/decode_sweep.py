"""Decode tiles x KV splits at the shapes where `bench --suite decode` is below cuDNN
(H200, 0e01b69: hd 64 MHA batch 16 at 0.81-0.83x, hd 64 batch 1-4 at 0.88-0.93x, hd 128
GQA batch 1 at 128k 3.26 TB/s against the issue's 3.5), each call replayed from a CUDA
graph (kernel time only), beside SDPA cuDNN on the same cache, also from a graph.

    python scripts/decode_sweep.py [--csv F] [--shapes D,G,B,CTX;...] [--splits 0,1,2]

Prints one line per (shape, tile, splits): GB/s of K+V read and the ratio to cuDNN; then
per shape the best. A measurement, not a test."""

from __future__ import annotations

import argparse
import functools
import sys

import torch

from flashtile.bench.decode import _sdpa_call, graph_ms
from flashtile.bench.harness import Timing
from flashtile.bench.report import write_rows
from flashtile.ops import kvcache
from flashtile.ops.kvcache import DecodeConfig

# (head dim, query heads per KV head, batch, context); 32 query heads throughout
SHAPES = [
    (64, 1, 16, 8192), (64, 1, 16, 32768), (64, 1, 4, 131072), (64, 1, 1, 131072),
    (64, 8, 16, 131072), (128, 8, 1, 131072), (128, 1, 16, 8192), (128, 8, 1, 8192),
]
SPLITS = [0, 1, 2, 3, 4, 8, 33, 66]
NHEADS = 32


def tiles(d: int, group: int) -> list[DecodeConfig | None]:
    bm = max(16, group)
    return [None, DecodeConfig(bm, 64, 4, 3), DecodeConfig(bm, 64, 4, 4),
            DecodeConfig(bm, 128, 4, 3), DecodeConfig(bm, 128, 8, 2),
            DecodeConfig(bm, 128, 8, 3), DecodeConfig(bm, 32, 4, 4),
            DecodeConfig(bm, 256, 8, 2) if d <= 64 else DecodeConfig(bm, 64, 8, 4)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv")
    ap.add_argument("--shapes", help="head dim, group, batch, context per shape, ';'-separated "
                    "(default: SHAPES)")
    ap.add_argument("--splits", help="comma-separated num_splits (default: SPLITS)")
    args = ap.parse_args()
    shapes = ([tuple(int(x) for x in item.split(",")) for item in args.shapes.split(";")]
              if args.shapes else SHAPES)
    split_list = [int(x) for x in args.splits.split(",")] if args.splits else SPLITS
    timing = Timing(warmup_ms=5, rep_ms=40)
    dev = torch.device("cuda")
    rows = []
    for d, g, b, ctx in shapes:
        hkv = NHEADS // g
        k_cache = torch.randn(b, ctx, hkv, d, device=dev, dtype=torch.bfloat16)
        v_cache = torch.randn_like(k_cache)
        q = torch.randn(b, 1, NHEADS, d, device=dev, dtype=torch.bfloat16)
        lens = torch.full((b,), ctx, dtype=torch.int32, device=dev)
        nbytes = 2 * b * ctx * hkv * d * 2
        cudnn = graph_ms(_sdpa_call(q, k_cache, v_cache, "CUDNN_ATTENTION"), timing)
        label = f"D{d} {'MHA' if g == 1 else f'GQA{g}:1'} B{b} ctx {ctx // 1024}k"
        print(f"{label}: cuDNN {nbytes / cudnn / 1e6:.0f} GB/s", flush=True)
        for cfg in tiles(d, g):
            for splits in split_list:
                call = functools.partial(kvcache.kvcache_forward, q, k_cache, v_cache,
                                         cache_seqlens=lens, num_splits=splits, config=cfg)
                try:
                    ms = graph_ms(call, timing)
                except Exception as exc:  # out of resources, ...
                    print(f"  {cfg} splits={splits}: {type(exc).__name__}", file=sys.stderr)
                    continue
                plan = kvcache._plan(q, k_cache, None, 0, splits, cfg, True, False, False,
                                     False)
                gbs = nbytes / ms / 1e6
                rows.append(dict(shape=label, auto=cfg is None and splits == 0,
                                 cfg=str(plan.cfg), requested=splits,
                                 splits=plan.num_splits, us=ms * 1e3, gbs=gbs,
                                 cudnn_gbs=nbytes / cudnn / 1e6, ratio=cudnn / ms))
                print(f"  {plan.cfg} splits {splits}->{plan.num_splits}: {gbs:.0f} GB/s "
                      f"({cudnn / ms:.2f}x cuDNN)", flush=True)
        del k_cache, v_cache
        torch.cuda.empty_cache()
    print("\nbest per shape (auto = the shipped tile and heuristic):")
    for label in dict.fromkeys(r["shape"] for r in rows):
        mine = [r for r in rows if r["shape"] == label]
        auto = next((r for r in mine if r["auto"]), None)
        if auto is None:
            continue
        best = max(mine, key=lambda r: r["gbs"])
        print(f"{label:24s} auto {auto['gbs']:5.0f} GB/s ({auto['ratio']:.2f}x, "
              f"{auto['splits']} splits)  best {best['gbs']:5.0f} ({best['ratio']:.2f}x) "
              f"{best['cfg']} {best['splits']} splits")
    if args.csv:
        write_rows(args.csv, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
