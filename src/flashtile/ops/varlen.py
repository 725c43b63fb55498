"""Variable-length (packed) attention: forward and backward, no work on padding.

Layers, top to bottom (never merged):
    flash_attn_varlen_func         public function, argument checks, docstring
    FlashAttnVarlenFunction        torch.autograd.Function over the two torch.library ops
    flashtile::varlen_fwd / varlen_bwd   custom ops (torch.compile sees these)
    varlen_forward / varlen_backward     launchers: (out, lse), no autograd
    _varlen_fwd_kernel, _varlen_bwd_*_kernel   @triton.jit kernels

The tile loops are the dense kernel's own (``flash._fwd_tiles``, ``_bwd_dq_tiles``,
``_bwd_dkdv_tiles``): a varlen program only moves its base pointers to the start of
its sequence and reads that sequence's lengths from ``cu_seqlens``. Row indices inside
the loops are relative to the sequence, so the masks (causal, window, bottom-right
alignment) are per sequence exactly as in the dense kernel.

Notation for all kernels in this file:
    B batch (number of sequences), H query heads, Hkv key/value heads (H = group * Hkv),
    TQ / TK total packed query / key tokens, M / N one sequence's query / key length,
    D head dim (BLOCK_D = D rounded up to a power of two >= 16).
    Forward and dQ grids: (cdiv(max_seqlen_q, BLOCK_M), H, B): one program per query
    tile of one sequence; programs past their sequence's end return at once (no loads,
    no stores), so padding costs a launch slot, never memory traffic or FLOPs.
    dK/dV grid: (cdiv(max_seqlen_k, BLOCK_N), Hkv, B), looping over the group's query
    heads in order (deterministic GQA sums, no atomics).
    lse and the backward's delta are (H, TQ) float32: packed like q, no padding.
On sm_90 the forward runs the Gluon kernels instead from 8k-long sequences, at hd 128
from 4k (hopper_fwd.hopper_varlen_forward, where hopper_varlen_supported and
configs.hopper_varlen_preferred; grid (query tiles of the longest sequence, B * H)):
measured 1.07-1.39x this kernel at 8k-long sequences and 0.73-0.98x at 2k (ac7393a), at
hd 128 and 4k 1.05-1.18x (s25d). FLASHTILE_HOPPER_VARLEN=1 / =0 forces it on / off. The
backward is this file's, or on sm_90 from 8k-long sequences, causal and at hd 128
non-causal from 2k (configs.hopper_varlen_bwd_preferred; FLASHTILE_HOPPER_VARLEN_BWD=1 /
=0 forces it on / off) the Gluon two-kernel backward over per-sequence descriptors
(hopper_bwd.hopper_varlen_backward), sliding windows included.
"""

from __future__ import annotations

import math
import os

import torch
import triton
import triton.language as tl

from .. import configs
from . import hopper_bwd, hopper_fwd
from ._checks import check_device, check_qkv, check_scalars, check_window
from ._common import (
    cast_out,
    device_ctx,
    is_interpreting,
    kv_tile_ranges,
    next_pow2,
    q_tile_ranges,
    softcap_flag,
    softmax_finish,
    stage_bounds,
)
from .flash import (
    _attn_bwd_preprocess_kernel,
    _bwd_dkdv_tiles,
    _bwd_dq_tiles,
    _fwd_tiles,
    _load_row_stats,
)

__all__ = [
    "flash_attn_varlen_func", "varlen_forward", "varlen_backward", "FlashAttnVarlenFunction",
    "check_cu_seqlens_values",
]

# ==================================================================================
# public API
# ==================================================================================


def flash_attn_varlen_func(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int,
    softmax_scale: float | None = None, causal: bool = False,
    window_size: tuple[int, int] = (-1, -1), softcap: float = 0.0, return_lse: bool = False,
):
    """Exact attention over a batch of packed sequences of different lengths.

    Sequence ``b`` owns query rows ``cu_seqlens_q[b]:cu_seqlens_q[b+1]`` and key rows
    ``cu_seqlens_k[b]:cu_seqlens_k[b+1]``; masks are per sequence, bottom-right aligned
    (``offset = seqlen_k_b - seqlen_q_b``). Zero-length sequences are allowed.

    Args:
        q: (total_q, nheads, headdim), float16 / bfloat16 / float32.
        k: (total_k, nheads_kv, headdim), same dtype and device; nheads % nheads_kv == 0.
        v: (total_k, nheads_kv, headdim), like k. Last dimension contiguous.
        cu_seqlens_q: (batch + 1,) int32 on q's device, non-decreasing, starting at 0,
            ending at most at total_q.
        cu_seqlens_k: (batch + 1,) int32, likewise for k/v.
        max_seqlen_q: int, at least the longest query sequence (sizes the grid).
        max_seqlen_k: int, at least the longest key sequence.
        softmax_scale, causal, window_size, softcap: as ``flash_attn_func``.
        return_lse: also return lse, (nheads, total_q) float32, natural log.

    Returns:
        out (total_q, nheads, headdim) in q's dtype, or (out, lse). Rows past
        ``cu_seqlens_q[-1]`` are not written.

    The lengths live on the device and are not read on the host (no synchronisation);
    ``FLASHTILE_DEBUG_CHECKS=1`` checks their values before each launch.
    """
    check_qkv(q, k, v, ndim=3, layout="(total_tokens, nheads, headdim)")
    _check_cu_seqlens(cu_seqlens_q, cu_seqlens_k, q)
    _check_max_seqlen("max_seqlen_q", max_seqlen_q)
    _check_max_seqlen("max_seqlen_k", max_seqlen_k)
    left, right = check_window(window_size)
    check_scalars(0.0, softcap, softmax_scale)
    if causal:
        right = 0
    if _debug_checks():
        check_cu_seqlens_values(cu_seqlens_q, q.shape[0], max_seqlen_q, "cu_seqlens_q")
        check_cu_seqlens_values(cu_seqlens_k, k.shape[0], max_seqlen_k, "cu_seqlens_k")
    scale = float(softmax_scale) if softmax_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    out, lse = FlashAttnVarlenFunction.apply(
        q, k, v, cu_seqlens_q, cu_seqlens_k, int(max_seqlen_q), int(max_seqlen_k), scale,
        left, right, float(softcap),
    )
    return (out, lse) if return_lse else out


def _check_cu_seqlens(cu_q, cu_k, q) -> None:
    for name, cu in (("cu_seqlens_q", cu_q), ("cu_seqlens_k", cu_k)):
        if not isinstance(cu, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(cu).__name__}")
        if cu.dtype != torch.int32:
            raise TypeError(f"{name} must be int32, got {cu.dtype}")
        if cu.dim() != 1 or cu.shape[0] < 1:
            raise ValueError(f"{name} must be 1-D (batch + 1,), got shape {tuple(cu.shape)}")
    if cu_q.shape != cu_k.shape:
        raise ValueError(
            f"cu_seqlens_q and cu_seqlens_k must both be (batch + 1,), got "
            f"{tuple(cu_q.shape)} and {tuple(cu_k.shape)}"
        )
    check_device([("q", q), ("cu_seqlens_q", cu_q), ("cu_seqlens_k", cu_k)])


def _check_max_seqlen(name: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be a Python int, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")


def _debug_checks() -> bool:
    """Opt-in value checks of device tensors (they synchronise): FLASHTILE_DEBUG_CHECKS=1."""
    return os.environ.get("FLASHTILE_DEBUG_CHECKS", "0") == "1"


def check_cu_seqlens_values(cu: torch.Tensor, total: int, max_seqlen: int, name: str) -> None:
    """Host-side check of a cu_seqlens tensor's values (synchronises; debug mode only):
    starts at 0, non-decreasing, ends within ``total``, no length above ``max_seqlen``."""
    c = cu.detach().to("cpu", torch.int64)
    lens = c[1:] - c[:-1]
    if int(c[0]) != 0:
        raise ValueError(f"{name}[0] must be 0, got {int(c[0])}")
    if (lens < 0).any():
        raise ValueError(f"{name} must be non-decreasing, got {c.tolist()}")
    if int(c[-1]) > total:
        raise ValueError(f"{name}[-1] = {int(c[-1])} exceeds the packed length {total}")
    if lens.numel() and int(lens.max()) > max_seqlen:
        raise ValueError(
            f"a sequence of length {int(lens.max())} in {name} exceeds max_seqlen {max_seqlen}"
        )


class FlashAttnVarlenFunction(torch.autograd.Function):
    """Autograd over the varlen custom ops; saves nothing when no input needs a grad."""

    @staticmethod
    def forward(ctx, q, k, v, cu_q, cu_k, max_q, max_k, scale, left, right, softcap):
        out, lse = torch.ops.flashtile.varlen_fwd(
            q, k, v, cu_q, cu_k, max_q, max_k, scale, left, right, softcap
        )
        if any(ctx.needs_input_grad[:3]):
            ctx.save_for_backward(q, k, v, out, lse, cu_q, cu_k)
            ctx.args = (max_q, max_k, scale, left, right, softcap)
        ctx.mark_non_differentiable(lse)
        ctx.set_materialize_grads(False)  # as FlashAttnFunction: no zeros for dlse
        return out, lse

    @staticmethod
    def backward(ctx, dout, dlse):
        if torch.is_grad_enabled():
            raise RuntimeError(
                "flashtile: double backward through flash_attn_varlen_func is not supported"
            )
        if dout is None:  # out did not reach the loss
            return (None,) * 11
        q, k, v, out, lse, cu_q, cu_k = ctx.saved_tensors
        dq, dk, dv = torch.ops.flashtile.varlen_bwd(dout, q, k, v, out, lse, cu_q, cu_k, *ctx.args)
        return dq, dk, dv, None, None, None, None, None, None, None, None


@torch.library.custom_op("flashtile::varlen_fwd", mutates_args=())
def _varlen_fwd_op(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int, softmax_scale: float,
    window_left: int | None, window_right: int | None, softcap: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    return varlen_forward(
        q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
        softmax_scale=softmax_scale, window_size=(window_left, window_right), softcap=softcap,
    )


@_varlen_fwd_op.register_fake
def _(q, k, v, cu_q, cu_k, max_q, max_k, softmax_scale, window_left, window_right, softcap):
    lse = q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)
    return torch.empty_like(q, memory_format=torch.contiguous_format), lse


@torch.library.custom_op("flashtile::varlen_bwd", mutates_args=())
def _varlen_bwd_op(
    dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
    lse: torch.Tensor, cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor,
    max_seqlen_q: int, max_seqlen_k: int, softmax_scale: float, window_left: int | None,
    window_right: int | None, softcap: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return varlen_backward(
        dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
        softmax_scale=softmax_scale, window_size=(window_left, window_right), softcap=softcap,
    )


@_varlen_bwd_op.register_fake
def _(dout, q, k, v, out, lse, cu_q, cu_k, max_q, max_k, scale, window_left, window_right,
      softcap):
    return (
        torch.empty_like(q, memory_format=torch.contiguous_format),
        torch.empty_like(k, memory_format=torch.contiguous_format),
        torch.empty_like(v, memory_format=torch.contiguous_format),
    )


# ==================================================================================
# launch configuration
# ==================================================================================


def _params(q, k, softmax_scale, window_size, softcap):
    """Constexprs and runtime scalars shared by the varlen kernels."""
    head_dim = q.shape[-1]
    left, right = window_size
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(head_dim)
    meta = dict(
        HEAD_DIM=head_dim, BLOCK_D=max(16, next_pow2(head_dim)), HAS_LEFT=left is not None,
        HAS_RIGHT=right is not None, SOFTCAP=softcap_flag(softcap, q.dtype),
        UPCAST=is_interpreting() and q.dtype != torch.float32,
        DOT_PREC="ieee" if q.dtype == torch.float32 else "tf32",
    )
    args = dict(
        nheads=q.shape[1], group=q.shape[1] // k.shape[1], sm_scale=float(scale),
        softcap=float(softcap) if softcap > 0 else 1.0, window_left=int(left or 0),
        window_right=int(right or 0),
    )
    return meta, args


# lengths, window sizes and the packed totals are runtime values: no recompiles when they
# change. Strides stay specialised (16-divisibility lets Triton pipeline K/V loads).
_NO_SPECIALIZE = ["total_q", "window_left", "window_right"]


# ==================================================================================
# forward
# ==================================================================================


def varlen_forward(
    q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *, softmax_scale=None,
    causal=False, window_size=(None, None), softcap=0.0, out=None, lse=None, config=None,
):
    """Launch the varlen forward; no autograd. Returns ``(out, lse)``.

    Shapes as ``flash_attn_varlen_func``; ``window_size`` entries are ints or None.
    ``out`` ((TQ, H, D), q's dtype) and ``lse`` ((H, TQ) float32, contiguous) may be given.
    """
    if causal:
        window_size = (window_size[0], 0)
    meta, args = _params(q, k, softmax_scale, window_size, softcap)
    total_q, nheads, _ = q.shape
    batch = cu_seqlens_q.shape[0] - 1
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device) if out is None else out
    if lse is None:
        lse = torch.empty((nheads, total_q), dtype=torch.float32, device=q.device)
    if batch == 0 or max_seqlen_q == 0 or total_q == 0 or nheads == 0:
        return out, lse
    if config is None and hopper_fwd.hopper_varlen_supported(
            q, k, v, out, False, window_size, softcap, softmax_scale):
        # sm_90: the Gluon forward over per-sequence TMA descriptors, where its schedule
        # for max_seqlen_q is not the portable kernel (None: fall through)
        res = hopper_fwd.hopper_varlen_forward(
            q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, softmax_scale,
            window_size[1] == 0, out, lse, left=window_size[0], softcap=softcap)
        if res is not None:
            return res
    cfg = config or configs.fwd_config(
        meta["BLOCK_D"], window_size[1] is not None, q.dtype, q.device, max_seqlen_q
    )
    grid = (triton.cdiv(max_seqlen_q, cfg.block_m), nheads, batch)
    with device_ctx(q):
        _varlen_fwd_kernel[grid](
            q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, q.stride(0), q.stride(1),
            k.stride(0), k.stride(1), v.stride(0), v.stride(1), out.stride(0), out.stride(1),
            total_q, **args, **meta, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
            num_warps=cfg.num_warps, num_stages=cfg.num_stages,
        )
    return out, lse


@triton.jit
def _seq_bounds(CU, b):
    """(start, length) of sequence ``b`` from a cumulative-lengths array."""
    start = tl.load(CU + b)
    return start, tl.load(CU + b + 1) - start


@triton.jit(do_not_specialize=_NO_SPECIALIZE)
def _varlen_fwd_kernel(
    Q, K, V, O, LSE,  # Q, O: (TQ, H, D); K, V: (TK, Hkv, D); LSE: (H, TQ) fp32
    CU_Q, CU_K,  # (B + 1,) int32
    stride_qm, stride_qh, stride_kn, stride_kh, stride_vn, stride_vh, stride_om, stride_oh,
    total_q, nheads, group, sm_scale, softcap, window_left, window_right,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, SOFTCAP: tl.constexpr,
    UPCAST: tl.constexpr, DOT_PREC: tl.constexpr,
):
    pid_m = tl.program_id(0)
    h = tl.program_id(1)
    b = tl.program_id(2)
    q_start, seqlen_q = _seq_bounds(CU_Q, b)
    start_m = pid_m * BLOCK_M
    if start_m >= seqlen_q:  # past this sequence's end: nothing to do
        return
    k_start, seqlen_k = _seq_bounds(CU_K, b)
    hk = h // group
    diag = seqlen_k - seqlen_q
    offs_m = start_m + tl.arange(0, BLOCK_M)  # rows relative to the sequence
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    row_ok = (offs_m < seqlen_q)[:, None] & (offs_d < HEAD_DIM)[None, :]
    rows = (q_start + offs_m)[:, None].to(tl.int64)

    # -- the query tile stays in registers; K/V bases sit at the sequence's start --
    q = tl.load(Q + h.to(tl.int64) * stride_qh + rows * stride_qm + offs_d[None, :],
                mask=row_ok, other=0.0)
    if UPCAST:
        q = q.to(tl.float32)
    k_base = K + k_start.to(tl.int64) * stride_kn + hk.to(tl.int64) * stride_kh
    v_base = V + k_start.to(tl.int64) * stride_vn + hk.to(tl.int64) * stride_vh
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    # -- the dense kernel's three stages: masked band, unmasked middle, masked edge --
    lo, mid_lo, mid_hi, hi = kv_tile_ranges(
        start_m, seqlen_q, seqlen_k, diag, window_left, window_right, BLOCK_M, BLOCK_N,
        HAS_LEFT, HAS_RIGHT,
    )
    for stage in tl.static_range(3):
        s_lo, s_hi = stage_bounds(stage, lo, mid_lo, mid_hi, hi)
        acc, l_i, m_i = _fwd_tiles(
            acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, s_lo, s_hi, offs_m,
            offs_n, offs_d, seqlen_q, seqlen_k, diag, window_left, window_right, sm_scale,
            softcap, 0.0, 0, 0, 0, HEAD_DIM, BLOCK_D, BLOCK_N, stage != 1, HAS_LEFT,
            HAS_RIGHT, SOFTCAP, False, UPCAST, DOT_PREC,
        )

    # -- epilogue: empty rows give 0 and lse = -inf --
    acc, lse = softmax_finish(acc, m_i, l_i, True)
    tl.store(O + h.to(tl.int64) * stride_oh + rows * stride_om + offs_d[None, :],
             cast_out(acc, O.dtype.element_ty, UPCAST), mask=row_ok)
    tl.store(LSE + h.to(tl.int64) * total_q + q_start + offs_m, lse, mask=offs_m < seqlen_q)


# ==================================================================================
# backward
# ==================================================================================


def varlen_backward(
    dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *,
    softmax_scale=None, causal=False, window_size=(None, None), softcap=0.0, config=None,
):
    """Launch the varlen backward kernels; no autograd. Returns ``(dq, dk, dv)``.

    Rows outside every sequence (past ``cu_seqlens[-1]``) get zero gradients.
    """
    if causal:
        window_size = (window_size[0], 0)
    meta, args = _params(q, k, softmax_scale, window_size, softcap)
    total_q, nheads, _ = q.shape
    nheads_kv = k.shape[1]
    batch = cu_seqlens_q.shape[0] - 1
    if dout.stride(-1) != 1:
        dout = dout.contiguous()
    # zeros, not empty: rows no program owns (tokens past cu_seqlens[-1]) get 0
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    if batch == 0 or total_q == 0 or k.shape[0] == 0 or nheads == 0:
        return dq, dk, dv
    if (config is None and max_seqlen_q > 0 and max_seqlen_k > 0
            and hopper_bwd.hopper_varlen_bwd_supported(
                q, k, v, dout, window_size[1] == 0, window_size, softcap, softmax_scale,
                max_seqlen_q, max_seqlen_k)):
        # sm_90, from 8k-long sequences: the Gluon two-kernel backward over per-sequence
        # TMA descriptors
        return hopper_bwd.hopper_varlen_backward(
            dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
            softmax_scale, window_size[1] == 0, dq, dk, dv, left=window_size[0])
    cfg = config or configs.bwd_config(
        meta["BLOCK_D"], window_size[1] is not None, q.dtype, q.device, max_seqlen_k
    )
    delta = torch.empty((nheads, total_q), dtype=torch.float32, device=q.device)
    common = dict(**args, **meta, num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    strides = (
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        dout.stride(0), dout.stride(1),
    )
    with device_ctx(q):
        # delta = rowsum(dO * O): the dense preprocess over the packed rows as one batch
        _attn_bwd_preprocess_kernel[(triton.cdiv(total_q, cfg.block_m), nheads)](
            out, dout, delta, 0, out.stride(0), out.stride(1), 0, dout.stride(0),
            dout.stride(1), total_q, nheads, HEAD_DIM=meta["HEAD_DIM"], BLOCK_D=meta["BLOCK_D"],
            BLOCK_M=cfg.block_m,
        )
        if max_seqlen_k > 0:
            _varlen_bwd_dkdv_kernel[(triton.cdiv(max_seqlen_k, cfg.block_n), nheads_kv, batch)](
                q, k, v, dout, lse, delta, dk, dv, cu_seqlens_q, cu_seqlens_k, *strides,
                dk.stride(0), dk.stride(1), dv.stride(0), dv.stride(1), total_q,
                BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, **common,
            )
        if max_seqlen_q > 0:  # the dQ kernel's own tile (configs.BwdConfig.dq)
            dq_cfg = cfg.dq()
            _varlen_bwd_dq_kernel[(triton.cdiv(max_seqlen_q, dq_cfg.block_m), nheads, batch)](
                q, k, v, dout, lse, delta, dq, cu_seqlens_q, cu_seqlens_k, *strides,
                dq.stride(0), dq.stride(1), total_q, BLOCK_M=dq_cfg.block_m,
                BLOCK_N=dq_cfg.block_n, **{**common, "num_warps": dq_cfg.num_warps},
            )
    return dq, dk, dv


@triton.jit(do_not_specialize=_NO_SPECIALIZE)
def _varlen_bwd_dkdv_kernel(
    Q, K, V, DO, LSE, DELTA, DK, DV,  # Q, DO: (TQ, H, D); K, V, DK, DV: (TK, Hkv, D)
    CU_Q, CU_K,  # (B + 1,) int32; LSE, DELTA: (H, TQ) fp32
    stride_qm, stride_qh, stride_kn, stride_kh, stride_vn, stride_vh, stride_dom, stride_doh,
    stride_dkn, stride_dkh, stride_dvn, stride_dvh, total_q, nheads, group, sm_scale, softcap,
    window_left, window_right, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HAS_LEFT: tl.constexpr,
    HAS_RIGHT: tl.constexpr, SOFTCAP: tl.constexpr, UPCAST: tl.constexpr,
    DOT_PREC: tl.constexpr,
):
    pid_n = tl.program_id(0)
    hk = tl.program_id(1)
    b = tl.program_id(2)
    k_start, seqlen_k = _seq_bounds(CU_K, b)
    start_n = pid_n * BLOCK_N
    if start_n >= seqlen_k:
        return
    q_start, seqlen_q = _seq_bounds(CU_Q, b)
    diag = seqlen_k - seqlen_q
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    kv_mask = (offs_n < seqlen_k)[:, None] & (offs_d < HEAD_DIM)[None, :]
    rows_n = (k_start + offs_n)[:, None].to(tl.int64)
    zero = pid_n * 0  # the tile loops' batch*head index: stats pointers are pre-offset

    # -- this program's key/value tile stays in registers --
    k = tl.load(K + hk.to(tl.int64) * stride_kh + rows_n * stride_kn + offs_d[None, :],
                mask=kv_mask, other=0.0)
    v = tl.load(V + hk.to(tl.int64) * stride_vh + rows_n * stride_vn + offs_d[None, :],
                mask=kv_mask, other=0.0)
    if UPCAST:
        k = k.to(tl.float32)
        v = v.to(tl.float32)
    dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    lo, mid_lo, mid_hi, hi = q_tile_ranges(
        start_n, seqlen_q, seqlen_k, diag, window_left, window_right, BLOCK_M, BLOCK_N,
        HAS_LEFT, HAS_RIGHT,
    )
    # -- every query head of the GQA group, in order: deterministic sums --
    for g in range(0, group):
        h = hk * group + g
        q_base = Q + q_start.to(tl.int64) * stride_qm + h.to(tl.int64) * stride_qh
        do_base = DO + q_start.to(tl.int64) * stride_dom + h.to(tl.int64) * stride_doh
        # row statistics of this sequence and head: (H, TQ) rows start at q_start
        stats = h.to(tl.int64) * total_q + q_start
        for stage in tl.static_range(3):
            s_lo, s_hi = stage_bounds(stage, lo, mid_lo, mid_hi, hi)
            dk, dv = _bwd_dkdv_tiles(
                dk, dv, k, v, q_base, do_base, LSE + stats, DELTA + stats, zero, stride_qm,
                stride_dom, s_lo, s_hi, offs_m, offs_n, offs_d, seqlen_q, seqlen_k, diag,
                window_left, window_right, sm_scale, softcap, 0.0, 0, 0, HEAD_DIM, BLOCK_D,
                BLOCK_M, stage != 1, HAS_LEFT, HAS_RIGHT, SOFTCAP, False, UPCAST, DOT_PREC,
            )
    dk = dk * sm_scale
    tl.store(DK + hk.to(tl.int64) * stride_dkh + rows_n * stride_dkn + offs_d[None, :],
             cast_out(dk, DK.dtype.element_ty, UPCAST), mask=kv_mask)
    tl.store(DV + hk.to(tl.int64) * stride_dvh + rows_n * stride_dvn + offs_d[None, :],
             cast_out(dv, DV.dtype.element_ty, UPCAST), mask=kv_mask)


@triton.jit(do_not_specialize=_NO_SPECIALIZE)
def _varlen_bwd_dq_kernel(
    Q, K, V, DO, LSE, DELTA, DQ,  # Q, DO, DQ: (TQ, H, D); K, V: (TK, Hkv, D)
    CU_Q, CU_K,  # (B + 1,) int32; LSE, DELTA: (H, TQ) fp32
    stride_qm, stride_qh, stride_kn, stride_kh, stride_vn, stride_vh, stride_dom, stride_doh,
    stride_dqm, stride_dqh, total_q, nheads, group, sm_scale, softcap, window_left,
    window_right, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
    SOFTCAP: tl.constexpr, UPCAST: tl.constexpr, DOT_PREC: tl.constexpr,
):
    pid_m = tl.program_id(0)
    h = tl.program_id(1)
    b = tl.program_id(2)
    q_start, seqlen_q = _seq_bounds(CU_Q, b)
    start_m = pid_m * BLOCK_M
    if start_m >= seqlen_q:
        return
    k_start, seqlen_k = _seq_bounds(CU_K, b)
    hk = h // group
    diag = seqlen_k - seqlen_q
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    q_mask = (offs_m < seqlen_q)[:, None] & (offs_d < HEAD_DIM)[None, :]
    rows = (q_start + offs_m)[:, None].to(tl.int64)

    q = tl.load(Q + h.to(tl.int64) * stride_qh + rows * stride_qm + offs_d[None, :],
                mask=q_mask, other=0.0)
    do = tl.load(DO + h.to(tl.int64) * stride_doh + rows * stride_dom + offs_d[None, :],
                 mask=q_mask, other=0.0)
    if UPCAST:
        q = q.to(tl.float32)
        do = do.to(tl.float32)
    stats = h.to(tl.int64) * total_q + q_start
    lse2, delta = _load_row_stats(LSE + stats, DELTA + stats, pid_m * 0, offs_m, seqlen_q)
    k_base = K + k_start.to(tl.int64) * stride_kn + hk.to(tl.int64) * stride_kh
    v_base = V + k_start.to(tl.int64) * stride_vn + hk.to(tl.int64) * stride_vh
    dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    lo, mid_lo, mid_hi, hi = kv_tile_ranges(
        start_m, seqlen_q, seqlen_k, diag, window_left, window_right, BLOCK_M, BLOCK_N,
        HAS_LEFT, HAS_RIGHT,
    )
    for stage in tl.static_range(3):
        s_lo, s_hi = stage_bounds(stage, lo, mid_lo, mid_hi, hi)
        dq = _bwd_dq_tiles(
            dq, q, do, lse2, delta, k_base, v_base, stride_kn, stride_vn, s_lo, s_hi, offs_m,
            offs_n, offs_d, seqlen_q, seqlen_k, diag, window_left, window_right, sm_scale,
            softcap, 0.0, 0, 0, 0, HEAD_DIM, BLOCK_D, BLOCK_N, stage != 1, HAS_LEFT,
            HAS_RIGHT, SOFTCAP, False, UPCAST, DOT_PREC,
        )
    dq = dq * sm_scale
    tl.store(DQ + h.to(tl.int64) * stride_dqh + rows * stride_dqm + offs_d[None, :],
             cast_out(dq, DQ.dtype.element_ty, UPCAST), mask=q_mask)
