"""Rung v1, naive attention: three kernels, the N x N matrices live in HBM.

    kernel 1   S = softmax_scale * Q K^T       -> HBM, fp32, masked entries -inf
    kernel 2   P = softmax(S) row by row        reads S, writes P (fp32) and lse
    kernel 3   O = P V                          reads P

The N x N matrix crosses HBM four times (S written, S read, P written, P read):
16 bytes per score, against 4 * D FLOPs per score, and O(N^2) memory. v2 removes
half of that traffic, v3 all of it; v4 moves the math to tensor cores.

fp32 math, as a from-scratch CUDA implementation would do it: q, k, v are converted
to fp32 after loading and the products run as IEEE fp32 FMAs
(``input_precision="ieee"``, no tensor cores).

Notation: B batch, H heads, M = seqlen_q, N = seqlen_k, D head dim, BLOCK_D = D
padded to a power of two >= 16. S and P are (B, H, M, N) fp32, contiguous; LSE is
(B, H, M). Grids: kernel 1 (cdiv(M, BLOCK_M), cdiv(N, BLOCK_N), B * H); kernel 2
(B * H * M,), one program per row with the whole row in one block (16 rows per
program under the interpreter); kernel 3 (cdiv(M, BLOCK_M), B * H).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..ops._common import attn_keep, cast_out, is_interpreting
from . import INTERP_TILE, TileConfig, block_d, device_ctx, empty_outputs, prepare

# a softmax row must fit one block: Triton's limit on elements per tensor
MAX_SEQLEN_K = 1 << 20


def attention(q, k, v, *, causal=False, softmax_scale=None):
    """v1: ``(out, lse)``; shapes and semantics in ``flashtile.ladder``."""
    scale = prepare(q, k, v, softmax_scale)
    batch, seqlen_q, nheads, head_dim = q.shape
    seqlen_k = k.shape[1]
    if seqlen_k > MAX_SEQLEN_K:
        raise ValueError(f"v1 keeps a softmax row in one block: seqlen_k <= {MAX_SEQLEN_K}")
    out, lse = empty_outputs(q)
    s = torch.empty((batch, nheads, seqlen_q, seqlen_k), dtype=torch.float32, device=q.device)
    p = torch.empty_like(s)
    cfg = config(head_dim, q.device)
    interp = is_interpreting()
    with device_ctx(q):
        scores(q, k, s, scale, causal, cfg)
        bn = triton.next_power_of_2(seqlen_k)
        rows = batch * nheads * seqlen_q
        # the interpreter pays per program: there, one program takes 16 rows
        per_program = 16 if interp else 1
        _softmax_kernel[(triton.cdiv(rows, per_program),)](
            s, p, lse, rows, seqlen_k, ROWS=per_program, BLOCK_N=bn,
            num_warps=1 if interp else _softmax_warps(bn),
        )
        _pv_kernel[(triton.cdiv(seqlen_q, cfg.block_m), batch * nheads)](
            p, v, out, v.stride(0), v.stride(1), v.stride(2), out.stride(0), out.stride(1),
            out.stride(2), seqlen_q, seqlen_k, nheads, HEAD_DIM=head_dim,
            BLOCK_D=block_d(head_dim), BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, UPCAST=interp,
            num_warps=cfg.num_warps, num_stages=cfg.num_stages,
        )
    return out, lse


def scores(q, k, s, scale, causal, cfg):
    """Kernel 1 into ``s`` ((B, H, M, N) fp32): shared with v2, which keeps it."""
    batch, seqlen_q, nheads, head_dim = q.shape
    seqlen_k = k.shape[1]
    grid = (triton.cdiv(seqlen_q, cfg.block_m), triton.cdiv(seqlen_k, cfg.block_n),
            batch * nheads)
    _scores_kernel[grid](
        q, k, s, q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
        seqlen_q, seqlen_k, nheads, scale, HEAD_DIM=head_dim, BLOCK_D=block_d(head_dim),
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, CAUSAL=causal, num_warps=cfg.num_warps,
        num_stages=cfg.num_stages,
    )


# ==================================================================================
# config
# ==================================================================================


def config(head_dim: int, device: torch.device) -> TileConfig:
    """Tiles of kernels 1 and 3 (and of v2). No software pipelining below v6
    (num_stages=1), so each rung changes one thing. The largest fp32 FMA tiles that
    compile without spills for sm_90 (ptxas -v, offline, 2026-11-29): at D = 128,
    64 x 64 spills 600 bytes, 32 x 32 none. Speed not yet measured."""
    if device.type != "cuda":
        return INTERP_TILE
    if block_d(head_dim) <= 64:
        return TileConfig(64, 64, 8, 1)
    return TileConfig(32, 32, 4, 1)


def _softmax_warps(block_n: int) -> int:
    # about 32 fp32 values per thread (Triton's fused-softmax tutorial)
    return max(1, min(16, block_n // 1024))


# ==================================================================================
# kernels
# ==================================================================================


@triton.jit(do_not_specialize=["seqlen_q", "seqlen_k"])
def _scores_kernel(
    Q, K,
    S,  # Q: (B, M, H, D); K: (B, N, H, D); S: (B, H, M, N) fp32
    stride_qb, stride_qm, stride_qh, stride_kb, stride_kn, stride_kh, seqlen_q, seqlen_k,
    nheads, sm_scale, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_bh = tl.program_id(2)
    b = pid_bh // nheads
    h = pid_bh % nheads
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_DIM
    q = tl.load(
        Q + b.to(tl.int64) * stride_qb + h * stride_qh + offs_m[:, None].to(tl.int64) * stride_qm
        + offs_d[None, :], mask=(offs_m < seqlen_q)[:, None] & d_ok[None, :], other=0.0,
    ).to(tl.float32)
    k = tl.load(
        K + b.to(tl.int64) * stride_kb + h * stride_kh + offs_n[:, None].to(tl.int64) * stride_kn
        + offs_d[None, :], mask=(offs_n < seqlen_k)[:, None] & d_ok[None, :], other=0.0,
    ).to(tl.float32)
    # -- scores: fp32 FMAs, no tensor cores --
    s = tl.dot(q, tl.trans(k), input_precision="ieee") * sm_scale
    keep = attn_keep(
        offs_m[:, None], offs_n[None, :], seqlen_q, seqlen_k, seqlen_k - seqlen_q, 0, 0, False,
        CAUSAL,
    )
    s = tl.where(keep, s, float("-inf"))
    # int64: B * H * M * N passes 2^31 at the benchmark shapes
    s_ptrs = (S + pid_bh.to(tl.int64) * seqlen_q * seqlen_k
              + offs_m[:, None].to(tl.int64) * seqlen_k + offs_n[None, :])
    tl.store(s_ptrs, s, mask=(offs_m < seqlen_q)[:, None] & (offs_n < seqlen_k)[None, :])


@triton.jit(do_not_specialize=["n_rows", "seqlen_k"])
def _softmax_kernel(
    S, P,
    LSE,  # S, P: (B, H, M, N) fp32; LSE: (B, H, M) fp32
    n_rows, seqlen_k, ROWS: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """ROWS rows of P = softmax(S) (1 on the GPU): each row read once, written once."""
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)  # flat (b, h, m)
    offs_n = tl.arange(0, BLOCK_N)
    ok = (rows < n_rows)[:, None] & (offs_n < seqlen_k)[None, :]
    offs = rows[:, None] * seqlen_k + offs_n[None, :]
    s = tl.load(S + offs, mask=ok, other=float("-inf"))
    m = tl.max(s, 1)
    m_use = tl.where(m == float("-inf"), 0.0, m)  # a row with no key: p = 0, not NaN
    p = tl.exp(s - m_use[:, None])
    l = tl.sum(p, 1)
    l_safe = tl.where(l == 0.0, 1.0, l)
    tl.store(P + offs, p / l_safe[:, None], mask=ok)
    lse = tl.where(l == 0.0, float("-inf"), m_use + tl.log(l_safe))
    tl.store(LSE + rows, lse, mask=rows < n_rows)


@triton.jit(do_not_specialize=["seqlen_q", "seqlen_k"])
def _pv_kernel(
    P, V,
    O,  # P: (B, H, M, N) fp32; V: (B, N, H, D); O: (B, M, H, D)
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
    # 64-bit scalar bases, 32-bit tile offsets: a 2D tensor of 64-bit pointers carried
    # through the loop costs two registers per element (ptxas -v, sm_90)
    p_base = P + (pid_bh.to(tl.int64) * seqlen_q + pid_m * BLOCK_M) * seqlen_k
    p_offs = tl.arange(0, BLOCK_M)[:, None] * seqlen_k + offs_n[None, :]
    v_base = V + b.to(tl.int64) * stride_vb + h * stride_vh
    v_offs = offs_n[:, None] * stride_vn + offs_d[None, :]
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    for start_n in range(0, seqlen_k, BLOCK_N):
        n_ok = start_n + offs_n < seqlen_k
        p = tl.load(p_base + start_n + p_offs, mask=m_ok[:, None] & n_ok[None, :], other=0.0)
        v = tl.load(v_base + tl.cast(start_n, tl.int64) * stride_vn + v_offs,
                    mask=n_ok[:, None] & d_ok[None, :], other=0.0).to(tl.float32)
        acc += tl.dot(p, v, input_precision="ieee")
    o_ptrs = (O + b.to(tl.int64) * stride_ob + h * stride_oh
              + offs_m[:, None].to(tl.int64) * stride_om + offs_d[None, :])
    tl.store(o_ptrs, cast_out(acc, O.dtype.element_ty, UPCAST), mask=m_ok[:, None] & d_ok[None, :])
