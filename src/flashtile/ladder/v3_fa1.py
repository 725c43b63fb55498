"""Rung v3, FlashAttention-1: tiled online softmax, no N x N matrix anywhere.

One program per (batch, head), FA1's loop order (Dao et al. 2022, Algorithm 1)::

    for each K/V tile j:                       outer: K_j, V_j loaded once, kept on chip
        for each query tile i:                 inner
            load Q_i and the running O_i, m_i, l_i from HBM
            S_ij = scale * Q_i K_j^T            (registers only)
            m_new = max(m_i, rowmax(S_ij));  P_ij = exp(S_ij - m_new)
            l_new = exp(m_i - m_new) * l_i + rowsum(P_ij)
            O_i = (l_i * exp(m_i - m_new) * O_i + P_ij V_j) / l_new    (kept normalised)
            store O_i, m_new, l_new to HBM
    O -> output dtype, lse = m + log(l)

What changed from v2: the scores never leave the chip; the price is that O (fp32),
m and l make a round trip through HBM for every K/V tile (O(N * D * N / BLOCK_N)
bytes instead of O(N^2)), and O is renormalised at every step. Parallelism is only
B * H programs, FA1's known weakness at long sequences (few heads, many idle SMs);
v4 (FA2) inverts the loops to fix both.

fp32 math (``input_precision="ieee"``, inputs converted after loading), no causal
tile skipping (masked tiles are computed and masked: pruning is v6), no pipelining.

Notation: B batch, H heads, M = seqlen_q, N = seqlen_k, D head dim (BLOCK_D padded).
Scratch: OACC (B, H, M, D) fp32 zeros, MI (B, H, M) fp32 -inf, LI (B, H, M) fp32 zeros.
Grid: (B * H,).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..ops._common import attn_keep, cast_out, is_interpreting, online_softmax
from . import INTERP_TILE, TileConfig, block_d, device_ctx, empty_outputs, prepare


def attention(q, k, v, *, causal=False, softmax_scale=None):
    """v3: ``(out, lse)``; shapes and semantics in ``flashtile.ladder``."""
    scale = prepare(q, k, v, softmax_scale)
    batch, seqlen_q, nheads, head_dim = q.shape
    seqlen_k = k.shape[1]
    out, lse = empty_outputs(q)
    # the running state lives in HBM, as in FA1
    o_acc = torch.zeros((batch, nheads, seqlen_q, head_dim), dtype=torch.float32,
                        device=q.device)
    m_i = torch.full((batch, nheads, seqlen_q), float("-inf"), dtype=torch.float32,
                     device=q.device)
    l_i = torch.zeros((batch, nheads, seqlen_q), dtype=torch.float32, device=q.device)
    cfg = config(head_dim, q.device)
    with device_ctx(q):
        _fa1_kernel[(batch * nheads,)](
            q, k, v, out, lse, o_acc, m_i, l_i, q.stride(0), q.stride(1), q.stride(2),
            k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1), v.stride(2),
            out.stride(0), out.stride(1), out.stride(2), seqlen_q, seqlen_k, nheads, scale,
            HEAD_DIM=head_dim, BLOCK_D=block_d(head_dim), BLOCK_M=cfg.block_m,
            BLOCK_N=cfg.block_n, CAUSAL=causal, UPCAST=is_interpreting(),
            num_warps=cfg.num_warps, num_stages=cfg.num_stages,
        )
    return out, lse


# ==================================================================================
# config
# ==================================================================================


def config(head_dim: int, device: torch.device) -> TileConfig:
    """K_j, V_j (fp32) stay on chip across the inner loop; unpipelined. Speed not yet
    measured; spills from ptxas -v on an offline sm_90 compile, 2026-11-29.

    BLOCK_N sets the traffic: every K/V tile moves each query row's fp32 O, m, l
    through HBM and back, about 10 * D / BLOCK_N bytes per score against v2's 12, so
    the K/V tile is as wide as the registers allow (D = 64: 32 x 128, no spills;
    D = 128: 16 x 128, 24 bytes of spills, accepted over 16 x 64, which has none but
    doubles O's round trips). D > 128: not compile-checked."""
    if device.type != "cuda":
        return INTERP_TILE
    d = block_d(head_dim)
    if d <= 64:
        return TileConfig(32, 128, 8, 1)
    if d <= 128:
        return TileConfig(16, 128, 8, 1)
    return TileConfig(16, 64, 8, 1)


# ==================================================================================
# kernel
# ==================================================================================


@triton.jit(do_not_specialize=["seqlen_q", "seqlen_k"])
def _fa1_kernel(
    Q, K, V, O, LSE, OACC, MI,
    LI,  # Q, O: (B, M, H, D); K, V: (B, N, H, D); LSE, MI, LI: (B, H, M); OACC: (B, H, M, D)
    stride_qb, stride_qm, stride_qh, stride_kb, stride_kn, stride_kh, stride_vb, stride_vn,
    stride_vh, stride_ob, stride_om, stride_oh, seqlen_q, seqlen_k, nheads, sm_scale,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, UPCAST: tl.constexpr,
):
    pid_bh = tl.program_id(0)
    b = pid_bh // nheads
    h = pid_bh % nheads
    diag = seqlen_k - seqlen_q
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_DIM
    q_base = Q + b.to(tl.int64) * stride_qb + h * stride_qh
    k_base = K + b.to(tl.int64) * stride_kb + h * stride_kh
    v_base = V + b.to(tl.int64) * stride_vb + h * stride_vh
    row_base = pid_bh.to(tl.int64) * seqlen_q  # into MI, LI, LSE; times D into OACC
    # pointers are recomputed from the loop index at each step, not hoisted 32-bit
    # offset tiles: those stay live across both loops and spill (ptxas -v, sm_90)

    # -- outer loop: one K/V tile, loaded once --
    for start_n in range(0, seqlen_k, BLOCK_N):
        cols = start_n + offs_n
        kv_mask = (cols < seqlen_k)[:, None] & d_ok[None, :]
        k = tl.load(k_base + cols[:, None].to(tl.int64) * stride_kn + offs_d[None, :],
                    mask=kv_mask, other=0.0).to(tl.float32)
        v = tl.load(v_base + cols[:, None].to(tl.int64) * stride_vn + offs_d[None, :],
                    mask=kv_mask, other=0.0).to(tl.float32)
        # -- inner loop: every query tile reads, updates and writes back its state --
        for start_m in range(0, seqlen_q, BLOCK_M):
            rows = start_m + offs_m
            r_ok = rows < seqlen_q
            q = tl.load(q_base + rows[:, None].to(tl.int64) * stride_qm + offs_d[None, :],
                        mask=r_ok[:, None] & d_ok[None, :], other=0.0).to(tl.float32)
            o_ptrs = OACC + (row_base + rows[:, None]) * HEAD_DIM + offs_d[None, :]
            o_mask = r_ok[:, None] & d_ok[None, :]
            o = tl.load(o_ptrs, mask=o_mask, other=0.0)
            m_i = tl.load(MI + row_base + rows, mask=r_ok, other=float("-inf"))
            l_i = tl.load(LI + row_base + rows, mask=r_ok, other=0.0)
            # -- scores --
            s = tl.dot(q, tl.trans(k), input_precision="ieee") * sm_scale
            keep = attn_keep(rows[:, None], cols[None, :], seqlen_q, seqlen_k, diag, 0, 0,
                             False, CAUSAL)
            s = tl.where(keep, s, float("-inf"))
            # -- online softmax: new max, rescale, renormalise O --
            m_new, alpha, p, l_new = online_softmax(m_i, l_i, s, False)
            l_safe = tl.where(l_new == 0.0, 1.0, l_new)
            pv = tl.dot(p, v, input_precision="ieee")
            o = (o * (l_i * alpha)[:, None] + pv) / l_safe[:, None]
            tl.store(o_ptrs, o, mask=o_mask)
            tl.store(MI + row_base + rows, m_new, mask=r_ok)
            tl.store(LI + row_base + rows, l_new, mask=r_ok)
        # the next K/V tile reads this state back, possibly from other threads
        tl.debug_barrier()

    # -- epilogue: O to the output dtype, lse = m + log(l) --
    for start_m in range(0, seqlen_q, BLOCK_M):
        rows = start_m + offs_m
        r_ok = rows < seqlen_q
        o = tl.load(OACC + (row_base + rows[:, None]) * HEAD_DIM + offs_d[None, :],
                    mask=r_ok[:, None] & d_ok[None, :], other=0.0)
        m_i = tl.load(MI + row_base + rows, mask=r_ok, other=float("-inf"))
        l_i = tl.load(LI + row_base + rows, mask=r_ok, other=0.0)
        empty = l_i == 0.0
        lse = tl.where(empty, float("-inf"), m_i + tl.log(tl.where(empty, 1.0, l_i)))
        o_ptrs = (O + b.to(tl.int64) * stride_ob + h * stride_oh
                  + rows[:, None].to(tl.int64) * stride_om + offs_d[None, :])
        tl.store(o_ptrs, cast_out(o, O.dtype.element_ty, UPCAST),
                 mask=r_ok[:, None] & d_ok[None, :])
        tl.store(LSE + row_base + rows, lse, mask=r_ok)
