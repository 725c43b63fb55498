"""Rung v5, FlashAttention-2 on bf16/fp16 tensor cores, fp32 accumulators.

v4's algorithm, unchanged, with the products in the input dtype: q, k, v stay bf16
(or fp16) from HBM to the MMA, S and the output accumulator are fp32, the softmax
runs in fp32, and P is rounded to the input dtype for the P V product (as FA2 does).
The tensor cores run about 2x (dense) faster on 16-bit operands than on tf32, and
the tiles take half the shared memory and registers, so they can grow to 64 x 64.

Still missing (v6): causal tile skipping (every K/V tile is computed and masked),
exp2 with the folded scale, software pipelining (num_stages=1 here), tiles per head
dim.

Under the interpreter bf16 ``tl.dot`` is wrong, so UPCAST runs the products in fp32
on operands that hold bf16 values; P is still rounded to the input dtype first
(``cast_out``), so the interpreter computes what the GPU computes.

Notation: B batch, H heads, M = seqlen_q, N = seqlen_k, D head dim (BLOCK_D padded).
Grid: (cdiv(M, BLOCK_M), B * H).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..ops._common import attn_keep, cast_out, is_interpreting, online_softmax, softmax_finish
from . import INTERP_TILE, TileConfig, block_d, device_ctx, empty_outputs, prepare


def attention(q, k, v, *, causal=False, softmax_scale=None):
    """v5: ``(out, lse)``; shapes and semantics in ``flashtile.ladder``."""
    scale = prepare(q, k, v, softmax_scale)
    batch, seqlen_q, nheads, head_dim = q.shape
    out, lse = empty_outputs(q)
    cfg = config(q.device)
    with device_ctx(q):
        _fa2_kernel[(triton.cdiv(seqlen_q, cfg.block_m), batch * nheads)](
            q, k, v, out, lse, q.stride(0), q.stride(1), q.stride(2), k.stride(0),
            k.stride(1), k.stride(2), v.stride(0), v.stride(1), v.stride(2), out.stride(0),
            out.stride(1), out.stride(2), seqlen_q, k.shape[1], nheads, scale,
            HEAD_DIM=head_dim, BLOCK_D=block_d(head_dim), BLOCK_M=cfg.block_m,
            BLOCK_N=cfg.block_n, CAUSAL=causal, UPCAST=is_interpreting(),
            num_warps=cfg.num_warps, num_stages=cfg.num_stages,
        )
    return out, lse


# ==================================================================================
# config
# ==================================================================================


def config(device: torch.device) -> TileConfig:
    """One generic tile for every head dim, unpipelined: choosing per head dim and
    pipelining are v6's changes. 64 x 64 with 8 warps compiles without spills for
    sm_90 at D = 64 and 128 (4 warps spill 840 bytes at D = 128; ptxas -v, offline,
    2026-11-29). Speed not yet measured."""
    if device.type != "cuda":
        return INTERP_TILE
    return TileConfig(64, 64, 8, 1)


# ==================================================================================
# kernel
# ==================================================================================


@triton.jit(do_not_specialize=["seqlen_q", "seqlen_k"])
def _fa2_kernel(
    Q, K, V, O,
    LSE,  # Q, O: (B, M, H, D); K, V: (B, N, H, D); LSE: (B, H, M) fp32
    stride_qb, stride_qm, stride_qh, stride_kb, stride_kn, stride_kh, stride_vb, stride_vn,
    stride_vh, stride_ob, stride_om, stride_oh, seqlen_q, seqlen_k, nheads, sm_scale,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, UPCAST: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // nheads
    h = pid_bh % nheads
    diag = seqlen_k - seqlen_q
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    m_ok = offs_m < seqlen_q
    d_ok = offs_d < HEAD_DIM

    # -- the query tile, in the input dtype, kept in registers --
    q = tl.load(Q + b.to(tl.int64) * stride_qb + h * stride_qh
                + offs_m[:, None].to(tl.int64) * stride_qm + offs_d[None, :],
                mask=m_ok[:, None] & d_ok[None, :], other=0.0)
    if UPCAST:
        q = q.to(tl.float32)
    # 64-bit scalar bases + 32-bit tile offsets: a 2D tensor of 64-bit pointers carried
    # through the loop costs two registers per element (ptxas -v, sm_90)
    k_base = K + b.to(tl.int64) * stride_kb + h * stride_kh
    v_base = V + b.to(tl.int64) * stride_vb + h * stride_vh
    k_offs = offs_n[:, None] * stride_kn + offs_d[None, :]
    v_offs = offs_n[:, None] * stride_vn + offs_d[None, :]
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    for start_n in range(0, seqlen_k, BLOCK_N):
        cols = start_n + offs_n
        kv_mask = (cols < seqlen_k)[:, None] & d_ok[None, :]
        k_ptrs = k_base + tl.cast(start_n, tl.int64) * stride_kn + k_offs
        v_ptrs = v_base + tl.cast(start_n, tl.int64) * stride_vn + v_offs
        k = tl.load(k_ptrs, mask=kv_mask, other=0.0)
        if UPCAST:
            k = k.to(tl.float32)
        # -- scores: 16-bit MMA, fp32 accumulate --
        s = tl.dot(q, tl.trans(k)) * sm_scale
        keep = attn_keep(offs_m[:, None], cols[None, :], seqlen_q, seqlen_k, diag, 0, 0,
                         False, CAUSAL)
        s = tl.where(keep, s, float("-inf"))
        # -- online softmax (fp32) --
        m_new, alpha, p, l_i = online_softmax(m_i, l_i, s, False)
        v = tl.load(v_ptrs, mask=kv_mask, other=0.0)
        if UPCAST:
            v = v.to(tl.float32)
        # -- P rounded to the input dtype for the second MMA --
        p = cast_out(p, V.dtype.element_ty, UPCAST).to(v.dtype)
        acc = acc * alpha[:, None] + tl.dot(p, v)
        m_i = m_new

    # -- epilogue: normalise once; rows with no key give 0 and lse = -inf --
    acc, lse = softmax_finish(acc, m_i, l_i, False)
    o_ptrs = (O + b.to(tl.int64) * stride_ob + h * stride_oh
              + offs_m[:, None].to(tl.int64) * stride_om + offs_d[None, :])
    tl.store(o_ptrs, cast_out(acc, O.dtype.element_ty, UPCAST), mask=m_ok[:, None] & d_ok[None, :])
    tl.store(LSE + pid_bh.to(tl.int64) * seqlen_q + offs_m, lse, mask=m_ok)
