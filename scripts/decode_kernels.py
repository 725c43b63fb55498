"""Where a batch-1 decode call's GPU time goes, flashtile against SDPA's cuDNN backend.

    PYTHONPATH=src python scripts/decode_kernels.py [--layers 8] [--ctx 8192,32768,131072]

Session 10 (issue 5). The decode bench's CUDA-graph column reads 19.7 / 34.3 / 81.8 us at
8k / 32k / 128k (B1, 32 query heads, GQA 8:1, hd 128) for 16 / 64 / 256 MiB of K/V:
a line of slope ~4.3 TB/s and ~15 us at zero bytes, and cuDNN's column has the same
intercept. Where do those 15 us go? Per shape and backend:

  kernels   the GPU duration of each kernel (torch profiler, CUPTI timestamps; a 256 MiB
            L2 flush before each call, as do_bench does): what the kernels themselves
            take, without the launch gaps between them;
  1 call    do_bench of one call replayed from a CUDA graph (the decode bench's column);
  L layers  ``--layers`` calls on L different caches (a model's layers) captured in one
            graph and replayed, divided by L: the per-layer time a decoding engine that
            graphs the whole step sees, the graph's own start and the flush amortised.

GB/s counts the K and V bytes read, as the decode bench does.

The first run (a6549c9) flushed L2 as do_bench does, by zeroing 256 MiB: that leaves L2
full of dirty lines, and a kernel reading less than L2 then pays their write-back (up to
the whole L2, ~12 us at 4 TB/s). Both backends showed a ~7 us intercept that fits it.
Timings now flush with a read (L2 left holding clean lines); the kernel lines show both
flushes. flashtile also runs in variants of the split kernel's tile (``VARIANTS``: a
DecodeConfig replacing kvcache.decode_config's pick; the split heuristic follows it).
The second run (96c0b31) measured the combine launched with PDL (lost, removed) and
the combine's chunk (32 kept).
"""

from __future__ import annotations

import argparse
import collections
import sys

import torch

NHEADS = 32
# (name, DecodeConfig fields or None for the shipped pick); "sdpa-cudnn" is the baseline
VARIANTS = [("flashtile", None), ("ft 16x64 w4 s3 x2", (16, 64, 4, 3, 2)),
            ("ft 16x128 w4 s2", (16, 128, 4, 2, 1)), ("ft 16x64 w8 s4", (16, 64, 8, 4, 1)),
            ("ft fused-combine", None), ("sdpa-cudnn", None)]
# variants run with kvcache.FUSED_COMBINE (the last split program of each query tile
# merges; session 33's chunked merge): no combine launch
FUSED = {"ft fused-combine"}


_FLUSH: dict = {}


def flush_l2(device, mode: str) -> None:
    """Evict L2: ``dirty`` zeroes 256 MiB (do_bench's way: L2 left full of dirty lines),
    ``clean`` reads 256 MiB (a sum: L2 left holding clean lines)."""
    buf = _FLUSH.get(device)
    if buf is None:
        buf = _FLUSH[device] = torch.zeros(64 * 2**20, dtype=torch.float32, device=device)
    if mode == "dirty":
        buf.zero_()
    else:
        buf.sum()


_SKIP = ("elementwise", "fill", "reduce_kernel", "memset")


def kernel_times(fn, device, flush: str, calls: int = 20) -> dict[str, float]:
    """Mean GPU microseconds per call of each kernel ``fn`` runs (flush kernels left
    out), from the torch profiler."""
    acts = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(calls):
            flush_l2(device, flush)
            fn()
        torch.cuda.synchronize(device)
    total = collections.defaultdict(float)
    for evt in prof.events():
        if evt.device_type == torch.autograd.DeviceType.CUDA and not any(
                s in evt.name.lower() for s in _SKIP):
            total[evt.name[:40]] += evt.time_range.elapsed_us() / calls
    return dict(total)


def timed_us(fn, device, flush: str, reps: int = 100) -> float:
    """Median GPU microseconds of ``fn`` between two events, L2 flushed before each."""
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for _ in range(5):
        fn()
    for s, e in zip(starts, ends):
        flush_l2(device, flush)
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize(device)
    times = sorted(s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends))
    return times[len(times) // 2]


def graph_us(fns, device, flush: str = "clean") -> float:
    """Median (us) of one CUDA graph running every closure of ``fns`` in turn, L2
    flushed before each replay, divided by their number."""
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        for _ in range(2):
            for fn in fns:
                fn()
    torch.cuda.current_stream(device).wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for fn in fns:
            fn()
    return timed_us(graph.replay, device, flush) / len(fns)


def closures(backend, qs, ks, vs, lens):
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from flashtile.ops.kvcache import flash_attn_with_kvcache

    out = []
    for q, k, v in zip(qs, ks, vs):
        if backend == "flashtile":
            out.append(lambda q=q, k=k, v=v: flash_attn_with_kvcache(q, k, v,
                                                                     cache_seqlens=lens))
        else:
            qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

            def sdpa(qt=qt, kt=kt, vt=vt):
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    return F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True)
            out.append(sdpa)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--ctx", default="8192,32768,131072")
    ap.add_argument("--groups", default="8,1", help="GQA group sizes (1 = MHA)")
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--variants", help="comma-separated VARIANTS names (default: all)")
    args = ap.parse_args()
    chosen = [v for v in VARIANTS if args.variants is None
              or v[0] in args.variants.split(",")]
    if not torch.cuda.is_available():
        print("decode_kernels: needs a GPU")
        return 2
    device = torch.device("cuda")
    from flashtile.ops import kvcache

    shipped = kvcache.decode_config
    d = args.head_dim
    rows = []
    for g in map(int, args.groups.split(",")):
        for ctx in map(int, args.ctx.split(",")):
            hkv = NHEADS // g
            nbytes = 2 * ctx * hkv * d * 2
            layers = args.layers if nbytes * args.layers <= 8 * 2**30 else 2
            ks = [torch.randn(1, ctx, hkv, d, device=device, dtype=torch.bfloat16)
                  for _ in range(layers)]
            vs = [torch.randn_like(k) for k in ks]
            qs = [torch.randn(1, 1, NHEADS, d, device=device, dtype=torch.bfloat16)
                  for _ in range(layers)]
            lens = torch.full((1,), ctx, dtype=torch.int32, device=device)
            name = f"g{g} ctx {ctx // 1024}k ({nbytes / 2**20:.0f} MiB)"
            for variant, fields in chosen:
                if fields is not None and g == 1:
                    continue  # the tile variants are for the GQA rows (block_m 16)
                kvcache._PLANS.clear()
                kvcache.FUSED_COMBINE = variant in FUSED
                kvcache.decode_config = shipped if fields is None else (
                    lambda *a, fields=fields, **k: kvcache.DecodeConfig(*fields))
                backend = "sdpa-cudnn" if variant == "sdpa-cudnn" else "flashtile"
                fns = closures(backend, qs, ks, vs, lens)
                for flush in ("dirty", "clean") if fields is None else ("clean",):
                    kt = kernel_times(fns[0], device, flush)
                    print(f"{name} {variant}, {flush} flush: kernels " + ", ".join(
                        f"{k} {t:.1f} us" for k, t in kt.items()), flush=True)
                try:
                    one = graph_us(fns[:1], device)
                    many = graph_us(fns, device)
                except Exception as exc:  # report the rest
                    print(f"{name} {variant}: graph failed: {exc}", flush=True)
                    one = many = float("nan")
                rows.append((name, variant, sum(kt.values()), one, many, layers,
                             nbytes / many / 1e3))
            kvcache.decode_config = shipped
            kvcache.FUSED_COMBINE = False
            kvcache._PLANS.clear()
            del ks, vs
            torch.cuda.empty_cache()
    print("\n| shape | variant | kernel us (sum, clean flush) | 1 call, graph us "
          "| per layer, graph of L us | L | GB/s per layer |")
    print("|---|---|---|---|---|---|---|")
    for name, backend, ksum, one, many, layers, gbs in rows:
        print(f"| {name} | {backend} | {ksum:.1f} | {one:.1f} | {many:.1f} | {layers} | "
              f"{gbs:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
