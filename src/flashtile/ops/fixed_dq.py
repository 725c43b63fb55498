"""Fixed-point dQ for the one-kernel Gluon backward (``HopperBwdConfig.reduce_fixed``):
deterministic adds, meant to cost what the racing fp32 adds cost (same buffer size, same
traffic; not yet measured on a GPU).

In the one-kernel backward (ops/hopper_bwd.py, DQ_REDUCE) every 128-key program adds its
share of each query tile's dQ into one buffer by TMA reduce-adds, and the programs race.
fp32 adds in a different order give different last bits; integer adds do not. So each
share is scaled by a power of two, rounded to int32 and added into an int32 buffer:
whatever order the adds land in, the sum is the same, bit for bit.

The scale comes from a bound on |dQ| that is known before the launch. With
dS_ij = P_ij (dP_ij - D_i), dP_ij = dO_i . V_j and D_i = sum_j P_ij dP_ij:
  |dP_ij - D_i| <= 2 max_j |dP_ij| <= 2 |dO_i| max_j |V_j|   (Cauchy-Schwarz)
and since sum_j P_ij = 1,
  |dQ_ic| = scale |sum_j dS_ij K_jc| <= 2 * scale * |dO_i| * max_j |V_j| * max_jc |K_jc|.
A softcap multiplies dS by 1 - tanh^2 <= 1; causal masks and windows only drop terms.
B, that bound over a program head's rows, comes from three maxima per program head
(``bounds``: max |dO_i|^2 over its query heads, max |V_j|^2 and max K_jc^2 over its key
head), atomic maxima in one pass over dO, K and V (a maximum is order-free too). The
kernel scales its dQ shares by 2^e with B 2^e <= 2^30 (``FIXED_LOG2_LIMIT``), so the
int32 sum cannot overflow, and stores 2^e beside the maxima; ``dequantize`` divides by it.

Precision: the bound is loose by the spread of the softmax and the alignment of the
vectors (B / max |dQ| was 300 - 4300 on random and adversarial data at 1k - 16k keys), so
one unit of the int32 sum, 2^-30 of B, is 2^-18 - 2^-22 of the largest |dQ|, and each
share rounds by half a unit. The summed roundings reached 2^-14 of the largest |dQ| at
16k keys (128 shares; a CPU simulation in session 26), against bf16's own rounding of dQ
at 2^-9, so the DESIGN.md bound holds with the margin of fp32 adds (tests/test_fixed_dq.py
simulates the scheme up to 4k keys, adversarial scores included). A NaN or an infinity in dO, K or V gives NaN dQ over
the program head that reads it (fp32 adds would give it in the NaN's rows only).

Buffer layout: ``stats`` is (batch * program heads, 4) fp32, zeroed: the three maxima,
then the kernel's 2^e. Program heads are the dK/dV grid's second axis: key heads, or
query heads with ``expand`` (HopperBwdConfig.gqa_expand).

Public functions:
    bounds(dout, k, v, group, expand) -> stats          the maxima (one launch)
    dequantize(acc, stats, dq, group, expand)           dq = acc / 2^e (fp32), cast on store
    fixed_mult(stats_row, sm_scale) -> float            2^e on the host (tests)
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ._common import cast_out, is_interpreting, next_pow2

__all__ = ["bounds", "dequantize", "fixed_mult", "FIXED_LOG2_LIMIT"]

# B * 2^e <= 2^FIXED_LOG2_LIMIT: half the int32 range, so that the shares' roundings (half
# a unit each) and the kernel's fp32 products cannot reach 2^31
FIXED_LOG2_LIMIT = 30
# the maxima are floored here before their logarithms (all-zero dO: e stays finite)
FIXED_TINY = 2.0**-100
_ROWS = 64  # rows per program of both kernels


# ==================================================================================
# host side
# ==================================================================================


def bounds(dout: torch.Tensor, k: torch.Tensor, v: torch.Tensor, group: int,
           expand: bool) -> torch.Tensor:
    """The three maxima per program head (module docstring), into a zeroed
    (batch * program heads, 4) fp32 tensor. dout (B, M, H, D); k, v (B, N, Hkv, D); any
    strides; ``group`` = H // Hkv."""
    batch, seqlen_q, nheads, head_dim = dout.shape
    seqlen_k, nheads_kv = k.shape[1], k.shape[2]
    heads = nheads if expand else nheads_kv
    stats = torch.zeros((batch * heads, 4), dtype=torch.float32, device=dout.device)
    grid = (triton.cdiv(max(seqlen_q, seqlen_k), _ROWS), batch * nheads)
    _bounds_kernel[grid](
        dout, k, v, stats, seqlen_q, seqlen_k, nheads, nheads_kv, heads, group,
        *dout.stride(), *k.stride(), *v.stride(),
        EXPAND=bool(expand), HEAD_DIM=head_dim, BLOCK_R=_ROWS, BLOCK_D=next_pow2(head_dim),
    )
    return stats


def dequantize(acc: torch.Tensor, stats: torch.Tensor, dq: torch.Tensor, group: int,
               expand: bool) -> None:
    """dq = acc / 2^e (the kernel's multiplier in ``stats[:, 3]``; the sum rounded to
    fp32), cast to dq's dtype. acc (B, M, H, D) int32, contiguous; dq the same shape, any
    strides."""
    batch, seqlen_q, nheads, head_dim = acc.shape
    heads = nheads if expand else nheads // group
    rows = batch * seqlen_q * nheads
    _dequantize_kernel[(triton.cdiv(rows, _ROWS),)](
        acc, stats, dq, rows, seqlen_q, nheads, heads, group, *dq.stride(),
        EXPAND=bool(expand), HEAD_DIM=head_dim, BLOCK_R=_ROWS, BLOCK_D=next_pow2(head_dim),
        UPCAST=is_interpreting(),
    )


def fixed_mult(stats_row, sm_scale: float) -> float:
    """2^e for one program head's maxima (do2, v2, k2), as ops/hopper_bwd._fixed_mult
    computes it in fp32: e = floor(FIXED_LOG2_LIMIT - log2 B), clamped to [-126, 126];
    NaN when a maximum is not finite."""
    do2, v2, k2 = (float(x) for x in stats_row[:3])
    if not all(math.isfinite(x) for x in (do2, v2, k2)):
        return math.nan
    lb = 1.0 + math.log2(sm_scale) + 0.5 * sum(math.log2(max(x, FIXED_TINY))
                                               for x in (do2, v2, k2))
    return 2.0 ** min(max(math.floor(FIXED_LOG2_LIMIT - lb), -126), 126)


# ==================================================================================
# device side
# ==================================================================================


@triton.jit
def _row_max(x, valid):
    """max over rows of sum(x^2) per row; a row with a NaN or an infinity gives +inf (a
    maximum over NaN would drop it)."""
    s = tl.sum(x * x, axis=1)
    s = tl.where(s == s, s, float("inf"))
    return tl.max(tl.where(valid, s, 0.0), axis=0)


@triton.jit
def _bounds_kernel(
    DO, K, V, STATS, seqlen_q, seqlen_k, nheads, nheads_kv, heads, group,
    s_ob, s_om, s_oh, s_od, s_kb, s_kn, s_kh, s_kd, s_vb, s_vn, s_vh, s_vd,
    EXPAND: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_R: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    """grid (row blocks, B * H): program (r, b * H + h) takes dO's rows of query head h,
    and, when h < Hkv, K's and V's rows of key head h, and atomic-maxes them into the
    program heads that read them."""
    r0 = tl.program_id(0) * BLOCK_R
    b = tl.program_id(1) // nheads
    h = tl.program_id(1) % nheads
    rows = r0 + tl.arange(0, BLOCK_R)
    d = tl.arange(0, BLOCK_D)
    dmask = d < HEAD_DIM
    if r0 < seqlen_q:  # dO: program head h (expanded) or its key head
        qv = rows < seqlen_q
        x = tl.load(DO + b.to(tl.int64) * s_ob + rows[:, None].to(tl.int64) * s_om
                    + h * s_oh + d[None, :] * s_od, mask=qv[:, None] & dmask[None, :],
                    other=0.0).to(tl.float32)
        if EXPAND:
            ph = h
        else:
            ph = h // group
        tl.atomic_max(STATS + (b * heads + ph) * 4, _row_max(x, qv))
    if (h < nheads_kv) & (r0 < seqlen_k):  # K / V of key head h
        kv = rows < seqlen_k
        m2 = kv[:, None] & dmask[None, :]
        off = b.to(tl.int64) * s_kb + rows[:, None].to(tl.int64) * s_kn + h * s_kh
        kx = tl.load(K + off + d[None, :] * s_kd, mask=m2, other=0.0).to(tl.float32)
        off = b.to(tl.int64) * s_vb + rows[:, None].to(tl.int64) * s_vn + h * s_vh
        vx = tl.load(V + off + d[None, :] * s_vd, mask=m2, other=0.0).to(tl.float32)
        kk = kx * kx
        kk = tl.where(kk == kk, kk, float("inf"))  # a NaN counts as unbounded
        k2 = tl.max(tl.max(tl.where(m2, kk, 0.0), axis=1), axis=0)
        v2 = _row_max(vx, kv)
        if EXPAND:  # every query head of the group is a program head
            for g in range(0, group):
                tl.atomic_max(STATS + (b * heads + h * group + g) * 4 + 1, v2)
                tl.atomic_max(STATS + (b * heads + h * group + g) * 4 + 2, k2)
        else:
            tl.atomic_max(STATS + (b * heads + h) * 4 + 1, v2)
            tl.atomic_max(STATS + (b * heads + h) * 4 + 2, k2)


@triton.jit
def _dequantize_kernel(
    ACC, STATS, DQ, rows, seqlen_q, nheads, heads, group, s_b, s_m, s_h, s_d,
    EXPAND: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_R: tl.constexpr,
    BLOCK_D: tl.constexpr, UPCAST: tl.constexpr,
):
    """BLOCK_R rows (b, m, h) of the int32 sum per program: divided by their program
    head's 2^e, cast to dq's dtype."""
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    d = tl.arange(0, BLOCK_D)
    rv = r < rows
    h = r % nheads
    m = (r // nheads) % seqlen_q
    b = r // (nheads * seqlen_q)
    if EXPAND:
        ph = h
    else:
        ph = h // group
    mult = tl.load(STATS + (b * heads + ph) * 4 + 3, mask=rv, other=1.0)
    mask = rv[:, None] & (d < HEAD_DIM)[None, :]
    acc = tl.load(ACC + r[:, None].to(tl.int64) * HEAD_DIM + d[None, :], mask=mask, other=0)
    out = acc.to(tl.float32) / mult[:, None]
    dst = (DQ + b[:, None].to(tl.int64) * s_b + m[:, None].to(tl.int64) * s_m
           + h[:, None] * s_h + d[None, :] * s_d)
    tl.store(dst, cast_out(out, DQ.dtype.element_ty, UPCAST), mask=mask)
