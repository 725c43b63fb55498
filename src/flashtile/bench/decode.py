"""``flashtile bench --suite decode``: KV-cache decoding bandwidth, split-KV speed-up,
paged-cache fragmentation.

Three measurements (issue 5):

1. Decode bandwidth. For batch x context x head dim x (MHA, GQA 8:1), one query token
   per sequence over a full contiguous cache, the bytes of K and V read per call,
   ``2 * B * ctx * Hkv * D * 2``, over the median time, in GB/s; beside the device copy
   bandwidth measured in the same run (``dst.copy_(src)`` of 1 GiB, counting read +
   write), SDPA (each of its cuDNN / flash / efficient backends on the same cache as a
   (B, H, S, D) view; the best is reported) and FlexAttention (compiled per shape, on a
   subset: compiling is slow). Caches over 64 GiB are skipped.
2. Split-KV speed-up at batch 1, GQA 8:1 (32 query heads, 4 KV heads), head dim 128:
   ``num_splits=1`` vs the heuristic (``num_splits=0``), at contexts 8k and longer.
3. Paged-memory fragmentation: a batch of requests with a long-tailed spread of
   lengths; KV memory reserved by max-length contiguous preallocation vs by
   ``flashtile.kv.PagedKVCache`` pages (16..256 tokens), as a table and (``--plot``) a PNG.

Without a CUDA device, ``run`` says that timings need a GPU, runs a tiny decode under the
interpreter against the reference and prints the fragmentation table (host-only).
"""

from __future__ import annotations

import argparse
import math
import sys
import time

COPY_BYTES = 1 << 30
CACHE_CAP_BYTES = 64 << 30
NHEADS = 32
FRAG_REQUESTS = 256
FRAG_MAX_LEN = 8192
# bytes per token of a Llama-like model's KV (32 layers x 8 KV heads x 128 x 2 (K, V) x bf16)
FRAG_BYTES_PER_TOKEN = 32 * 8 * 128 * 2 * 2


def configure_parser(parser: argparse.ArgumentParser) -> None:
    from .cli import parse_size

    g = parser.add_argument_group("decode suite (--suite decode)")
    g.add_argument("--decode-batches", type=int, nargs="+", default=[1, 4, 16, 64],
                   metavar="B", help="batch sizes (default: 1 4 16 64)")
    g.add_argument("--decode-contexts", type=parse_size, nargs="+",
                   default=[1024, 8192, 32768, 131072], metavar="N",
                   help="cache lengths, 8k style (default: 1k 8k 32k 128k)")
    g.add_argument("--decode-head-dims", type=int, nargs="+", default=[64, 128], metavar="D",
                   help="head dims (default: 64 128)")
    g.add_argument("--decode-groups", type=int, nargs="+", default=[1, 8], metavar="G",
                   help="query heads per KV head: 1 = MHA, 8 = GQA 8:1 (default: 1 8)")
    g.add_argument("--decode-flex", choices=("none", "some", "all"), default="some",
                   help="FlexAttention shapes (compiles per shape): some = head dim 128, "
                   "batch 1 and 16, context 32k (default: some)")
    g.add_argument("--decode-split-contexts", type=parse_size, nargs="+",
                   default=[8192, 32768, 131072], metavar="N",
                   help="contexts of the split-KV speed-up (default: 8k 32k 128k)")


def run(args: argparse.Namespace) -> int:
    from .harness import gpu_or_smoke

    return gpu_or_smoke(
        "decode", "Running a CPU smoke check (interpreter) and the host-only fragmentation "
        "table instead.", _smoke, _run_gpu, args,
        then=lambda: _frag_section(getattr(args, "plot", None)))


# ----------------------------------------------------------------------------------
# CPU smoke
# ----------------------------------------------------------------------------------


def _smoke() -> list[str]:
    import torch

    from .. import reference
    from ..ops.kvcache import flash_attn_with_kvcache

    lines = []
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 1, 4, 32, generator=gen, dtype=torch.float32).half()
    k_cache = torch.randn(2, 64, 1, 32, generator=gen).half()
    v_cache = torch.randn(2, 64, 1, 32, generator=gen).half()
    lens = torch.tensor([64, 37], dtype=torch.int32)
    for splits in (1, 3):
        out = flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens,
                                      num_splits=splits)
        ref = reference.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens)
        err = (out.double() - ref.double()).abs().max().item()
        if not err < 1e-2:
            raise RuntimeError(f"num_splits={splits}: max|out - ref| = {err:.3e}")
        lines.append(f"decode smoke ok: B2 ctx<=64 H4 Hkv1 D32 num_splits={splits}, "
                     f"max|out - ref64| = {err:.2e}")
    return lines


# ----------------------------------------------------------------------------------
# GPU measurements
# ----------------------------------------------------------------------------------


def _run_gpu(args) -> int:
    import torch

    from .harness import Record, Timing
    from .report import Env, write_csv

    timing = Timing.quick() if args.quick else Timing(warmup_ms=10, rep_ms=50)
    env = Env.collect(args.commit)
    device = torch.device("cuda")
    start = time.perf_counter()
    copy_gbs = _copy_bandwidth(device, timing)
    print(f"decode: device copy {copy_gbs:.0f} GB/s (read + write)", file=sys.stderr)
    records = [Record("copy_1GiB", "torch", None, "gbs", copy_gbs)]
    rows = _bandwidth_rows(args, device, timing, records)
    split_rows = _split_rows(args, device, timing, records)
    host_rows = _host_rows(device, timing, records)
    sweep_rows = _sweep_rows(device, timing, records)
    print(f"decode: measured in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    if args.csv:
        write_csv(args.csv, records, env)
        print(f"wrote {args.csv}", file=sys.stderr)
    print(_format_bandwidth(rows, copy_gbs))
    print()
    print(_format_split(split_rows))
    print()
    print(_format_host(host_rows))
    print()
    print(_format_sweep(sweep_rows))
    print()
    print(_frag_section(args.plot))
    print(env.line())
    return 0


def _copy_bandwidth(device, timing) -> float:
    import torch

    from .harness import median_ms

    src = torch.empty(COPY_BYTES, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), timing)
    return 2 * COPY_BYTES / ms / 1e6


def _shapes(args):
    for d in args.decode_head_dims:
        for g in args.decode_groups:
            for b in args.decode_batches:
                for ctx in args.decode_contexts:
                    nheads_kv = max(1, NHEADS // g)
                    nbytes = 2 * b * ctx * nheads_kv * d * 2
                    if nbytes <= CACHE_CAP_BYTES:
                        yield d, g, nheads_kv, b, ctx, nbytes


def _flex_wanted(args, d, b, ctx) -> bool:
    if args.decode_flex == "all":
        return True
    return args.decode_flex == "some" and d == 128 and b in (1, 16) and ctx == 32768


def _bandwidth_rows(args, device, timing, records) -> list[dict]:
    import torch

    from .flops import Shape
    from .harness import Record

    rows = []
    for d, g, nheads_kv, b, ctx, nbytes in _shapes(args):
        fn = k_cache = v_cache = None  # free the previous cache before the next one
        torch.cuda.empty_cache()
        try:
            k_cache = torch.randn(b, ctx, nheads_kv, d, device=device, dtype=torch.bfloat16)
            v_cache = torch.randn_like(k_cache)
        except torch.OutOfMemoryError:
            continue
        q = torch.randn(b, 1, nheads_kv * g, d, device=device, dtype=torch.bfloat16)
        row = dict(d=d, g=g, b=b, ctx=ctx, mib=nbytes / 2**20)
        shape = Shape(b, ctx, nheads_kv * g, d, False)
        calls = {}
        for name, fn in _decode_backends(q, k_cache, v_cache, args, d, b, ctx):
            ms = _time_or_none(fn, timing)
            if ms is not None:
                calls[name] = fn
                row[name] = nbytes / ms / 1e6
                records.append(Record(f"decode_g{g}", name, shape, "kv_read_gbs", row[name]))
        sdpa = {k: v for k, v in row.items() if k.startswith("sdpa-")}
        if sdpa:
            best = max(sdpa, key=sdpa.get)
            row["sdpa_best"], row["sdpa_best_name"] = sdpa[best], best[5:]
        # flashtile and the best SDPA backend again, replayed from CUDA graphs: kernels
        # against kernels. The eager numbers also hold whatever host time the GPU waits
        # on (do_bench records its start event before the call's Python runs), which
        # moves by tens of us between runs.
        for name, key in (("flashtile", "flashtile_graph"),
                          (f"sdpa-{row.get('sdpa_best_name')}", "sdpa_graph")):
            if name in calls:
                try:
                    row[key] = nbytes / graph_ms(calls[name], timing) / 1e6
                except Exception as exc:  # capture failed: report the rest
                    print(f"decode: graph of {name} failed: {exc}", file=sys.stderr)
                    continue
                records.append(Record(f"decode_g{g}", f"{name}-graph", shape, "kv_read_gbs",
                                      row[key]))
        rows.append(row)
        print(f"decode: {_label(row)} flashtile {row.get('flashtile', 0):.0f} GB/s",
              file=sys.stderr)
    return rows


def _sdpa_call(q, k_cache, v_cache, member: str):
    """Zero-argument SDPA decode call on a contiguous cache with one backend pinned
    (``member`` of SDPBackend), GQA through ``enable_gqa``."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    qt, kt, vt = q.transpose(1, 2), k_cache.transpose(1, 2), v_cache.transpose(1, 2)
    gqa = q.shape[2] != k_cache.shape[2]
    backend = getattr(SDPBackend, member)

    def sdpa():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=gqa)

    return sdpa


def _decode_backends(q, k_cache, v_cache, args, d, b, ctx):
    """(name, zero-argument closure) pairs on one contiguous cache."""
    import torch

    from ..ops.kvcache import flash_attn_with_kvcache

    lens = torch.full((q.shape[0],), k_cache.shape[1], dtype=torch.int32, device=q.device)
    yield "flashtile", lambda: flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens)
    qt, kt, vt = q.transpose(1, 2), k_cache.transpose(1, 2), v_cache.transpose(1, 2)
    gqa = q.shape[2] != k_cache.shape[2]
    for label, member in (("cudnn", "CUDNN_ATTENTION"), ("flash", "FLASH_ATTENTION"),
                          ("efficient", "EFFICIENT_ATTENTION")):
        yield f"sdpa-{label}", _sdpa_call(q, k_cache, v_cache, member)
    if _flex_wanted(args, d, b, ctx):
        try:
            from torch.nn.attention.flex_attention import flex_attention

            from .backends import raise_recompile_limit

            raise_recompile_limit()
            compiled = torch.compile(flex_attention, dynamic=False)
            yield "flex", lambda: compiled(qt, kt, vt, enable_gqa=gqa)
        except ImportError:
            pass


def _time_or_none(fn, timing):
    """Median ms, or None when the backend cannot run this shape (first call raises)."""
    import torch

    from .harness import median_ms

    try:
        fn()
        torch.cuda.synchronize()
    except Exception:  # an SDPA backend without a kernel for this shape, say
        return None
    return median_ms(fn, timing)


def _split_rows(args, device, timing, records) -> list[dict]:
    import torch

    from ..ops.kvcache import (
        _sm_count,
        decode_config,
        flash_attn_with_kvcache,
        num_splits_heuristic,
    )
    from .flops import Shape
    from .harness import Record

    rows = []
    nheads_kv, d = 4, 128
    for ctx in args.decode_split_contexts:
        k_cache = torch.randn(1, ctx, nheads_kv, d, device=device, dtype=torch.bfloat16)
        v_cache = torch.randn_like(k_cache)
        q = torch.randn(1, 1, NHEADS, d, device=device, dtype=torch.bfloat16)
        lens = torch.full((1,), ctx, dtype=torch.int32, device=device)
        times = {}
        for splits in (1, 0):
            def call(s=splits, q=q, k_cache=k_cache, v_cache=v_cache, lens=lens):
                return flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens,
                                               num_splits=s)

            times[splits] = _time_or_none(call, timing)
        cfg = decode_config(d, 8, 1, torch.bfloat16, device)
        chosen = num_splits_heuristic(nheads_kv, ctx, cfg.block_n,
                                      _sm_count(device.index or 0), 2 * cfg.block_n * d * 2)
        nbytes = 2 * ctx * nheads_kv * d * 2
        row = dict(ctx=ctx, splits=chosen, ms1=times[1], ms0=times[0],
                   gbs1=nbytes / times[1] / 1e6, gbs0=nbytes / times[0] / 1e6)
        row["speedup"] = times[1] / times[0]
        shape = Shape(1, ctx, NHEADS, d, False)
        records.append(Record("decode_split", "flashtile", shape, "split_speedup", row["speedup"]))
        rows.append(row)
    return rows


# host overhead vs kernel time: eager vs CUDA graph (issue 5, batch 1 decode)
HOST_SHAPES = [(8, 128, 8192), (8, 128, 32768), (8, 128, 131072), (1, 128, 8192)]  # (g, d, ctx)
SWEEP_CTX = 32768
SWEEP_SPLITS = (1, 8, 16, 32, 64, 96, 128, 0)


def _decode_call(q, k_cache, v_cache, lens, splits=0, op=False):
    """Zero-argument decode closure; ``op=True`` forces the torch.library custom op
    (the path torch.compile sees) instead of the eager fast path."""
    from ..ops import kvcache

    def call():
        saved = kvcache.EAGER_FAST_PATH
        kvcache.EAGER_FAST_PATH = not op
        try:
            return kvcache.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens,
                                                   num_splits=splits)
        finally:
            kvcache.EAGER_FAST_PATH = saved

    return call


def graph_ms(fn, timing):
    """Median ms of ``fn`` captured in a CUDA graph and replayed: kernel time plus the
    gaps between its launches on the GPU, no Python."""
    import torch

    from .harness import median_ms

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return median_ms(graph.replay, timing)


def _host_rows(device, timing, records) -> list[dict]:
    """Per shape: host us/call of the eager fast path and of the custom op, GPU time of
    the eager call (do_bench) and of its CUDA-graph replay: graph ~= eager means the
    kernels bound it; graph << eager means the host does."""
    import torch

    from .flops import Shape
    from .harness import Record, host_us

    rows = []
    for g, d, ctx in HOST_SHAPES:
        nheads_kv = NHEADS // g
        k_cache = torch.randn(1, ctx, nheads_kv, d, device=device, dtype=torch.bfloat16)
        v_cache = torch.randn_like(k_cache)
        q = torch.randn(1, 1, NHEADS, d, device=device, dtype=torch.bfloat16)
        lens = torch.full((1,), ctx, dtype=torch.int32, device=device)
        fast, op = _decode_call(q, k_cache, v_cache, lens), _decode_call(
            q, k_cache, v_cache, lens, op=True)
        nbytes = 2 * ctx * nheads_kv * d * 2
        row = dict(g=g, d=d, b=1, ctx=ctx, mib=nbytes / 2**20,
                   host_fast=host_us(fast, device), host_op=host_us(op, device),
                   eager_ms=_time_or_none(fast, timing), op_ms=_time_or_none(op, timing))
        try:
            row["graph_ms"] = graph_ms(fast, timing)
        except Exception as exc:  # report the rest of the table
            print(f"decode: graph capture failed: {exc}", file=sys.stderr)
            row["graph_ms"] = None
        # SDPA's cuDNN backend on the same cache, eager and replayed from a CUDA graph:
        # kernel against kernel, host against host
        cudnn = _sdpa_call(q, k_cache, v_cache, "CUDNN_ATTENTION")
        row["cudnn_eager_ms"] = _time_or_none(cudnn, timing)
        try:
            row["cudnn_graph_ms"] = graph_ms(cudnn, timing) if row["cudnn_eager_ms"] else None
        except Exception as exc:
            print(f"decode: cuDNN graph capture failed: {exc}", file=sys.stderr)
            row["cudnn_graph_ms"] = None
        shape = Shape(1, ctx, NHEADS, d, False)
        for metric in ("host_fast", "host_op"):
            records.append(Record(f"decode_g{g}", "flashtile", shape, f"{metric}_us", row[metric]))
        for metric in ("eager_ms", "op_ms", "graph_ms", "cudnn_eager_ms", "cudnn_graph_ms"):
            if row[metric]:
                backend = "sdpa-cudnn" if metric.startswith("cudnn") else "flashtile"
                records.append(Record(f"decode_g{g}", backend, shape,
                                      metric.replace("cudnn_", "").replace(
                                          "_ms", "_kv_read_gbs"),
                                      nbytes / row[metric] / 1e6))
        rows.append(row)
        del k_cache, v_cache
        torch.cuda.empty_cache()
    return rows


def _sweep_rows(device, timing, records) -> list[dict]:
    """num_splits sweep at batch 1, GQA 8:1, hd 128, ctx SWEEP_CTX, CUDA-graph replay
    (kernel time only): where the heuristic's choice sits against the best."""
    import torch

    from ..ops import kvcache
    from .flops import Shape
    from .harness import Record

    d, nheads_kv, ctx = 128, 4, SWEEP_CTX
    k_cache = torch.randn(1, ctx, nheads_kv, d, device=device, dtype=torch.bfloat16)
    v_cache = torch.randn_like(k_cache)
    q = torch.randn(1, 1, NHEADS, d, device=device, dtype=torch.bfloat16)
    lens = torch.full((1,), ctx, dtype=torch.int32, device=device)
    nbytes = 2 * ctx * nheads_kv * d * 2
    rows = []
    for splits in SWEEP_SPLITS:
        fn = _decode_call(q, k_cache, v_cache, lens, splits)
        try:
            ms = graph_ms(fn, timing)
        except Exception as exc:
            print(f"decode: sweep num_splits={splits} failed: {exc}", file=sys.stderr)
            continue
        plan = kvcache._plan(q, k_cache, None, 0, splits, None, True, False, False, False)
        rows.append(dict(requested=splits, splits=plan.num_splits, ms=ms, gbs=nbytes / ms / 1e6))
        records.append(Record("decode_split_sweep", f"splits{plan.num_splits}",
                              Shape(1, ctx, NHEADS, d, False), "graph_kv_read_gbs",
                              nbytes / ms / 1e6))
    return rows


# ----------------------------------------------------------------------------------
# tables
# ----------------------------------------------------------------------------------


def _k(n: int) -> str:
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)


def _label(row) -> str:
    kind = "MHA" if row["g"] == 1 else f"GQA{row['g']}:1"
    return f"D{row['d']} {kind} B{row['b']} ctx {_k(row['ctx'])}"


def _format_bandwidth(rows, copy_gbs) -> str:
    from .report import _align

    head = ["shape", "KV MiB", "flashtile GB/s", "% copy", "SDPA best", "GB/s", "flash/SDPA",
            "graph GB/s flashtile", "graph SDPA", "graph flash/SDPA", "flex GB/s"]
    table = [head]

    def num(x):
        return f"{x:.0f}" if x else "-"

    def ratio(a, b):
        return f"{a / b:.2f}x" if a and b else "-"

    for r in rows:
        ft, best = r.get("flashtile"), r.get("sdpa_best")
        ftg, bestg = r.get("flashtile_graph"), r.get("sdpa_graph")
        table.append([
            _label(r), f"{r['mib']:.0f}", num(ft),
            f"{100 * ft / copy_gbs:.0f}%" if ft else "-", r.get("sdpa_best_name", "-"),
            num(best), ratio(ft, best), num(ftg), num(bestg), ratio(ftg, bestg),
            num(r.get("flex")),
        ])
    return (_align(table, left=1) + f"\nK/V bytes read per call over the median time (eager; "
            f"graph: the same call replayed from a CUDA graph, the best SDPA backend by its "
            f"eager time); device copy {copy_gbs:.0f} GB/s counting read + write, measured "
            f"in this run")


def _format_split(rows) -> str:
    from .report import _align

    table = [["split-KV: B1 H32 Hkv4 D128, ctx", "num_splits=1 GB/s", "auto splits",
              "auto GB/s", "speed-up"]]
    for r in rows:
        table.append([_k(r["ctx"]), f"{r['gbs1']:.0f}", str(r["splits"]), f"{r['gbs0']:.0f}",
                      f"{r['speedup']:.2f}x"])
    return _align(table, left=1)


def _format_host(rows) -> str:
    from .report import _align

    table = [["batch 1 decode", "KV MiB", "host us fast", "host us op", "eager GB/s",
              "op GB/s", "graph GB/s", "eager us", "graph us", "cuDNN eager us",
              "cuDNN graph us", "graph vs cuDNN graph"]]

    def us(ms):
        return f"{1e3 * ms:.1f}" if ms else "-"

    for r in rows:
        def gbs(ms, r=r):
            return f"{r['mib'] * 2**20 / ms / 1e6:.0f}" if ms else "-"

        ft, cu = r["graph_ms"], r.get("cudnn_graph_ms")
        table.append([_label(r), f"{r['mib']:.0f}", f"{r['host_fast']:.1f}",
                      f"{r['host_op']:.1f}", gbs(r["eager_ms"]), gbs(r["op_ms"]),
                      gbs(ft), us(r["eager_ms"]), us(ft), us(r.get("cudnn_eager_ms")),
                      us(cu), f"{cu / ft:.2f}x" if ft and cu else "-"])
    return (_align(table, left=1) + "\nhost us: wall time per call of the Python path "
            "(no sync); fast = eager fast path, op = through torch.library (what compile "
            "sees); graph = the same call replayed from a CUDA graph (kernels only); "
            "cuDNN = SDPA's cuDNN backend on the same cache")


def _format_sweep(rows) -> str:
    from .report import _align

    table = [[f"num_splits sweep: B1 H32 Hkv4 D128 ctx {_k(SWEEP_CTX)} (CUDA graph)",
              "splits", "us", "GB/s"]]
    for r in rows:
        req = "auto" if r["requested"] == 0 else str(r["requested"])
        table.append([req, str(r["splits"]), f"{1e3 * r['ms']:.1f}", f"{r['gbs']:.0f}"])
    return _align(table, left=1)


def fragmentation(lengths, max_len: int, page_sizes=(16, 32, 64, 128, 256)) -> list[dict]:
    """Reserved vs used tokens for ``lengths``: max-length contiguous preallocation, then
    one ``PagedKVCache`` per page size holding every request (host-side accounting on a
    tiny CPU pool: the manager's pages are what a real pool would reserve)."""
    import torch

    from ..kv import PagedKVCache

    used = sum(lengths)
    rows = [dict(layout=f"contiguous (max {_k(max_len)})", reserved=len(lengths) * max_len,
                 used=used)]
    for ps in page_sizes:
        num_pages = sum(-(-n // ps) for n in lengths)
        cache = PagedKVCache(max(num_pages, 1), ps, 1, 8, max_batch=len(lengths),
                             max_pages_per_seq=-(-max_len // ps), dtype=torch.float16,
                             device="cpu")
        for n in lengths:
            cache.advance(cache.allocate(n), n)
        stats = cache.memory_stats()
        rows.append(dict(layout=f"paged, {ps}-token pages", reserved=stats["reserved_tokens"],
                         used=stats["used_tokens"]))
    return rows


def request_lengths(n: int = FRAG_REQUESTS, max_len: int = FRAG_MAX_LEN, seed: int = 0):
    """A long-tailed spread of request lengths (log-normal, median ~600 tokens, clipped
    to [16, max_len]): chat-like traffic where a few requests are long."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, generator=gen) * 1.0 + math.log(600)
    return [int(min(max(16, round(math.exp(float(v)))), max_len)) for v in x]


def _frag_section(plot_path) -> str:
    from .report import _align

    lengths = request_lengths()
    rows = fragmentation(lengths, FRAG_MAX_LEN)
    gib = FRAG_BYTES_PER_TOKEN / 2**30
    table = [["KV layout", "reserved GiB", "used GiB", "wasted"]]
    for r in rows:
        table.append([r["layout"], f"{r['reserved'] * gib:.1f}", f"{r['used'] * gib:.1f}",
                      f"{100 * (1 - r['used'] / r['reserved']):.1f}%"])
    text = (f"paged KV memory: {len(lengths)} requests, lengths {min(lengths)}-{max(lengths)} "
            f"(median {sorted(lengths)[len(lengths) // 2]}), 128 KiB of KV per token "
            "(32 layers x 8 KV heads x 128 x K,V x bf16)\n" + _align(table, left=1))
    if plot_path:
        text += "\n" + _frag_plot(rows, plot_path, gib)
    return text


def _frag_plot(rows, path, gib) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "(no figure: matplotlib is not installed)"
    from pathlib import Path

    fig, ax = plt.subplots(figsize=(7, 3.5))
    names = [r["layout"].replace(", ", "\n") for r in rows]
    ax.bar(names, [r["reserved"] * gib for r in rows], color="#c8c8c8", label="reserved")
    ax.bar(names, [r["used"] * gib for r in rows], color="#1f77b4", label="used")
    ax.set_ylabel("KV memory (GiB)")
    ax.set_title(f"KV memory of {FRAG_REQUESTS} requests: contiguous vs paged")
    ax.legend()
    ax.tick_params(axis="x", labelsize=7)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return f"wrote {path}"
