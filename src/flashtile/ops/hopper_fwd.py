"""The Hopper (sm_90) forward: Gluon kernels with TMA, an mbarrier-guarded shared-memory
ring and asynchronous wgmma. The portable tile-level kernel (ops/flash.py) stays the path
for other GPUs, the interpreter, windows, softcap and dropout; the backward runs there
(it recomputes from q, k, v, out and lse, which this forward returns the same way) unless
FLASHTILE_HOPPER_BWD=1 opts in to the Gluon backward of ops/hopper_bwd.py. Device
helpers shared with that backward live in ops/_gluon_common.py.

Layers, top to bottom:
    hopper_supported              may this call take the Hopper path? (dispatch predicate)
    hopper_attention_forward      launcher: (out, lse), no autograd; flash.attention_forward
                                  calls it first
    _fwd_kernel                   stage A: one partition, TMA prefetch ring, async wgmma
    _fwd_ws_kernel                stage B: warp-specialised, a 1-warp TMA producer feeding
                                  the consumer warpgroups; QK^T of tile t+1 overlaps the
                                  softmax of tile t

Notation: B batch, H query heads, Hkv key/value heads (H = group * Hkv), M = seqlen_q,
N = seqlen_k, D head dim (64, 128 or 256 here). One program per (query tile, b * H + h);
grid (cdiv(M, BLOCK_M), B * H); causal grids run the longest (bottom) query tiles first.
Each consumer warp owns 16 query rows: BLOCK_M = 16 * num_warps, so 8 warps are two
warpgroups of 64 rows that issue their own wgmma.
Key tiles t = 0 .. n_tiles-1 (start t * BLOCK_N); tiles below n_full need no mask
(off-band); the rest (causal diagonal band, the ragged last tile) are masked (on-band).
TMA descriptors address q/k/v/out as the 4D tensors they are ((B, S, H, D), any
16-byte-aligned strides); rows past the sequence end are zero-filled on load and
clipped on store, per (batch, head), so no sequence length needs to be a tile multiple.
"""

from __future__ import annotations

import math
import os

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from .. import configs
from ._common import is_interpreting
from ._gluon_common import GL_DTYPES as _GL_DTYPES
from ._gluon_common import kv_tile_range as _tile_range
from ._gluon_common import mma_layout as _mma_layout
from ._gluon_common import scores_masked as _scores_masked
from ._gluon_common import tma_addressable as _tma_addressable
from ._gluon_common import tma_desc as _desc

__all__ = [
    "hopper_supported", "hopper_problem_ok", "hopper_attention_forward", "HOPPER_HEAD_DIMS",
]

HOPPER_HEAD_DIMS = (64, 128, 256)
_DTYPES = (torch.float16, torch.bfloat16)


# ==================================================================================
# dispatch
# ==================================================================================


def _hopper_disabled() -> bool:
    return os.environ.get("FLASHTILE_DISABLE_HOPPER", "0") not in ("", "0")


def hopper_supported(
    q, k, v, causal=False, window=(None, None), softcap=0.0, dropout_p=0.0, softmax_scale=None
):
    """True when the Gluon forward can run this call: an sm_90 device (not the
    interpreter, not disabled by FLASHTILE_DISABLE_HOPPER=1) and a problem it covers
    (``hopper_problem_ok``).

    ``window`` is the launchers' ``(left, right)``: None for an unbounded side, any int a
    bound. Causal is ``causal=True`` or ``right == 0`` with no left bound.
    """
    if _hopper_disabled() or is_interpreting():
        return False
    if not (q.is_cuda and k.is_cuda and v.is_cuda):
        return False
    if torch.cuda.get_device_capability(q.device) != (9, 0):
        return False
    return hopper_problem_ok(q, k, v, causal, window, softcap, dropout_p, softmax_scale)


def hopper_problem_ok(
    q, k, v, causal=False, window=(None, None), softcap=0.0, dropout_p=0.0, softmax_scale=None
):
    """The device-independent half of ``hopper_supported``: fp16/bf16, head dim in
    HOPPER_HEAD_DIMS, full or causal masking (no window, softcap or dropout), a positive
    scale, non-empty q and k, and TMA-addressable tensors (16-byte aligned base and
    strides, last stride 1)."""
    if q.dtype not in _DTYPES or not (q.dtype == k.dtype == v.dtype):
        return False
    if q.shape[-1] not in HOPPER_HEAD_DIMS or k.shape[-1] != q.shape[-1]:
        return False
    left, right = window
    if causal:
        right = 0
    if left is not None or right not in (None, 0):
        return False
    if softcap or dropout_p or (softmax_scale is not None and not softmax_scale > 0):
        return False
    if k.shape[1] == 0 or q.shape[1] == 0:
        return False
    return all(_tma_addressable(x) for x in (q, k, v))


# ==================================================================================
# launcher
# ==================================================================================


def hopper_attention_forward(q, k, v, softmax_scale, causal, out, lse, config=None):
    """Run the Gluon forward into ``out`` ((B, M, H, D), q's dtype, TMA-addressable) and
    ``lse`` ((B, H, M) fp32, contiguous). Call only when ``hopper_supported`` holds.
    Returns ``(out, lse)``; lse in natural log, -inf on rows that see no key."""
    batch, seqlen_q, nheads, head_dim = q.shape
    seqlen_k, nheads_kv = k.shape[1], k.shape[2]
    cfg = config or configs.hopper_fwd_config(head_dim, causal, seqlen_q)
    if not _tma_addressable(out):  # a caller's out= view TMA cannot store to
        tmp = torch.empty(q.shape, dtype=q.dtype, device=q.device)
        hopper_attention_forward(q, k, v, softmax_scale, causal, tmp, lse, cfg)
        return out.copy_(tmp), lse
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(head_dim)
    kernel = _fwd_ws_kernel if cfg.warp_specialize else _fwd_kernel
    grid = (triton.cdiv(seqlen_q, cfg.block_m), batch * nheads)
    extra = dict(LOAD_REGS=cfg.load_regs) if cfg.warp_specialize else {}
    with torch.cuda.device(q.device):
        kernel[grid](
            _desc(q, cfg.block_m), _desc(k, cfg.block_n), _desc(v, cfg.block_n),
            _desc(out, cfg.block_m), lse, seqlen_q, seqlen_k, nheads, nheads // nheads_kv,
            float(scale) * 1.4426950408889634, HEAD_DIM=head_dim, BLOCK_M=cfg.block_m,
            BLOCK_N=cfg.block_n, NUM_STAGES=cfg.num_stages, CAUSAL=bool(causal),
            num_warps=cfg.num_warps, **extra,
        )
    return out, lse


# ==================================================================================
# device helpers shared by both kernels
# ==================================================================================


@gluon.jit
def _issue_kv(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, t, b, hk, pred,
              BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr):
    """TMA-load key/value tile ``t`` into ring slot t % NUM_STAGES (skipped if not pred)."""
    s = t % NUM_STAGES
    mbarrier.expect(k_bars.index(s), k_desc.block_type.nbytes, pred=pred)
    tma.async_copy_global_to_shared(
        k_desc, [b, t * BLOCK_N, hk, 0], k_bars.index(s), k_smem.index(s), pred=pred
    )
    mbarrier.expect(v_bars.index(s), v_desc.block_type.nbytes, pred=pred)
    tma.async_copy_global_to_shared(
        v_desc, [b, t * BLOCK_N, hk, 0], v_bars.index(s), v_smem.index(s), pred=pred
    )


@gluon.jit
def _softmax_step(qk, m_i, l_i, qk_scale, MASKED: gl.constexpr):
    """One online-softmax step in log2 units with the scale folded into one FMA:
    p = exp2(qk * qk_scale - m). Returns (p, alpha, m_new, l_new). Masked tiles guard
    rows with no key yet (m = -inf) so they give p = alpha = 0, never NaN."""
    m_new = gl.maximum(m_i, gl.max(qk, 1) * qk_scale)
    if MASKED:
        m_use = gl.where(m_new == float("-inf"), 0.0, m_new)
    else:
        m_use = m_new
    p = gl.exp2(qk * qk_scale - m_use[:, None])
    alpha = gl.exp2(m_i - m_use)
    l_new = l_i * alpha + gl.sum(p, 1)
    return p, alpha, m_new, l_new


@gluon.jit
def _epilogue(acc, m_i, l_i, q_smem, o_desc, LSE, pid_bh, b, h, start_m, seqlen_q,
              BLOCK_M: gl.constexpr, HEAD_DIM: gl.constexpr):
    """out = acc / l through shared memory (the Q tile's buffer) and a TMA store, which
    clips rows past seqlen_q; lse = (m + log2 l) * ln 2, -inf on rows with no key."""
    o_layout: gl.constexpr = acc.type.layout
    empty = l_i == 0.0
    l_safe = gl.where(empty, 1.0, l_i)
    lse = gl.where(empty, float("-inf"), (m_i + gl.log2(l_safe)) * 0.6931471805599453)
    o = acc / gl.convert_layout(l_safe, gl.SliceLayout(1, o_layout))[:, None]
    gl.thread_barrier()  # every warpgroup is done reading Q before O overwrites it
    q_smem.reshape([BLOCK_M, HEAD_DIM]).store(o.to(q_smem.dtype))
    fence_async_shared()  # generic-proxy stores -> visible to the TMA engine
    gl.thread_barrier()
    tma.async_copy_shared_to_global(o_desc, [b, start_m, h, 0], q_smem)
    rows = start_m + gl.arange(0, BLOCK_M, layout=lse.type.layout)
    gl.store(LSE + pid_bh.to(gl.int64) * seqlen_q + rows, lse, mask=rows < seqlen_q)
    tma.store_wait(pendings=0)


# ==================================================================================
# stage A: one partition; the ring is refilled by the consumers themselves
# ==================================================================================


@gluon.jit
def _fwd_tile_a(t, acc, m_i, l_i, q2, k_smem, v_smem, k_bars, v_bars, k_desc, v_desc, b, hk,
                n_tiles, rows, seqlen_k, diag, qk_scale, HEAD_DIM: gl.constexpr,
                BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr,
                MASKED: gl.constexpr, CAUSAL: gl.constexpr):
    """Consume key tile t: S = Q K^T (wgmma, smem x smem), softmax in registers,
    O += P V (wgmma, P from registers), then refill the slot with tile t + NUM_STAGES."""
    s_layout: gl.constexpr = _mma_layout(gl.num_warps(), BLOCK_N)
    o_layout: gl.constexpr = acc.type.layout
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    s = t % NUM_STAGES
    phase = (t // NUM_STAGES) & 1
    k_buf = k_smem.index(s).reshape([BLOCK_N, HEAD_DIM])
    v_buf = v_smem.index(s).reshape([BLOCK_N, HEAD_DIM])
    # -- scores --
    mbarrier.wait(k_bars.index(s), phase)
    qk = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    qk = warpgroup_mma(q2, k_buf.permute((1, 0)), qk, use_acc=False, is_async=True)
    qk = warpgroup_mma_wait(num_outstanding=0, deps=(qk,))
    if MASKED:
        qk = _scores_masked(qk, t, rows, seqlen_k, diag, BLOCK_N, CAUSAL)
    # -- rescale, accumulate --
    p, alpha, m_i, l_i = _softmax_step(qk, m_i, l_i, qk_scale, MASKED)
    acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))[:, None]
    p = gl.convert_layout(p.to(q2.dtype), p_layout)
    mbarrier.wait(v_bars.index(s), phase)
    acc = warpgroup_mma(p, v_buf, acc, is_async=True)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    # -- refill: every warpgroup must be done with slot s before TMA overwrites it --
    gl.thread_barrier()
    nxt = t + NUM_STAGES
    _issue_kv(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, nxt, b, hk, nxt < n_tiles,
              BLOCK_N, NUM_STAGES)
    return acc, m_i, l_i


@gluon.jit(do_not_specialize=["seqlen_q", "seqlen_k"])
def _fwd_kernel(
    q_desc, k_desc, v_desc, o_desc,  # TMA descriptors: q, o (B, M, H, D); k, v (B, N, Hkv, D)
    LSE,  # (B, H, M) fp32
    seqlen_q, seqlen_k, nheads, group, qk_scale,  # qk_scale = softmax_scale * log2(e)
    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
    NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr,
):
    gl.static_assert(BLOCK_M == 16 * gl.num_warps(), "each warp owns 16 query rows")
    gl.static_assert(HEAD_DIM <= 256 and BLOCK_N <= 256, "wgmma n is at most 256")
    dtype: gl.constexpr = q_desc.dtype
    o_layout: gl.constexpr = _mma_layout(gl.num_warps(), HEAD_DIM)
    s_layout: gl.constexpr = _mma_layout(gl.num_warps(), BLOCK_N)
    pid_m = gl.program_id(0)
    if CAUSAL:
        pid_m = gl.num_programs(0) - 1 - pid_m  # longest rows first: better tail balance
    pid_bh = gl.program_id(1)
    b = pid_bh // nheads
    h = pid_bh % nheads
    hk = h // group
    start_m = pid_m * BLOCK_M
    diag = seqlen_k - seqlen_q
    n_full, n_tiles = _tile_range(start_m, seqlen_q, seqlen_k, BLOCK_M, BLOCK_N, CAUSAL)

    # -- shared memory: the Q tile (later O), a NUM_STAGES-deep K/V ring, barriers --
    q_smem = gl.allocate_shared_memory(dtype, q_desc.block_type.shape, q_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES] + k_desc.block_type.shape,
                                       k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES] + v_desc.block_type.shape,
                                       v_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_bars = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    v_bars = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(k_bars.index(i), count=1)
        mbarrier.init(v_bars.index(i), count=1)
    fence_async_shared()  # barrier inits visible to the async proxy (TMA)
    gl.thread_barrier()

    # -- prologue: Q, and the first NUM_STAGES key/value tiles in flight --
    mbarrier.expect(q_bar, q_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(q_desc, [b, start_m, h, 0], q_bar, q_smem)
    for i in gl.static_range(NUM_STAGES):
        _issue_kv(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, i, b, hk, i < n_tiles,
                  BLOCK_N, NUM_STAGES)

    rows = start_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_layout))
    m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, gl.SliceLayout(1, s_layout))
    l_i = gl.zeros([BLOCK_M], gl.float32, gl.SliceLayout(1, s_layout))
    acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, o_layout)
    mbarrier.wait(q_bar, 0)
    q2 = q_smem.reshape([BLOCK_M, HEAD_DIM])

    # -- off-band tiles (no mask), then the on-band / ragged tail (masked) --
    for t in range(0, n_full):
        acc, m_i, l_i = _fwd_tile_a(
            t, acc, m_i, l_i, q2, k_smem, v_smem, k_bars, v_bars, k_desc, v_desc, b, hk,
            n_tiles, rows, seqlen_k, diag, qk_scale, HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES,
            False, CAUSAL,
        )
    for t in range(n_full, n_tiles):
        acc, m_i, l_i = _fwd_tile_a(
            t, acc, m_i, l_i, q2, k_smem, v_smem, k_bars, v_bars, k_desc, v_desc, b, hk,
            n_tiles, rows, seqlen_k, diag, qk_scale, HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES,
            True, CAUSAL,
        )
    _epilogue(acc, m_i, l_i, q_smem, o_desc, LSE, pid_bh, b, h, start_m, seqlen_q, BLOCK_M,
              HEAD_DIM)



# ==================================================================================
# stage B: warp specialisation. A 1-warp producer partition streams K/V tiles through
# the ring (empty/ready mbarrier pairs); the consumer warpgroups (the default
# partition) issue QK^T of tile t+1 before the softmax of tile t, so the tensor cores
# work while the softmax runs.
# ==================================================================================


@gluon.jit
def _ws_producer(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, empty_bars, b, hk, n_tiles,
                 BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr):
    for t in range(0, n_tiles):
        # slot t % NUM_STAGES is free once the consumers released tile t - NUM_STAGES:
        # that is completion number t // NUM_STAGES of its empty barrier
        use = t // NUM_STAGES
        mbarrier.wait(empty_bars.index(t % NUM_STAGES), (use & 1) ^ 1, pred=use > 0)
        _issue_kv(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, t, b, hk, True, BLOCK_N,
                  NUM_STAGES)


@gluon.jit
def _ws_qk(q2, k_smem, k_bars, t, n_tiles, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
           BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr):
    """Issue S = Q K_t^T asynchronously (returns the in-flight accumulator). With no
    tiles at all (n_tiles == 0) the wait is skipped and the result is never read."""
    s_layout: gl.constexpr = _mma_layout(gl.num_warps(), BLOCK_N)
    s = t % NUM_STAGES
    mbarrier.wait(k_bars.index(s), (t // NUM_STAGES) & 1, pred=t < n_tiles)
    k_buf = k_smem.index(s).reshape([BLOCK_N, HEAD_DIM])
    qk = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    return warpgroup_mma(q2, k_buf.permute((1, 0)), qk, use_acc=False, is_async=True)


@gluon.jit
def _fwd_tile_b(t, qk, acc, m_i, l_i, q2, k_smem, v_smem, k_bars, v_bars, empty_bars,
                n_tiles, rows, seqlen_k, diag, qk_scale, HEAD_DIM: gl.constexpr,
                BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr,
                MASKED: gl.constexpr, CAUSAL: gl.constexpr):
    """Consume tile t whose scores ``qk`` are ready; returns the scores of tile t+1."""
    o_layout: gl.constexpr = acc.type.layout
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    # -- QK^T of the next tile runs on the tensor cores during this softmax; the last
    #    tile recomputes itself (one redundant GEMM per program, no branch) --
    nxt = gl.minimum(t + 1, n_tiles - 1)
    qk_next = _ws_qk(q2, k_smem, k_bars, nxt, n_tiles, HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES)
    if MASKED:
        qk = _scores_masked(qk, t, rows, seqlen_k, diag, BLOCK_N, CAUSAL)
    p, alpha, m_i, l_i = _softmax_step(qk, m_i, l_i, qk_scale, MASKED)
    acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))[:, None]
    p = gl.convert_layout(p.to(q2.dtype), p_layout)
    s = t % NUM_STAGES
    mbarrier.wait(v_bars.index(s), (t // NUM_STAGES) & 1)
    v_buf = v_smem.index(s).reshape([BLOCK_N, HEAD_DIM])
    acc = warpgroup_mma(p, v_buf, acc, is_async=True)
    qk_next, acc = warpgroup_mma_wait(num_outstanding=0, deps=(qk_next, acc))
    # -- every consumer warp is done with slot s: hand it back to the producer --
    gl.thread_barrier()
    mbarrier.arrive(empty_bars.index(s))
    return qk_next, acc, m_i, l_i


@gluon.jit
def _ws_consumer(q_smem, q_bar, k_smem, v_smem, k_bars, v_bars, empty_bars, start_m, n_full,
                 n_tiles, seqlen_k, diag, qk_scale, HEAD_DIM: gl.constexpr,
                 BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr,
                 CAUSAL: gl.constexpr):
    s_layout: gl.constexpr = _mma_layout(gl.num_warps(), BLOCK_N)
    o_layout: gl.constexpr = _mma_layout(gl.num_warps(), HEAD_DIM)
    rows = start_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_layout))
    m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, gl.SliceLayout(1, s_layout))
    l_i = gl.zeros([BLOCK_M], gl.float32, gl.SliceLayout(1, s_layout))
    acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, o_layout)
    mbarrier.wait(q_bar, 0)
    q2 = q_smem.reshape([BLOCK_M, HEAD_DIM])
    qk = _ws_qk(q2, k_smem, k_bars, 0, n_tiles, HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES)
    qk = warpgroup_mma_wait(num_outstanding=0, deps=(qk,))
    for t in range(0, n_full):
        qk, acc, m_i, l_i = _fwd_tile_b(
            t, qk, acc, m_i, l_i, q2, k_smem, v_smem, k_bars, v_bars, empty_bars, n_tiles,
            rows, seqlen_k, diag, qk_scale, HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES, False,
            CAUSAL,
        )
    for t in range(n_full, n_tiles):
        qk, acc, m_i, l_i = _fwd_tile_b(
            t, qk, acc, m_i, l_i, q2, k_smem, v_smem, k_bars, v_bars, empty_bars, n_tiles,
            rows, seqlen_k, diag, qk_scale, HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES, True,
            CAUSAL,
        )
    return acc, m_i, l_i


@gluon.jit(do_not_specialize=["seqlen_q", "seqlen_k"])
def _fwd_ws_kernel(
    q_desc, k_desc, v_desc, o_desc,  # TMA descriptors: q, o (B, M, H, D); k, v (B, N, Hkv, D)
    LSE,  # (B, H, M) fp32
    seqlen_q, seqlen_k, nheads, group, qk_scale,  # qk_scale = softmax_scale * log2(e)
    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
    NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr, LOAD_REGS: gl.constexpr,
):
    gl.static_assert(BLOCK_M == 16 * gl.num_warps(), "each consumer warp owns 16 query rows")
    gl.static_assert(HEAD_DIM <= 256 and BLOCK_N <= 256, "wgmma n is at most 256")
    dtype: gl.constexpr = q_desc.dtype
    pid_m = gl.program_id(0)
    if CAUSAL:
        pid_m = gl.num_programs(0) - 1 - pid_m  # longest rows first: better tail balance
    pid_bh = gl.program_id(1)
    b = pid_bh // nheads
    h = pid_bh % nheads
    hk = h // group
    start_m = pid_m * BLOCK_M
    diag = seqlen_k - seqlen_q
    n_full, n_tiles = _tile_range(start_m, seqlen_q, seqlen_k, BLOCK_M, BLOCK_N, CAUSAL)

    q_smem = gl.allocate_shared_memory(dtype, q_desc.block_type.shape, q_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES] + k_desc.block_type.shape,
                                       k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES] + v_desc.block_type.shape,
                                       v_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_bars = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    v_bars = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    empty_bars = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(k_bars.index(i), count=1)
        mbarrier.init(v_bars.index(i), count=1)
        mbarrier.init(empty_bars.index(i), count=1)
    fence_async_shared()  # barrier inits visible to the async proxy (TMA)
    gl.thread_barrier()
    mbarrier.expect(q_bar, q_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(q_desc, [b, start_m, h, 0], q_bar, q_smem)

    acc, m_i, l_i = gl.warp_specialize(
        [
            (_ws_consumer, (q_smem, q_bar, k_smem, v_smem, k_bars, v_bars, empty_bars, start_m,
                            n_full, n_tiles, seqlen_k, diag, qk_scale, HEAD_DIM, BLOCK_M,
                            BLOCK_N, NUM_STAGES, CAUSAL)),
            (_ws_producer, (k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, empty_bars, b, hk,
                            n_tiles, BLOCK_N, NUM_STAGES)),
        ],
        [1],
        [LOAD_REGS],
    )
    _epilogue(acc, m_i, l_i, q_smem, o_desc, LSE, pid_bh, b, h, start_m, seqlen_q, BLOCK_M,
              HEAD_DIM)


# ==================================================================================
# cross-compilation for sm_90 without a GPU (CI and scripts/compile_sm90.py)
# ==================================================================================


def compile_sm90(head_dim: int, causal: bool, dtype=torch.bfloat16, config=None):
    """Compile the Gluon forward for sm_90 on any machine (no GPU needed) with the
    argument types a real launch produces. Returns Triton's compiled kernel (``.asm``
    holds ttgir/ptx/cubin, ``.metadata.shared`` the shared memory in bytes)."""
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    cfg = config or configs.hopper_fwd_config(head_dim, causal, 4096)
    kernel = _fwd_ws_kernel if cfg.warp_specialize else _fwd_kernel
    gdt = _GL_DTYPES[dtype]
    tys = {torch.float16: "fp16", torch.bfloat16: "bf16"}

    def desc(rows):
        block = [1, rows, 1, head_dim]
        layout = gl.NVMMASharedLayout.get_default_for(block, gdt)
        return f"tensordesc<{tys[dtype]}[{','.join(map(str, block))}],{layout!r}>"

    constexprs = dict(HEAD_DIM=head_dim, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
                      NUM_STAGES=cfg.num_stages, CAUSAL=bool(causal))
    if cfg.warp_specialize:
        constexprs["LOAD_REGS"] = cfg.load_regs
    sig = dict(q_desc=desc(cfg.block_m), k_desc=desc(cfg.block_n), v_desc=desc(cfg.block_n),
               o_desc=desc(cfg.block_m), LSE="*fp32", seqlen_q="i32", seqlen_k="i32",
               nheads="i32", group="i32", qk_scale="fp32")
    sig.update({name: "constexpr" for name in constexprs})
    src = GluonASTSource(fn=kernel, signature=sig, constexprs=constexprs,
                         attrs={(4,): [["tt.divisibility", 16]]})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options=dict(num_warps=cfg.num_warps))
