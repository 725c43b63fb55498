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
"""

from __future__ import annotations

import argparse
import collections
import sys

import torch
import triton

NHEADS = 32


def _flush_buffer(device):
    return torch.empty(256 * 2**20, dtype=torch.int8, device=device)


def kernel_times(fn, device, calls: int = 20) -> dict[str, float]:
    """Mean GPU microseconds per call of each kernel ``fn`` runs (flush kernels left
    out), from the torch profiler."""
    flush = _flush_buffer(device)
    acts = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(calls):
            flush.zero_()
            fn()
        torch.cuda.synchronize(device)
    total = collections.defaultdict(float)
    for evt in prof.events():
        if evt.device_type == torch.autograd.DeviceType.CUDA and "elementwise" not in evt.name \
                and "fill" not in evt.name.lower():
            total[evt.name[:60]] += evt.time_range.elapsed_us() / calls
    return dict(total)


def graph_us(fns, device) -> float:
    """do_bench median (us) of one CUDA graph running every closure of ``fns`` in turn,
    divided by their number."""
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
    ms = triton.testing.do_bench(graph.replay, warmup=25, rep=200, return_mode="median")
    return ms * 1e3 / len(fns)


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
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("decode_kernels: needs a GPU")
        return 2
    device = torch.device("cuda")
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
            for backend in ("flashtile", "sdpa-cudnn"):
                fns = closures(backend, qs, ks, vs, lens)
                kt = kernel_times(fns[0], device)
                one = graph_us(fns[:1], device)
                many = graph_us(fns, device)
                name = f"g{g} ctx {ctx // 1024}k ({nbytes / 2**20:.0f} MiB)"
                rows.append((name, backend, sum(kt.values()), one, many, layers,
                             nbytes / many / 1e3))
                print(f"{name} {backend}: kernels " + ", ".join(
                    f"{k} {t:.1f} us" for k, t in kt.items()), flush=True)
            del ks, vs
            torch.cuda.empty_cache()
    print("\n| shape | backend | kernel us (sum) | 1 call, graph us | per layer, graph of L us "
          "| L | GB/s per layer |")
    print("|---|---|---|---|---|---|---|")
    for name, backend, ksum, one, many, layers, gbs in rows:
        print(f"| {name} | {backend} | {ksum:.1f} | {one:.1f} | {many:.1f} | {layers} | "
              f"{gbs:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
