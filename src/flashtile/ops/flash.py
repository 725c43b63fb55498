"""The production dense attention kernel: forward and backward, in tile-level Triton.

Layers, top to bottom (never merged):
    flash_attn_func            public function, argument checks, docstring
    FlashAttnFunction          torch.autograd.Function over the two torch.library ops
    flashtile::flash_attn_fwd / flash_attn_bwd   custom ops (torch.compile sees these);
                               plain eager calls skip their dispatch and call the
                               launchers (_eager_ok); with nothing for autograd to record,
                               flash_attn_func calls the forward launcher directly
    attention_forward / attention_backward       launchers: (out, lse), no autograd
    _attn_fwd_kernel, _attn_bwd_*_kernel         @triton.jit kernels

Notation for all kernels in this file:
    B batch, H query heads, Hkv key/value heads (H = group * Hkv), M = seqlen_q,
    N = seqlen_k, D head dim (BLOCK_D = D rounded up to a power of two >= 16).
    Forward and dQ grids: (cdiv(M, BLOCK_M), B * H), one program per query tile.
    dK/dV grid: (cdiv(N, BLOCK_N), B * Hkv), one program per key tile, looping over
    the group's query heads so GQA sums are deterministic (no atomics).
    Constexprs: HAS_LEFT/HAS_RIGHT window sides present (causal = HAS_RIGHT, right=0),
    SOFTCAP, DROPOUT, UPCAST (interpreter: dots in fp32, bf16 dots are wrong there),
    DOT_PREC ("ieee" for fp32 inputs).
"""

from __future__ import annotations

import functools
import math
import os

import torch
import torch.autograd.forward_ad as _forward_ad
import triton
import triton.language as tl

from .. import configs
from . import _gluon_common, hopper_bwd, hopper_fwd
from ._checks import check_qkv, check_scalars, check_window
from ._common import (
    BITS_PAD,
    DROPOUT_BITS_HEADER,
    NULL_CTX,
    attn_keep,
    cast_out,
    delta_rows,
    device_capability,
    device_ctx,
    dispatch_env,
    dropout_keep,
    env_mode,
    fwd_scores,
    is_interpreting,
    kv_tile_ranges,
    lse2_box,
    next_pow2,
    online_softmax,
    plain_eager,
    q_tile_ranges,
    scores_log2,
    softcap_flag,
    softmax_finish,
    store_dropout_bits,
)
from ._launch import (
    cached_launch,
    current_stream,
    make_plan,
    make_room,
    plain_launch,
    recording,
    run_compiled,
    run_plan,
)

__all__ = [
    "flash_attn_func", "attention_forward", "attention_backward", "FlashAttnFunction",
    "draw_rng_state", "dropout_mask", "dropout_bits_mask",
]


# ==================================================================================
# public API
# ==================================================================================


def flash_attn_func(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dropout_p: float = 0.0,
    softmax_scale: float | None = None, causal: bool = False,
    window_size: tuple[int, int] = (-1, -1), softcap: float = 0.0, deterministic: bool = True,
    return_lse: bool = False,
):
    """Exact attention, FlashAttention-style (argument order of flash-attn's function).

    Args:
        q: (batch, seqlen_q, nheads, headdim), float16 / bfloat16 / float32.
        k: (batch, seqlen_k, nheads_kv, headdim), same dtype and device as q;
            nheads must be a multiple of nheads_kv (GQA / MQA).
        v: (batch, seqlen_k, nheads_kv, headdim), like k.
            headdim: a multiple of 8, at most 256. Last dimension contiguous; other
            strides are free.
        dropout_p: attention-dropout probability in [0, 1). Use 0.0 for evaluation.
            The mask comes from a counter-based RNG seeded from torch's default
            generator, so ``torch.manual_seed`` reproduces it.
        softmax_scale: scale of q.k, default 1 / sqrt(headdim).
        causal: keep key j for query i when j <= i + seqlen_k - seqlen_q
            (bottom-right aligned, as flash-attn >= 2.1).
        window_size: (left, right) local window, keep
            i + off - left <= j <= i + off + right (off = seqlen_k - seqlen_q);
            -1 is unbounded on that side. causal=True sets right = 0.
        softcap: if > 0, scores become softcap * tanh(scores / softcap) before masking.
        deterministic: True (the default): the backward's gradients are bitwise the
            same from call to call. False lets the sm_90 backward compute dQ in its
            dK/dV kernel and add it up with racing fp32 reduce-adds where that measured
            faster (configs.hopper_bwd_reduce_preferred), as flash-attn's default does;
            elsewhere the flag changes nothing.
        return_lse: also return lse, (batch, nheads, seqlen_q) float32, natural log of
            the softmax normaliser (-inf on fully masked rows); not differentiable.

    Returns:
        out (batch, seqlen_q, nheads, headdim) in q's dtype, or (out, lse).
    """
    check_qkv(q, k, v)
    if _is_no_window(window_size):
        left = right = None  # what check_window returns for the default
    else:
        left, right = check_window(window_size)
    check_scalars(dropout_p, softcap, softmax_scale)
    if causal:
        right = 0
    scale = float(softmax_scale) if softmax_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    if not _records_autograd(q, k, v) and _eager_ok(q, k, v):
        # nothing for autograd to record (no_grad, inference, frozen inputs): the launcher
        # alone, as FlashAttnFunction's eager forward would run it
        with _profiled("flashtile::flash_attn_fwd"):
            out, lse = attention_forward(
                q, k, v, softmax_scale=scale, window_size=(left, right),
                softcap=float(softcap), dropout_p=float(dropout_p),
                rng_state=draw_rng_state(q.device) if dropout_p > 0 else (0, 0),
            )
    else:
        out, lse = FlashAttnFunction.apply(
            q, k, v, scale, left, right, float(softcap), float(dropout_p), bool(deterministic)
        )
    return (out, lse) if return_lse else out


def _is_no_window(window_size) -> bool:
    """window_size is exactly the default (-1, -1): a tuple of two ints."""
    return (type(window_size) is tuple and len(window_size) == 2
            and type(window_size[0]) is int and type(window_size[1]) is int
            and window_size[0] == -1 and window_size[1] == -1)


def _records_autograd(q, k, v) -> bool:
    """Whether FlashAttnFunction.apply would record anything: grad mode on and an input
    that requires grad, or a forward-mode AD level open (dual tensors)."""
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        return True
    return getattr(_forward_ad, "_current_level", 0) >= 0


class FlashAttnFunction(torch.autograd.Function):
    """Autograd over the custom ops; saves nothing when no input needs a gradient.

    Plain eager calls run the launchers directly instead of the custom ops (``_eager_ok``:
    same kernels, same RNG draw, bitwise the same results, without the op dispatch's host
    time); under torch.compile, tracing or a dispatch mode the custom ops run.
    """

    @staticmethod
    def forward(ctx, q, k, v, scale, left, right, softcap, dropout_p, deterministic):
        if _eager_ok(q, k, v):
            with _profiled("flashtile::flash_attn_fwd"):
                rng = draw_rng_state(q.device) if dropout_p > 0 else (0, 0)
                rng_fwd = rng
                if dropout_p > 0 and dropout_bits_on(q, k, v, left, right, softcap,
                                                      dropout_p):
                    # the forward draws as always and also writes its decisions as bits,
                    # which both backward kernels read instead of drawing again (None if
                    # too large: they draw)
                    buf = dropout_bits_buffer(rng, q.shape[0], q.shape[2], q.shape[1],
                                              k.shape[1], q.device)
                    if buf is not None:
                        rng_fwd, rng = (buf, 0), (buf[DROPOUT_BITS_HEADER:], 0)
                out, lse = attention_forward(
                    q, k, v, softmax_scale=scale, window_size=(left, right), softcap=softcap,
                    dropout_p=dropout_p, rng_state=rng_fwd,
                )
            saved = (q, k, v, out, lse)
        else:
            out, lse, rng_state = torch.ops.flashtile.flash_attn_fwd(
                q, k, v, scale, left, right, softcap, dropout_p
            )
            rng, saved = None, (q, k, v, out, lse, rng_state)
        if any(ctx.needs_input_grad[:3]):
            ctx.save_for_backward(*saved)
            ctx.args = (scale, left, right, softcap, dropout_p, deterministic)
            ctx.rng = rng  # (seed, offset) from the eager path; else the op's rng tensor
        ctx.mark_non_differentiable(lse)
        # no zeros for the lse's gradient (always unused; a fill kernel and an allocation
        # per backward call, seen in session 10's host profile) nor for an unused out
        ctx.set_materialize_grads(False)
        return out, lse

    @staticmethod
    def backward(ctx, dout, dlse):
        if torch.is_grad_enabled():
            raise RuntimeError(
                "flashtile: double backward (create_graph=True through attention) is not "
                "supported; the backward kernels are not differentiable"
            )
        if dout is None:  # out did not reach the loss: no gradient flows
            return (None,) * 9
        q, k, v, out, lse, *rng_saved = ctx.saved_tensors
        scale, left, right, softcap, dropout_p, deterministic = ctx.args
        # an eager forward's RNG state may hold a tensor (a dropout_bits_buffer's words, or
        # the on-device pair drawn under graph capture), which the custom op cannot take:
        # the launchers then run even when the backward alone is traced or under a
        # dispatch mode (a FlopCounterMode around loss.backward(), say)
        rng_tensor = ctx.rng is not None and isinstance(ctx.rng[0], torch.Tensor)
        if rng_tensor or _eager_ok(dout, q, k, v):
            with _profiled("flashtile::flash_attn_bwd"):
                rng = ctx.rng if ctx.rng is not None else tuple(rng_saved[0].tolist())
                dq, dk, dv = attention_backward(
                    dout, q, k, v, out, lse, softmax_scale=scale, window_size=(left, right),
                    softcap=softcap, dropout_p=dropout_p, rng_state=rng,
                    deterministic=deterministic,
                )
        else:
            rng_state = rng_saved[0] if rng_saved else torch.tensor(ctx.rng, dtype=torch.int64)
            dq, dk, dv = torch.ops.flashtile.flash_attn_bwd(
                dout, q, k, v, out, lse, rng_state, scale, left, right, softcap, dropout_p,
                deterministic,
            )
        return dq, dk, dv, None, None, None, None, None, None


# Plain eager calls skip the torch.library dispatch (_eager_ok); False forces the custom
# ops everywhere (tests compare the two paths).
EAGER_FAST_PATH = True


def _eager_ok(*tensors) -> bool:
    """The launchers may run instead of the custom ops (``_common.plain_eager``).
    Autograd is FlashAttnFunction's either way (its forward and backward run with grad
    mode off)."""
    return EAGER_FAST_PATH and plain_eager(*tensors)


def _profiled(name):
    """A profiler range named like the custom op the eager path skips (profiles keep
    showing flashtile::flash_attn_fwd / _bwd); free when no profiler runs."""
    if torch.autograd._profiler_enabled():
        return torch.autograd.profiler.record_function(name)
    return NULL_CTX


@torch.library.custom_op("flashtile::flash_attn_fwd", mutates_args=())
def _flash_attn_fwd_op(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, softmax_scale: float,
    window_left: int | None, window_right: int | None, softcap: float, dropout_p: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    rng_state = draw_rng_state() if dropout_p > 0 else (0, 0)
    out, lse = attention_forward(
        q, k, v, softmax_scale=softmax_scale, window_size=(window_left, window_right),
        softcap=softcap, dropout_p=dropout_p, rng_state=rng_state,
    )
    return out, lse, torch.tensor(rng_state, dtype=torch.int64)


@_flash_attn_fwd_op.register_fake
def _(q, k, v, softmax_scale, window_left, window_right, softcap, dropout_p):
    batch, seqlen_q, nheads, _ = q.shape
    lse = q.new_empty((batch, nheads, seqlen_q), dtype=torch.float32)
    return (
        torch.empty_like(q, memory_format=torch.contiguous_format), lse,
        torch.empty(2, dtype=torch.int64),
    )


@torch.library.custom_op("flashtile::flash_attn_bwd", mutates_args=())
def _flash_attn_bwd_op(
    dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
    lse: torch.Tensor, rng_state: torch.Tensor, softmax_scale: float, window_left: int | None,
    window_right: int | None, softcap: float, dropout_p: float, deterministic: bool = True,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return attention_backward(
        dout, q, k, v, out, lse, softmax_scale=softmax_scale,
        window_size=(window_left, window_right), softcap=softcap, dropout_p=dropout_p,
        rng_state=tuple(rng_state.tolist()),  # a CPU tensor: no device sync
        deterministic=deterministic,
    )


@_flash_attn_bwd_op.register_fake
def _(
    dout, q, k, v, out, lse, rng_state, softmax_scale, window_left, window_right, softcap,
    dropout_p, deterministic=True,
):
    return (
        torch.empty_like(q, memory_format=torch.contiguous_format),
        torch.empty_like(k, memory_format=torch.contiguous_format),
        torch.empty_like(v, memory_format=torch.contiguous_format),
    )


# ==================================================================================
# launch configuration
# ==================================================================================


def draw_rng_state(device: torch.device | None = None):
    """(seed, offset) for dropout, drawn from torch's default CPU generator (no sync).
    Both stay below 2**31 so the kernel's argument types never change.

    Inside CUDA graph capture (``torch.cuda.graph``) numbers drawn on the host would be
    captured as kernel arguments, so every replay would apply one dropout mask. There,
    with the call's CUDA ``device``, the pair is drawn on the device instead and returned
    as ``(tensor, 0)`` (an int64 tensor of 2 in the seed's place: torch's CUDA generator is
    graph-safe, so each replay draws anew); the portable kernels load it
    (``dropout_keep``). Without a device (the torch.compile custom
    op, whose schema returns the state on the host) it raises there. (A call on another
    device type cannot be in a capture: no check.)"""
    if device is not None and device.type == "cuda":
        if torch.cuda.is_current_stream_capturing():
            return torch.randint(0, 2**31 - 1, (2,), dtype=torch.int64, device=device), 0
    elif device is None and torch.cuda.is_available():
        if torch.cuda.is_current_stream_capturing():
            raise RuntimeError(
                "flashtile: attention dropout in a CUDA graph captured through "
                "torch.compile (mode='reduce-overhead') is not supported (every replay "
                "would reuse the captured mask); use mode='default' or "
                "'max-autotune-no-cudagraphs', or capture the eager call with "
                "torch.cuda.graph")
    seed, offset = torch.randint(0, 2**31 - 1, (2,), dtype=torch.int64).tolist()
    return seed, offset


@functools.lru_cache(maxsize=256)
def _flags(has_left, has_right, softcap, dropout, dtype, interp):
    """The kernels' trailing constexprs, in signature order: (HAS_LEFT, HAS_RIGHT, SOFTCAP,
    DROPOUT, UPCAST, DOT_PREC)."""
    return (has_left, has_right, softcap, dropout, interp and dtype != torch.float32,
            "ieee" if dtype == torch.float32 else "tf32")


def _common_params(q, k, softmax_scale, window_size, softcap, dropout_p, rng_state):
    """(block_d, runtime, flags) for every kernel of this file: BLOCK_D (HEAD_DIM padded);
    the runtime scalars after the strides, in signature order (seqlen_q, seqlen_k, nheads,
    group, sm_scale, softcap, window_left, window_right, dropout_p, seed, rng_offset); the
    trailing constexprs (``_flags``, memoised). Signature order: HEAD_DIM, BLOCK_D,
    BLOCK_M, BLOCK_N, then the flags."""
    _, seqlen_q, nheads, head_dim = q.shape
    left, right = window_size
    flags = _flags(left is not None, right is not None, softcap_flag(softcap, q.dtype),
                   dropout_p > 0, q.dtype, is_interpreting())
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(head_dim)
    seed, rng_offset = rng_state if dropout_p > 0 else (0, 0)
    runtime = (
        seqlen_q, k.shape[1], nheads, nheads // k.shape[2], float(scale),
        float(softcap) if softcap > 0 else 1.0, int(left or 0), int(right or 0),
        float(dropout_p), seed, rng_offset,
    )
    return max(16, next_pow2(head_dim)), runtime, flags


# configs.* are pure functions of their arguments (frozen dataclasses back): memoised per
# (padded head dim, causal, dtype, device, seqlen). check_smem reads the device's
# properties: done once per (config, head dim, element size, device) that passes.
@functools.lru_cache(maxsize=1024)
def _fwd_config(block_d, causal, dtype, device, seqlen_q):
    return configs.fwd_config(block_d, causal, dtype, device, seqlen_q)


@functools.lru_cache(maxsize=1024)
def _bwd_configs(block_d, causal, dtype, device, seqlen_k):
    """(dK/dV config, dQ config) of ``configs.bwd_config``."""
    cfg = configs.bwd_config(block_d, causal, dtype, device, seqlen_k)
    return cfg, cfg.dq()


@functools.lru_cache(maxsize=1024)
def _smem_ok(cfg, head_dim, elem_bytes, device):
    configs.check_smem(cfg, head_dim, elem_bytes, device)  # raises: nothing cached
    return True


def _check_smem(cfg, head_dim, elem_bytes, device):
    if type(cfg) is configs.FwdConfig:  # frozen: hashable
        _smem_ok(cfg, head_dim, elem_bytes, device)
    else:
        configs.check_smem(cfg, head_dim, elem_bytes, device)


def _cdiv(x: int, y: int) -> int:
    """triton.cdiv's formula without its constexpr-function wrapper (microseconds per
    call on the host)."""
    return (x + y - 1) // y


def _maybe_sm90(device) -> bool:
    """False when the Gluon kernels certainly cannot run (hopper_fwd.hopper_supported and
    hopper_bwd.hopper_bwd_supported ask for a CUDA device of capability (9, 0)): skips
    their per-call checks elsewhere. True means: ask them."""
    return device.type == "cuda" and device_capability(device) == (9, 0)


def _check_buffer(name, buf, shape, dtype, device):
    if buf.shape != torch.Size(shape) or buf.dtype != dtype or buf.device != device:
        raise ValueError(
            f"{name}= buffer must be {tuple(shape)} {dtype} on {device}, got "
            f"{tuple(buf.shape)} {buf.dtype} on {buf.device}"
        )
    if buf.numel() and buf.stride(-1) != 1:
        raise ValueError(f"{name}= buffer must be contiguous in its last dimension")


# Launches skip Triton's per-call argument binding once a kernel is cached
# (ops/_launch.cached_launch), under the switch ops/kvcache.py uses too
# (FLASHTILE_FAST_LAUNCH=0 turns it off). On by default since commit after f8abc94: the
# host cost of a training step's attention halves (scripts/host_overhead.py, 2-core CPU,
# stub kernels: forward 166 -> 81 us, backward 361 -> 174 us per call), and
# `gpu_check.sh train` measures the step time both ways; scripts/host_overhead.py
# --check compares the kernel it picks with Triton's own on the CPU (fake driver).
FAST_LAUNCH = os.environ.get("FLASHTILE_FAST_LAUNCH", "1") not in ("", "0")
_FAST_LAUNCH_DEVICES = ("cuda",)  # scripts/host_overhead.py adds "cpu" (stub kernels)
_KERNELS: dict = {}
_run_compiled = run_compiled  # the CPU check replaces it with a spy


def _launch(fn, grid, device, n_ptr, args, num_warps, num_stages):
    """``fn[grid](*args, num_warps=, num_stages=)`` (options left out when None), through
    the cached launch when FAST_LAUNCH is on for this device type. Returns the compiled
    kernel the cached launch ran (None otherwise: no plan is made from it)."""
    if FAST_LAUNCH and device.type in _FAST_LAUNCH_DEVICES:
        return cached_launch(_KERNELS, fn, grid, device, n_ptr, args, num_warps, num_stages,
                             _run_compiled)
    plain_launch(fn, grid, args, num_warps, num_stages)
    return None


# Launch plans of the portable forward and backward: per call signature (shapes, strides,
# 16-byte alignment of the inputs, dtype, device, scale, window, softcap, dropout), the
# compiled kernels, grids and every argument but the tensors and the RNG state, so that
# a repeated call (a training step's layers, step after step) allocates its outputs and
# launches, skipping the configs, the argument tuples and the cached launch's key. Made
# only when every launch of the first call went through the cached launch (FAST_LAUNCH)
# and the outputs are fresh allocations (contiguous, aligned: their strides follow from
# the shapes), so a plan's kernels are the ones the cached launch (and Triton) would
# pick; scripts/host_overhead.py --check compares them. Session 10: the host, not the
# GPU, sets a MiniGPT training step's time.
_PLANS: dict = {}
MAX_PLANS = 1024
# A/B switch (scripts/host_overhead.py --ab-plans, host_split.py --ab, host_gluon.py --ab);
# FLASHTILE_LAUNCH_PLANS=0 starts a process with it off
USE_PLANS = os.environ.get("FLASHTILE_LAUNCH_PLANS", "1") not in ("", "0")


def _rng_kind(rng_state, dropout_p):
    """What the kernels' seed argument is (a plan's kernels are compiled for one): None
    an int (Philox draws in the kernels), else the tensor's dtype: int64 the (seed,
    offset) pair on the device (draw_rng_state inside CUDA graph capture), int32 a
    dropout_bits_buffer (the forward writes it, the backward reads its words)."""
    seed = rng_state[0] if dropout_p > 0 else 0
    return seed.dtype if isinstance(seed, torch.Tensor) else None


def _plan_key(tag, tensors, *rest):
    """A plan's key: ``tag``, each tensor's shape, strides and data_ptr % 16, then
    ``rest``."""
    parts = [tag]
    for t in tensors:
        parts += (t.shape, t.stride(), t.data_ptr() & 15)
    return (*parts, *rest)


def _keep_plan(key, plan) -> None:
    make_room(_PLANS, MAX_PLANS)
    _PLANS[key] = plan


def clear_plans() -> None:
    """Forget every launch plan (tests that patch the dispatch call it between calls)."""
    _PLANS.clear()


def _gluon_replay(plan, sources) -> None:
    """Replay a Gluon plan (ops/_launch.run_plan) over ``sources`` (the call's tensors in
    the order the plan was made with)."""
    with device_ctx(sources[0]):
        run_plan(plan, sources, sources[0].device, _gluon_common._run_compiled,
                 _gluon_common._unchecked_desc)


def _keep_gluon_plan(key, records, sources) -> None:
    """Keep the plan of ``records`` under ``key`` (None: no plan asked for), if the call
    can be replayed (ops/_launch.make_plan)."""
    if key is not None:
        plan = make_plan(records, sources)
        if plan is not None:
            _keep_plan(key, plan)


# kept under a Gluon plan's key when the signature does not take the Gluon path: its
# predicates are skipped next time (the portable path and its own plan run)
_NOT_GLUON = ()


def _gluon_plans_on(device) -> bool:
    """Plans of the Gluon launches (ops/_launch.make_plan): made and replayed when plans
    and the cached Gluon launch are on for this device type. A Gluon plan is keyed on the
    call's signature and the dispatch's environment (``dispatch_env``) and replays the
    launches that signature made: the dispatch predicates, configs and argument tuples
    run once per signature. Session 42, HF Llama's 2k shape: scripts/host_gluon.py (CPU,
    stub launches) forward 130 -> 67 us, autograd.grad 356 -> 197 us of Python; on the
    H100's host (host_split.py --ab) the launcher 108 -> 42 us, autograd.grad 728 -> 319."""
    return (USE_PLANS and _gluon_common.FAST_LAUNCH
            and device.type in _gluon_common._FAST_LAUNCH_DEVICES)


# ==================================================================================
# forward
# ==================================================================================


def attention_forward(
    q, k, v, *, softmax_scale=None, causal=False, window_size=(None, None), softcap=0.0,
    dropout_p=0.0, rng_state=None, out=None, lse=None, config=None,
):
    """Launch the forward kernel; no autograd. Returns ``(out, lse)``.

    Shapes as ``flash_attn_func``. ``window_size`` entries are ints or None (unbounded);
    any int is a bound, negative ones included. ``rng_state=(seed, offset)``, or a tensor
    in the seed's place (draw_rng_state's on-device pair; a dropout_bits_buffer, into
    which the kernel also writes its decisions) (drawn if None when dropout is on).
    ``out`` ((B, Sq, H, D), q's dtype) and ``lse`` ((B, H, Sq), float32, contiguous) may
    be given to write into.
    """
    if causal:
        window_size = (window_size[0], 0)
    batch, seqlen_q, nheads, _ = q.shape
    device = q.device
    fresh = out is None and lse is None  # a plan's outputs: contiguous, aligned
    if out is None:
        out = torch.empty(q.shape, dtype=q.dtype, device=device)
    else:
        _check_buffer("out", out, q.shape, q.dtype, device)
    if lse is None:
        lse = torch.empty((batch, nheads, seqlen_q), dtype=torch.float32, device=device)
    else:
        _check_buffer("lse", lse, (batch, nheads, seqlen_q), torch.float32, device)
        if not lse.is_contiguous():
            raise ValueError("lse= buffer must be contiguous")
    if out.numel() == 0:
        return out, lse
    if dropout_p > 0 and rng_state is None:
        rng_state = draw_rng_state(device)
    sm90 = config is None and _maybe_sm90(device)
    gkey = plan = None
    if sm90 and fresh and not dropout_p and _gluon_plans_on(device):
        gkey = _plan_key("gfwd", (q, k, v), q.dtype, device, softmax_scale, window_size,
                         softcap, dispatch_env())
        plan = _PLANS.get(gkey)
        if plan:  # the Gluon launch this signature made last time
            _gluon_replay(plan, (q, k, v, out, lse))
            return out, lse
    if sm90 and plan is None and hopper_fwd.hopper_supported(
        q, k, v, window=window_size, softcap=softcap, dropout_p=dropout_p,
        softmax_scale=softmax_scale, windows=True, softcaps=True, dropouts=True,
    ):  # sm_90: the Gluon kernel (ops/hopper_fwd.py) where configs.hopper_fwd_schedule
        # measured it faster (a sliding window or softcap: stage A or C, window_config;
        # dropout: stage A, dropout_config); FLASHTILE_DISABLE_HOPPER=1 skips it
        causal_ = window_size[1] == 0
        left = window_size[0]
        if dropout_p > 0:
            hcfg = hopper_fwd.dropout_config(q.shape[-1], causal_, seqlen_q)
        else:
            hcfg = hopper_fwd.call_config(q.shape[-1], causal_, seqlen_q, left, softcap)
        if hcfg is not None:
            with recording() as records:
                hopper_fwd.hopper_attention_forward(
                    q, k, v, softmax_scale, causal_, out, lse, hcfg, left, softcap,
                    dropout_p, rng_state if dropout_p > 0 else (0, 0),
                )
            _keep_gluon_plan(gkey, records, (q, k, v, out, lse))
            return out, lse
    if gkey is not None and plan is None:
        _keep_plan(gkey, _NOT_GLUON)
    key = None
    if (fresh and config is None and USE_PLANS and FAST_LAUNCH
            and device.type in _FAST_LAUNCH_DEVICES):
        key = _plan_key("fwd", (q, k, v), q.dtype, device, softmax_scale, window_size,
                        softcap, dropout_p, _rng_kind(rng_state, dropout_p))
        plan = _PLANS.get(key)
        if plan is not None:  # (kernel, grid, arguments before the RNG state, after it)
            seed, offset = rng_state if dropout_p > 0 else (0, 0)
            with device_ctx(q):
                _run_compiled(plan[0], plan[1], current_stream(device),
                              (q, k, v, out, lse, *plan[2], seed, offset, *plan[3]))
            return out, lse
    block_d, runtime, flags = _common_params(q, k, softmax_scale, window_size, softcap,
                                             dropout_p, rng_state)
    cfg = config or _fwd_config(block_d, window_size[1] is not None, q.dtype, device, seqlen_q)
    _check_smem(cfg, block_d, q.element_size(), device)
    grid = (_cdiv(seqlen_q, cfg.block_m), batch * nheads)
    qs, ks, vs, os_ = q.stride(), k.stride(), v.stride(), out.stride()
    head = (qs[0], qs[1], qs[2], ks[0], ks[1], ks[2], vs[0], vs[1], vs[2], os_[0], os_[1],
            os_[2], *runtime[:9])
    tail = (q.shape[-1], block_d, cfg.block_m, cfg.block_n, *flags)
    with device_ctx(q):
        kernel = _launch(_attn_fwd_kernel, grid, device, 5,
                         (q, k, v, out, lse, *head, *runtime[9:], *tail), cfg.num_warps,
                         cfg.num_stages)
    if key is not None and kernel is not None:
        _keep_plan(key, (kernel, grid, head, tail))
    return out, lse


# Runtime ints that must not specialise the kernels (Triton specialises ints equal to 1
# or divisible by 16): sequence lengths, window sizes, RNG state. Changing them never
# recompiles. Strides stay specialised: their divisibility by 16 is what lets Triton
# prove 16-byte rows and pipeline the K/V loads with cp.async (without it: no async copy
# in the TTGIR, ~200 TFLOPS on the H200, 2026-11-29). A batch stride S*H*D keeps its
# divisibility for every S whenever H*D % 16 == 0; otherwise at most two variants exist.
_NO_SPECIALIZE = ["seqlen_q", "seqlen_k", "window_left", "window_right", "seed", "rng_offset"]


@triton.jit(do_not_specialize=_NO_SPECIALIZE)
def _attn_fwd_kernel(
    Q, K, V, O,
    LSE,  # Q, O: (B, M, H, D); K, V: (B, N, Hkv, D); LSE: (B, H, M) fp32
    stride_qb, stride_qm, stride_qh, stride_kb, stride_kn, stride_kh, stride_vb, stride_vn,
    stride_vh, stride_ob, stride_om, stride_oh, seqlen_q, seqlen_k, nheads, group, sm_scale,
    softcap, window_left, window_right, dropout_p, seed, rng_offset, HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HAS_LEFT: tl.constexpr,
    HAS_RIGHT: tl.constexpr, SOFTCAP: tl.constexpr, DROPOUT: tl.constexpr, UPCAST: tl.constexpr,
    DOT_PREC: tl.constexpr,
):
    # heaviest query tiles first (the last ones under a causal mask): shortens the tail
    pid_m = tl.num_programs(0) - 1 - tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // nheads
    h = pid_bh % nheads
    hk = h // group
    start_m = pid_m * BLOCK_M
    diag = seqlen_k - seqlen_q
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_DIM

    # -- load the query tile once; it stays in registers --
    q_ptrs = (
        Q
        + b.to(tl.int64) * stride_qb
        + h.to(tl.int64) * stride_qh
        + offs_m[:, None].to(tl.int64) * stride_qm
        + offs_d[None, :]
    )
    q = tl.load(q_ptrs, mask=(offs_m < seqlen_q)[:, None] & d_ok[None, :], other=0.0)
    if UPCAST:
        q = q.to(tl.float32)
    k_base = K + b.to(tl.int64) * stride_kb + hk.to(tl.int64) * stride_kh
    v_base = V + b.to(tl.int64) * stride_vb + hk.to(tl.int64) * stride_vh

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    bits = seed  # a dropout_bits_buffer: draw with its (seed, offset), write its words
    if DROPOUT:
        if seed.dtype.is_ptr():
            if seed.dtype.element_ty == tl.int32:
                bits = seed + _BITS_HEADER
                rng_offset = tl.load(seed + 1)
                seed = tl.load(seed)

    # -- key tiles: masked left band, unmasked middle, masked diagonal/boundary --
    lo, mid_lo, mid_hi, hi = kv_tile_ranges(
        start_m, seqlen_q, seqlen_k, diag, window_left, window_right, BLOCK_M, BLOCK_N,
        HAS_LEFT, HAS_RIGHT,
    )
    acc, l_i, m_i = _fwd_tiles(
        acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, lo, mid_lo, offs_m, offs_n,
        offs_d, seqlen_q, seqlen_k, diag, window_left, window_right, sm_scale, softcap,
        dropout_p, seed, rng_offset, pid_bh, HEAD_DIM, BLOCK_D, BLOCK_N, True, HAS_LEFT,
        HAS_RIGHT, SOFTCAP, DROPOUT, UPCAST, DOT_PREC, bits, start_m,
    )
    acc, l_i, m_i = _fwd_tiles(
        acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, mid_lo, mid_hi, offs_m, offs_n,
        offs_d, seqlen_q, seqlen_k, diag, window_left, window_right, sm_scale, softcap,
        dropout_p, seed, rng_offset, pid_bh, HEAD_DIM, BLOCK_D, BLOCK_N, False, HAS_LEFT,
        HAS_RIGHT, SOFTCAP, DROPOUT, UPCAST, DOT_PREC, bits, start_m,
    )
    acc, l_i, m_i = _fwd_tiles(
        acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, mid_hi, hi, offs_m, offs_n,
        offs_d, seqlen_q, seqlen_k, diag, window_left, window_right, sm_scale, softcap,
        dropout_p, seed, rng_offset, pid_bh, HEAD_DIM, BLOCK_D, BLOCK_N, True, HAS_LEFT,
        HAS_RIGHT, SOFTCAP, DROPOUT, UPCAST, DOT_PREC, bits, start_m,
    )

    # -- epilogue: normalise once; empty rows give 0 and lse = -inf --
    acc, lse = softmax_finish(acc, m_i, l_i, True)
    if DROPOUT:
        acc = acc * (1.0 / (1.0 - dropout_p))
    o_ptrs = (
        O
        + b.to(tl.int64) * stride_ob
        + h.to(tl.int64) * stride_oh
        + offs_m[:, None].to(tl.int64) * stride_om
        + offs_d[None, :]
    )
    tl.store(
        o_ptrs, cast_out(acc, O.dtype.element_ty, UPCAST),
        mask=(offs_m < seqlen_q)[:, None] & d_ok[None, :],
    )
    tl.store(LSE + pid_bh.to(tl.int64) * seqlen_q + offs_m, lse, mask=offs_m < seqlen_q)


@triton.jit
def _load_tile(
    ptrs, rows, n_rows, d_ok, MASK_ROWS: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr, UPCAST: tl.constexpr,
):
    """Load a (rows, BLOCK_D) tile; masks compile away when rows and D are in range."""
    if MASK_ROWS:
        x = tl.load(ptrs, mask=(rows < n_rows)[:, None] & d_ok[None, :], other=0.0)
    elif HEAD_DIM != BLOCK_D:
        x = tl.load(ptrs, mask=d_ok[None, :], other=0.0)
    else:
        x = tl.load(ptrs)
    if UPCAST:
        x = x.to(tl.float32)
    return x


@triton.jit
def _fwd_tiles(
    acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, lo, hi, offs_m, offs_n, offs_d,
    seqlen_q, seqlen_k, diag, window_left, window_right, sm_scale, softcap, dropout_p, seed,
    rng_offset, pid_bh, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
    MASKED: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
    SOFTCAP: tl.constexpr, DROPOUT: tl.constexpr, UPCAST: tl.constexpr, DOT_PREC: tl.constexpr,
    bits=0, start_m=0,
):
    """Online-softmax over key tiles [lo, hi): the one inner loop of the forward. ``bits``:
    a dropout_bits_buffer's words (an int32 pointer) to write the decisions into."""
    d_ok = offs_d < HEAD_DIM
    # int32 tile offsets + a scalar 64-bit base per step: a 2D tensor of 64-bit pointers
    # would cost 2 registers per element and spill (ptxas -v, sm_90)
    k_offs = offs_n[:, None] * stride_kn + offs_d[None, :]
    v_offs = offs_n[:, None] * stride_vn + offs_d[None, :]
    for start_n in tl.range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        k_ptrs = k_base + tl.cast(start_n, tl.int64) * stride_kn + k_offs
        v_ptrs = v_base + tl.cast(start_n, tl.int64) * stride_vn + v_offs
        k = _load_tile(k_ptrs, cols, seqlen_k, d_ok, MASKED, HEAD_DIM, BLOCK_D, UPCAST)
        s = fwd_scores(
            q, k, offs_m, cols, seqlen_q, seqlen_k, diag, window_left, window_right, sm_scale,
            softcap, MASKED, HAS_LEFT, HAS_RIGHT, SOFTCAP, DOT_PREC,
        )  # log2 units
        # -- rescale the running state, accumulate --
        m_new, alpha, p, l_i = online_softmax(m_i, l_i, s, True)
        if DROPOUT:
            keep = dropout_keep(seed, rng_offset, pid_bh, offs_m, cols, dropout_p, False,
                                seqlen_q, seqlen_k)
            if bits.dtype.is_ptr() and bits.dtype.element_ty == tl.int32:
                # the decisions taken from the dropped P tile (-1 where dropped; P >= 0),
                # so the compiler converts that tile for the words' reductions instead
                # of drawing the Philox numbers a second time in their layout (it did:
                # twice the mul.hi, ptxas sm_90)
                p = tl.where(keep, p, -1.0)
                store_dropout_bits(bits, p >= 0.0, pid_bh, offs_m, cols, seqlen_q,
                                   seqlen_k, start_m, start_n)
                p = tl.maximum(p, 0.0)
            else:
                p = tl.where(keep, p, 0.0)
        v = _load_tile(v_ptrs, cols, seqlen_k, d_ok, MASKED, HEAD_DIM, BLOCK_D, UPCAST)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PREC)
        m_i = m_new
    return acc, l_i, m_i


# ==================================================================================
# backward
# ==================================================================================


def attention_backward(
    dout, q, k, v, out, lse, *, softmax_scale=None, causal=False, window_size=(None, None),
    softcap=0.0, dropout_p=0.0, rng_state=(0, 0), dq=None, dk=None, dv=None, config=None,
    deterministic=True,
):
    """Launch the backward kernels; no autograd. Returns ``(dq, dk, dv)``.

    ``dout`` like ``out`` (any strides with a contiguous last dim); ``lse`` as returned
    by ``attention_forward``; ``rng_state`` the forward's (seed, offset).
    ``deterministic=False`` lets the sm_90 backward add dQ with racing reduce-adds
    where configs.hopper_bwd_reduce_preferred measured that faster (dQ then differs in
    its last bits from call to call); every other path is deterministic either way.
    """
    if causal:
        window_size = (window_size[0], 0)
    batch, seqlen_q, nheads, _ = q.shape
    seqlen_k, nheads_kv = k.shape[1], k.shape[2]
    device = q.device
    if dout.stride(-1) != 1:
        dout = dout.contiguous()
    # fresh buffers match by construction; the caller's are checked
    fresh = dq is None and dk is None and dv is None  # a plan's outputs
    if dq is None:
        dq = torch.empty(q.shape, dtype=q.dtype, device=device)
    else:
        _check_buffer("dq", dq, q.shape, q.dtype, device)
    if dk is None:
        dk = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    else:
        _check_buffer("dk", dk, k.shape, k.dtype, k.device)
    if dv is None:
        dv = torch.empty(v.shape, dtype=v.dtype, device=v.device)
    else:
        _check_buffer("dv", dv, v.shape, v.dtype, v.device)
    if q.numel() == 0 or k.numel() == 0:  # nothing attends: every gradient is zero
        return dq.zero_(), dk.zero_(), dv.zero_()
    # the forward's dropout decisions as bit words (a dropout_bits_buffer's, after its
    # header), which the Gluon backward can read too
    bits = rng_state[0] if dropout_p > 0 and _rng_kind(rng_state, dropout_p) == torch.int32 \
        else None
    sm90 = config is None and _maybe_sm90(device)
    gkey = plan = None
    if sm90 and fresh and not dropout_p and _gluon_plans_on(device):
        gkey = _plan_key("gbwd", (q, k, v, out, dout, lse), q.dtype, device, softmax_scale,
                         window_size, softcap, bool(deterministic), dispatch_env())
        plan = _PLANS.get(gkey)
        if plan:  # the Gluon backward this signature ran last time
            _gluon_replay(plan, (dout, q, k, v, out, lse, dq, dk, dv))
            return dq, dk, dv
    if sm90 and plan is None and hopper_bwd.hopper_bwd_supported(
        q, k, v, window=window_size, softcap=softcap, dropout_p=dropout_p,
        softmax_scale=softmax_scale, windows=True, softcaps=True, bits=bits is not None,
    ):  # sm_90 where configs.hopper_bwd_preferred: the Gluon kernels (ops/hopper_bwd.py)
        with recording() as records:
            hopper_bwd.hopper_attention_backward(
                dout, q, k, v, out, lse, softmax_scale, window_size[1] == 0, dq, dk, dv,
                left=window_size[0], softcap=softcap, dropout_p=dropout_p, bits=bits,
                deterministic=deterministic,
            )
        _keep_gluon_plan(gkey, records, (dout, q, k, v, out, lse, dq, dk, dv))
        return dq, dk, dv
    if gkey is not None and plan is None:
        _keep_plan(gkey, _NOT_GLUON)
    delta_shape = (batch, nheads, seqlen_q)
    key = None
    if (fresh and config is None and USE_PLANS and FAST_LAUNCH
            and device.type in _FAST_LAUNCH_DEVICES):
        key = _plan_key("bwd", (q, k, v, out, dout, lse), q.dtype, device, softmax_scale,
                        window_size, softcap, dropout_p, _rng_kind(rng_state, dropout_p))
        plan = _PLANS.get(key)
        if plan is not None:  # per kernel: (kernel, grid, arguments before / after the RNG)
            (pk, pg, pa), (kk, kg, ka, kt), (qk, qg, qa, qt) = plan
            seed, offset = rng_state if dropout_p > 0 else (0, 0)
            delta = torch.empty(delta_shape, dtype=torch.float32, device=device)
            stream = current_stream(device)
            with device_ctx(q):
                _run_compiled(pk, pg, stream, (out, dout, delta, *pa))
                _run_compiled(kk, kg, stream, (q, k, v, dout, lse, delta, dk, dv, *ka, seed,
                                               offset, *kt))
                _run_compiled(qk, qg, stream, (q, k, v, dout, lse, delta, dq, *qa, seed,
                                               offset, *qt))
            return dq, dk, dv
    block_d, runtime, flags = _common_params(q, k, softmax_scale, window_size, softcap,
                                             dropout_p, rng_state)
    if config is None:
        cfg, dq_cfg = _bwd_configs(block_d, window_size[1] is not None, q.dtype, device,
                                   seqlen_k)
    else:
        cfg, dq_cfg = config, config.dq()
    head_dim = q.shape[-1]
    delta = torch.empty(delta_shape, dtype=torch.float32, device=device)
    os_, dos = out.stride(), dout.stride()
    qs, ks, vs = q.stride(), k.stride(), v.stride()
    strides = (qs[0], qs[1], qs[2], ks[0], ks[1], ks[2], vs[0], vs[1], vs[2], dos[0], dos[1],
               dos[2])
    num_stages = cfg.num_stages
    dks, dvs, dqs = dk.stride(), dv.stride(), dq.stride()
    # each kernel's arguments around the RNG state (runtime[9:]: seed, offset)
    pre_grid = (_cdiv(seqlen_q, cfg.block_m), batch * nheads)
    pre_args = (os_[0], os_[1], os_[2], dos[0], dos[1], dos[2], seqlen_q, nheads, head_dim,
                block_d, cfg.block_m)
    kv_grid = (_cdiv(seqlen_k, cfg.block_n), batch * nheads_kv)
    kv_head = (*strides, dks[0], dks[1], dks[2], dvs[0], dvs[1], dvs[2], *runtime[:9])
    kv_tail = (head_dim, block_d, cfg.block_m, cfg.block_n, *flags)
    q_grid = (_cdiv(seqlen_q, dq_cfg.block_m), batch * nheads)
    q_head = (*strides, dqs[0], dqs[1], dqs[2], *runtime[:9])
    q_tail = (head_dim, block_d, dq_cfg.block_m, dq_cfg.block_n, *flags)
    with device_ctx(q):
        # the preprocess kernel takes Triton's default num_warps / num_stages
        pk = _launch(_attn_bwd_preprocess_kernel, pre_grid, device, 3,
                     (out, dout, delta, *pre_args), None, None)
        kk = _launch(_attn_bwd_dkdv_kernel, kv_grid, device, 8,
                     (q, k, v, dout, lse, delta, dk, dv, *kv_head, *runtime[9:], *kv_tail),
                     cfg.num_warps, num_stages)
        qk = _launch(_attn_bwd_dq_kernel, q_grid, device, 7,
                     (q, k, v, dout, lse, delta, dq, *q_head, *runtime[9:], *q_tail),
                     dq_cfg.num_warps, num_stages)
    if key is not None and None not in (pk, kk, qk):
        _keep_plan(key, ((pk, pre_grid, pre_args), (kk, kv_grid, kv_head, kv_tail),
                         (qk, q_grid, q_head, q_tail)))
    return dq, dk, dv


@triton.jit(do_not_specialize=["seqlen_q"])
def _attn_bwd_preprocess_kernel(
    O, DO,
    DELTA,  # O, DO: (B, M, H, D); DELTA: (B, H, M) fp32
    stride_ob, stride_om, stride_oh, stride_dob, stride_dom, stride_doh, seqlen_q, nheads,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr,
):
    """DELTA = rowsum(dO * O): the softmax-backward correction, once per row."""
    delta_rows(O, DO, DELTA, stride_ob, stride_om, stride_oh, stride_dob, stride_dom,
               stride_doh, seqlen_q, nheads, HEAD_DIM, BLOCK_D, BLOCK_M)


@triton.jit(do_not_specialize=["seqlen_q"])
def _attn_bwd_preprocess_lse2_kernel(
    O, DO, DELTA, LSE,
    ST,  # as _attn_bwd_preprocess_kernel's; LSE (B, H, M); ST (B*H*cdiv(M, BLOCK_M), 2*BLOCK_M)
    stride_ob, stride_om, stride_oh, stride_dob, stride_dom, stride_doh, seqlen_q, nheads,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr,
):
    """DELTA, and per block of BLOCK_M query rows in ST the rows' lse in log2 units (+inf
    on rows with no key, as the kernels compute it per use) then their delta again: the
    Gluon dK/dV kernel (HopperBwdConfig.lse2_pre) loads both with one TMA box. Rows past
    seqlen_q get +inf and 0 (P = 0 there)."""
    pid_bh, offs_m, delta, _ = delta_rows(O, DO, DELTA, stride_ob, stride_om, stride_oh,
                                          stride_dob, stride_dom, stride_doh, seqlen_q,
                                          nheads, HEAD_DIM, BLOCK_D, BLOCK_M)
    lse2_box(LSE, ST, pid_bh, tl.program_id(0), tl.num_programs(0), offs_m, seqlen_q, delta,
             BLOCK_M)


@triton.jit
def _load_row_stats(LSE, DELTA, bh, rows, seqlen_q):
    """lse (to log2 units; +inf on empty rows so p = 0 there) and delta of ``rows``."""
    ok = rows < seqlen_q
    lse = tl.load(LSE + bh.to(tl.int64) * seqlen_q + rows, mask=ok, other=0.0)
    lse2 = lse * 1.4426950408889634
    lse2 = tl.where(lse2 == float("-inf"), float("inf"), lse2)
    delta = tl.load(DELTA + bh.to(tl.int64) * seqlen_q + rows, mask=ok, other=0.0)
    return lse2, delta


@triton.jit(do_not_specialize=_NO_SPECIALIZE)
def _attn_bwd_dkdv_kernel(
    Q, K, V, DO, LSE, DELTA, DK,
    DV,  # Q, DO: (B, M, H, D); K, V, DK, DV: (B, N, Hkv, D)
    stride_qb, stride_qm, stride_qh, stride_kb, stride_kn, stride_kh, stride_vb, stride_vn,
    stride_vh, stride_dob, stride_dom, stride_doh, stride_dkb, stride_dkn, stride_dkh,
    stride_dvb, stride_dvn, stride_dvh, seqlen_q, seqlen_k, nheads, group, sm_scale, softcap,
    window_left, window_right, dropout_p, seed, rng_offset, HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HAS_LEFT: tl.constexpr,
    HAS_RIGHT: tl.constexpr, SOFTCAP: tl.constexpr, DROPOUT: tl.constexpr, UPCAST: tl.constexpr,
    DOT_PREC: tl.constexpr,
):
    pid_n = tl.program_id(0)
    pid_bhk = tl.program_id(1)
    nheads_kv = nheads // group
    b = pid_bhk // nheads_kv
    hk = pid_bhk % nheads_kv
    start_n = pid_n * BLOCK_N
    diag = seqlen_k - seqlen_q
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_DIM
    kv_mask = (offs_n < seqlen_k)[:, None] & d_ok[None, :]
    rows_n = offs_n[:, None].to(tl.int64)

    # -- this program's key/value tile stays in registers --
    k = tl.load(
        K
        + b.to(tl.int64) * stride_kb
        + hk.to(tl.int64) * stride_kh
        + rows_n * stride_kn
        + offs_d[None, :], mask=kv_mask, other=0.0,
    )
    v = tl.load(
        V
        + b.to(tl.int64) * stride_vb
        + hk.to(tl.int64) * stride_vh
        + rows_n * stride_vn
        + offs_d[None, :], mask=kv_mask, other=0.0,
    )
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
        bh = b * nheads + h
        q_base = Q + b.to(tl.int64) * stride_qb + h.to(tl.int64) * stride_qh
        do_base = DO + b.to(tl.int64) * stride_dob + h.to(tl.int64) * stride_doh
        for stage in tl.static_range(3):
            if stage == 0:
                s_lo, s_hi = lo, mid_lo
            elif stage == 1:
                s_lo, s_hi = mid_lo, mid_hi
            else:
                s_lo, s_hi = mid_hi, hi
            dk, dv = _bwd_dkdv_tiles(
                dk, dv, k, v, q_base, do_base, LSE, DELTA, bh, stride_qm, stride_dom, s_lo,
                s_hi, offs_m, offs_n, offs_d, seqlen_q, seqlen_k, diag, window_left,
                window_right, sm_scale, softcap, dropout_p, seed, rng_offset, HEAD_DIM, BLOCK_D,
                BLOCK_M, stage != 1, HAS_LEFT, HAS_RIGHT, SOFTCAP, DROPOUT, UPCAST, DOT_PREC,
                start_n,
            )
    dk = dk * sm_scale
    tl.store(
        DK
        + b.to(tl.int64) * stride_dkb
        + hk.to(tl.int64) * stride_dkh
        + rows_n * stride_dkn
        + offs_d[None, :], cast_out(dk, DK.dtype.element_ty, UPCAST), mask=kv_mask,
    )
    tl.store(
        DV
        + b.to(tl.int64) * stride_dvb
        + hk.to(tl.int64) * stride_dvh
        + rows_n * stride_dvn
        + offs_d[None, :], cast_out(dv, DV.dtype.element_ty, UPCAST), mask=kv_mask,
    )


@triton.jit
def _bwd_dkdv_tiles(
    dk, dv, k, v, q_base, do_base, LSE, DELTA, bh, stride_qm, stride_dom, lo, hi, offs_m,
    offs_n, offs_d, seqlen_q, seqlen_k, diag, window_left, window_right, sm_scale, softcap,
    dropout_p, seed, rng_offset, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
    BLOCK_M: tl.constexpr, MASKED: tl.constexpr, HAS_LEFT: tl.constexpr,
    HAS_RIGHT: tl.constexpr, SOFTCAP: tl.constexpr, DROPOUT: tl.constexpr, UPCAST: tl.constexpr,
    DOT_PREC: tl.constexpr, start_n=0,
):
    """Accumulate dK, dV of the key tile at ``start_n`` over query tiles [lo, hi)
    (transposed scores)."""
    d_ok = offs_d < HEAD_DIM
    q_offs = offs_m[:, None] * stride_qm + offs_d[None, :]
    do_offs = offs_m[:, None] * stride_dom + offs_d[None, :]
    for start_m in tl.range(lo, hi, BLOCK_M):
        rows = start_m + offs_m
        q_ptrs = q_base + tl.cast(start_m, tl.int64) * stride_qm + q_offs
        do_ptrs = do_base + tl.cast(start_m, tl.int64) * stride_dom + do_offs
        q = _load_tile(q_ptrs, rows, seqlen_q, d_ok, MASKED, HEAD_DIM, BLOCK_D, UPCAST)
        do = _load_tile(do_ptrs, rows, seqlen_q, d_ok, MASKED, HEAD_DIM, BLOCK_D, UPCAST)
        lse2, delta = _load_row_stats(LSE, DELTA, bh, rows, seqlen_q)
        # -- recompute P^T from the saved lse --
        sT, tT = scores_log2(
            tl.dot(k, tl.trans(q), input_precision=DOT_PREC), sm_scale, softcap, SOFTCAP
        )
        pT = tl.exp2(sT - lse2[None, :])
        if MASKED:
            keep = attn_keep(
                rows[None, :], offs_n[:, None], seqlen_q, seqlen_k, diag, window_left,
                window_right, HAS_LEFT, HAS_RIGHT,
            )
            pT = tl.where(keep, pT, 0.0)
        # -- dV += P_dropped^T dO --
        dpT = tl.dot(v, tl.trans(do), input_precision=DOT_PREC)
        if DROPOUT:
            keep_d = dropout_keep(seed, rng_offset, bh, rows, offs_n, dropout_p, True,
                                  seqlen_q, seqlen_k)
            scale_d = 1.0 / (1.0 - dropout_p)
            dv += tl.dot(
                tl.where(keep_d, pT * scale_d, 0.0).to(do.dtype), do, input_precision=DOT_PREC
            )
            dpT = tl.where(keep_d, dpT * scale_d, 0.0)
        else:
            dv += tl.dot(pT.to(do.dtype), do, input_precision=DOT_PREC)
        # -- dS = P * (dP - delta); through the softcap's tanh --
        dsT = pT * (dpT - delta[None, :])
        if SOFTCAP:
            dsT = dsT * (1.0 - tT * tT)
        dk += tl.dot(dsT.to(q.dtype), q, input_precision=DOT_PREC)
    return dk, dv


@triton.jit(do_not_specialize=_NO_SPECIALIZE)
def _attn_bwd_dq_kernel(
    Q, K, V, DO, LSE, DELTA,
    DQ,  # Q, DO, DQ: (B, M, H, D); K, V: (B, N, Hkv, D)
    stride_qb, stride_qm, stride_qh, stride_kb, stride_kn, stride_kh, stride_vb, stride_vn,
    stride_vh, stride_dob, stride_dom, stride_doh, stride_dqb, stride_dqm, stride_dqh, seqlen_q,
    seqlen_k, nheads, group, sm_scale, softcap, window_left, window_right, dropout_p, seed,
    rng_offset, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
    SOFTCAP: tl.constexpr, DROPOUT: tl.constexpr, UPCAST: tl.constexpr, DOT_PREC: tl.constexpr,
):
    # heaviest query tiles first (the last ones under a causal mask): shortens the tail
    pid_m = tl.num_programs(0) - 1 - tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // nheads
    h = pid_bh % nheads
    hk = h // group
    start_m = pid_m * BLOCK_M
    diag = seqlen_k - seqlen_q
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_DIM
    q_mask = (offs_m < seqlen_q)[:, None] & d_ok[None, :]
    rows_m = offs_m[:, None].to(tl.int64)

    q = tl.load(
        Q
        + b.to(tl.int64) * stride_qb
        + h.to(tl.int64) * stride_qh
        + rows_m * stride_qm
        + offs_d[None, :], mask=q_mask, other=0.0,
    )
    do = tl.load(
        DO
        + b.to(tl.int64) * stride_dob
        + h.to(tl.int64) * stride_doh
        + rows_m * stride_dom
        + offs_d[None, :], mask=q_mask, other=0.0,
    )
    if UPCAST:
        q = q.to(tl.float32)
        do = do.to(tl.float32)
    lse2, delta = _load_row_stats(LSE, DELTA, pid_bh, offs_m, seqlen_q)
    k_base = K + b.to(tl.int64) * stride_kb + hk.to(tl.int64) * stride_kh
    v_base = V + b.to(tl.int64) * stride_vb + hk.to(tl.int64) * stride_vh
    dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    lo, mid_lo, mid_hi, hi = kv_tile_ranges(
        start_m, seqlen_q, seqlen_k, diag, window_left, window_right, BLOCK_M, BLOCK_N,
        HAS_LEFT, HAS_RIGHT,
    )
    for stage in tl.static_range(3):
        if stage == 0:
            s_lo, s_hi = lo, mid_lo
        elif stage == 1:
            s_lo, s_hi = mid_lo, mid_hi
        else:
            s_lo, s_hi = mid_hi, hi
        dq = _bwd_dq_tiles(
            dq, q, do, lse2, delta, k_base, v_base, stride_kn, stride_vn, s_lo, s_hi, offs_m,
            offs_n, offs_d, seqlen_q, seqlen_k, diag, window_left, window_right, sm_scale,
            softcap, dropout_p, seed, rng_offset, pid_bh, HEAD_DIM, BLOCK_D, BLOCK_N,
            stage != 1, HAS_LEFT, HAS_RIGHT, SOFTCAP, DROPOUT, UPCAST, DOT_PREC,
        )
    dq = dq * sm_scale
    tl.store(
        DQ
        + b.to(tl.int64) * stride_dqb
        + h.to(tl.int64) * stride_dqh
        + rows_m * stride_dqm
        + offs_d[None, :], cast_out(dq, DQ.dtype.element_ty, UPCAST), mask=q_mask,
    )


@triton.jit
def _bwd_dq_tiles(
    dq, q, do, lse2, delta, k_base, v_base, stride_kn, stride_vn, lo, hi, offs_m, offs_n,
    offs_d, seqlen_q, seqlen_k, diag, window_left, window_right, sm_scale, softcap, dropout_p,
    seed, rng_offset, bh, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
    MASKED: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
    SOFTCAP: tl.constexpr, DROPOUT: tl.constexpr, UPCAST: tl.constexpr, DOT_PREC: tl.constexpr,
):
    """Accumulate dQ of one query tile over key tiles [lo, hi)."""
    d_ok = offs_d < HEAD_DIM
    # int32 tile offsets + a scalar 64-bit base per step: a 2D tensor of 64-bit pointers
    # would cost 2 registers per element and spill (ptxas -v, sm_90)
    k_offs = offs_n[:, None] * stride_kn + offs_d[None, :]
    v_offs = offs_n[:, None] * stride_vn + offs_d[None, :]
    for start_n in tl.range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        k_ptrs = k_base + tl.cast(start_n, tl.int64) * stride_kn + k_offs
        v_ptrs = v_base + tl.cast(start_n, tl.int64) * stride_vn + v_offs
        k = _load_tile(k_ptrs, cols, seqlen_k, d_ok, MASKED, HEAD_DIM, BLOCK_D, UPCAST)
        v = _load_tile(v_ptrs, cols, seqlen_k, d_ok, MASKED, HEAD_DIM, BLOCK_D, UPCAST)
        s, t = scores_log2(
            tl.dot(q, tl.trans(k), input_precision=DOT_PREC), sm_scale, softcap, SOFTCAP
        )
        p = tl.exp2(s - lse2[:, None])
        if MASKED:
            keep = attn_keep(
                offs_m[:, None], cols[None, :], seqlen_q, seqlen_k, diag, window_left,
                window_right, HAS_LEFT, HAS_RIGHT,
            )
            p = tl.where(keep, p, 0.0)
        dp = tl.dot(do, tl.trans(v), input_precision=DOT_PREC)
        if DROPOUT:
            keep_d = dropout_keep(seed, rng_offset, bh, offs_m, cols, dropout_p, False,
                                  seqlen_q, seqlen_k)
            dp = tl.where(keep_d, dp * (1.0 / (1.0 - dropout_p)), 0.0)
        ds = p * (dp - delta[:, None])
        if SOFTCAP:
            ds = ds * (1.0 - t * t)
        dq += tl.dot(ds.to(k.dtype), k, input_precision=DOT_PREC)
    return dq


# ==================================================================================
# test-only: the dropout pattern the kernels draw
# ==================================================================================


def dropout_mask(rng_state, batch, nheads, seqlen_q, seqlen_k, dropout_p, device):
    """Bool keep-mask (B, H, Sq, Sk) that the kernels apply for ``rng_state``; for tests
    and the validation harness (it runs the kernels' own ``dropout_keep``)."""
    keep = torch.empty((batch * nheads, seqlen_q, seqlen_k), dtype=torch.int8, device=device)
    if isinstance(rng_state[0], torch.Tensor):  # draw_rng_state's on-device pair
        rng_state = rng_state[0].tolist()
    seed, rng_offset = rng_state
    grid = (_cdiv(seqlen_q, 16), _cdiv(seqlen_k, 16), batch * nheads)
    with device_ctx(keep):
        _dropout_mask_kernel[grid](
            keep, seqlen_q, seqlen_k, float(dropout_p), seed, rng_offset, BLOCK=16
        )
    return keep.view(batch, nheads, seqlen_q, seqlen_k).bool()


def dropout_bits_mask(words, batch, nheads, seqlen_q, seqlen_k):
    """Bool (B, H, Sq, Sk) decisions held in a dropout_bits_buffer's words (the tensor
    after its header; the format at _common.BITS_PAD); for tests. Elements whose blocks
    no forward tile visited read whatever the buffer held."""
    nr16, nc8 = _cdiv(seqlen_q, BITS_PAD) * 8, _cdiv(seqlen_k, BITS_PAD) * 16
    n = batch * nheads * nr16 * nc8 * 4
    blocks = words[:n].view(batch * nheads, nr16, nc8, 2, 2).long() & 0xFFFFFFFF
    r = torch.arange(seqlen_q, device=words.device)[:, None]
    c = torch.arange(seqlen_k, device=words.device)[None, :]
    w = blocks[:, r // 16, c // 8, (r % 16) // 8, c % 2]
    keep = (w >> (4 * (r % 8) + (c % 8) // 2)) & 1
    return keep.view(batch, nheads, seqlen_q, seqlen_k).bool()


DROPOUT_BITS_MAX_BYTES = 256 << 20  # larger masks: the kernels draw their own (Philox)
# Dropout bits: training calls (the autograd Function's eager path) have the forward
# write its dropout decisions as bits, which both backward kernels read instead of
# drawing them again (three Philox passes -> one). Session 16 (`s16e`): with the bits
# drawn by a kernel of their own, reading them made every attention kernel cheaper (-31
# us per layer at MiniGPT's 64 x 256, -127 at 16 x 1024), but that kernel cost as much
# (36.6 / 128.5 us). Session 17: the forward writes them (+42 / +68 us per layer, `s17a`),
# and the Gluon backward reads them (`s17f`: its kernels 80.2 / 174.2 us against the
# portable backward's 107.7 / 238.8 with bits, 131.1 / 325.0 drawing). So by default
# ("auto", FLASHTILE_DROPOUT_BITS unset) on where the Gluon backward will read them
# (hopper_bwd.hopper_bwd_supported with bits): the graphed MiniGPT step 7.19 -> 7.14 ms
# at 64 x 256 (capped kernels then) and 8.83 -> 8.48 at 16 x 1024. =1: everywhere
# (the portable backward reads them too); =0: never.
DROPOUT_BITS_ENV_VAR = "FLASHTILE_DROPOUT_BITS"
_BITS_HEADER = tl.constexpr(DROPOUT_BITS_HEADER)  # the forward kernel's view of it


def dropout_bits_on(q, k, v, left, right, softcap, dropout_p) -> bool:
    """Whether this training call's forward writes its dropout decisions as bits:
    FLASHTILE_DROPOUT_BITS read at each call (so one process can time both; `train
    --bench flashtile@FLASHTILE_DROPOUT_BITS=0`), unset: where the Gluon backward will
    read them (``left`` / ``right`` the launchers' window, causal as right = 0)."""
    mode = env_mode(DROPOUT_BITS_ENV_VAR)
    if mode != "auto":
        return mode == "on"
    return _maybe_sm90(q.device) and hopper_bwd.hopper_bwd_supported(
        q, k, v, window=(left, right), softcap=softcap, dropout_p=dropout_p,
        windows=True, softcaps=True, bits=True)


def dropout_bits_buffer(rng_state, batch, nheads, seqlen_q, seqlen_k, device):
    """An int32 buffer for the forward to draw ``rng_state``'s decisions into as bits:
    DROPOUT_BITS_HEADER words ((seed, offset), which the forward loads and draws with),
    then per batch * head ``bh`` the bit blocks of _common.BITS_PAD (Sq and Sk padded to
    multiples of 128, one bit per element; blocks of 16 rows x 8 keys whose words are
    warp ballots of the wgmma layout). Passed as the forward's seed (``(buffer, 0)``),
    the forward writes the words (_common.store_dropout_bits); the words
    (``buffer[DROPOUT_BITS_HEADER:]``) passed as the backward's seed, its kernels read
    them (_common.dropout_keep; the Gluon backward's bits_words_mma) instead of
    drawing. Words of tiles no kernel visits (a causal mask's upper triangle) stay
    unwritten: every element read there is masked. ``rng_state``: host ints (written
    with one fill, no copy from the host) or draw_rng_state's on-device pair (copied on
    the device: capture-safe). None when the words would exceed DROPOUT_BITS_MAX_BYTES."""
    per_bh = _cdiv(seqlen_q, BITS_PAD) * _cdiv(seqlen_k, BITS_PAD) * BITS_PAD**2 // 32
    if batch * nheads * per_bh * 4 > DROPOUT_BITS_MAX_BYTES:
        return None
    buf = torch.empty(DROPOUT_BITS_HEADER + batch * nheads * per_bh, dtype=torch.int32,
                      device=device)
    seed, offset = rng_state
    if isinstance(seed, torch.Tensor):  # draw_rng_state's on-device pair
        buf[:2].copy_(seed)
    else:  # both below 2**31: one int64 fill, little-endian (seed, offset)
        buf[:2].view(torch.int64).fill_(seed + (offset << 32))
    return buf


@triton.jit
def _dropout_mask_kernel(
    KEEP, seqlen_q, seqlen_k, dropout_p, seed, rng_offset, BLOCK: tl.constexpr
):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    bh = tl.program_id(2)
    keep = dropout_keep(seed, rng_offset, bh, rows, cols, dropout_p, False)
    ptrs = KEEP + bh.to(tl.int64) * seqlen_q * seqlen_k + rows[:, None] * seqlen_k + cols[None, :]
    tl.store(ptrs, keep.to(tl.int8), mask=(rows[:, None] < seqlen_q) & (cols[None, :] < seqlen_k))
