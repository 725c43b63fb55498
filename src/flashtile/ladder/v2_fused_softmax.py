"""Rung v2, fused softmax: the scores go to HBM once; softmax and P V are one kernel.

    kernel 1   S = softmax_scale * Q K^T  -> HBM, fp32 (v1's kernel, unchanged)
    kernel 2   per query tile: pass 1 streams S for the row max m and normaliser l;
               pass 2 streams S again, forms P = exp(S - m) / l in registers and
               accumulates P V. P never exists in HBM.

What changed from v1: P is gone (no write, no read, no N x N buffer), and one launch
fewer. S still crosses HBM three times (written once, read twice: 12 bytes per score
against v1's 16) and the N x N buffer still has to fit in memory.

Pass 1 keeps a running max and rescales the normaliser when the max grows (the
online normaliser of Milakov & Gimelshein, 2018) so that one read of S gives both.
v3 takes the next step: rescale the *output* too, and S need not exist at all.

fp32 math as v1 (``input_precision="ieee"``, inputs converted after loading).
Notation as v1. Kernel 2 grid: (cdiv(M, BLOCK_M), B * H), one program per query tile.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..ops._common import cast_out, is_interpreting
from . import TileConfig, block_d, device_ctx, empty_outputs, prepare
from .v1_naive import config as v1_config
from .v1_naive import scores


def attention(q, k, v, *, causal=False, softmax_scale=None):
    """v2: ``(out, lse)``; shapes and semantics in ``flashtile.ladder``."""
    scale = prepare(q, k, v, softmax_scale)
    batch, seqlen_q, nheads, head_dim = q.shape
    seqlen_k = k.shape[1]
    out, lse = empty_outputs(q)
    s = torch.empty((batch, nheads, seqlen_q, seqlen_k), dtype=torch.float32, device=q.device)
    cfg = config(head_dim, q.device)
    interp = is_interpreting()
    with device_ctx(q):
        scores(q, k, s, scale, causal, cfg)
        _softmax_pv_kernel[(triton.cdiv(seqlen_q, cfg.block_m), batch * nheads)](
            s, v, out, lse, v.stride(0), v.stride(1), v.stride(2), out.stride(0),
            out.stride(1), out.stride(2), seqlen_q, seqlen_k, nheads, HEAD_DIM=head_dim,
            BLOCK_D=block_d(head_dim), BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, UPCAST=interp,
            num_warps=cfg.num_warps, num_stages=cfg.num_stages,
        )
    return out, lse


# ==================================================================================
# config
# ==================================================================================


def config(head_dim: int, device: torch.device) -> TileConfig:
    """Tiles of both kernels: v1's (the fused kernel compiles without spills there
    too, offline sm_90, 2026-11-29), unpipelined. Speed not yet measured."""
    return v1_config(head_dim, device)


# ==================================================================================
# kernel
# ==================================================================================


@triton.jit(do_not_specialize=["seqlen_q", "seqlen_k"])
def _softmax_pv_kernel(
    S, V, O,
    LSE,  # S: (B, H, M, N) fp32; V: (B, N, H, D); O: (B, M, H, D); LSE: (B, H, M) fp32
    stride_vb, stride_vn, stride_vh, stride_ob, stride_om, stride_oh, seqlen_q, seqlen_k,
    nheads, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, UPCAST: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // nheads
    h = pid_bh % nheads
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    m_ok = offs_m < seqlen_q
    d_ok = offs_d < HEAD_DIM
    # 64-bit scalar bases, 32-bit tile offsets (fewer registers than 64-bit pointers)
    s_base = S + (pid_bh.to(tl.int64) * seqlen_q + pid_m * BLOCK_M) * seqlen_k
    s_offs = tl.arange(0, BLOCK_M)[:, None] * seqlen_k + offs_n[None, :]

    # -- pass 1: row max and normaliser in one read of S --
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    for start_n in range(0, seqlen_k, BLOCK_N):
        n_ok = start_n + offs_n < seqlen_k
        s = tl.load(s_base + start_n + s_offs, mask=m_ok[:, None] & n_ok[None, :],
                    other=float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)  # no key seen yet
        l_i = l_i * tl.exp(m_i - m_use) + tl.sum(tl.exp(s - m_use[:, None]), 1)
        m_i = m_new

    # -- pass 2: P = exp(S - m) / l in registers, straight into P V --
    empty = l_i == 0.0  # rows with no key: out 0, lse -inf
    m_use = tl.where(empty, 0.0, m_i)
    l_safe = tl.where(empty, 1.0, l_i)
    inv_l = 1.0 / l_safe
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    v_base = V + b.to(tl.int64) * stride_vb + h * stride_vh
    v_offs = offs_n[:, None] * stride_vn + offs_d[None, :]
    for start_n in range(0, seqlen_k, BLOCK_N):
        n_ok = start_n + offs_n < seqlen_k
        s = tl.load(s_base + start_n + s_offs, mask=m_ok[:, None] & n_ok[None, :],
                    other=float("-inf"))
        p = tl.exp(s - m_use[:, None]) * inv_l[:, None]
        v = tl.load(v_base + tl.cast(start_n, tl.int64) * stride_vn + v_offs,
                    mask=n_ok[:, None] & d_ok[None, :], other=0.0).to(tl.float32)
        acc += tl.dot(p, v, input_precision="ieee")

    o_ptrs = (O + b.to(tl.int64) * stride_ob + h * stride_oh
              + offs_m[:, None].to(tl.int64) * stride_om + offs_d[None, :])
    tl.store(o_ptrs, cast_out(acc, O.dtype.element_ty, UPCAST), mask=m_ok[:, None] & d_ok[None, :])
    lse = tl.where(empty, float("-inf"), m_use + tl.log(l_safe))
    tl.store(LSE + pid_bh.to(tl.int64) * seqlen_q + offs_m, lse, mask=m_ok)
