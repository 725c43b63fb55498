"""Attention over a KV cache (decode and chunked prefill): contiguous or paged caches,
append-in-call, GQA head packing, split-KV (FlashDecoding) with a combine kernel.

Layers, top to bottom (never merged):
    flash_attn_with_kvcache        public function, argument checks, docstring
    flashtile::kvcache_fwd         custom op (mutates k_cache / v_cache: the append); what
                                   torch.compile traces. Plain eager calls skip its
                                   dispatch and call the launcher (_eager_ok)
    kvcache_forward                launcher: append, attend, combine; returns (out, lse);
                                   shape-derived plans memoised (_plan), compiled kernels
                                   launched without Triton's per-call binding (_launch)
    _append_kv_kernel, _kvcache_fwd_kernel, _combine_kernel   @triton.jit kernels

Forward only: this is the inference path.

Notation for all kernels in this file:
    B batch, H query heads, Hkv cache heads (H = group * Hkv), M = seqlen_q (1 for
    decode), N = a sequence's key count = cache_seqlens[b] + seqlen_new (or the cache
    capacity without cache_seqlens), D head dim (BLOCK_D = D rounded up to a power of
    two >= 16), S the number of KV splits.
    Head packing: the query tile of one program holds the whole GQA group. Row r of the
    tile is query position i = start_i + r // GROUP_P2 of head g = r % GROUP_P2 of the
    group (GROUP_P2 = group rounded up to a power of two; rows with g >= group are
    padding, loaded as zeros and never stored). Every K/V tile is loaded once for the
    group instead of once per query head: decode's 1-row tiles become group-row tiles.
    ROWS = BLOCK_M // GROUP_P2 query positions per tile.
    Attention grid: (S, cdiv(M, ROWS), B * Hkv). Split s takes an equal share of the
    key tiles this query tile needs (causal/window pruning first, then the split), and
    writes a normalised fp32 partial output with its running max m and normaliser l
    (the split's lse is (m + log2 l) ln 2); the combine kernel (grid (M, B * H)) merges
    the splits with weights exp2(m_s - max m) l_s. With S = 1 the attention kernel
    writes out and lse directly and no combine runs. With FUSED_COMBINE (opt-in,
    FLASHTILE_DECODE_FUSED_COMBINE=1; GPU tests pass, its first build measured slower:
    27.5 against 19.6 us at batch-1 GQA 8k, 0e01b69; rebuilt in session 33 with chunked
    loads, not yet measured) there is no combine launch:
    each split bumps its query tile's arrival counter (acq_rel, after a barrier), and
    the split that arrives last merges all partials of the tile (_merge_splits, the
    combine kernel's arithmetic) and resets the counter.
    Paged caches: K_CACHE (num_pages, PAGE_SIZE, Hkv, D) addressed through PAGE_TABLE
    (B, max_pages). With PAGE_SIZE >= BLOCK_N a key tile lies inside one page: one
    page-table load per tile and the same scalar-base addressing as a contiguous cache;
    smaller pages gather each key row through its own page-table entry.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from ._checks import check_device, check_scalars, check_tensor, check_window
from ._common import (
    cast_out,
    device_ctx,
    fwd_scores,
    is_interpreting,
    kv_tile_ranges,
    next_pow2,
    online_softmax,
    plain_eager,
    sm_count_of,
    softcap_flag,
    softmax_finish,
    stage_bounds,
)
from ._launch import cached_launch, make_room, plain_launch, run_compiled
from .flash import _load_tile

__all__ = [
    "flash_attn_with_kvcache", "kvcache_forward", "DecodeConfig", "decode_config",
    "num_splits_heuristic", "check_cache_values",
]

MAX_SPLITS = 128
PAGE_SIZES = (16, 32, 64, 128, 256)
# split-KV heuristic (num_splits=0): aim for SPLIT_WAVES programs per SM, each reading at
# least MIN_SPLIT_BYTES of K+V (below that its prologue, q load and partial store cost
# more than its share of the read). Contiguous hd128 16x128 tiles take 136 KB of shared
# memory (ptxas sm_90): one program per SM is resident. H200, batch 1, 32 query / 4 KV
# heads, hd 128, ctx 32k, CUDA graph (commit 836b108, `bench --suite decode`): splits
# 8/16/32/64/96/128 -> 58.2/37.5/34.0/40.1/46.9/53.3 us: one wave (32 splits x 4
# programs on 132 SMs) beats the two waves of the first guess (64) by 15%.
SPLIT_WAVES = 1
MIN_SPLIT_BYTES = 64 * 1024
# eager calls skip the torch.library dispatch (see _eager_ok); False forces the op
EAGER_FAST_PATH = True
# Split-KV: the last split program of each query tile to finish merges the partials
# itself (a per-tile arrival counter), instead of a separate combine launch. Opt-in
# (FLASHTILE_DECODE_FUSED_COMBINE=1): its GPU tests pass (0e01b69, `decodefused`), but it
# measured slower, batch-1 GQA 8:1 hd 128 under a CUDA graph 27.5 / 41.1 us at 8k / 32k
# against 19.6 / 34.3 with the combine kernel: one program merging a whole tile's splits
# serially costs more than the launch it saves. That merge looped one split per step (a
# chain of 2 S dependent L2 loads); session 33 rebuilt it with the combine kernel's
# chunked loads (MERGE_ELEMS), suite s33f, not yet measured.
FUSED_COMBINE = os.environ.get("FLASHTILE_DECODE_FUSED_COMBINE", "0") not in ("", "0")
# Partials merged per step of the combine kernel (a [CHUNK, D] tile of fp32). Session 10
# (scripts/decode_kernels.py, 96c0b31; B1 GQA 8:1 hd 128, 32 splits): 16 -> 32 took the
# combine from 3.5 to 3.0 us at 8k, one step instead of two. Launching the combine with
# programmatic dependent launch (griddepcontrol; the split kernel releasing it at its
# start) was measured in the same run and lost: 14.5 -> 17.5 us per layer at 8k under a
# CUDA graph, 25.7 -> 28.5 at 32k; not kept.
COMBINE_CHUNK = 32
# The fused combine's merge reads this many fp32 of partial outputs per step (a [chunk,
# block_m, block_d] load: 4 splits of the 16 x 128 tile at hd 128, 8 at hd 64), after one
# load of every split's running max (session 33, CPU-checked; its first build looped one
# split at a time). ptxas sm_90 (the batch-1 tiles, 32 splits): 316 / 152 B spilled at hd
# 128 / 64 against the serial merge's 260 / 124 and the split kernel alone's 284 / 140
# (the CPU build without the launch's divisibility hints); 16384 spilled 708 / 240 (the
# [chunk, rows, d] pointer tensor: 64-bit addresses)
MERGE_ELEMS = 8192
# launches skip Triton's per-call argument binding once a kernel is cached (_launch).
# H200 (836b108): the KV-cache GPU tests pass with it (65); eager batch-1 decode, GQA
# 8:1 hd 128, 8k: 25.7 us per call with it vs 45.5 us without (CUDA-graph replay 25.1).
# FLASHTILE_FAST_LAUNCH=0 turns it off (Triton's own launch path).
FAST_LAUNCH = os.environ.get("FLASHTILE_FAST_LAUNCH", "1") not in ("", "0")


# ==================================================================================
# public API
# ==================================================================================


def flash_attn_with_kvcache(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, k: torch.Tensor | None = None,
    v: torch.Tensor | None = None, cache_seqlens: torch.Tensor | int | None = None,
    page_table: torch.Tensor | None = None, softmax_scale: float | None = None,
    causal: bool = False, window_size: tuple[int, int] = (-1, -1), softcap: float = 0.0,
    num_splits: int = 0, return_lse: bool = False,
):
    """Attention of new queries over a KV cache, appending new keys/values first.

    Args:
        q: (batch, seqlen_q, nheads, headdim), float16 / bfloat16 / float32;
            seqlen_q = 1 for decode, > 1 for chunked prefill.
        k_cache: contiguous (batch, seqlen_cache, nheads_kv, headdim), or paged
            (num_pages, page_size, nheads_kv, headdim) with ``page_table``; page_size a
            power of two from 16 to 256. Same dtype and device as q; nheads % nheads_kv == 0.
        v_cache: like k_cache.
        k, v: optional (batch, seqlen_new, nheads_kv, headdim): written into the caches
            at positions ``cache_seqlens[b] ... cache_seqlens[b] + seqlen_new - 1`` inside
            this call (the caches are modified in place), then attended to.
        cache_seqlens: (batch,) int32 (or a Python int for all): valid cache lengths
            *before* this call; not modified. None: every sequence uses the whole cache
            (then k/v must be None).
        page_table: (batch, max_pages) int32 page ids into the paged cache; row b lists
            sequence b's pages in order.
        softmax_scale, causal, window_size, softcap: as ``flash_attn_func``; masks are
            bottom-right aligned with seqlen_k = cache_seqlens[b] + seqlen_new.
        num_splits: split the keys of each (sequence, head group) across this many
            programs (FlashDecoding), merged through their lse; 0 picks it from the SM
            count and the shape, 1 disables splitting.
        return_lse: also return lse, (batch, nheads, seqlen_q) float32, natural log.

    Returns:
        out (batch, seqlen_q, nheads, headdim) in q's dtype, or (out, lse).

    Lengths and page ids live on the device and are not checked on this hot path (no
    host synchronisation, CUDA graphs stay valid): ``flashtile.kv.PagedKVCache`` checks
    them on the host, and ``FLASHTILE_DEBUG_CHECKS=1`` checks them before each launch.
    Under ``torch.compile`` this is the custom op ``flashtile::kvcache_fwd``; a plain
    eager call runs the same launcher without the op's dispatch (same kernels, same
    result, ~2x less host time per call).
    """
    cache_seqlens = _check_args(
        q, k_cache, v_cache, k, v, cache_seqlens, page_table, num_splits
    )
    if window_size == (-1, -1) and type(window_size) is tuple:
        left = right = None
    else:
        left, right = check_window(window_size)
    if softcap != 0.0 or softmax_scale is not None:
        check_scalars(0.0, softcap, softmax_scale)
    if causal:
        right = 0
    if os.environ.get("FLASHTILE_DEBUG_CHECKS", "0") == "1":
        check_cache_values(k_cache, cache_seqlens, page_table, 0 if k is None else k.shape[1])
    scale = float(softmax_scale) if softmax_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    if _eager_ok(q, k_cache, v_cache, k, v, cache_seqlens, page_table):
        if k is not None:  # what the op's mutates_args does: the caches changed in place
            torch._C._increment_version((k_cache, v_cache))
        out, lse = kvcache_forward(
            q, k_cache, v_cache, k, v, cache_seqlens, page_table, softmax_scale=scale,
            window_size=(left, right), softcap=float(softcap), num_splits=num_splits,
        )
    else:
        out, lse = torch.ops.flashtile.kvcache_fwd(
            q, k_cache, v_cache, k, v, cache_seqlens, page_table, scale, left, right,
            float(softcap), int(num_splits),
        )
    return (out, lse) if return_lse else out


def _eager_ok(*tensors) -> bool:
    """The launcher may run instead of the custom op (``_common.plain_eager``) and
    autograd would record nothing (the op has no backward, and says so when asked)."""
    if not (EAGER_FAST_PATH and plain_eager(*tensors)):
        return False
    grad = torch.is_grad_enabled()
    return not (grad and any(t is not None and t.requires_grad for t in tensors))


def _check_args(q, k_cache, v_cache, k, v, cache_seqlens, page_table, num_splits):
    """Shapes, dtypes and devices only (nothing read from the device). Returns
    cache_seqlens as a tensor (or None)."""
    check_tensor("q", q, 4, "(batch, seqlen_q, nheads, headdim)")
    layout = "(batch, seqlen_cache, nheads_kv, headdim) or (num_pages, page_size, ...)"
    check_tensor("k_cache", k_cache, 4, layout)
    check_tensor("v_cache", v_cache, 4, layout)
    batch, _, nheads, head_dim = q.shape
    if k_cache.dtype != q.dtype or v_cache.dtype != q.dtype:
        raise TypeError(
            f"q, k_cache, v_cache must share a dtype, got {q.dtype}, {k_cache.dtype}, "
            f"{v_cache.dtype}"
        )
    if head_dim % 8 != 0 or not (8 <= head_dim <= 256):
        raise ValueError(
            f"headdim (q.shape[-1]) must be a multiple of 8 in [8, 256], got {head_dim}"
        )
    if k_cache.shape != v_cache.shape:
        raise ValueError(
            f"k_cache and v_cache must have the same shape, got {tuple(k_cache.shape)} and "
            f"{tuple(v_cache.shape)}"
        )
    if k_cache.shape[-1] != head_dim:
        raise ValueError(f"k_cache headdim {k_cache.shape[-1]} != q headdim {head_dim}")
    nheads_kv = k_cache.shape[2]
    if nheads_kv == 0 or nheads % nheads_kv != 0:
        raise ValueError(f"nheads of q ({nheads}) must be a multiple of nheads_kv ({nheads_kv})")
    device = q.device
    if k_cache.device != device or v_cache.device != device:
        check_device([("q", q), ("k_cache", k_cache), ("v_cache", v_cache)])
    if (k is None) != (v is None):
        raise ValueError("k and v must be given together (or both None)")
    if k is not None:
        check_tensor("k", k, 4, "(batch, seqlen_new, nheads_kv, headdim)")
        check_tensor("v", v, 4, "(batch, seqlen_new, nheads_kv, headdim)")
        want = (batch, k.shape[1], nheads_kv, head_dim)
        for name, t in (("k", k), ("v", v)):
            if tuple(t.shape) != want or t.dtype != q.dtype:
                raise ValueError(
                    f"{name} must be {want} {q.dtype}, got {tuple(t.shape)} {t.dtype}"
                )
        if cache_seqlens is None:
            raise ValueError("appending k/v needs cache_seqlens (where to write them)")
        if k.device != device or v.device != device:
            check_device([("q", q), ("k", k), ("v", v)])
    if page_table is not None:
        if not isinstance(page_table, torch.Tensor) or page_table.dtype != torch.int32:
            raise TypeError(f"page_table must be an int32 tensor, got {_describe(page_table)}")
        if page_table.dim() != 2 or page_table.shape[0] != batch:
            raise ValueError(
                f"page_table must be (batch={batch}, max_pages), got {tuple(page_table.shape)}"
            )
        if k_cache.shape[1] not in PAGE_SIZES:
            raise ValueError(
                f"page_size (k_cache.shape[1]) must be one of {PAGE_SIZES}, got {k_cache.shape[1]}"
            )
        if page_table.device != device:
            check_device([("q", q), ("page_table", page_table)])
    elif k_cache.shape[0] != batch:
        raise ValueError(
            f"a contiguous k_cache must have batch {batch} in dim 0, got {tuple(k_cache.shape)}"
            " (pass page_table for a paged cache)"
        )
    if isinstance(cache_seqlens, int) and not isinstance(cache_seqlens, bool):
        cache_seqlens = _full_seqlens(cache_seqlens, batch, device)
    if cache_seqlens is not None:
        if not isinstance(cache_seqlens, torch.Tensor) or cache_seqlens.dtype != torch.int32:
            raise TypeError(
                f"cache_seqlens must be an int32 tensor or an int, got {_describe(cache_seqlens)}"
            )
        if tuple(cache_seqlens.shape) != (batch,):
            raise ValueError(
                f"cache_seqlens must be (batch={batch},), got {tuple(cache_seqlens.shape)}"
            )
        if cache_seqlens.device != device:
            check_device([("q", q), ("cache_seqlens", cache_seqlens)])
    if device.type != "cuda":  # CPU only under the interpreter; nothing else
        check_device([("q", q)])
    if type(num_splits) is not int or num_splits < 0:
        raise ValueError(f"num_splits must be an int >= 0 (0 = automatic), got {num_splits!r}")
    return cache_seqlens


_SEQLENS_CACHE: dict = {}


def _full_seqlens(n: int, batch: int, device: torch.device) -> torch.Tensor:
    """cache_seqlens given as an int: one (batch,) int32 tensor per (n, batch, device),
    kept (the kernels only read it), so repeated calls launch no fill kernel."""
    key = (n, batch, device)
    t = _SEQLENS_CACHE.get(key)
    if t is None and device.type == "cuda" and torch.cuda.is_current_stream_capturing():
        # made inside a graph capture, its fill would only run at replay: not cacheable
        return torch.full((batch,), n, dtype=torch.int32, device=device)
    if t is None:
        if len(_SEQLENS_CACHE) > 64:
            _SEQLENS_CACHE.clear()
        t = _SEQLENS_CACHE[key] = torch.full((batch,), n, dtype=torch.int32, device=device)
    return t


def _describe(x) -> str:
    if isinstance(x, torch.Tensor):
        return f"a {x.dtype} tensor"
    return type(x).__name__


def check_cache_values(k_cache, cache_seqlens, page_table, seqlen_new: int = 0) -> None:
    """Host-side checks of values that live on the device (synchronises: debug mode and
    tests only): lengths within the capacity, used page ids within the cache."""
    paged = page_table is not None
    capacity = page_table.shape[1] * k_cache.shape[1] if paged else k_cache.shape[1]
    if cache_seqlens is None:
        return
    lens = cache_seqlens.detach().to("cpu", torch.int64)
    if (lens < 0).any():
        raise ValueError(f"cache_seqlens must be >= 0, got {lens.tolist()}")
    if lens.numel() and int((lens + seqlen_new).max()) > capacity:
        raise ValueError(
            f"cache_seqlens + seqlen_new ({(lens + seqlen_new).tolist()}) exceeds the cache "
            f"capacity {capacity}"
        )
    if paged:
        pt = page_table.detach().to("cpu", torch.int64)
        page_size, num_pages = k_cache.shape[1], k_cache.shape[0]
        for b, n in enumerate((lens + seqlen_new).tolist()):
            used = pt[b, : (n + page_size - 1) // page_size]
            if ((used < 0) | (used >= num_pages)).any():
                raise ValueError(
                    f"page_table[{b}] has page ids outside [0, {num_pages}): {used.tolist()}"
                )


@torch.library.custom_op("flashtile::kvcache_fwd", mutates_args=("k_cache", "v_cache"))
def _kvcache_fwd_op(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, k: torch.Tensor | None,
    v: torch.Tensor | None, cache_seqlens: torch.Tensor | None, page_table: torch.Tensor | None,
    softmax_scale: float, window_left: int | None, window_right: int | None, softcap: float,
    num_splits: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    return kvcache_forward(
        q, k_cache, v_cache, k, v, cache_seqlens, page_table, softmax_scale=softmax_scale,
        window_size=(window_left, window_right), softcap=softcap, num_splits=num_splits,
    )


@_kvcache_fwd_op.register_fake
def _(q, k_cache, v_cache, k, v, cache_seqlens, page_table, softmax_scale, window_left,
      window_right, softcap, num_splits):
    batch, seqlen_q, nheads, _ = q.shape
    lse = q.new_empty((batch, nheads, seqlen_q), dtype=torch.float32)
    return torch.empty_like(q, memory_format=torch.contiguous_format), lse


# ==================================================================================
# launch configuration
# ==================================================================================


@dataclass(frozen=True)
class DecodeConfig:
    block_m: int  # rows of the packed query tile (GROUP_P2 heads x ROWS positions)
    block_n: int  # keys per tile
    num_warps: int
    num_stages: int
    # programs per SM the split heuristic aims for (num_splits_heuristic): 1 for tiles
    # that fill an SM's shared memory alone, more for small tiles, whose few bytes in
    # flight per program need company to keep HBM busy
    per_sm: int = 1


# hd 64 decode: at or above this many programs per SM (batch x KV heads x query tiles)
# the wide 16 x 128 w8 tile, below it the 16 x 64 w4 one (decode bench, ac7393a / 0e01b69:
# MHA batch 64, 2048 programs, 0.93-0.97x cuDNN with 16 x 64 against 1.00-1.01x with
# 16 x 128; batch 16, 512 programs, 0.98x against 0.79-0.83x)
WIDE_TILE_PROGRAMS_PER_SM = 8
# caches of at most this many keys (capacity) take the short-cache tiles of decode_config;
# a multiple of 16, as _plan keys contiguous caches by 16-key groups
SHORT_CACHE_KEYS = 1024


def decode_config(
    head_dim: int, group_p2: int, seqlen_q: int, dtype: torch.dtype, device: torch.device,
    batch_kv: int | None = None, capacity: int | None = None,
) -> DecodeConfig:
    """Tile shape of the cache kernel. ``head_dim`` is the padded (power of two) head
    dim; ``group_p2`` the GQA group rounded up to a power of two; ``batch_kv`` = batch x
    KV heads when known (the hd 64 tile depends on how many programs there are);
    ``capacity`` the keys the cache can hold (its rows, or pages x page size), when
    known: the host's only bound on how many keys a program reads (SHORT_CACHE_KEYS)."""
    want_rows = group_p2 * next_pow2(seqlen_q)
    if device.type != "cuda":
        # interpreter: small key tiles so the tests cross several tiles and splits
        return DecodeConfig(max(16, group_p2, min(32, want_rows)), 16, 1, 1)
    # tl.dot needs 16 rows; decode (M = 1) with group 8 fills 16 rows with 2 positions'
    # worth of slots, half of them padding, which costs no memory traffic (first guess)
    block_m = max(16, group_p2, min(64, want_rows))
    if dtype == torch.float32:
        return DecodeConfig(block_m, 32, 4, 2)  # fp32: IEEE dots, small tiles (first guess)
    # memory-bound: large key tiles keep bytes in flight. Registers/spills/smem from ptxas
    # (sm_90, compiled on the CPU): 16x128 w8 s3 hd128 128-183 regs, 0 spill, 74 KB smem
    # paged but 136 KB contiguous (one program per SM); 16x128 w4 255 regs (spills);
    # 64-row tiles (chunked prefill, wgmma) 64x64 w4 s3 222-253 regs; hd256 16x64 w4
    # 187-255 regs, 0 spill; 64x64 w8 s2 254 regs. Speed: first guess until
    # scripts/suites/decode.sh measures GB/s against the copy bandwidth.
    short = capacity is not None and capacity <= SHORT_CACHE_KEYS
    if block_m <= 32:
        many = _many_programs(batch_kv, seqlen_q, block_m // group_p2, device)
        if head_dim <= 64 and not many:
            # `gpu_check.sh decodesweep` (072c1bb, H200, CUDA graph, GB/s against cuDNN's):
            # 16 x 64 tiles on 4 warps with the split heuristic aiming at two programs per
            # SM: MHA batch 16 at 8k 0.98x (16 x 128 w8, the hd 128 tile shipped here
            # before: 0.81x), 32k 0.98x (0.82x); MHA batch 4 at 128k with 2 / 3 splits
            # 1.11x / 1.14x (one split: 0.77x; 16 x 128 w8 1.04x); MHA batch 1 at 128k, 8
            # splits 0.97x (4 splits, the one-wave rule: 0.69x); GQA 8:1 batch 16, 4
            # splits 0.95x (2 splits: 0.67x). At MHA batch 64 (2048 programs) the 16 x 128
            # w8 tile stays ahead (WIDE_TILE_PROGRAMS_PER_SM).
            # A ring of 4: `s25a` (ff2bd7d, decode_sweep.py, CUDA graph, GB/s against
            # cuDNN's), GQA 8:1 batch 64 at 8k / 128k 3911 / 4625 (0.97x / 0.99x) against
            # 3833 / 4399 (0.95x / 0.94x) with 3; batch 16 at 32k, 4 splits, 3856 (0.97x)
            # against 3768 (0.95x); at 8k 2656 against 2679 (0.95x / 0.96x)
            return DecodeConfig(block_m, 64, 4, 4, per_sm=2)
        if short:
            # `s25a`: at 1k keys a program reads 8 tiles of 128 and the 16 x 128 w8 tile
            # (136 KB at hd 128, one program per SM) fills and drains its ring every few
            # tiles. GB/s against cuDNN's (CUDA graph), shipped -> this tile: hd 128 MHA
            # batch 16 / 64 0.89x / 0.92x -> 0.98x / 0.97x (16 x 64 w4 s3: 0.91x / 1.00x),
            # GQA 8:1 batch 64 0.91x -> 0.96x; hd 64 MHA batch 64 (the wide tile) 0.95x
            # -> 16 x 128 w4 s3 0.99x. Between 1k and 8k keys not measured (at 8k the
            # shipped tiles read 0.98-1.01x in `decode`, 97ab595)
            if head_dim <= 64:
                return DecodeConfig(block_m, 128, 4, 3)
            if head_dim <= 128:
                return DecodeConfig(block_m, 32, 4, 4)
        if head_dim <= 128:
            return DecodeConfig(block_m, 128, 8, 3)
        return DecodeConfig(block_m, 64, 4, 3)
    if head_dim <= 128:
        return DecodeConfig(block_m, 64, 4, 3)
    return DecodeConfig(block_m, 64, 8, 2)


def _many_programs(batch_kv: int | None, seqlen_q: int, rows: int,
                   device: torch.device) -> bool:
    """At least WIDE_TILE_PROGRAMS_PER_SM programs per SM: ``batch_kv`` (batch x KV
    heads; None: unknown, so no) times the query tiles of ``rows`` positions."""
    return batch_kv is not None and (
        batch_kv * triton.cdiv(seqlen_q, rows)
        >= WIDE_TILE_PROGRAMS_PER_SM * _sm_count(_device_index(device)))


def _device_index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


_sm_count = sm_count_of  # SMs of a device index (tests patch this name)


def num_splits_heuristic(
    work: int, max_seqlen_k: int, block_n: int, n_sm: int, tile_bytes: int = MIN_SPLIT_BYTES,
    per_sm: int = 1,
) -> int:
    """KV splits when ``work`` (= batch * nheads_kv * query tiles: GQA-packed programs)
    cannot fill ``n_sm`` SMs with ``per_sm`` programs each (DecodeConfig.per_sm): at most
    SPLIT_WAVES * per_sm programs per SM, each reading at least MIN_SPLIT_BYTES
    (``tile_bytes`` = K+V bytes of one key tile), at most MAX_SPLITS; then as few splits
    as give the same tiles per split (no empty splits). E.g. on 132 SMs, batch 1 x 4 KV
    heads, hd 128 (64 KiB tiles of 128 keys, per_sm 1): ctx 8k 32 splits (128 programs of
    2 tiles), 32k 32 (128 of 8 tiles), 128k 32 (128 of 32 tiles); hd 64 (16 KiB tiles of
    64 keys, per_sm 2), batch 4 x 32 KV heads at 128k: 2 splits (256 programs)."""
    target = SPLIT_WAVES * per_sm * n_sm
    if work <= 0 or n_sm <= 0 or work >= 0.8 * target:
        return 1
    n_tiles = triton.cdiv(max(max_seqlen_k, 1), block_n)
    min_tiles = max(1, triton.cdiv(MIN_SPLIT_BYTES, max(tile_bytes, 1)))
    # floor: a program more than the SMs hold would start a second, nearly empty wave
    splits = min(target // work, n_tiles // min_tiles, MAX_SPLITS)
    if splits <= 1:
        return 1
    return triton.cdiv(n_tiles, triton.cdiv(n_tiles, splits))


@dataclass(frozen=True)
class _Plan:
    """Everything the launcher derives from shapes and options, memoised per call shape
    (``_plan``): a repeated decode call computes none of it again."""
    cfg: DecodeConfig
    num_splits: int
    grid: tuple[int, int, int]
    combine_grid: tuple[int, int, int]
    append_grid: tuple[int, int, int]
    fwd_meta: tuple  # constexprs of _kvcache_fwd_kernel, in signature order
    combine_meta: tuple
    append_meta: tuple
    ws_numel: int  # fp32 split workspace: S*B*H*M*D partial outputs, S*B*H*M m, S*B*H*M l
    o_part_strides: tuple[int, int, int]  # (b, m, h) strides of the partials
    fused_combine: bool  # the split kernel merges (FUSED_COMBINE and more than 1 split)


_PLANS: dict = {}


def _plan(q, k_cache, page_table, seqlen_new, num_splits, config, has_seqlens, has_left,
          has_right, has_softcap) -> _Plan:
    paged = page_table is not None
    # a contiguous cache's length enters the plan only through its number of key tiles
    # (num_splits_heuristic; decode_config's key tiles are multiples of 16 keys): keyed
    # by 16-key groups, a cache grown by a token per call (HF's DynamicCache) misses
    # once per 16 tokens. A caller's own config keeps the exact length.
    kshape = k_cache.shape if paged or config is not None else (
        k_cache.shape[0], -((k_cache.shape[1] + 15) // 16), *k_cache.shape[2:])
    key = (q.shape, kshape, page_table.shape[1] if paged else -1, q.dtype, q.device,
           seqlen_new, num_splits, config, has_seqlens, has_left, has_right, has_softcap,
           FUSED_COMBINE, COMBINE_CHUNK, MERGE_ELEMS)
    plan = _PLANS.get(key)
    if plan is None:
        make_room(_PLANS, 1024)
        plan = _PLANS[key] = _make_plan(q, k_cache, page_table, seqlen_new, num_splits,
                                        config, has_seqlens, has_left, has_right, has_softcap)
    return plan


def _make_plan(q, k_cache, page_table, seqlen_new, num_splits, config, has_seqlens,
               has_left, has_right, has_softcap) -> _Plan:
    batch, seqlen_q, nheads, head_dim = q.shape
    nheads_kv = k_cache.shape[2]
    paged = page_table is not None
    page_size = k_cache.shape[1] if paged else 0
    capacity = page_table.shape[1] * page_size if paged else k_cache.shape[1]
    block_d = max(16, next_pow2(head_dim))
    group_p2 = next_pow2(nheads // nheads_kv)
    interp = is_interpreting()
    upcast = interp and q.dtype != torch.float32
    cfg = config or decode_config(block_d, group_p2, seqlen_q, q.dtype, q.device,
                                  batch * nheads_kv, capacity)
    m_tiles = triton.cdiv(seqlen_q, cfg.block_m // group_p2)
    work = batch * nheads_kv * m_tiles
    if num_splits == 0:
        cuda = q.device.type == "cuda"
        n_sm = _sm_count(_device_index(q.device)) if cuda else 0
        tile_bytes = 2 * cfg.block_n * head_dim * q.element_size()
        num_splits = num_splits_heuristic(work, capacity, cfg.block_n, n_sm, tile_bytes,
                                          cfg.per_sm)
    num_splits = max(1, min(num_splits, MAX_SPLITS))
    split = num_splits > 1
    fused = split and FUSED_COMBINE
    # the fused merge: every split's m at once, then MERGE_ELEMS fp32 of partial outputs
    # per step ([chunk, block_m, block_d])
    splits_p2 = next_pow2(num_splits) if fused else 1
    chunk = min(splits_p2, max(1, MERGE_ELEMS // (cfg.block_m * block_d))) if fused else 1
    fwd_meta = (head_dim, block_d, cfg.block_m, cfg.block_n, group_p2, paged,
                max(page_size, 1), has_seqlens, has_left, has_right, has_softcap, split, upcast,
                "ieee" if q.dtype == torch.float32 else "tf32", fused, splits_p2, chunk)
    rows = batch * nheads * seqlen_q
    return _Plan(
        cfg=cfg, num_splits=num_splits, grid=(num_splits, m_tiles, batch * nheads_kv),
        combine_grid=(seqlen_q, batch * nheads, 1),
        append_grid=(triton.cdiv(seqlen_new, 16 if interp else 64), batch * nheads_kv, 1),
        fwd_meta=fwd_meta,
        combine_meta=(head_dim, block_d, next_pow2(num_splits),
                      min(next_pow2(num_splits), COMBINE_CHUNK), upcast),
        append_meta=(head_dim, block_d, 16 if interp else 64, paged, max(page_size, 1)),
        ws_numel=num_splits * rows * (head_dim + 2) if split else 0,
        o_part_strides=(nheads * seqlen_q * head_dim, head_dim, seqlen_q * head_dim),
        fused_combine=fused,
    )


# ==================================================================================
# forward
# ==================================================================================


def kvcache_forward(
    q, k_cache, v_cache, k=None, v=None, cache_seqlens=None, page_table=None, *,
    softmax_scale=None, causal=False, window_size=(None, None), softcap=0.0, num_splits=0,
    out=None, lse=None, config=None,
):
    """Append ``k``/``v`` into the cache, attend, combine splits; no autograd, no checks
    of device values. Returns ``(out, lse)``; shapes as ``flash_attn_with_kvcache``,
    ``window_size`` entries ints or None. ``out`` / ``lse`` may be given to write into.

    Per call: 1 launch (attention) when num_splits resolves to 1, + 1 (combine) when it
    splits, + 1 (append) when k/v are given; 2 allocations (out, lse) + 1 (the fp32 split
    workspace) when it splits. Everything derived from shapes is memoised (``_plan``)."""
    left, right = window_size
    if causal:
        right = 0
    batch, seqlen_q, nheads, head_dim = q.shape
    nheads_kv = k_cache.shape[2]
    seqlen_new = 0 if k is None else k.shape[1]
    plan = _plan(q, k_cache, page_table, seqlen_new, num_splits, config,
                 cache_seqlens is not None, left is not None, right is not None,
                 softcap_flag(softcap, q.dtype))
    device = q.device
    if out is None:
        out = torch.empty(q.shape, dtype=q.dtype, device=device)
    if lse is None:
        lse = torch.empty((batch, nheads, seqlen_q), dtype=torch.float32, device=device)
    seqlens = cache_seqlens if cache_seqlens is not None else lse  # dummy pointer if unused
    paged = page_table is not None
    pt = page_table if paged else seqlens  # dummy pointer if unused
    pt_stride = page_table.stride(0) if paged else 0
    capacity = page_table.shape[1] * k_cache.shape[1] if paged else k_cache.shape[1]

    with device_ctx(q):
        if seqlen_new > 0 and batch > 0:
            _launch(_append_kv_kernel, plan.append_grid, device, 6, (
                k, v, k_cache, v_cache, seqlens, pt, *k.stride()[:3], *v.stride()[:3],
                *k_cache.stride()[:3], *v_cache.stride()[:3], pt_stride, seqlen_new, nheads_kv,
                *plan.append_meta), 4, 3)
        if out.numel() == 0:
            return out, lse
        if plan.num_splits > 1:
            ws = torch.empty(plan.ws_numel, dtype=torch.float32, device=device)
            o_dst = lse_dst = ws  # the kernel finds the lse part after the partial outputs
            o_strides = plan.o_part_strides
        else:
            o_dst, lse_dst = out, lse
            o_strides = out.stride()[:3]
        # the fused combine's arrival counters (zero between calls), else dummies
        counters = (_counters(device, plan.grid[1] * plan.grid[2]) if plan.fused_combine
                    else lse)
        cfg = plan.cfg
        _launch(_kvcache_fwd_kernel, plan.grid, device, 10, (
            q, k_cache, v_cache, o_dst, lse_dst, seqlens, pt, out, lse, counters,
            *q.stride()[:3], *k_cache.stride()[:3], *v_cache.stride()[:3], *o_strides,
            *out.stride()[:3], pt_stride, batch,
            seqlen_q, seqlen_new, capacity, nheads, nheads // nheads_kv,
            float(softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(head_dim)),
            float(softcap) if softcap > 0 else 1.0, int(left or 0), int(right or 0),
            plan.num_splits, *plan.fwd_meta), cfg.num_warps, cfg.num_stages)
        if plan.num_splits > 1 and not plan.fused_combine:
            _launch(_combine_kernel, plan.combine_grid, device, 3, (
                ws, out, lse, *out.stride()[:3], batch * nheads * seqlen_q, seqlen_q, nheads,
                plan.num_splits, *plan.combine_meta), 4, 3)
    return out, lse


_COUNTERS: dict = {}


def _counters(device: torch.device, n: int) -> torch.Tensor:
    """Zeroed int32 arrival counters of the fused combine, one per query tile, kept per
    (device, stream): each call's last program resets its tile's counter, so a buffer
    is zeroed once (and CUDA graphs replay with it). Calls in flight at once on two
    streams get two buffers; two at once on one stream cannot happen. Buffers live as
    long as the process (never dropped: a captured graph keeps using its pointer), 4 KB
    or more each."""
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    key = (device, stream)
    buf = _COUNTERS.get(key)
    if buf is None or buf.numel() < n:
        buf = _COUNTERS[key] = torch.zeros(max(n, 1024), dtype=torch.int32, device=device)
    return buf


_KERNELS: dict = {}
_FAST_LAUNCH_DEVICES = ("cuda",)  # scripts/decode_host_overhead.py adds "cpu" (stub kernels)
_run_compiled = run_compiled  # the CPU check replaces it with a spy


def _launch(fn, grid, device, n_ptr, args, num_warps, num_stages):
    """``fn[grid](*args, num_warps=, num_stages=)``; ``args`` holds every parameter of
    ``fn`` in signature order (constexprs included), its ``n_ptr`` tensors first. With
    FAST_LAUNCH (the default) the compiled kernel is cached and launched directly
    (ops/_launch.cached_launch: Triton's own run() rebinds every argument each call,
    about half the host time of a decode call, scripts/decode_host_overhead.py)."""
    if FAST_LAUNCH and device.type in _FAST_LAUNCH_DEVICES:
        cached_launch(_KERNELS, fn, grid, device, n_ptr, args, num_warps, num_stages,
                      _run_compiled)
    else:
        plain_launch(fn, grid, args, num_warps, num_stages)


@triton.jit(do_not_specialize=["seqlen_new"])
def _append_kv_kernel(
    KN, VN,  # (B, Snew, Hkv, D): the new keys / values
    K_CACHE, V_CACHE,  # (B, Scache, Hkv, D) or (pages, PAGE_SIZE, Hkv, D)
    SEQLENS, PAGE_TABLE,  # (B,) int32 lengths before the append; (B, max_pages) int32
    stride_knb, stride_knn, stride_knh, stride_vnb, stride_vnn, stride_vnh, stride_kb,
    stride_kn, stride_kh, stride_vb, stride_vn, stride_vh, stride_ptb, seqlen_new, nheads_kv,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK: tl.constexpr, PAGED: tl.constexpr,
    PAGE_SIZE: tl.constexpr,
):
    """Write rows j of the new K/V at cache position SEQLENS[b] + j: grid
    (cdiv(Snew, BLOCK), B * Hkv)."""
    pid_j = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // nheads_kv
    hk = pid_bh % nheads_kv
    offs_j = pid_j * BLOCK + tl.arange(0, BLOCK)
    offs_d = tl.arange(0, BLOCK_D)
    mask = (offs_j < seqlen_new)[:, None] & (offs_d < HEAD_DIM)[None, :]
    pos = tl.load(SEQLENS + b) + offs_j  # cache positions of these rows
    if PAGED:
        page = tl.load(PAGE_TABLE + b.to(tl.int64) * stride_ptb + pos // PAGE_SIZE,
                       mask=offs_j < seqlen_new, other=0).to(tl.int64)
        slot = pos % PAGE_SIZE
        k_row = page * stride_kb + slot * stride_kn
        v_row = page * stride_vb + slot * stride_vn
    else:
        k_row = b.to(tl.int64) * stride_kb + pos.to(tl.int64) * stride_kn
        v_row = b.to(tl.int64) * stride_vb + pos.to(tl.int64) * stride_vn
    src = offs_j[:, None].to(tl.int64)
    kn = tl.load(KN + b.to(tl.int64) * stride_knb + hk * stride_knh + src * stride_knn
                 + offs_d[None, :], mask=mask)
    vn = tl.load(VN + b.to(tl.int64) * stride_vnb + hk * stride_vnh + src * stride_vnn
                 + offs_d[None, :], mask=mask)
    tl.store(K_CACHE + hk * stride_kh + k_row[:, None] + offs_d[None, :], kn, mask=mask)
    tl.store(V_CACHE + hk * stride_vh + v_row[:, None] + offs_d[None, :], vn, mask=mask)


# lengths and window sizes are runtime values: changing them never recompiles. Strides
# stay specialised (16-divisibility lets Triton pipeline the K/V loads with cp.async).
_NO_SPECIALIZE = [
    "batch", "seqlen_q", "seqlen_new", "capacity", "window_left", "window_right", "num_splits",
]


@triton.jit(do_not_specialize=_NO_SPECIALIZE)
def _kvcache_fwd_kernel(
    Q,  # (B, M, H, D)
    K_CACHE, V_CACHE,  # (B, Scache, Hkv, D) or (pages, PAGE_SIZE, Hkv, D)
    O,  # (B, M, H, D) in q's dtype, or with SPLIT the fp32 partials (S, B, H, M, D)
    LSE,  # (B, H, M) fp32, or with SPLIT (S, B, H, M)
    SEQLENS, PAGE_TABLE,  # (B,) int32; (B, max_pages) int32
    O_FINAL, LSE_FINAL,  # FUSED_COMBINE: the merged (B, M, H, D) output and (B, H, M) lse
    COUNTERS,  # FUSED_COMBINE: int32 per query tile (grid axes 1, 2), zero between calls
    stride_qb, stride_qm, stride_qh, stride_kb, stride_kn, stride_kh, stride_vb, stride_vn,
    stride_vh, stride_ob, stride_om, stride_oh, stride_fb, stride_fm, stride_fh, stride_ptb,
    batch, seqlen_q, seqlen_new,
    capacity, nheads, group, sm_scale, softcap, window_left, window_right, num_splits,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    GROUP_P2: tl.constexpr, PAGED: tl.constexpr, PAGE_SIZE: tl.constexpr,
    HAS_SEQLENS: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
    SOFTCAP: tl.constexpr, SPLIT: tl.constexpr, UPCAST: tl.constexpr, DOT_PREC: tl.constexpr,
    FUSED_COMBINE: tl.constexpr,
    SPLITS_P2: tl.constexpr, MERGE_CHUNK: tl.constexpr,  # FUSED_COMBINE's merge (else 1)
):
    ROWS: tl.constexpr = BLOCK_M // GROUP_P2
    tl.static_assert(ROWS * GROUP_P2 == BLOCK_M)
    split = tl.program_id(0)
    start_i = tl.program_id(1) * ROWS
    pid_bh = tl.program_id(2)
    nheads_kv = nheads // group
    b = pid_bh // nheads_kv
    hk = pid_bh % nheads_kv
    if HAS_SEQLENS:
        seqlen_k = tl.load(SEQLENS + b) + seqlen_new
    else:
        seqlen_k = capacity
    diag = seqlen_k - seqlen_q

    # -- the packed query tile: row r = (position start_i + r // GROUP_P2, head r % GROUP_P2)
    offs_r = tl.arange(0, BLOCK_M)
    offs_i = start_i + offs_r // GROUP_P2
    offs_g = offs_r % GROUP_P2
    offs_h = hk * group + offs_g
    offs_d = tl.arange(0, BLOCK_D)
    row_ok = (offs_i < seqlen_q) & (offs_g < group)
    io_mask = row_ok[:, None] & (offs_d < HEAD_DIM)[None, :]
    q = tl.load(Q + b.to(tl.int64) * stride_qb + (offs_i.to(tl.int64) * stride_qm
                + offs_h * stride_qh)[:, None] + offs_d[None, :], mask=io_mask, other=0.0)
    if UPCAST:
        q = q.to(tl.float32)

    # -- key tiles this query tile needs (causal/window pruning), then this split's share --
    lo, mid_lo, mid_hi, hi = kv_tile_ranges(
        start_i, seqlen_q, seqlen_k, diag, window_left, window_right, ROWS, BLOCK_N, HAS_LEFT,
        HAS_RIGHT,
    )
    per = ((hi - lo + BLOCK_N - 1) // BLOCK_N + num_splits - 1) // num_splits * BLOCK_N
    s_lo = tl.minimum(lo + split * per, hi)
    s_hi = tl.minimum(s_lo + per, hi)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    for stage in tl.static_range(3):
        t_lo, t_hi = stage_bounds(stage, lo, mid_lo, mid_hi, hi)
        acc, l_i, m_i = _cache_tiles(
            acc, l_i, m_i, q, K_CACHE, V_CACHE, PAGE_TABLE, b, hk, stride_kb, stride_kn,
            stride_kh, stride_vb, stride_vn, stride_vh, stride_ptb,
            tl.minimum(tl.maximum(t_lo, s_lo), s_hi), tl.minimum(tl.maximum(t_hi, s_lo), s_hi),
            offs_i, offs_d, seqlen_q, seqlen_k, diag, window_left, window_right, sm_scale,
            softcap, HEAD_DIM, BLOCK_D, BLOCK_N, stage != 1, PAGED, PAGE_SIZE, HAS_LEFT,
            HAS_RIGHT, SOFTCAP, UPCAST, DOT_PREC,
        )

    # -- epilogue: normalised rows (0 and lse = -inf where no key was seen) --
    acc, lse = softmax_finish(acc, m_i, l_i, True)
    o_rows = (b.to(tl.int64) * stride_ob + offs_i.to(tl.int64) * stride_om
              + offs_h.to(tl.int64) * stride_oh)
    lse_rows = (b.to(tl.int64) * nheads + offs_h) * seqlen_q + offs_i
    if SPLIT:
        # one fp32 workspace (O and LSE both point at it): partial outputs of split s at
        # s * (B * H * M * D), then all S * B * H * M running maxima m (log2 units), then
        # as many normalisers l. (m, l) rather than lse = (m + log2 l) ln 2: a merge
        # weight exp2(m_s - m) * l_s carries no log/exp round trip, whose error grows
        # with |lse| (in fp32 it broke the DESIGN.md bound on some inputs)
        rows_per_split = tl.cast(batch, tl.int64) * nheads * seqlen_q
        part = split.to(tl.int64) * rows_per_split
        tl.store(O + part * HEAD_DIM + o_rows[:, None] + offs_d[None, :], acc, mask=io_mask)
        lse_base = LSE + tl.cast(num_splits, tl.int64) * rows_per_split * HEAD_DIM
        tl.store(lse_base + part + lse_rows, m_i, mask=row_ok)
        tl.store(lse_base + tl.cast(num_splits, tl.int64) * rows_per_split + part + lse_rows,
                 l_i, mask=row_ok)
        if FUSED_COMBINE:
            # arrive; the last split of this query tile merges all of them (the barrier
            # orders every thread's stores before the gpu-scope release of the add)
            tl.debug_barrier()
            cnt = COUNTERS + pid_bh * tl.num_programs(1) + tl.program_id(1)
            if tl.atomic_add(cnt, 1, sem="acq_rel", scope="gpu") == num_splits - 1:
                tl.store(cnt, 0)  # every split has arrived: ready for the next call
                f_rows = (b.to(tl.int64) * stride_fb + offs_i.to(tl.int64) * stride_fm
                          + offs_h.to(tl.int64) * stride_fh)
                _merge_splits(O, lse_base, O_FINAL, LSE_FINAL, o_rows, lse_rows, f_rows,
                              rows_per_split, num_splits, offs_d, row_ok, io_mask, HEAD_DIM,
                              BLOCK_M, BLOCK_D, UPCAST, SPLITS_P2, MERGE_CHUNK)
    else:
        tl.store(O + o_rows[:, None] + offs_d[None, :], cast_out(acc, O.dtype.element_ty, UPCAST),
                 mask=io_mask)
        tl.store(LSE + lse_rows, lse, mask=row_ok)


@triton.jit
def _split_weight(M_PART, L_PART, part, mask, m_use):
    """Merge weight exp2(m_s - m_use) * l_s of the partials at offsets ``part``: empty
    (masked) splits, m = -inf and l = 0, weigh 0."""
    return tl.exp2(tl.load(M_PART + part, mask=mask, other=float("-inf"), cache_modifier=".cg")
                   - m_use) * tl.load(L_PART + part, mask=mask, other=0.0, cache_modifier=".cg")


@triton.jit
def _merge_splits(O_PART, M_PART, O, LSE, o_rows, lse_rows, f_rows, rows_per_split,
                  num_splits, offs_d, row_ok, io_mask, HEAD_DIM: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr, UPCAST: tl.constexpr,
                  SPLITS_P2: tl.constexpr, CHUNK: tl.constexpr):
    """The fused combine of one packed query tile, the arithmetic of _combine_kernel:
    the splits' largest running max m first, then weights w_s = exp2(m_s - m) * l_s,
    out = sum_s w_s o_s / sum_s w_s, lse = (m + log2 sum_s w_s) ln 2 (softmax_finish).
    Partials are read through L2 (other SMs wrote them); rows no split saw a key of give
    0 and -inf. Every split's m in one [SPLITS_P2, BLOCK_M] load, then the partial
    outputs CHUNK splits per step ([CHUNK, BLOCK_M, BLOCK_D] loads), so the merge waits
    on 1 + ceil(S / CHUNK) load latencies: the first build looped one split per step, a
    chain of 2 S dependent loads (27.5 against 19.6 us per call at 8k, 0e01b69)."""
    L_PART = M_PART + tl.cast(num_splits, tl.int64) * rows_per_split
    offs_s = tl.arange(0, SPLITS_P2)
    m_ok = (offs_s < num_splits)[:, None] & row_ok[None, :]
    m = tl.max(tl.load(M_PART + offs_s.to(tl.int64)[:, None] * rows_per_split
                       + lse_rows[None, :], mask=m_ok, other=float("-inf"),
                       cache_modifier=".cg"), 0)
    m_use = tl.where(m == float("-inf"), 0.0, m)
    offs_c = tl.arange(0, CHUNK)
    total = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    for s0 in range(0, num_splits, CHUNK):
        part = (s0 + offs_c).to(tl.int64) * rows_per_split  # [CHUNK]
        ok = (s0 + offs_c < num_splits)[:, None] & row_ok[None, :]  # [CHUNK, BLOCK_M]
        w = _split_weight(M_PART, L_PART, part[:, None] + lse_rows[None, :], ok,
                          m_use[None, :])
        o_s = tl.load(O_PART + (part[:, None] * HEAD_DIM + o_rows[None, :])[:, :, None]
                      + offs_d[None, None, :], mask=ok[:, :, None] & io_mask[None, :, :],
                      other=0.0, cache_modifier=".cg")
        acc += tl.sum(w[:, :, None] * o_s, 0)
        total += tl.sum(w, 0)
    acc, lse = softmax_finish(acc, m_use, total, True)
    tl.store(O + f_rows[:, None] + offs_d[None, :], cast_out(acc, O.dtype.element_ty, UPCAST),
             mask=io_mask)
    tl.store(LSE + lse_rows, lse, mask=row_ok)


@triton.jit
def _cache_tiles(
    acc, l_i, m_i, q, K_CACHE, V_CACHE, PAGE_TABLE, b, hk, stride_kb, stride_kn, stride_kh,
    stride_vb, stride_vn, stride_vh, stride_ptb, lo, hi, offs_i, offs_d, seqlen_q, seqlen_k,
    diag, window_left, window_right, sm_scale, softcap, HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr, PAGED: tl.constexpr,
    PAGE_SIZE: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
    SOFTCAP: tl.constexpr, UPCAST: tl.constexpr, DOT_PREC: tl.constexpr,
):
    """Online softmax of the packed query tile over cache keys [lo, hi)."""
    offs_n = tl.arange(0, BLOCK_N)
    d_ok = offs_d < HEAD_DIM
    # int32 tile offsets + a scalar 64-bit base per tile (a 2D tensor of 64-bit pointers
    # costs 2 registers per element); only the small-page gather needs 64-bit rows
    k_offs = offs_n[:, None] * stride_kn + offs_d[None, :]
    v_offs = offs_n[:, None] * stride_vn + offs_d[None, :]
    k_head = K_CACHE + hk.to(tl.int64) * stride_kh
    v_head = V_CACHE + hk.to(tl.int64) * stride_vh
    pt_row = PAGE_TABLE + b.to(tl.int64) * stride_ptb
    for start_n in tl.range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        if PAGED:
            if PAGE_SIZE >= BLOCK_N:  # the tile lies inside one page
                page = tl.load(pt_row + start_n // PAGE_SIZE).to(tl.int64)
                slot = start_n % PAGE_SIZE
                k_ptrs = k_head + page * stride_kb + slot * stride_kn + k_offs
                v_ptrs = v_head + page * stride_vb + slot * stride_vn + v_offs
            else:  # gather each key row through its page
                pages = tl.load(pt_row + cols // PAGE_SIZE, mask=cols < seqlen_k,
                                other=0).to(tl.int64)
                slots = cols % PAGE_SIZE
                k_ptrs = k_head + (pages * stride_kb + slots * stride_kn)[:, None] + offs_d[None, :]
                v_ptrs = v_head + (pages * stride_vb + slots * stride_vn)[:, None] + offs_d[None, :]
        else:
            row = tl.cast(start_n, tl.int64)
            k_ptrs = k_head + b.to(tl.int64) * stride_kb + row * stride_kn + k_offs
            v_ptrs = v_head + b.to(tl.int64) * stride_vb + row * stride_vn + v_offs
        k = _load_tile(k_ptrs, cols, seqlen_k, d_ok, MASKED, HEAD_DIM, BLOCK_D, UPCAST)
        # -- scores (log2 units), masks, online softmax --
        s = fwd_scores(
            q, k, offs_i, cols, seqlen_q, seqlen_k, diag, window_left, window_right, sm_scale,
            softcap, MASKED, HAS_LEFT, HAS_RIGHT, SOFTCAP, DOT_PREC,
        )
        m_new, alpha, p, l_i = online_softmax(m_i, l_i, s, True)
        v = _load_tile(v_ptrs, cols, seqlen_k, d_ok, MASKED, HEAD_DIM, BLOCK_D, UPCAST)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PREC)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit(do_not_specialize=["rows_per_split", "seqlen_q", "num_splits"])
def _combine_kernel(
    O_PART,  # fp32 workspace: (S, B, H, M, D) partial outputs, then (S, B, H, M) running
    #          maxima m (log2 units), then (S, B, H, M) normalisers l
    O, LSE,  # (B, M, H, D) in q's dtype; (B, H, M) fp32
    stride_ob, stride_om, stride_oh, rows_per_split, seqlen_q, nheads, num_splits,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, SPLITS_P2: tl.constexpr,
    CHUNK: tl.constexpr, UPCAST: tl.constexpr,
):
    """Merge the splits of one query row: with m = max_s m_s and w_s = exp2(m_s - m) l_s,
    out = sum_s w_s o_s / sum_s w_s and lse = (m + log2 sum_s w_s) ln 2; rows where every
    split saw no key give 0 and -inf. Grid (M, B * H). The partials are read CHUNK
    splits per step (a [CHUNK, D] tile): a loop of one split per step is a chain of S
    dependent ~1 us load latencies."""
    i = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // nheads
    h = pid_bh % nheads
    row = pid_bh.to(tl.int64) * seqlen_q + i  # (b, h, i) in the (B, H, M) order
    stride_s = tl.cast(rows_per_split, tl.int64)
    M_PART = O_PART + tl.cast(num_splits, tl.int64) * stride_s * HEAD_DIM
    L_PART = M_PART + tl.cast(num_splits, tl.int64) * stride_s
    offs_s = tl.arange(0, SPLITS_P2)
    m = tl.max(tl.load(M_PART + offs_s.to(tl.int64) * stride_s + row,
                       mask=offs_s < num_splits, other=float("-inf")), 0)
    m_use = tl.where(m == float("-inf"), 0.0, m)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_DIM
    offs_c = tl.arange(0, CHUNK)
    # the row as a [1, D] tile and its normaliser as [1], as softmax_finish takes them
    acc = tl.zeros([1, BLOCK_D], dtype=tl.float32)
    total = tl.zeros([1], dtype=tl.float32)
    for s0 in range(0, num_splits, CHUNK):
        s_ok = s0 + offs_c < num_splits
        part = (s0 + offs_c).to(tl.int64) * stride_s + row
        w = _split_weight(M_PART, L_PART, part, s_ok, m_use)
        o_s = tl.load(O_PART + part[:, None] * HEAD_DIM + offs_d[None, :],
                      mask=s_ok[:, None] & d_ok[None, :], other=0.0)
        acc += tl.sum(w[:, None] * o_s, 0)[None, :]
        total += tl.sum(w, 0)
    acc, lse = softmax_finish(acc, m_use, total, True)
    tl.store(O + b.to(tl.int64) * stride_ob + i.to(tl.int64) * stride_om
             + h.to(tl.int64) * stride_oh + offs_d[None, :],
             cast_out(acc, O.dtype.element_ty, UPCAST), mask=d_ok[None, :])
    tl.store(LSE + row + tl.arange(0, 1), lse)
