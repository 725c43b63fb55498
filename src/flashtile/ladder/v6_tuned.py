"""Rung v6, tuned FlashAttention-2: v5's algorithm with four engineering changes.

1. Causal tile pruning. A query tile needs only the key tiles up to its diagonal;
   tiles past it are skipped (half the work of a causal pass), and the mask is
   computed only on the diagonal band and the ragged last tile. Everything before
   the band runs an unmasked loop (no index math, no selects).
2. exp2 with the folded scale: scores are kept in log2 units,
   ``s2 = (softmax_scale * log2(e)) * q.k``, so each probability costs one ``ex2``
   (MUFU) and no extra multiply; lse converts back to natural log once at the end.
3. Software pipelining: ``num_stages`` > 1 lets Triton prefetch the next K/V tile
   into shared memory while the current one is in the MMAs.
4. Tiles per head dim from a small table (``CONFIGS``), instead of one generic tile.

Two loops share one body (``_tiles``): [0, band) unmasked, [band, hi) masked, with
the ranges from ``flashtile.ops._common.kv_tile_ranges`` (the production kernel's).
What the production rung adds on top: GQA, windows, softcap, dropout, backward.

Notation: B batch, H heads, M = seqlen_q, N = seqlen_k, D head dim (BLOCK_D padded).
Grid: (cdiv(M, BLOCK_M), B * H). UPCAST: interpreter only (fp32 products on values
held in the input dtype; see v5).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..ops._common import (
    LOG2E,
    attn_keep,
    cast_out,
    is_interpreting,
    kv_tile_ranges,
    online_softmax,
    softmax_finish,
)
from . import INTERP_TILE, TileConfig, block_d, device_ctx, empty_outputs, prepare


def attention(q, k, v, *, causal=False, softmax_scale=None):
    """v6: ``(out, lse)``; shapes and semantics in ``flashtile.ladder``."""
    scale = prepare(q, k, v, softmax_scale)
    batch, seqlen_q, nheads, head_dim = q.shape
    out, lse = empty_outputs(q)
    cfg = config(head_dim, q.device)
    with device_ctx(q):
        _fa2_tuned_kernel[(triton.cdiv(seqlen_q, cfg.block_m), batch * nheads)](
            q, k, v, out, lse, q.stride(0), q.stride(1), q.stride(2), k.stride(0),
            k.stride(1), k.stride(2), v.stride(0), v.stride(1), v.stride(2), out.stride(0),
            out.stride(1), out.stride(2), seqlen_q, k.shape[1], nheads, scale * LOG2E.value,
            HEAD_DIM=head_dim, BLOCK_D=block_d(head_dim), BLOCK_M=cfg.block_m,
            BLOCK_N=cfg.block_n, CAUSAL=causal, UPCAST=is_interpreting(),
            num_warps=cfg.num_warps, num_stages=cfg.num_stages,
        )
    return out, lse


# ==================================================================================
# config
# ==================================================================================

# padded head dim -> tile. The Triton tutorial's Hopper tiles, kept where they compile
# for sm_90 without real spills (ptxas -v, offline, 2026-11-29); speed not yet
# measured on the H200 (the ladder run decides, docs/ladder.md):
#   64:  128 x 64, 8 warps, 3 stages (4 warps: 255 regs, 8 bytes of spills)
#   128: 128 x 64, 8 warps, 3 stages (4 bytes of spills; 128 x 128: 190 bytes)
#   256: 64 x 64, 8 warps, 2 stages (4 warps: 10 KB of spills); not in the ladder run
CONFIGS = {
    64: TileConfig(128, 64, 8, 3),
    128: TileConfig(128, 64, 8, 3),
    256: TileConfig(64, 64, 8, 2),
}


def config(head_dim: int, device: torch.device) -> TileConfig:
    """The table entry for the smallest padded head dim >= ``head_dim``."""
    if device.type != "cuda":
        return INTERP_TILE
    d = block_d(head_dim)
    return CONFIGS[min(key for key in CONFIGS if key >= d)]


# ==================================================================================
# kernel
# ==================================================================================


@triton.jit(do_not_specialize=["seqlen_q", "seqlen_k"])
def _fa2_tuned_kernel(
    Q, K, V, O,
    LSE,  # Q, O: (B, M, H, D); K, V: (B, N, H, D); LSE: (B, H, M) fp32
    stride_qb, stride_qm, stride_qh, stride_kb, stride_kn, stride_kh, stride_vb, stride_vn,
    stride_vh, stride_ob, stride_om, stride_oh, seqlen_q, seqlen_k, nheads, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, UPCAST: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // nheads
    h = pid_bh % nheads
    start_m = pid_m * BLOCK_M
    diag = seqlen_k - seqlen_q
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    m_ok = offs_m < seqlen_q
    d_ok = offs_d < HEAD_DIM

    q = tl.load(Q + b.to(tl.int64) * stride_qb + h * stride_qh
                + offs_m[:, None].to(tl.int64) * stride_qm + offs_d[None, :],
                mask=m_ok[:, None] & d_ok[None, :], other=0.0)
    if UPCAST:
        q = q.to(tl.float32)
    k_base = K + b.to(tl.int64) * stride_kb + h * stride_kh
    v_base = V + b.to(tl.int64) * stride_vb + h * stride_vh
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)  # log2 units
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    # -- key tiles: [0, band) need no mask, [band, hi) do, past hi are skipped
    #    (kv_tile_ranges' first, left-window stage is empty without a window) --
    _, start, band, hi = kv_tile_ranges(
        start_m, seqlen_q, seqlen_k, diag, 0, 0, BLOCK_M, BLOCK_N, False, CAUSAL,
    )
    acc, l_i, m_i = _tiles(
        acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, start, band, offs_m, offs_n,
        offs_d, seqlen_q, seqlen_k, diag, qk_scale, HEAD_DIM, BLOCK_D, BLOCK_N, False, CAUSAL,
        UPCAST,
    )
    acc, l_i, m_i = _tiles(
        acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, band, hi, offs_m, offs_n,
        offs_d, seqlen_q, seqlen_k, diag, qk_scale, HEAD_DIM, BLOCK_D, BLOCK_N, True, CAUSAL,
        UPCAST,
    )

    # -- epilogue: normalise once; lse back to natural log --
    acc, lse = softmax_finish(acc, m_i, l_i, True)
    o_ptrs = (O + b.to(tl.int64) * stride_ob + h * stride_oh
              + offs_m[:, None].to(tl.int64) * stride_om + offs_d[None, :])
    tl.store(o_ptrs, cast_out(acc, O.dtype.element_ty, UPCAST), mask=m_ok[:, None] & d_ok[None, :])
    tl.store(LSE + pid_bh.to(tl.int64) * seqlen_q + offs_m, lse, mask=m_ok)


@triton.jit
def _tiles(
    acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, lo, hi, offs_m, offs_n, offs_d,
    seqlen_q, seqlen_k, diag, qk_scale, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
    BLOCK_N: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr, UPCAST: tl.constexpr,
):
    """Online softmax over key tiles [lo, hi), in log2 units."""
    d_ok = offs_d < HEAD_DIM
    # 64-bit scalar base + 32-bit tile offsets: 64-bit pointer tiles carried through
    # the loop cost two registers per element (ptxas -v, sm_90)
    k_offs = offs_n[:, None] * stride_kn + offs_d[None, :]
    v_offs = offs_n[:, None] * stride_vn + offs_d[None, :]
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        k_ptrs = k_base + tl.cast(start_n, tl.int64) * stride_kn + k_offs
        v_ptrs = v_base + tl.cast(start_n, tl.int64) * stride_vn + v_offs
        # unmasked tiles lie wholly inside [0, seqlen_k): only a padded D needs a mask
        if MASKED:
            kv_mask = (cols < seqlen_k)[:, None] & d_ok[None, :]
            k = tl.load(k_ptrs, mask=kv_mask, other=0.0)
            v = tl.load(v_ptrs, mask=kv_mask, other=0.0)
        elif HEAD_DIM != BLOCK_D:
            k = tl.load(k_ptrs, mask=d_ok[None, :], other=0.0)
            v = tl.load(v_ptrs, mask=d_ok[None, :], other=0.0)
        else:
            k = tl.load(k_ptrs)
            v = tl.load(v_ptrs)
        if UPCAST:
            k = k.to(tl.float32)
            v = v.to(tl.float32)
        # -- scores in log2 units: the scale and log2(e) folded into one multiply --
        s = tl.dot(q, tl.trans(k)) * qk_scale
        if MASKED:
            keep = attn_keep(offs_m[:, None], cols[None, :], seqlen_q, seqlen_k, diag, 0, 0,
                             False, CAUSAL)
            s = tl.where(keep, s, float("-inf"))
        # -- rescale the running state, accumulate --
        m_new, alpha, p, l_i = online_softmax(m_i, l_i, s, True)
        p = cast_out(p, v_base.dtype.element_ty, UPCAST).to(v.dtype)
        acc = acc * alpha[:, None] + tl.dot(p, v)
        m_i = m_new
    return acc, l_i, m_i
