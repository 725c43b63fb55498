"""Fixed-point dQ for the one-kernel Gluon backward (``HopperBwdConfig.reduce_fixed``):
deterministic adds at what the racing fp32 adds cost (same buffer size, same traffic;
`s26a` measured the fixed build 1-8% ahead of the racing one at hd 128 non-causal 4k-16k,
benchmarks/results.md, session 27), the deterministic default there
(configs.hopper_bwd_fixed_preferred).

In the one-kernel backward (ops/hopper_bwd.py, DQ_REDUCE) every 128-key program adds its
share of each query tile's dQ into one buffer by TMA reduce-adds, and the programs race.
fp32 adds in a different order give different last bits; integer adds do not. So each
share is scaled by a power of two, rounded to int32 and added into an int32 buffer:
whatever order the adds land in, the sum is the same, bit for bit.

The scale comes from a bound on |dQ| known before the launch. With
dS_ij = P_ij (dP_ij - D_i), dP_ij = dO_i . V_j and D_i = sum_j P_ij dP_ij:
  |dP_ij - D_i| <= 2 max_j |dP_ij| <= 2 |dO_i| max_j |V_j|   (Cauchy-Schwarz)
and since sum_j P_ij = 1,
  |dQ_ic| = scale |sum_j dS_ij K_jc| <= B_i = 2 * scale * |dO_i| * max_j |V_j| * max |K|.
A softcap multiplies dS by 1 - tanh^2 <= 1; causal masks and windows only drop terms.
``bounds`` reads dO, K and V once: |dO_i|^2 per query row and head, and per program head
max |V_j|^2 and max K_jc^2 (atomic maxima: order-free too). Each row i gets 2^e_i with
B_i 2^e_i <= 2^30 (``FIXED_LOG2_LIMIT``, half the int32 range), so no sum can overflow.

One scale per row, not per head: a head-wide bound would quantise a row whose |dO_i| is
10^4 below the head's largest on the scale of that largest row (worst-row relative error
~1 in a CPU simulation with dO row norms spread log-normally, sigma ln 10; 2.5e-5 with
per-row scales).

``mults`` writes 2^e_i once, for the Gluon kernel (each step's rows) and ``dequantize``
to read. e_i is integer arithmetic on the fp32 exponent fields (no log2 whose
approximation a torch twin would have to match): with E(x) the unbiased exponent field
of x (x < 2^(E(x) + 1), zeros and subnormals included with field 0),
  T_i = E(|dO_i|^2) + E(max |V|^2) + E(max K^2) + E(4 scale^2) + 4  >  log2 B_i^2,
  e_i = FIXED_LOG2_LIMIT - ceil(T_i / 2), clamped to [-126, 127];
a field of 255 (an infinity or a NaN in dO, K or V) gives 2^e_i = NaN, and NaN dQ.

Precision: B_i is loose by the spread of the softmax and the alignment of the vectors,
times up to 2^3.5 from the exponent rounding (B_i / |dQ_i| was 300 - 4300 on random and
adversarial data at 1k - 16k keys), so a unit of the int32 sum, 2^-30 of B_i, is 2^-14 -
2^-22 of |dQ_i|, and each share rounds by half a unit: below bf16's own rounding of dQ
(2^-9). Two cases loosen it: a row whose softmax sits on one key has |dQ_i| << B_i and is
quantised coarsely against its own size, but its error stays below ~2^-23 B_i, far under
what the bf16 O in delta = rowsum(dO o O) already puts there (~2^-10 B_i); and an outlier
channel of K raises max |K| for every column (simulated, 16k keys, a 30x channel: worst
row 2.4e-3 relative against bf16's 3.6e-3; a per-column scale, not built, gave 6.8e-4).
tests/test_fixed_dq.py simulates the scheme on the CPU against the DESIGN.md rule and a
per-row bound (random, wide-logit and late-spike scores, up to 4k keys, dO spread).

Buffers: ``rows`` (B, H, M) fp32 holds |dO_i|^2; ``heads`` (B * program heads, 2) fp32,
zeroed, max |V_j|^2 and max K_jc^2; ``mults`` (B, H, M) fp32, 2^e_i. Program heads are the
dK/dV grid's second axis: key heads, or query heads with ``expand``
(HopperBwdConfig.gqa_expand).

Before the Gluon kernel the backward needs delta = rowsum(dO o O) (and with lse2_pre the
(lse2, delta) boxes), these bounds, and the int32 sum zeroed. ``prologue`` does all of it
in one launch that reads O, dO, K and V once (FA3 zeroes its fp32 dQ accumulator in its
preprocess the same way), besides the zero fill of the per-head maxima: separately the
preprocess, ``bounds`` and the int32 fill are three launches that read dO twice
(HopperBwdConfig.fixed_prologue; `s29c` measured them at 127 us per backward at 16k
tokens x 2048 hidden, 8% of the hd 128 causal 4k backward; the prologue 113 us, `s29d`).

Public functions:
    prologue(out, dout, lse, k, v, group, expand, lse2) -> Prologue   one launch
    bounds(dout, k, v, group, expand) -> (rows, heads)          one launch
    scale_exponent(sm_scale) -> int                             E(4 scale^2), host side
    mults(rows, heads, es, group, expand) -> (B, H, M)          2^e_i, one launch
    dequantize(acc, mults, dq)                                  dq = acc / 2^e_i, cast
Reference twins: flashtile.reference.fixed_dq_bounds, fixed_dq_mults.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import triton
import triton.language as tl

from ._common import cast_out, delta_rows, is_interpreting, lse2_box, next_pow2
from ._gluon_common import launch

__all__ = ["prologue", "Prologue", "bounds", "scale_exponent", "mults", "dequantize",
           "FIXED_LOG2_LIMIT"]

# B_i * 2^e_i <= 2^FIXED_LOG2_LIMIT: half the int32 range, so that the shares' roundings
# (half a unit each) and the kernel's fp32 products cannot reach 2^31
FIXED_LOG2_LIMIT = 30
_ROWS = 64  # rows per program of the bound and dequantisation kernels
_ELEMS = 1024  # rows per program of the multipliers' kernel


# ==================================================================================
# host side
# ==================================================================================


class Prologue(NamedTuple):
    """What ``prologue`` wrote: delta (B, H, M) fp32; st the (lse2, delta) boxes
    (B * H * cdiv(M, 64), 128) fp32 or None; rows / heads as ``bounds``'; acc the int32
    dQ sum (B, M, H, D), zeroed."""
    delta: torch.Tensor
    st: torch.Tensor | None
    rows: torch.Tensor
    heads: torch.Tensor
    acc: torch.Tensor


def prologue(out: torch.Tensor, dout: torch.Tensor, lse: torch.Tensor, k: torch.Tensor,
             v: torch.Tensor, group: int, expand: bool, lse2: bool,
             acc: torch.Tensor | None = None, num_warps: int = 4) -> Prologue:
    """One launch: delta = rowsum(dO o O) as ops/hopper_bwd._delta writes it (with
    ``lse2`` also its (lse2, delta) boxes of 64 rows: HopperBwdConfig.lse2_pre), ``bounds``'
    rows and heads, and the int32 dQ sum (``acc``, contiguous (B, M, H, D) int32, or a new
    one) zeroed. out / dout (B, M, H, D) with a unit last stride, lse (B, H, M)
    contiguous, k / v (B, N, Hkv, D) any strides. ``num_warps`` other than 4 may change
    delta's last bits against the preprocess (another reduction layout)."""
    batch, seqlen_q, nheads, head_dim = dout.shape
    seqlen_k, nheads_kv = k.shape[1], k.shape[2]
    if out.stride(-1) != 1 or dout.stride(-1) != 1:
        raise ValueError("prologue: out and dout need a unit last stride")
    pheads = nheads if expand else nheads_kv
    dev = dout.device
    f32 = dict(dtype=torch.float32, device=dev)
    delta = torch.empty((batch, nheads, seqlen_q), **f32)
    rows = torch.empty((batch, nheads, seqlen_q), **f32)
    heads = torch.zeros((batch * pheads, 2), **f32)
    if acc is None:
        acc = torch.empty((batch, seqlen_q, nheads, head_dim), dtype=torch.int32, device=dev)
    elif acc.shape != dout.shape or acc.dtype != torch.int32 or not acc.is_contiguous():
        raise ValueError(f"prologue: acc must be contiguous int32 {tuple(dout.shape)}")
    n_qblocks = triton.cdiv(seqlen_q, _ROWS)
    st = torch.empty((batch * nheads * n_qblocks, 2 * _ROWS), **f32) if lse2 else None
    launch(
        _prologue_kernel, (triton.cdiv(max(seqlen_q, seqlen_k), _ROWS), batch * nheads), dev,
        out, dout, delta, lse, st if lse2 else delta, rows, k, v, heads, acc, seqlen_q,
        seqlen_k, nheads, nheads_kv, pheads, group, n_qblocks,
        out.stride(0), out.stride(1), out.stride(2), dout.stride(0), dout.stride(1),
        dout.stride(2), *k.stride(), *v.stride(),
        LSE2=bool(lse2), EXPAND=bool(expand), HEAD_DIM=head_dim, BLOCK_R=_ROWS,
        BLOCK_D=next_pow2(head_dim), num_warps=num_warps,
    )
    return Prologue(delta, st, rows, heads, acc)


def bounds(dout: torch.Tensor, k: torch.Tensor, v: torch.Tensor, group: int,
           expand: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows, heads) of the module docstring. dout (B, M, H, D); k, v (B, N, Hkv, D); any
    strides; ``group`` = H // Hkv."""
    batch, seqlen_q, nheads, head_dim = dout.shape
    seqlen_k, nheads_kv = k.shape[1], k.shape[2]
    pheads = nheads if expand else nheads_kv
    rows = torch.empty((batch, nheads, seqlen_q), dtype=torch.float32, device=dout.device)
    heads = torch.zeros((batch * pheads, 2), dtype=torch.float32, device=dout.device)
    grid = (triton.cdiv(max(seqlen_q, seqlen_k), _ROWS), batch * nheads)
    launch(
        _bounds_kernel, grid, dout.device, dout, k, v, rows, heads, seqlen_q, seqlen_k,
        nheads, nheads_kv, pheads, group,
        *dout.stride(), *k.stride(), *v.stride(),
        EXPAND=bool(expand), HEAD_DIM=head_dim, BLOCK_R=_ROWS, BLOCK_D=next_pow2(head_dim),
    )
    return rows, heads


def scale_exponent(sm_scale: float) -> int:
    """E(4 scale^2): the unbiased exponent of 4 * sm_scale^2 (so 4 scale^2 < 2^(E + 1))."""
    return math.frexp(4.0 * float(sm_scale) ** 2)[1] - 1


def mults(rows: torch.Tensor, heads: torch.Tensor, es: int, group: int,
          expand: bool) -> torch.Tensor:
    """2^e_i per (batch, query head, row) from ``bounds``' output (module docstring)."""
    batch, nheads, seqlen_q = rows.shape
    out = torch.empty_like(rows)
    n = rows.numel()
    launch(
        _mults_kernel, (triton.cdiv(n, _ELEMS),), rows.device, rows, heads, out, n, seqlen_q,
        nheads, nheads if expand else nheads // group, group,
        es, EXPAND=bool(expand), LIMIT=FIXED_LOG2_LIMIT, BLOCK=_ELEMS,
    )
    return out


def dequantize(acc: torch.Tensor, mult: torch.Tensor, dq: torch.Tensor) -> None:
    """dq = acc / 2^e_i (the sum rounded to fp32, the division exact), cast to dq's dtype.
    acc (B, M, H, D) int32, contiguous; ``mult`` (B, H, M) from ``mults``; dq like acc,
    any strides."""
    batch, seqlen_q, nheads, head_dim = acc.shape
    n = batch * seqlen_q * nheads
    launch(
        _dequantize_kernel, (triton.cdiv(n, _ROWS),), acc.device, acc, mult, dq, n,
        seqlen_q, nheads, *dq.stride(),
        HEAD_DIM=head_dim, BLOCK_R=_ROWS, BLOCK_D=next_pow2(head_dim),
        UPCAST=is_interpreting(),
    )


# ==================================================================================
# device side
# ==================================================================================


@triton.jit
def _nan_to_inf(x):
    """x with NaN as +inf (a maximum would drop a NaN)."""
    return tl.where(x == x, x, float("inf"))


@triton.jit
def _bounds_kernel(
    DO, K, V, ROWS, HEADS, seqlen_q, seqlen_k, nheads, nheads_kv, pheads, group,
    s_ob, s_om, s_oh, s_od, s_kb, s_kn, s_kh, s_kd, s_vb, s_vn, s_vh, s_vd,
    EXPAND: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_R: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    """grid (row blocks, B * H): program (r, b * H + h) writes |dO_i|^2 of query head h's
    rows, and, when h < Hkv, atomic-maxes K's and V's rows of key head h into the program
    heads that read them."""
    r0 = tl.program_id(0) * BLOCK_R
    b = tl.program_id(1) // nheads
    h = tl.program_id(1) % nheads
    r = r0 + tl.arange(0, BLOCK_R)
    d = tl.arange(0, BLOCK_D)
    dmask = d < HEAD_DIM
    if r0 < seqlen_q:
        qv = r < seqlen_q
        x = tl.load(DO + b.to(tl.int64) * s_ob + r[:, None].to(tl.int64) * s_om
                    + h * s_oh + d[None, :] * s_od, mask=qv[:, None] & dmask[None, :],
                    other=0.0).to(tl.float32)
        tl.store(ROWS + (b * nheads + h).to(tl.int64) * seqlen_q + r, tl.sum(x * x, axis=1),
                 mask=qv)
    if (h < nheads_kv) & (r0 < seqlen_k):  # K / V of key head h
        _head_maxima(K, V, HEADS, b, h, r, d, dmask, seqlen_k, pheads, group, s_kb, s_kn,
                     s_kh, s_kd, s_vb, s_vn, s_vh, s_vd, EXPAND)


@triton.jit
def _head_maxima(K, V, HEADS, b, h, r, d, dmask, seqlen_k, pheads, group, s_kb, s_kn, s_kh,
                 s_kd, s_vb, s_vn, s_vh, s_vd, EXPAND: tl.constexpr):
    """Rows ``r`` of key head h: max |V_j|^2 and max K_jc^2 atomic-maxed into the program
    heads that read them."""
    kv = r < seqlen_k
    m2 = kv[:, None] & dmask[None, :]
    off = b.to(tl.int64) * s_kb + r[:, None].to(tl.int64) * s_kn + h * s_kh
    kx = tl.load(K + off + d[None, :] * s_kd, mask=m2, other=0.0).to(tl.float32)
    off = b.to(tl.int64) * s_vb + r[:, None].to(tl.int64) * s_vn + h * s_vh
    vx = tl.load(V + off + d[None, :] * s_vd, mask=m2, other=0.0).to(tl.float32)
    k2 = tl.max(tl.max(tl.where(m2, _nan_to_inf(kx * kx), 0.0), axis=1), axis=0)
    v2 = tl.max(tl.where(kv, _nan_to_inf(tl.sum(vx * vx, axis=1)), 0.0), axis=0)
    if EXPAND:  # every query head of the group is a program head
        for g in range(0, group):
            tl.atomic_max(HEADS + (b * pheads + h * group + g) * 2, v2)
            tl.atomic_max(HEADS + (b * pheads + h * group + g) * 2 + 1, k2)
    else:
        tl.atomic_max(HEADS + (b * pheads + h) * 2, v2)
        tl.atomic_max(HEADS + (b * pheads + h) * 2 + 1, k2)


@triton.jit(do_not_specialize=["seqlen_q", "seqlen_k", "n_qblocks"])
def _prologue_kernel(
    O, DO, DELTA, LSE, ST, ROWS, K, V, HEADS, ACC, seqlen_q, seqlen_k, nheads, nheads_kv,
    pheads, group, n_qblocks, s_ob, s_om, s_oh, s_dob, s_dom, s_doh, s_kb, s_kn, s_kh, s_kd,
    s_vb, s_vn, s_vh, s_vd, LSE2: tl.constexpr, EXPAND: tl.constexpr,
    HEAD_DIM: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr,
):
    """grid (row blocks of max(M, N), B * H): program (r, b * H + h), for query head h's
    rows: delta and |dO_i|^2 (and with LSE2 the rows' (lse2, delta) box), through the
    preprocess kernels' helpers (_common.delta_rows, lse2_box), the int32 sum's rows zeroed; for
    key head h < Hkv's rows the K / V maxima (``_bounds_kernel``'s)."""
    r0 = tl.program_id(0) * BLOCK_R
    bh = tl.program_id(1)
    b = bh // nheads
    h = bh % nheads
    r = r0 + tl.arange(0, BLOCK_R)
    d = tl.arange(0, BLOCK_D)
    dmask = d < HEAD_DIM
    if r0 < seqlen_q:  # the preprocess's delta (and box), from the same helpers
        _, _, delta, do = delta_rows(O, DO, DELTA, s_ob, s_om, s_oh, s_dob, s_dom, s_doh,
                                     seqlen_q, nheads, HEAD_DIM, BLOCK_D, BLOCK_R)
        qv = r < seqlen_q
        tl.store(ROWS + bh.to(tl.int64) * seqlen_q + r, tl.sum(do * do, axis=1), mask=qv)
        if LSE2:
            lse2_box(LSE, ST, bh, tl.program_id(0), n_qblocks, r, seqlen_q, delta, BLOCK_R)
        # the int32 sum (B, M, H, D), contiguous: this head's rows
        acc = (ACC + ((b.to(tl.int64) * seqlen_q + r[:, None].to(tl.int64)) * nheads + h)
               * HEAD_DIM + d[None, :])
        tl.store(acc, tl.zeros([BLOCK_R, BLOCK_D], tl.int32),
                 mask=qv[:, None] & dmask[None, :])
    if (h < nheads_kv) & (r0 < seqlen_k):  # K / V of key head h
        _head_maxima(K, V, HEADS, b, h, r, d, dmask, seqlen_k, pheads, group, s_kb, s_kn,
                     s_kh, s_kd, s_vb, s_vn, s_vh, s_vd, EXPAND)


@triton.jit
def _field(x):
    """The biased exponent field of non-negative fp32 x (0: zero or subnormal; 255:
    infinity or NaN)."""
    return (x.to(tl.int32, bitcast=True) >> 23) & 0xFF


@triton.jit
def _mults_kernel(ROWS, HEADS, OUT, n, seqlen_q, nheads, pheads, group, es,
                  EXPAND: tl.constexpr, LIMIT: tl.constexpr, BLOCK: tl.constexpr):
    """BLOCK rows' 2^e_i (the module docstring's integer formula; its torch twin is
    reference.fixed_dq_mults)."""
    r = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    rv = r < n
    bh = r // seqlen_q
    h = bh % nheads
    b = bh // nheads
    if EXPAND:
        ph = h
    else:
        ph = h // group
    fd = _field(tl.load(ROWS + r, mask=rv, other=0.0))
    fv = _field(tl.load(HEADS + (b * pheads + ph) * 2, mask=rv, other=0.0))
    fk = _field(tl.load(HEADS + (b * pheads + ph) * 2 + 1, mask=rv, other=0.0))
    t = (fd - 127) + (fv - 127) + (fk - 127) + es + 4
    e = tl.minimum(tl.maximum(LIMIT - ((t + 1) >> 1), -126), 127)
    mult = ((e + 127) << 23).to(tl.float32, bitcast=True)
    mult = tl.where((fd == 255) | (fv == 255) | (fk == 255), float("nan"), mult)
    tl.store(OUT + r, mult, mask=rv)


@triton.jit
def _dequantize_kernel(
    ACC, MULT, DQ, n, seqlen_q, nheads, s_b, s_m, s_h, s_d, HEAD_DIM: tl.constexpr,
    BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr, UPCAST: tl.constexpr,
):
    """BLOCK_R rows (b, m, h) of the int32 sum per program: divided by their 2^e_i, cast."""
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    d = tl.arange(0, BLOCK_D)
    rv = r < n
    h = r % nheads
    m = (r // nheads) % seqlen_q
    b = r // (nheads * seqlen_q)
    mult = tl.load(MULT + (b * nheads + h).to(tl.int64) * seqlen_q + m, mask=rv, other=1.0)
    mask = rv[:, None] & (d < HEAD_DIM)[None, :]
    acc = tl.load(ACC + r[:, None].to(tl.int64) * HEAD_DIM + d[None, :], mask=mask, other=0)
    out = acc.to(tl.float32) / mult[:, None]
    dst = (DQ + b[:, None].to(tl.int64) * s_b + m[:, None].to(tl.int64) * s_m
           + h[:, None] * s_h + d[None, :] * s_d)
    tl.store(dst, cast_out(out, DQ.dtype.element_ty, UPCAST), mask=mask)
