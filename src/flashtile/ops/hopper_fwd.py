"""The Hopper (sm_90) forward: Gluon kernels with TMA, an mbarrier-guarded shared-memory
ring and asynchronous wgmma. The portable tile-level kernel (ops/flash.py) stays the path
for other GPUs, the interpreter and dropout at hd 256 or with a window or softcap
(stage A draws dropout at hd 64 / 128: ``dropout_config``), for a softcap at hd 64 or under
FLASHTILE_HOPPER_SOFTCAP=0 (at hd 128 / 256 it runs stage A or C: SOFTCAP, ``softcap_mode``),
and for sliding windows under FLASHTILE_HOPPER_WINDOW=0 (by default they run stage A or C,
``window_config``); the backward
runs there (it recomputes from q, k, v, out and lse, which this forward returns the same
way) where the Gluon backward of ops/hopper_bwd.py is not preferred
(configs.hopper_bwd_preferred). Device helpers shared with that backward live in
ops/_gluon_common.py.

Layers, top to bottom:
    hopper_supported              may this call take the Hopper path? (dispatch predicate)
    default_config                the shipped schedule of a call (configs.hopper_fwd_schedule),
                                  None where the portable kernel is faster
    call_config                   default_config, or window_config for a windowed or
                                  softcapped call
    window_config                 a sliding window's (or softcap's) config: stage C where
                                  the schedule runs C, else stage A; their left-edge
                                  tiles (HAS_LEFT, window_tile_range) are masked
    hopper_attention_forward      launcher: (out, lse), no autograd; flash.attention_forward
                                  calls it first
    hopper_varlen_forward         the same kernels over packed variable-length sequences
                                  (ops/varlen.py, from 8k-long sequences; =1 / =0
                                  in FLASHTILE_HOPPER_VARLEN force it on / off):
                                  VARLEN programs build TMA descriptors over their own
                                  sequence's rows on the device (_program_seq)
    _fwd_kernel                   stage A: one partition, TMA prefetch ring, async wgmma
    _fwd_ws_kernel                stage B: warp-specialised, a 1-warp TMA producer feeding
                                  the consumer warpgroups; QK^T of tile t+1 overlaps the
                                  softmax of tile t
    _fwd_c_kernel                 stage C (HopperFwdConfig.pingpong): FA3's
                                  consumer schedule, two warpgroups on their own 64-row
                                  tiles in ping-pong, PV(t) under the softmax of t+1

Notation: B batch, H query heads, Hkv key/value heads (H = group * Hkv), M = seqlen_q,
N = seqlen_k, D head dim (64, 128 or 256 here). One program per (query tile, b * H + h);
grid (cdiv(M, BLOCK_M), B * H); causal grids run the longest (bottom) query tiles first.
Each consumer warp owns 16 query rows: BLOCK_M = 16 * num_warps, so 8 warps are two
warpgroups of 64 rows that issue their own wgmma.
Key tiles t = 0 .. n_tiles-1 (start t * BLOCK_N); tiles below n_full need no mask
(off-band); the rest (causal diagonal band, the ragged last tile) are masked (on-band).
Stage A visits them in order, or last to first (the masked ones first) in a
register-capped config (HopperFwdConfig.max_regs: hd 64 causal at 128 registers, so two
programs share an SM).
TMA descriptors address q/k/v/out as the 4D tensors they are ((B, S, H, D), any
16-byte-aligned strides); rows past the sequence end are zero-filled on load and
clipped on store, per (batch, head), so no sequence length needs to be a tile multiple.
"""

from __future__ import annotations

import dataclasses
import functools
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
from ._common import (
    DROPOUT_BITS_HEADER,
    _bits_block,
    device_capability,
    device_ctx,
    env_mode,
    is_interpreting,
    sm_count,
    tanh_f32,
)
from ._gluon_common import GL_DTYPES as _GL_DTYPES
from ._gluon_common import (
    alloc_ring_pair,
    bits_keep,
    bits_words_mma,
    dropout_keeps_mma,
    dropout_thr16,
    dropped,
    exp2_mixed,
    issue_kv,
    issue_kv_slot,
    scratch_allocator,
    seq_bounds,
    seq_desc,
    sm90_source,
    smid,
    store_bits_mma,
    tile_ids,
    trace_stamp,
    window_tile_range,
)
from ._gluon_common import kv_tile_range as _tile_range
from ._gluon_common import launch as _gluon_launch
from ._gluon_common import mma_layout as _mma_layout
from ._gluon_common import scores_masked as _scores_masked
from ._gluon_common import tma_addressable as _tma_addressable
from ._gluon_common import tma_desc as _desc
from ._launch import record as _record

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
    q, k, v, causal=False, window=(None, None), softcap=0.0, dropout_p=0.0, softmax_scale=None,
    windows=False, softcaps=False, dropouts=False,
):
    """True when the Gluon forward can run this call: an sm_90 device (not the
    interpreter, not disabled by FLASHTILE_DISABLE_HOPPER=1) and a problem it covers
    (``hopper_problem_ok``).

    ``window`` is the launchers' ``(left, right)``: None for an unbounded side, any int a
    bound. Causal is ``causal=True`` or ``right == 0`` with no left bound. ``windows``:
    the caller can run a left bound (a sliding window) through ``window_config``;
    ``softcaps``: a softcap (stages A and C, opt-in: ``softcap_mode``); ``dropouts``:
    dropout (stage A, ``dropout_config``).
    """
    if _hopper_disabled() or is_interpreting():
        return False
    if not (q.is_cuda and k.is_cuda and v.is_cuda):
        return False
    if device_capability(q.device) != (9, 0):
        return False
    return hopper_problem_ok(q, k, v, causal, window, softcap, dropout_p, softmax_scale,
                             windows, softcaps, dropouts)


def hopper_problem_ok(
    q, k, v, causal=False, window=(None, None), softcap=0.0, dropout_p=0.0, softmax_scale=None,
    windows=False, softcaps=False, dropouts=False,
):
    """The device-independent half of ``hopper_supported``: fp16/bf16, head dim in
    HOPPER_HEAD_DIMS, full or causal masking (with ``windows`` and ``window_mode`` on,
    also a left bound >= 0: a sliding window, causal or not; no right bound other than
    causal's; with ``softcaps`` and ``softcap_mode`` on, a softcap > 0; dropout only with
    ``dropouts`` and ``dropout_mode`` on, at configs.HOPPER_DROPOUT_HEAD_DIMS, without a
    window or softcap, and where some element can be kept: ``dropout_thr16``), a
    positive scale, non-empty q and k, and
    TMA-addressable tensors (16-byte aligned base and strides, last stride 1)."""
    if q.dtype not in _DTYPES or not (q.dtype == k.dtype == v.dtype):
        return False
    if q.shape[-1] not in HOPPER_HEAD_DIMS or k.shape[-1] != q.shape[-1]:
        return False
    left, right = window
    if causal:
        right = 0
    if right not in (None, 0):
        return False
    if left is not None and not (windows and left >= 0 and window_mode() != "off"):
        return False
    if softcap and not (softcaps and softcap > 0 and softcap_mode() != "off"):
        return False
    if dropout_p and not (dropouts and dropout_mode() != "off" and left is None
                          and not softcap and q.shape[-1] in configs.HOPPER_DROPOUT_HEAD_DIMS
                          and _dropout_thr16(float(dropout_p)) is not None):
        return False
    if softmax_scale is not None and not softmax_scale > 0:
        return False
    if k.shape[1] == 0 or q.shape[1] == 0:
        return False
    return all(_tma_addressable(x) for x in (q, k, v))


# ==================================================================================
# launcher
# ==================================================================================


def hopper_attention_forward(q, k, v, softmax_scale, causal, out, lse, config=None,
                             left=None, softcap=0.0, dropout_p=0.0, rng_state=(0, 0)):
    """Run the Gluon forward into ``out`` ((B, M, H, D), q's dtype, TMA-addressable) and
    ``lse`` ((B, H, M) fp32, contiguous). Call only when ``hopper_supported`` holds.
    ``left``: a sliding window's left bound (row i sees keys from i + N - M - left on;
    stages A and C, ``window_config``); ``softcap`` > 0: scores softcap * tanh(s /
    softcap) (the same). ``dropout_p`` > 0: attention dropout with ``rng_state`` as
    flash.attention_forward takes it ((seed, offset) ints, the on-device int64 pair, or a
    dropout_bits_buffer whose words this forward writes), the portable kernels' decisions
    bit for bit (stage A, ``dropout_config``). Returns ``(out, lse)``; lse in natural log,
    -inf on rows that see no key."""
    batch, seqlen_q, _, head_dim = q.shape
    seqlen_k = k.shape[1]
    cfg = config or default_config(head_dim, causal, seqlen_q)
    if cfg is None:  # the table prefers the portable kernel here; a direct call runs A
        cfg = configs.hopper_fwd_config(head_dim, causal, seqlen_q)
    if not _tma_addressable(out):  # a caller's out= view TMA cannot store to
        tmp = torch.empty(q.shape, dtype=q.dtype, device=q.device)
        hopper_attention_forward(q, k, v, softmax_scale, causal, tmp, lse, cfg, left,
                                 softcap, dropout_p, rng_state)
        return out.copy_(tmp), lse
    drop = {}
    if dropout_p:
        if cfg.schedule != "A":
            raise ValueError(f"dropout runs on stage A: {cfg}")
        thr16 = _dropout_thr16(float(dropout_p))
        seed = rng_state[0]
        bits = None
        if isinstance(seed, torch.Tensor) and seed.dtype == torch.int32:
            bits = seed[DROPOUT_BITS_HEADER:]  # a dropout_bits_buffer: its words
        drop = dict(seed=seed, rng_offset=rng_state[1], drop_thr=thr16,
                    keep_p=1.0 - float(dropout_p), BITS=bits, DROPOUT=True)
        if bits is not None and dropout_ws_mode() == "on":  # a dropout partition
            drop.update(DROP_WS=True, DROP_REGS=DROP_WS_REGS)
    if not drop:  # one launch a plan may replay (ops/_launch.make_plan)
        _record("expect", 1)
    with device_ctx(q):
        _launch(cfg, seqlen_q, batch, q, k, v, out, lse, (None,) * 6, seqlen_q, seqlen_k,
                softmax_scale, causal, left=left, softcap=softcap, **drop)
    return out, lse


def _launch(cfg, rows, batch, q, k, v, out, lse, varlen_ptrs, seqlen_q, seqlen_k,
            softmax_scale, causal, left=None, softcap=0.0, trace=None, **varlen):
    """Launch ``cfg``'s kernel over (cdiv(rows, block_m), batch * H) on 4D (B, S, H, D)
    tensors: the dense call, or (``varlen_ptrs`` = packed Q, K, V, O, cu_seqlens_q / k and
    VARLEN=True) the varlen one, whose (1, T, H, D) views carry the descriptors' layout.
    ``left`` (a sliding window's left bound) and ``softcap`` need stage A or C."""
    head_dim, nheads, nheads_kv = q.shape[3], q.shape[2], k.shape[2]
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(head_dim)
    m_tiles = triton.cdiv(rows, cfg.block_m)
    # a paired config's causal call with an odd query-tile count: the round robin would
    # be unbalanced (s20a), so the one-shot grid takes it unless the switch forces it on
    odd = bool(cfg.paired and causal and m_tiles % 2)
    kernel, block_m, num_warps, extra = _kernel_args(cfg, persistent_ok=not varlen,
                                                     unpaired=odd)
    qk_scale = float(scale) * 1.4426950408889634
    if kernel is not _fwd_ws_kernel:
        extra = dict(extra, left=0 if left is None else int(left), HAS_LEFT=left is not None)
        if softcap:  # scores tanh(qk * scale / softcap), softmax scale softcap * log2(e)
            extra.update(cap_scale=float(scale) / float(softcap), SOFTCAP=True)
            qk_scale = float(softcap) * 1.4426950408889634
    elif left is not None or softcap:
        raise ValueError(f"a sliding window or softcap runs on stage A or C, not B: {cfg}")
    if kernel is _fwd_kernel and cfg.tile_heads and causal and not varlen.get("VARLEN"):
        extra = dict(extra, TILE_MAJOR=True, tile_heads=min(cfg.tile_heads, batch * nheads))
    if trace is not None:  # stage C's timeline (scripts/trace_stage_c.py)
        if kernel not in (_fwd_c_kernel, _fwd_cp_kernel):
            raise ValueError(f"a timeline is traced in stage C only: {cfg}")
        extra = dict(extra, TRACE=trace)
    if kernel is _fwd_cp_kernel:
        n_work = m_tiles * batch * nheads
        programs = min(n_work, PERSISTENT_PROGRAMS or sm_count(q.device))
        if cfg.paired and causal and m_tiles % 2 == 0:
            extra = dict(extra, PAIRED=True)
            programs = min(programs, n_work // 2)  # every program gets a unit
        _gluon_launch(
            kernel, (programs, 1), q.device, _desc(q, block_m),
            _desc(k, cfg.block_n), _desc(v, cfg.block_n), _desc(out, block_m), lse,
            seqlen_q, seqlen_k, nheads, nheads // nheads_kv, m_tiles, n_work, qk_scale,
            HEAD_DIM=head_dim, BLOCK_M=block_m, BLOCK_N=cfg.block_n,
            NUM_STAGES=cfg.num_stages, CAUSAL=bool(causal), num_warps=num_warps, **extra,
        )
        return
    _gluon_launch(
        kernel, (triton.cdiv(rows, cfg.block_m), batch * nheads), q.device, _desc(q, block_m),
        _desc(k, cfg.block_n), _desc(v, cfg.block_n), _desc(out, block_m),
        lse, *varlen_ptrs, seqlen_q, seqlen_k, nheads, nheads // nheads_kv,
        qk_scale, HEAD_DIM=head_dim, BLOCK_M=block_m,
        BLOCK_N=cfg.block_n, NUM_STAGES=cfg.one_shot_stages, CAUSAL=bool(causal),
        num_warps=num_warps, **extra, **_options(cfg), **varlen,
    )


def hopper_varlen_supported(q, k, v, out, causal, window, softcap, softmax_scale=None) -> bool:
    """May ops/varlen.py's forward take the Gluon path: packed (T, H, D) q / k / v / out
    that hopper_supported's rules accept as (1, T, H, D) views (sm_90, fp16/bf16, head
    dim 64/128/256, full or causal or (unless FLASHTILE_HOPPER_WINDOW=0) a sliding window;
    a softcap unless FLASHTILE_HOPPER_SOFTCAP=0; TMA-addressable), and a schedule other
    than the portable kernel for the call's max_seqlen_q (checked by the launcher)."""
    if varlen_disabled():
        return False
    views = [x.unsqueeze(0) for x in (q, k, v)]
    return hopper_supported(*views, causal, window, softcap, 0.0, softmax_scale,
                            windows=True, softcaps=True) and _tma_addressable(out)


def dropout_mode() -> str:
    """FLASHTILE_HOPPER_DROPOUT: unset ("auto") or "1": dropout runs on the Gluon forward
    where it covers the call (``hopper_problem_ok``); "0": on the portable forward. With
    the bit blocks (s18c, 64 x 256 / 16 x 1024 at MiniGPT's 6 heads of 64): 56.7 / 121.8
    us per call against the portable forward's 96.5 / 223.4 (cuDNN 40.8 / 103.7); the
    graphed MiniGPT step 6.99 / 8.09 ms against 7.21 / 8.70 (cuDNN 6.94 / 7.83)."""
    return env_mode("FLASHTILE_HOPPER_DROPOUT")


def dropout_ws_mode() -> str:
    """FLASHTILE_HOPPER_DROPOUT_WS=1: a training call's dropout (the forward writing the
    bit blocks) is drawn by a partition of its own, 4 warps beside stage A's consumers
    (``_drop_producer``); unset or 0: by the consumers, in their step loop. Opt-in until
    measured."""
    mode = env_mode("FLASHTILE_HOPPER_DROPOUT_WS")
    return "off" if mode == "auto" else mode


# registers per thread of the dropout partition (setmaxnreg; the consumers get the rest
# of the 64K file: (65536 - 128 * 96) / 256 = 208)
DROP_WS_REGS = 96


def dropout_config(head_dim, causal, seqlen_q):
    """A dropout call's config: stage A uncapped (configs.hopper_fwd_dropout_config)."""
    return configs.hopper_fwd_dropout_config(head_dim, causal, seqlen_q)


@functools.lru_cache(maxsize=64)
def _dropout_thr16(dropout_p: float):
    return dropout_thr16(dropout_p)


def varlen_mode() -> str:
    """"auto" (FLASHTILE_HOPPER_VARLEN unset: the Gluon varlen forward from
    configs.HOPPER_VARLEN_MIN_SEQLEN on, where it measured faster than the portable
    varlen kernel), "on" (=1: wherever it can run) or "off" (=0 or empty)."""
    return env_mode("FLASHTILE_HOPPER_VARLEN")


def varlen_disabled() -> bool:
    return varlen_mode() == "off"


def hopper_varlen_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, softmax_scale,
                          causal, out, lse, config=None, left=None, softcap=0.0):
    """The Gluon forward over packed variable-length sequences (ops/varlen.py's layout:
    q / out (TQ, H, D), k / v (TK, Hkv, D), lse (H, TQ) fp32, int32 cu_seqlens). Grid
    (query tiles of the longest sequence, B * H); each program builds TMA descriptors
    over its own sequence's rows (_program_seq), so the kernels are the dense ones.
    Returns (out, lse), or None where the shipped schedule for max_seqlen_q is the
    portable kernel, or (``varlen_mode`` "auto", no ``config``) the sequences are shorter
    than configs.hopper_varlen_preferred asks: then the caller runs its own. ``left``: a
    sliding window's left bound, ``softcap`` > 0 a softcap (stage A or C,
    ``window_config``). Call only when hopper_varlen_supported holds."""
    if config is None and varlen_mode() == "auto" and not configs.hopper_varlen_preferred(
            max_seqlen_q, q.shape[-1]):
        return None
    cfg = config or _varlen_config(call_config(q.shape[-1], causal, max_seqlen_q, left,
                                               softcap), q.shape[-1], causal, max_seqlen_q,
                                   left is not None or bool(softcap))
    if cfg is None:
        return None
    with device_ctx(q), scratch_allocator(q.device):
        _launch(cfg, max_seqlen_q, cu_seqlens_q.shape[0] - 1,
                *(x.unsqueeze(0) for x in (q, k, v, out)), lse,
                (q, k, v, out, cu_seqlens_q, cu_seqlens_k), 0, 0, softmax_scale, causal,
                left=left, softcap=softcap, VARLEN=True)
    return out, lse


def _varlen_config(cfg, head_dim, causal, max_seqlen_q, masked):
    """The config a varlen call runs, from the dense call's: varlen launches keep the
    one-shot grid, and hd 256's persistent split ring without O buffers (shipped dense
    since session 35) leaves them what they ran before it: stage A, or with a window or
    softcap from 8k queries (or FLASHTILE_HOPPER_SCHEDULE=C) the one-shot stage C
    (7386e40), with the turn waits on as then. s35a (H100) measured the one-shot C level
    with A on an unwindowed 8k varlen batch, and a 16k one died there with 'unspecified
    launch failure' in its timing loop. Not reproduced since: s35b (H200, fresh
    processes, CUDA_LAUNCH_BLOCKING=1, 60 flushed calls of each path) and s36a (H100,
    s35a's env_ab run itself, and the one-shot C with the backward) all passed, and s36a
    measured A level with or 1-2.5% faster than the one-shot C at 8k / 16k (forward +
    backward). So varlen keeps A, on the measurement as well."""
    if cfg is None or not (head_dim > 128 and cfg.persistent):
        return cfg
    return _varlen_fallback(cfg, head_dim, causal, max_seqlen_q, masked,
                            os.environ.get("FLASHTILE_HOPPER_SCHEDULE", "").upper() == "C")


@functools.lru_cache(maxsize=256)
def _varlen_fallback(cfg, head_dim, causal, max_seqlen_q, masked, forced_c):
    """_varlen_config's substitute, memoised (no dataclasses.replace per call)."""
    if forced_c or (masked and max_seqlen_q >= VARLEN_MASKED_C_MIN_SEQLEN_HD256):
        return dataclasses.replace(cfg.one_shot(), turn_waits=True)
    return configs.hopper_fwd_config(head_dim, causal, max_seqlen_q)


def window_mode() -> str:
    """Sliding windows on the Gluon kernels: "auto" (unset) and "on" (=1) run them (the
    forward where configs.hopper_fwd_schedule runs a Gluon stage, ``window_config``; the
    two-kernel backward at hd 64 / 128 where hopper_bwd's table runs it), "off" (=0 or
    empty) keeps them on the portable kernels. On by default since session 12: 286 + 96
    GPU tests (634c4d4, 66647e8) and the covering validation grid (766a526) passed with
    it, and it measured 1.09-1.71x the portable forward and 1.21-1.36x its forward +
    backward at hd 64 / 128 (benchmarks/results.md, session 12)."""
    return env_mode("FLASHTILE_HOPPER_WINDOW")


def softcap_mode() -> str:
    """Softcap on the Gluon kernels: "auto" (unset) and "on" (=1) run them (the forward's
    stages A and C at hd 128 / 256, ``window_config``; the two-kernel backward at hd 64 /
    128), "off" (=0 or empty) keeps softcapped calls on the portable kernels. On by
    default since session 13: 184 + 195 GPU tests and the HF Gemma-2 models passed
    (7386e40, 925238e), and with tanh.approx (925238e) it measured 1.45-1.60x the
    portable forward at hd 128 / 256 and 1.06-1.35x its forward + backward
    (benchmarks/results.md, session 13)."""
    return env_mode("FLASHTILE_HOPPER_SOFTCAP")


def call_config(head_dim, causal, seqlen_q, left=None, softcap=0.0):
    """The config a dense or varlen call runs: ``default_config``, or ``window_config``
    when it has a sliding window's left bound or a softcap (None: the portable kernel)."""
    if left is None and not softcap:
        return default_config(head_dim, causal, seqlen_q)
    return window_config(head_dim, causal, seqlen_q, bool(softcap))


def window_config(head_dim, causal, seqlen_q, softcap=False):
    """The config of a windowed or softcapped call (causal or not) where the shipped
    schedule runs a Gluon stage at all (``default_config`` not None; else None, the
    portable kernel): stage C where the schedule runs C (since session 12, its
    warpgroups' left-edge tiles; stage A before), else stage A (B has neither). With
    ``softcap`` at hd 64: None (the portable kernel measured faster there). A forced
    schedule (FLASHTILE_HOPPER_SCHEDULE=A|B|C, for A/B runs) overrides that exception.
    Memoised per FLASHTILE_HOPPER_SCHEDULE, as default_config."""
    return _window_config(head_dim, causal, seqlen_q, bool(softcap),
                          os.environ.get("FLASHTILE_HOPPER_SCHEDULE", "").upper(),
                          os.environ.get(OVERRIDES_ENV_VAR, ""))


@functools.lru_cache(maxsize=1024)
def _window_config(head_dim, causal, seqlen_q, softcap, forced, overrides=""):
    cfg = _default_config(head_dim, causal, seqlen_q, forced, overrides)
    if cfg is None or cfg.pingpong:
        return cfg
    if softcap and head_dim <= 64 and not forced:
        return None  # the portable kernel (the note below)
    return _overridden(configs.hopper_fwd_config(head_dim, causal, seqlen_q, windowed=True),
                       overrides)


# A softcapped forward at hd 64 runs the portable kernel: with tanh.approx (925238e,
# `s13soft`, bench_window --softcap 50, causal, windows 1024 / 4096) it read 255.5 / 306.7
# TFLOPS against stage A's 251.5 / 296.5 and stage C's 228.8 / 295.9; ab8ba26 `s13check`:
# 255.5 / 306.2 (and 254.7 / 297.2) against 251.3 / 297.7. Within 3.4% either way: the
# score's second MUFU op (tanh beside exp2) sets the pace there whatever the schedule.
# Its backward stays on the Gluon kernels (forward + backward 1.14-1.18x the portable
# path in those runs).
# hd 256 windows ran stage C from 8k queries before the schedule ran C there (7386e40,
# `varlenwin`, bench_window: Gemma-2's shape, causal, window 4096, the one-shot stage C /
# A 556 / 490 TFLOPS at 8k and 560 / 506 at 16k); since session 35 dense calls follow
# the schedule (stage C, persistent, from 1k) and varlen ones keep the old rule
# (_varlen_config) from this query length.
VARLEN_MASKED_C_MIN_SEQLEN_HD256 = 8192


# FLASHTILE_HOPPER_FWD_OVERRIDES="field=value,...": fields of the config a call runs
# replaced (configs.parse_overrides: ints, "none"), for A/B runs through the public call
# (scripts/env_ab.py), as the backward's FLASHTILE_HOPPER_BWD_OVERRIDES
OVERRIDES_ENV_VAR = "FLASHTILE_HOPPER_FWD_OVERRIDES"


def _overridden(cfg, overrides):
    if cfg is None or not overrides:
        return cfg
    return dataclasses.replace(cfg, **configs.parse_overrides(overrides))


def default_config(head_dim, causal, seqlen_q):
    """The shipped Gluon config of a call (configs.hopper_fwd_schedule picks stage A, B or
    C), or None where the portable kernel measured faster: then flash.attention_forward
    falls through to it. FLASHTILE_HOPPER_SCHEDULE=A|B|C forces a stage everywhere (A/B
    runs of the whole test grid); unset, the shipped table. FLASHTILE_HOPPER_FWD_OVERRIDES
    replaces fields of the result (OVERRIDES_ENV_VAR)."""
    return _default_config(head_dim, causal, seqlen_q,
                           os.environ.get("FLASHTILE_HOPPER_SCHEDULE", "").upper(),
                           os.environ.get(OVERRIDES_ENV_VAR, ""))


@functools.lru_cache(maxsize=1024)
def _default_config(head_dim, causal, seqlen_q, forced, overrides=""):
    schedule = forced if forced in ("A", "B", "C") else configs.hopper_fwd_schedule(
        head_dim, causal, seqlen_q)
    if schedule == "portable":
        return None
    if schedule == "C":
        return _overridden(configs.hopper_fwd_config_c(head_dim, causal, seqlen_q),
                           overrides)
    cfg = configs.hopper_fwd_config(head_dim, causal, seqlen_q)
    if schedule == "B":
        cfg = dataclasses.replace(cfg, warp_specialize=True)
    return _overridden(cfg, overrides)


def _mma_regs(load_regs: int) -> int:
    """Stage C's consumer registers per thread (setmaxnreg): what the 64K register file
    leaves after the producer, over 3 warpgroups (the 1-warp producer occupies one),
    a multiple of 8, at most 240 (FA3's 24 / 240 / 240)."""
    return min(240, (65536 - 128 * load_regs) // 256 // 8 * 8)


def persistent_mode() -> str:
    """FLASHTILE_HOPPER_C_PERSISTENT: "on" / "off" force stage C's persistent grid
    (HopperFwdConfig.persistent) on or off for every dense stage C launch (A/B runs,
    tests); unset ("auto"), each config's own choice."""
    return env_mode("FLASHTILE_HOPPER_C_PERSISTENT")


# programs of the persistent grid: None = one per SM; tests set a few, so that each
# program walks many work items
PERSISTENT_PROGRAMS: int | None = None


def _kernel_args(cfg, persistent_ok: bool = True, unpaired: bool = False):
    """(kernel, BLOCK_M constexpr = TMA box rows of q/o, num_warps, extra constexprs).
    Stage C launches one consumer warpgroup as the default partition (num_warps 4) and
    tiles q/o by warpgroup (block_m / 2 rows); a program still covers cfg.block_m rows.
    ``persistent_ok``: False for varlen launches, which keep the one-shot grid.
    ``unpaired``: a paired config's call that cannot pair its items (causal, odd query-tile
    count) takes the one-shot grid unless FLASHTILE_HOPPER_C_PERSISTENT forces it on."""
    if cfg.pingpong:
        turns = env_mode("FLASHTILE_HOPPER_C_PINGPONG")
        pingpong = cfg.turn_waits if turns == "auto" else turns == "on"
        mode = persistent_mode()
        persistent = persistent_ok and (
            mode == "on" or (mode == "auto" and cfg.persistent and not unpaired))
        extra = dict(LOAD_REGS=cfg.load_regs, MMA_REGS=_mma_regs(cfg.load_regs),
                     PINGPONG=pingpong, K_FIRST=cfg.c_k_wait_first)
        if persistent:
            extra["V_STAGES"] = cfg.v_stages
            if cfg.v_stages and not cfg.o_stage:
                extra["O_VIA_Q"] = True
            if cfg.o_lag:
                extra["O_LAG"] = True
            if cfg.q_early:
                extra["Q_EARLY"] = True
        return (_fwd_cp_kernel if persistent else _fwd_c_kernel, cfg.block_m // 2,
                cfg.num_warps // 2, extra)
    if cfg.warp_specialize:
        return _fwd_ws_kernel, cfg.block_m, cfg.num_warps, dict(LOAD_REGS=cfg.load_regs)
    extra = dict(MASKED_FIRST=cfg.max_regs is not None, EXP2_EMU=cfg.exp2_emu,
                 EARLY_EXPECT=cfg.early_expect)
    if cfg.q_regs:
        extra["Q_REGS"] = True
    if cfg.lazy_rescale:
        extra["LAZY"] = True
    return _fwd_kernel, cfg.block_m, cfg.num_warps, extra


def _options(cfg) -> dict:
    """Compile options of a config beyond num_warps: ``maxnreg`` when a stage A config is
    capped (B and C ignore the cap)."""
    if cfg.max_regs is None or cfg.schedule != "A":
        return {}
    return dict(maxnreg=cfg.max_regs)


# ==================================================================================
# device helpers shared by both kernels
# ==================================================================================


@gluon.jit
def _softmax_step(qk, m_i, l_i, qk_scale, MASKED: gl.constexpr, EXP2_EMU: gl.constexpr = 0):
    """One online-softmax step in log2 units with the scale folded into one FMA:
    p = exp2(qk * qk_scale - m). Returns (p, alpha, m_new, l_new). Masked tiles guard
    rows with no key yet (m = -inf) so they give p = alpha = 0, never NaN. EXP2_EMU of
    the tile's four column quarters take their exponentials on the FMA pipe
    (``exp2_mixed``)."""
    m_new = gl.maximum(m_i, gl.max(qk, 1) * qk_scale)
    if MASKED:
        m_use = gl.where(m_new == float("-inf"), 0.0, m_new)
    else:
        m_use = m_new
    if EXP2_EMU == 0:  # (not through exp2_mixed: its extra inlining level alone moves
        # ptxas's spills of the capped hd 64 causal build from 52 to 72 bytes)
        p = gl.exp2(qk * qk_scale - m_use[:, None])
    else:
        p = exp2_mixed(qk * qk_scale - m_use[:, None], EXP2_EMU)
    alpha = gl.exp2(m_i - m_use)
    l_new = l_i * alpha + gl.sum(p, 1)
    return p, alpha, m_new, l_new


# HopperFwdConfig.lazy_rescale: the running max moves only when some row's grew by more
# than this (log2 units: a factor 256), FA4's conditional rescale
LAZY_LOG2 = gl.constexpr(8.0)


@gluon.jit
def _lazy_softmax_step(qk, acc, m_i, l_i, qk_scale, MASKED: gl.constexpr):
    """_softmax_step with the O rescale skipped while it is not needed (FA4's lazy
    rescale, HopperFwdConfig.lazy_rescale): the running max m (and with it O and l) moves
    only when some row's max grew by more than LAZY_LOG2 since m was last set. Otherwise
    P = exp2(s - m) against the stale m, entries up to 2^LAZY_LOG2: exact in the fp32
    sums, bf16's relative precision in the PV GEMM. The decision is one scalar per
    program (a max over its rows), so the branch is uniform. Returns (p, acc, m, l)."""
    o_layout: gl.constexpr = acc.type.layout
    m_new = gl.maximum(m_i, gl.max(qk, 1) * qk_scale)
    grow = gl.max(gl.where(m_new > m_i, m_new - m_i, 0.0), 0)  # inf where m was -inf
    big = grow > LAZY_LOG2
    m_ref = gl.where(big, m_new, m_i)  # (a row still at -inf saw no key: p = 0 there)
    if MASKED:
        m_use = gl.where(m_ref == float("-inf"), 0.0, m_ref)
    else:
        m_use = m_ref
    p = gl.exp2(qk * qk_scale - m_use[:, None])
    if big:  # the program's one rescale branch
        alpha = gl.exp2(m_i - m_use)
        l_i = l_i * alpha
        acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))[:, None]
    return p, acc, m_ref, l_i + gl.sum(p, 1)


@gluon.jit
def _epilogue(acc, m_i, l_i, q_smem, o_desc, lse_rows, b, h, start_m, seqlen_q,
              BLOCK_M: gl.constexpr, HEAD_DIM: gl.constexpr, keep_p=1.0,
              DROPOUT: gl.constexpr = False, LAG: gl.constexpr = False):
    """out = acc / l through shared memory (the Q tile's buffer) and a TMA store, which
    clips rows past seqlen_q; lse = (m + log2 l) * ln 2, -inf on rows with no key.
    DROPOUT: out = acc / (l * keep_p), keep_p = 1 - dropout_p (the kept entries scaled by
    1 / keep_p); lse stays the softmax's.
    LAG (HopperFwdConfig.o_lag; ``q_smem`` an O buffer of its own): the wait for the
    store to read the buffer comes before the next epilogue's write instead of after
    this store, so the warpgroup goes on to its next item at once; the caller waits once
    more before the program exits."""
    o_layout: gl.constexpr = acc.type.layout
    empty = l_i == 0.0
    l_safe = gl.where(empty, 1.0, l_i)
    lse = gl.where(empty, float("-inf"), (m_i + gl.log2(l_safe)) * 0.6931471805599453)
    if DROPOUT:
        l_safe = l_safe * keep_p
    o = acc / gl.convert_layout(l_safe, gl.SliceLayout(1, o_layout))[:, None]
    if LAG:  # the previous item's store has read the buffer (a no-op but in its issuer)
        tma.store_wait(pendings=0)
    gl.thread_barrier()  # every warpgroup is done reading Q before O overwrites it
    q_smem.reshape([BLOCK_M, HEAD_DIM]).store(o.to(q_smem.dtype))
    fence_async_shared()  # generic-proxy stores -> visible to the TMA engine
    gl.thread_barrier()
    tma.async_copy_shared_to_global(o_desc, [b, start_m, h, 0], q_smem)
    rows = start_m + gl.arange(0, BLOCK_M, layout=lse.type.layout)
    gl.store(lse_rows + rows, lse, mask=rows < seqlen_q)
    if not LAG:
        tma.store_wait(pendings=0)


@gluon.jit
def _program_seq(pid_bh, q_desc, k_desc, v_desc, o_desc, LSE, Q, K, V, O, CU_Q, CU_K,
                 seqlen_q, seqlen_k, nheads, group, VARLEN: gl.constexpr):
    """What every forward program starts from: (b, h, hk, seqlen_q, seqlen_k, lse_rows,
    q_desc, k_desc, v_desc, o_desc), ``b`` the batch coordinate of the descriptors and
    ``lse_rows`` the address of this (batch, head)'s lse row 0; ``pid_bh`` is the
    program's batch * head (grid axis 1, or tile_ids' under a tile-major order).
    Dense: the host descriptors over (B, S, H, D), lse (B, H, M).
    VARLEN (ops/varlen.py's packed (T, H, D) tensors, lse (H, TQ); the host descriptors
    are over (1, T, H, D) views): sequence b = pid // H spans rows cu[b] .. cu[b+1] of
    Q, K, V, O (base pointers), and the program builds device-side descriptors over just
    those rows, so TMA zero-fills and clips at the sequence's end exactly as at a dense
    tensor's, and the kernels' loops and masks run unchanged with b = 0. Programs past
    their sequence's end have returned before (_past_seq_end): every program here has a
    row to store (stage C's second warpgroup may not: TMA clips its whole tile). (Session
    15 tried the host descriptors over the whole packed tensors with each sequence's first
    row added to the coordinates, so that no program builds a descriptor: 0.60-0.97x
    these at 2k-long sequences, `varlenhost`; removed in session 16.)"""
    b = pid_bh // nheads
    h = pid_bh % nheads
    if VARLEN:
        q0, seqlen_q, k0, seqlen_k = seq_bounds(CU_Q, CU_K, b)
        lse_rows = LSE + h.to(gl.int64) * q_desc.shape[1] + q0  # (H, TQ)
        q_desc = seq_desc(Q, q0, seqlen_q, q_desc)
        o_desc = seq_desc(O, q0, seqlen_q, o_desc)
        k_desc = seq_desc(K, k0, seqlen_k, k_desc)
        v_desc = seq_desc(V, k0, seqlen_k, v_desc)
        b = 0
    else:
        lse_rows = LSE + pid_bh.to(gl.int64) * seqlen_q
    return (b, h, h // group, seqlen_q, seqlen_k, lse_rows, q_desc, k_desc, v_desc, o_desc)


@gluon.jit
def _past_seq_end(CU_Q, start, nheads, VARLEN: gl.constexpr):
    """VARLEN: does this program's first query row ``start`` lie past its sequence's end
    (the grid spans the longest sequence)? Such a program returns at once, before any
    descriptor is built. Always False for dense calls."""
    if VARLEN:
        b = gl.program_id(1) // nheads
        return start >= gl.load(CU_Q + b + 1) - gl.load(CU_Q + b)
    return False


# ==================================================================================
# stage A: one partition; the ring is refilled by the consumers themselves
# ==================================================================================


@gluon.jit
def _fwd_tile_a(i, acc, m_i, l_i, q2, k_smem, v_smem, k_bars, v_bars, k_desc, v_desc, b, hk,
                lo, n_tiles, rows, seqlen_k, diag, qk_scale, left, HEAD_DIM: gl.constexpr,
                BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr,
                MASKED: gl.constexpr, CAUSAL: gl.constexpr, MASKED_FIRST: gl.constexpr,
                EXP2_EMU: gl.constexpr = 0, HAS_LEFT: gl.constexpr = False, cap_scale=1.0,
                SOFTCAP: gl.constexpr = False, EARLY_EXPECT: gl.constexpr = False,
                drop=None, DROPOUT: gl.constexpr = False, ws=None,
                DROP_WS: gl.constexpr = False, NB: gl.constexpr = 2,
                LAZY: gl.constexpr = False):
    """Step i: consume key tile t = _step_tile(i) from ring slot i % NUM_STAGES: S = Q K^T
    (wgmma, smem x smem), softmax in registers, O += P V (wgmma, P from registers), then
    refill the slot with the tile of step i + NUM_STAGES. The steps visit tiles [lo,
    n_tiles) (lo > 0 only under a sliding window, HAS_LEFT). SOFTCAP: the scores are
    tanh(qk * cap_scale), and qk_scale carries softcap * log2(e). DROPOUT: ``drop`` =
    _dropout_args'; the tile's decisions are drawn (and written as bits) while the
    tensor cores compute S, and P's dropped entries are zeroed after the row sums.
    DROP_WS: the decisions come from the dropout partition (``_drop_producer``) through
    the bit blocks it wrote, ``ws`` = (full, empty) barrier rings of NB slots."""
    s_layout: gl.constexpr = _mma_layout(gl.num_warps(), BLOCK_N)
    o_layout: gl.constexpr = acc.type.layout
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    s = i % NUM_STAGES
    phase = (i // NUM_STAGES) & 1
    k_buf = k_smem.index(s).reshape([BLOCK_N, HEAD_DIM])
    v_buf = v_smem.index(s).reshape([BLOCK_N, HEAD_DIM])
    # -- scores --
    mbarrier.wait(k_bars.index(s), phase)
    qk = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    qk = warpgroup_mma(q2, k_buf.permute((1, 0)), qk, use_acc=False, is_async=True)
    t = _step_tile(i, lo, n_tiles, MASKED_FIRST)
    if DROP_WS:  # the dropout partition's words for this step, loaded under the GEMM
        keep = _ws_keep(drop, ws, i, t * BLOCK_N, seqlen_k, s_layout, BLOCK_M, BLOCK_N, NB)
    elif DROPOUT:  # integer work under the GEMM
        keep = _dropout_tile(drop, rows, t * BLOCK_N, seqlen_k, BLOCK_N, s_layout)
    qk = warpgroup_mma_wait(num_outstanding=0, deps=(qk,))
    if SOFTCAP:
        qk = tanh_f32(qk * cap_scale, True)
    if MASKED:
        qk = _scores_masked(qk, t, rows, seqlen_k, diag, BLOCK_N, CAUSAL, left, HAS_LEFT)
    # -- rescale (LAZY: only when a row's max grew past LAZY_LOG2), accumulate --
    if LAZY:
        p, acc, m_i, l_i = _lazy_softmax_step(qk, acc, m_i, l_i, qk_scale, MASKED)
    else:
        p, alpha, m_i, l_i = _softmax_step(qk, m_i, l_i, qk_scale, MASKED, EXP2_EMU)
        acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))[:, None]
    if DROP_WS:  # after the row sums: the normaliser counts every key
        p = gl.where(keep, p, 0.0)
    elif DROPOUT:
        p = dropped(p, keep)
    p = gl.convert_layout(p.to(q2.dtype), p_layout)
    mbarrier.wait(v_bars.index(s), phase)
    acc = warpgroup_mma(p, v_buf, acc, is_async=True)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    # -- refill: every warpgroup must be done with slot s before TMA overwrites it (the CTA
    #    barrier inside issue_kv_slot; with EARLY_EXPECT after the expects) --
    nxt = i + NUM_STAGES
    issue_kv_slot(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, s,
                  _step_tile(nxt, lo, n_tiles, MASKED_FIRST), b, hk, nxt < n_tiles - lo,
                  BLOCK_N, EARLY_EXPECT, True)
    if DROP_WS:  # every consumer warp is past this step's words (the CTA barrier above)
        mbarrier.arrive(ws[1].index(i % NB))
    return acc, m_i, l_i


@gluon.jit
def _dropout_tile(drop, rows, col0, seqlen_k, BLOCK_N: gl.constexpr, layout: gl.constexpr):
    """The keep mask (-1 kept, 0 dropped) of query ``rows`` and keys col0 .. col0 +
    BLOCK_N - 1: _common.dropout_keep's Philox draw, bit for bit, in the wgmma layout;
    with a dropout_bits_buffer also written as its words (store_bits_mma)."""
    seed, rng_offset, bh, thr16, words, seqlen_q, row0 = drop
    cols = col0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, layout))
    keep = dropout_keeps_mma(seed, rng_offset, bh, rows, cols, thr16)
    if words.dtype.is_ptr():
        if words.dtype.element_ty == gl.int32:
            store_bits_mma(words, keep, bh, row0, col0, seqlen_q, seqlen_k)
    return keep


@gluon.jit
def _dropout_args(seed, rng_offset, BITS, bh, thr16, seqlen_q, row0):
    """``drop`` of the DROPOUT steps: (seed, rng_offset, bh, thr16, the words to
    write (BITS) or else the seed argument, seqlen_q, row0: the program's first query
    row). The ``seed`` argument is an int, or a pointer: an int64 (seed, offset) pair
    drawn on the device (flash.draw_rng_state under graph capture), or a
    dropout_bits_buffer's int32 header holding the pair; ``BITS`` (None or the words
    after that header, a separate argument so that its 16-byte alignment is known and
    the words go out 16 bytes at a time)."""
    words = seed
    if BITS is not None:
        words = BITS
    if seed.dtype.is_ptr():
        rng_offset = gl.load(seed + 1).to(gl.int32)
        seed = gl.load(seed).to(gl.int32)
    return seed, rng_offset, bh, thr16, words, seqlen_q, row0


@gluon.jit
def _ws_keep(drop, ws, i, col0, seqlen_k, layout: gl.constexpr, BLOCK_M: gl.constexpr,
             BLOCK_N: gl.constexpr, NB: gl.constexpr):
    """DROP_WS: step i's keep tile (bool) from the bit blocks the dropout partition wrote
    for it: wait for its slot's full barrier, then one word per lane and 64 keys, and the
    warp transpose (_gluon_common.bits_words_mma, cached in L2 only)."""
    mbarrier.wait(ws[0].index(i % NB), (i // NB) & 1)
    seed, rng_offset, bh, thr16, words, seqlen_q, row0 = drop
    w = bits_words_mma(_bits_block(words, bh, seqlen_q, seqlen_k), row0, col0, layout,
                       BLOCK_M, BLOCK_N, False, True)
    return bits_keep(w, layout)


@gluon.jit
def _drop_producer(drop, full_bars, empty_bars, lo, n_tiles, seqlen_k, BLOCK_M: gl.constexpr,
                   BLOCK_N: gl.constexpr, NB: gl.constexpr, MASKED_FIRST: gl.constexpr):
    """The dropout partition (DROP_WS, 4 warps): for each step the consumers will take, in
    their order, draw the (BLOCK_M, BLOCK_N) tile's decisions and write its bit blocks
    (_dropout_tile), then hand the step over on its slot's full barrier; a slot is
    reused once the consumers released it (its empty barrier), so the partition runs at
    most NB steps ahead. Its integer work overlaps the consumers' GEMMs and softmax."""
    layout: gl.constexpr = _mma_layout(gl.num_warps(), BLOCK_N)
    row0 = drop[6]
    rows = row0 + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, layout))
    for i in range(0, n_tiles - lo):
        use = i // NB
        mbarrier.wait(empty_bars.index(i % NB), (use & 1) ^ 1, pred=use > 0)
        _dropout_tile(drop, rows, _step_tile(i, lo, n_tiles, MASKED_FIRST) * BLOCK_N,
                      seqlen_k, BLOCK_N, layout)
        gl.thread_barrier()  # the partition's stores all issued before the hand-over
        mbarrier.arrive(full_bars.index(i % NB))


@gluon.jit
def _step_tile(i, lo, n_tiles, MASKED_FIRST: gl.constexpr):
    """The key tile of step i over tiles [lo, n_tiles): last to first when MASKED_FIRST,
    else in order."""
    if MASKED_FIRST:
        return n_tiles - 1 - i
    return lo + i


@gluon.jit
def _consumer_state(q_smem, q_bar, start_m, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
                    BLOCK_N: gl.constexpr, Q_REGS: gl.constexpr = False):
    """A consumer's starting state (stages A and B): its query rows, the running max and
    sum, the O accumulator, and the Q tile once it has arrived (Q_REGS,
    HopperFwdConfig.q_regs: loaded into registers as the S GEMM's A operand, so that GEMM
    reads only K from shared memory)."""
    s_layout: gl.constexpr = _mma_layout(gl.num_warps(), BLOCK_N)
    o_layout: gl.constexpr = _mma_layout(gl.num_warps(), HEAD_DIM)
    rows = start_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_layout))
    m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, gl.SliceLayout(1, s_layout))
    l_i = gl.zeros([BLOCK_M], gl.float32, gl.SliceLayout(1, s_layout))
    acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, o_layout)
    mbarrier.wait(q_bar, 0)
    q2 = q_smem.reshape([BLOCK_M, HEAD_DIM])
    if Q_REGS:
        q2 = q2.load(gl.DotOperandLayout(operand_index=0, parent=s_layout, k_width=2))
    return rows, m_i, l_i, acc, q2


@gluon.jit
def _a_loops(q_smem, q_bar, k_smem, v_smem, k_bars, v_bars, k_desc, v_desc, b, hk, lo, a,
             n_full, n_tiles, start_m, seqlen_k, diag, qk_scale, left, cap_scale, drop,
             HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
             NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr, MASKED_FIRST: gl.constexpr,
             EXP2_EMU: gl.constexpr, HAS_LEFT: gl.constexpr, SOFTCAP: gl.constexpr,
             EARLY_EXPECT: gl.constexpr, DROPOUT: gl.constexpr, ws=None,
             DROP_WS: gl.constexpr = False, Q_REGS: gl.constexpr = False,
             LAZY: gl.constexpr = False):
    """Stage A's consumer: the step loops over the key tiles (``_fwd_tile_a``) from the
    Q tile's arrival; returns (acc, m_i, l_i). The whole kernel's warps, or with DROP_WS
    the default partition beside the dropout one."""
    rows, m_i, l_i, acc, q2 = _consumer_state(q_smem, q_bar, start_m, HEAD_DIM, BLOCK_M,
                                              BLOCK_N, Q_REGS)

    # -- MASKED_FIRST (a register-capped config): key tiles last to first, as FA2 does,
    #    the on-band / ragged tiles (masked) first, then the off-band ones. The mask's
    #    registers are then dead in the long unmasked loop, so the hd 64 causal kernel
    #    fits 128 registers per thread (two programs per SM) with its few spills outside
    #    that loop's hot path. Otherwise tiles in order, unmasked first: the order measured
    #    4-8% faster at hd 256 non-causal (3b020cc, `gpu_check.sh a1k`). HAS_LEFT: the
    #    window's left-edge tiles [lo, a) are masked too, visited last (MASKED_FIRST) or
    #    first; steps count from lo (lo = a = 0 without a window: that loop is empty) --
    if MASKED_FIRST:  # band, unmasked middle, left edge (empty without a window)
        ends_0 = n_tiles - n_full
        ends_1 = n_tiles - a
    else:  # left edge (empty without a window), unmasked middle, band
        ends_0 = a - lo
        ends_1 = n_full - lo
    for i in range(0, ends_0):
        acc, m_i, l_i = _fwd_tile_a(
            i, acc, m_i, l_i, q2, k_smem, v_smem, k_bars, v_bars, k_desc, v_desc, b, hk,
            lo, n_tiles, rows, seqlen_k, diag, qk_scale, left, HEAD_DIM, BLOCK_M,
            BLOCK_N, NUM_STAGES, True, CAUSAL, MASKED_FIRST, EXP2_EMU, HAS_LEFT, cap_scale,
            SOFTCAP, EARLY_EXPECT, drop, DROPOUT, ws, DROP_WS, LAZY=LAZY,
        )
    for i in range(ends_0, ends_1):
        acc, m_i, l_i = _fwd_tile_a(
            i, acc, m_i, l_i, q2, k_smem, v_smem, k_bars, v_bars, k_desc, v_desc, b, hk,
            lo, n_tiles, rows, seqlen_k, diag, qk_scale, left, HEAD_DIM, BLOCK_M,
            BLOCK_N, NUM_STAGES, False, CAUSAL, MASKED_FIRST, EXP2_EMU, HAS_LEFT, cap_scale,
            SOFTCAP, EARLY_EXPECT, drop, DROPOUT, ws, DROP_WS, LAZY=LAZY,
        )
    for i in range(ends_1, n_tiles - lo):
        acc, m_i, l_i = _fwd_tile_a(
            i, acc, m_i, l_i, q2, k_smem, v_smem, k_bars, v_bars, k_desc, v_desc, b, hk,
            lo, n_tiles, rows, seqlen_k, diag, qk_scale, left, HEAD_DIM, BLOCK_M,
            BLOCK_N, NUM_STAGES, True, CAUSAL, MASKED_FIRST, EXP2_EMU, HAS_LEFT, cap_scale,
            SOFTCAP, EARLY_EXPECT, drop, DROPOUT, ws, DROP_WS, LAZY=LAZY,
        )
    return acc, m_i, l_i


@gluon.jit(do_not_specialize=["seqlen_q", "seqlen_k", "left", "seed", "rng_offset", "drop_thr"])
def _fwd_kernel(
    q_desc, k_desc, v_desc, o_desc,  # TMA descriptors: q, o (B, M, H, D); k, v (B, N, Hkv, D)
    LSE,  # (B, H, M) fp32; VARLEN: (H, TQ)
    Q, K, V, O, CU_Q, CU_K,  # VARLEN: packed base pointers, cu_seqlens (else None)
    seqlen_q, seqlen_k, nheads, group, qk_scale,  # qk_scale = softmax_scale * log2(e)
    left,  # HAS_LEFT: row i sees keys from i + seqlen_k - seqlen_q - left on (else unused)
    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
    NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr, MASKED_FIRST: gl.constexpr,
    VARLEN: gl.constexpr = False, EXP2_EMU: gl.constexpr = 0, HAS_LEFT: gl.constexpr = False,
    cap_scale=1.0, SOFTCAP: gl.constexpr = False,  # softcap: tanh(qk * sm_scale / softcap)
    EARLY_EXPECT: gl.constexpr = False,  # HopperFwdConfig.early_expect
    # DROPOUT: seed / rng_offset as _dropout_args takes them, the threshold of
    # _gluon_common.dropout_thr16, keep_p = 1 - dropout_p
    seed=0, rng_offset=0, drop_thr=0, keep_p=1.0, BITS=None,
    DROPOUT: gl.constexpr = False,
    DROP_WS: gl.constexpr = False, DROP_REGS: gl.constexpr = 96,  # the dropout partition
    Q_REGS: gl.constexpr = False,  # HopperFwdConfig.q_regs: Q in registers (_consumer_state)
    LAZY: gl.constexpr = False,  # HopperFwdConfig.lazy_rescale (_lazy_softmax_step)
    # HopperFwdConfig.tile_heads: the grid tile-major in blocks of tile_heads heads
    TILE_MAJOR: gl.constexpr = False, tile_heads=1,
):
    gl.static_assert(BLOCK_M == 16 * gl.num_warps(), "each warp owns 16 query rows")
    gl.static_assert(HEAD_DIM <= 256 and BLOCK_N <= 256, "wgmma n is at most 256")
    gl.static_assert(not (TILE_MAJOR and VARLEN), "TILE_MAJOR: dense grids only")
    dtype: gl.constexpr = q_desc.dtype
    pid_m, pid_bh, m_tiles = tile_ids(TILE_MAJOR, tile_heads)  # dense causal only
    if CAUSAL:
        pid_m = m_tiles - 1 - pid_m  # longest rows first: better tail balance
    start_m = pid_m * BLOCK_M
    if _past_seq_end(CU_Q, start_m, nheads, VARLEN):
        return
    (b, h, hk, seqlen_q, seqlen_k, lse_rows, q_desc, k_desc, v_desc,
     o_desc) = _program_seq(pid_bh, q_desc, k_desc, v_desc, o_desc, LSE, Q, K, V, O, CU_Q,
                            CU_K, seqlen_q, seqlen_k, nheads, group, VARLEN)
    diag = seqlen_k - seqlen_q
    n_full, n_tiles = _tile_range(start_m, seqlen_q, seqlen_k, BLOCK_M, BLOCK_N, CAUSAL)
    if HAS_LEFT:  # a sliding window: tiles [lo, a) masked, [a, n_full) not, then the band
        lo, a, n_full = window_tile_range(start_m, seqlen_q, seqlen_k, left, n_full,
                                          n_tiles, BLOCK_M, BLOCK_N)
    else:
        lo = 0
        a = 0

    # -- shared memory: the Q tile (later O), a NUM_STAGES-deep K/V ring, barriers --
    q_smem = gl.allocate_shared_memory(dtype, q_desc.block_type.shape, q_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    k_smem, v_smem, k_bars, v_bars = alloc_ring_pair(k_desc, v_desc, NUM_STAGES)
    fence_async_shared()  # barrier inits visible to the async proxy (TMA)
    gl.thread_barrier()

    # -- prologue: Q, and the key/value tiles of the first NUM_STAGES steps in flight --
    mbarrier.expect(q_bar, q_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(q_desc, [b, start_m, h, 0], q_bar, q_smem)
    for i in gl.static_range(NUM_STAGES):
        issue_kv_slot(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, i,
                      _step_tile(i, lo, n_tiles, MASKED_FIRST), b, hk, i < n_tiles - lo,
                      BLOCK_N, EARLY_EXPECT, False)

    drop = None
    if DROPOUT:
        drop = _dropout_args(seed, rng_offset, BITS, pid_bh, drop_thr,
                             seqlen_q, start_m)
    if DROP_WS:  # a dropout partition (4 warps) draws and writes the bits ahead of the
        # consumers (this kernel's warps), NB steps at most
        full_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        empty_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        for j in gl.static_range(2):
            mbarrier.init(full_bars.index(j), count=1)
            mbarrier.init(empty_bars.index(j), count=1)
        fence_async_shared()
        gl.thread_barrier()
        acc, m_i, l_i = gl.warp_specialize(
            [
                (_a_loops, (q_smem, q_bar, k_smem, v_smem, k_bars, v_bars, k_desc, v_desc, b,
                            hk, lo, a, n_full, n_tiles, start_m, seqlen_k, diag, qk_scale,
                            left, cap_scale, drop, HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES,
                            CAUSAL, MASKED_FIRST, EXP2_EMU, HAS_LEFT, SOFTCAP, EARLY_EXPECT,
                            DROPOUT, (full_bars, empty_bars), True, Q_REGS, LAZY)),
                (_drop_producer, (drop, full_bars, empty_bars, lo, n_tiles, seqlen_k, BLOCK_M,
                                  BLOCK_N, 2, MASKED_FIRST)),
            ],
            [4],
            [DROP_REGS],
        )
    else:
        acc, m_i, l_i = _a_loops(q_smem, q_bar, k_smem, v_smem, k_bars, v_bars, k_desc,
                                 v_desc, b, hk, lo, a, n_full, n_tiles, start_m, seqlen_k,
                                 diag, qk_scale, left, cap_scale, drop, HEAD_DIM, BLOCK_M,
                                 BLOCK_N, NUM_STAGES, CAUSAL, MASKED_FIRST, EXP2_EMU,
                                 HAS_LEFT, SOFTCAP, EARLY_EXPECT, DROPOUT, Q_REGS=Q_REGS,
                                 LAZY=LAZY)
    _epilogue(acc, m_i, l_i, q_smem, o_desc, lse_rows, b, h, start_m, seqlen_q, BLOCK_M,
              HEAD_DIM, keep_p, DROPOUT)


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
        issue_kv(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, t, b, hk, True, BLOCK_N,
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
    rows, m_i, l_i, acc, q2 = _consumer_state(q_smem, q_bar, start_m, HEAD_DIM, BLOCK_M,
                                              BLOCK_N)
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
    LSE,  # (B, H, M) fp32; VARLEN: (H, TQ)
    Q, K, V, O, CU_Q, CU_K,  # VARLEN: packed base pointers, cu_seqlens (else None)
    seqlen_q, seqlen_k, nheads, group, qk_scale,  # qk_scale = softmax_scale * log2(e)
    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
    NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr, LOAD_REGS: gl.constexpr,
    VARLEN: gl.constexpr = False,
):
    gl.static_assert(BLOCK_M == 16 * gl.num_warps(), "each consumer warp owns 16 query rows")
    gl.static_assert(HEAD_DIM <= 256 and BLOCK_N <= 256, "wgmma n is at most 256")
    dtype: gl.constexpr = q_desc.dtype
    pid_m = gl.program_id(0)
    if CAUSAL:
        pid_m = gl.num_programs(0) - 1 - pid_m  # longest rows first: better tail balance
    start_m = pid_m * BLOCK_M
    if _past_seq_end(CU_Q, start_m, nheads, VARLEN):
        return
    (b, h, hk, seqlen_q, seqlen_k, lse_rows, q_desc, k_desc, v_desc,
     o_desc) = _program_seq(gl.program_id(1), q_desc, k_desc, v_desc, o_desc, LSE, Q, K, V,
                            O, CU_Q, CU_K, seqlen_q, seqlen_k, nheads, group, VARLEN)
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
    # the ring's barriers and the producer's slot-free barriers initialised together,
    # stage by stage (alloc_ring_pair is not used here: keeps this schedule's prologue as
    # it ran on the H200)
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
    _epilogue(acc, m_i, l_i, q_smem, o_desc, lse_rows, b, h, start_m, seqlen_q, BLOCK_M,
              HEAD_DIM)


# ==================================================================================
# stage C: FA3's consumer schedule (HopperFwdConfig(pingpong=True)). A program
# covers 2 * BLOCK_M query rows as two BLOCK_M-row tiles, one per consumer warpgroup:
# warpgroup 0 is the default partition, warpgroup 1 a 4-warp worker, and a 1-warp
# producer fills the K/V ring that both read (each tile loaded once per program, its
# slot released when both warpgroups arrived on the slot's empty barrier, count 2).
# ==================================================================================


@gluon.jit
def _c_producer(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, empty_bars, b, hk, lo,
                n_tiles, BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr,
                HAS_LEFT: gl.constexpr = False):
    # stage B's producer loop; empty_bars count 2 (one arrive per warpgroup). HAS_LEFT:
    # tiles [lo, n_tiles), ring positions counted from lo (a loop of its own, so that the
    # shipped stage B / C producers compile to the instructions they were measured with)
    if HAS_LEFT:
        for pos in range(0, n_tiles - lo):
            use = pos // NUM_STAGES
            mbarrier.wait(empty_bars.index(pos % NUM_STAGES), (use & 1) ^ 1, pred=use > 0)
            issue_kv_slot(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, pos % NUM_STAGES,
                          lo + pos, b, hk, True, BLOCK_N)
    else:
        _ws_producer(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, empty_bars, b, hk,
                     n_tiles, BLOCK_N, NUM_STAGES)


@gluon.jit
def _c_tiles(start_m, seqlen_q, seqlen_k, left, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
             CAUSAL: gl.constexpr, HAS_LEFT: gl.constexpr):
    """Key tiles of one warpgroup's query tile: (lo, a, b, n_tiles). [lo, a) are cut by a
    sliding window's left edge (masked), [a, b) need no mask, [b, n_tiles) the causal
    band or the ragged end (masked). Without a window lo = a = 0 and b = n_full."""
    n_full, n_tiles = _tile_range(start_m, seqlen_q, seqlen_k, BLOCK_M, BLOCK_N, CAUSAL)
    if HAS_LEFT:
        lo, a, n_full = window_tile_range(start_m, seqlen_q, seqlen_k, left, n_full, n_tiles,
                                          BLOCK_M, BLOCK_N)
    else:
        lo = 0
        a = 0
    return lo, a, n_full, n_tiles


@gluon.jit
def _c_turn_wait(turn_bars, k, m_other, WG: gl.constexpr):
    """Ping-pong: before its GEMMs of iteration k, warpgroup WG waits until the other
    warpgroup has issued its own (WG 1 waits for WG 0's k-th block, WG 0 for WG 1's
    (k-1)-th), but only while the other still has iterations (m_other of them).
    Scheduling only: correctness never depends on these barriers."""
    idx = k - 1 + WG
    mbarrier.wait(turn_bars.index(WG), idx & 1, pred=(idx >= 0) & (idx < m_other))


@gluon.jit
def _c_step(j, k, acc, p, m_i, l_i, q2, k_smem, v_smem, k_bars, v_bars, empty_bars, turn_bars,
            m_other, rows, seqlen_k, diag, qk_scale, WG: gl.constexpr, HEAD_DIM: gl.constexpr,
            BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr,
            MASKED: gl.constexpr, CAUSAL: gl.constexpr, base=0, left=0,
            HAS_LEFT: gl.constexpr = False, cap_scale=1.0, SOFTCAP: gl.constexpr = False,
            K_FIRST: gl.constexpr = False, V_STAGES: gl.constexpr = 0, v_empty=None):
    """Key tile j, this warpgroup's iteration k >= 0 (its first tile was the prologue's):
    issue S_j = Q K_j^T and O += P_{j-1} V_{j-1} back to back, pass the turn, then the
    softmax of S_j runs while PV_{j-1} is still on the tensor cores. Returns (acc, P_j,
    m, l). Tile j sits at ring position j - base (``base``: the program's first tile, 0
    without a sliding window). V_STAGES > 0 (the persistent grid's split ring): V has a
    ring of its own, V_STAGES deep behind ``v_empty``; the step then releases K_j (its S
    GEMM has retired) and V_{j-1}, instead of tile j-1's shared slot."""
    s_layout: gl.constexpr = _mma_layout(gl.num_warps(), BLOCK_N)
    o_layout: gl.constexpr = acc.type.layout
    s = (j - base) % NUM_STAGES
    V_SLOTS: gl.constexpr = V_STAGES if V_STAGES > 0 else NUM_STAGES
    sv = (j - base - 1) % V_SLOTS  # tile j-1's V slot (its shared slot without a split ring)
    # -- GEMMs, in the tensor-core turn of this warpgroup --
    if K_FIRST:  # HopperFwdConfig.c_k_wait_first: 3 bar.sync per step instead of 4
        mbarrier.wait(k_bars.index(s), ((j - base) // NUM_STAGES) & 1)
        _c_turn_wait(turn_bars, k, m_other, WG)
    else:
        _c_turn_wait(turn_bars, k, m_other, WG)
        mbarrier.wait(k_bars.index(s), ((j - base) // NUM_STAGES) & 1)
    qk = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    qk = warpgroup_mma(q2, k_smem.index(s).reshape([BLOCK_N, HEAD_DIM]).permute((1, 0)), qk,
                       use_acc=False, is_async=True)
    mbarrier.wait(v_bars.index(sv), ((j - base - 1) // V_SLOTS) & 1)
    acc = warpgroup_mma(p, v_smem.index(sv).reshape([BLOCK_N, HEAD_DIM]), acc, is_async=True)
    mbarrier.arrive(turn_bars.index(1 - WG), count=1)
    # -- S_j done (wgmma groups retire in order; PV_{j-1} may stay in flight) --
    qk = warpgroup_mma_wait(num_outstanding=1, deps=(qk,))
    if SOFTCAP:  # tanh(qk * sm_scale / softcap); qk_scale carries softcap * log2(e)
        qk = tanh_f32(qk * cap_scale, True)
    if MASKED:
        qk = _scores_masked(qk, j, rows, seqlen_k, diag, BLOCK_N, CAUSAL, left, HAS_LEFT)
    p_new, alpha, m_i, l_i = _softmax_step(qk, m_i, l_i, qk_scale, MASKED)
    acc, p = warpgroup_mma_wait(num_outstanding=0, deps=(acc, p))
    # -- every warp of this warpgroup is done with tile j-1: release its slot --
    gl.thread_barrier()
    if V_STAGES > 0:
        mbarrier.arrive(empty_bars.index(s), count=1)  # K_j
        mbarrier.arrive(v_empty.index(sv), count=1)  # V_{j-1}
    else:
        mbarrier.arrive(empty_bars.index(sv), count=1)  # tile j-1's slot
    acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))[:, None]
    p = gl.convert_layout(p_new.to(q2.dtype), p.type.layout)
    return acc, p, m_i, l_i


@gluon.jit
def _c_release(k_bars, empty_bars, lo, hi, shift, NUM_STAGES: gl.constexpr,
               V_STAGES: gl.constexpr = 0, v_empty=None, v_bars=None):
    """Key tiles [lo, hi) that only the other warpgroup needs (tile j at ring position
    j - shift): release each once it is loaded, so its slot completes its 2 arrivals in
    order. V_STAGES > 0: its K slot once K_j is loaded and its V slot once V_j is (K_j's
    landing only says the producer got past V_{j-1}'s slot; an arrival on V_j's slot
    before V_j lands could count toward the slot's previous tile while the other
    warpgroup still reads it). Neither wait can deadlock: the tiles released at an item's
    start are at most one ahead of the other warpgroup's first (a window's left edge,
    64 rows apart, 128-key tiles), and those at its end come after all its turns."""
    for j in range(lo, hi):
        mbarrier.wait(k_bars.index((j - shift) % NUM_STAGES), ((j - shift) // NUM_STAGES) & 1)
        mbarrier.arrive(empty_bars.index((j - shift) % NUM_STAGES), count=1)
        if V_STAGES > 0:
            mbarrier.wait(v_bars.index((j - shift) % V_STAGES), ((j - shift) // V_STAGES) & 1)
            mbarrier.arrive(v_empty.index((j - shift) % V_STAGES), count=1)


@gluon.jit
def _c_s_issue(q2, k_smem, k_bars, pos, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
               BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr):
    """Issue (async) S = Q K^T over the key tile at ring position ``pos`` once it has
    landed."""
    s = pos % NUM_STAGES
    mbarrier.wait(k_bars.index(s), (pos // NUM_STAGES) & 1)
    qk = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, _mma_layout(gl.num_warps(), BLOCK_N))
    return warpgroup_mma(q2, k_smem.index(s).reshape([BLOCK_N, HEAD_DIM]).permute((1, 0)),
                         qk, use_acc=False, is_async=True)


@gluon.jit
def _c_first_softmax(qk, j, rows, seqlen_k, diag, qk_scale, dtype: gl.constexpr,
                     p_layout: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr,
                     left, HAS_LEFT: gl.constexpr, cap_scale, SOFTCAP: gl.constexpr):
    """An item's first key tile ``j`` (scores ``qk``, masked): its P (the PV GEMM's register
    operand) and the running max and sum it starts."""
    row_l: gl.constexpr = gl.SliceLayout(1, qk.type.layout)
    if SOFTCAP:
        qk = tanh_f32(qk * cap_scale, True)
    qk = _scores_masked(qk, j, rows, seqlen_k, diag, BLOCK_N, CAUSAL, left, HAS_LEFT)
    m_i = gl.full([qk.shape[0]], float("-inf"), gl.float32, row_l)
    l_i = gl.zeros([qk.shape[0]], gl.float32, row_l)
    p, _alpha, m_i, l_i = _softmax_step(qk, m_i, l_i, qk_scale, True)
    return gl.convert_layout(p.to(dtype), p_layout), m_i, l_i


@gluon.jit
def _c_item(q2, acc, m_i, l_i, k_smem, v_smem, k_bars, v_bars, empty_bars, turn_bars, lo, a,
            n_full, n_tiles, shift, k0, m_other, rows, seqlen_k, diag, qk_scale,
            WG: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
            BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr, left,
            HAS_LEFT: gl.constexpr, cap_scale, SOFTCAP: gl.constexpr, K_FIRST: gl.constexpr,
            TRACE=None, V_STAGES: gl.constexpr = 0, v_empty=None, LAST_PV: gl.constexpr = True):
    """One warpgroup's key tiles [lo, n_tiles) of its query tile (n_tiles > lo): the
    prologue's S of tile lo, the steps (``_c_step``: a window's left-edge tiles masked,
    the off-band tiles unmasked, the on-band / ragged tail masked), the last PV. Tile j
    sits at ring position j - ``shift``; the step of tile j is this warpgroup's turn k0 +
    j - lo - 1. TRACE: ``_c_consumer``'s stamps 3, 4 and 6.
    V_STAGES > 0: the split ring (``_c_step``); the prologue releases K_lo, the last PV
    V of the last tile. Not LAST_PV: the last PV is the caller's (``_c_last_pv``, with
    the returned P); every S GEMM of this warpgroup has retired in all its warps by then,
    so its Q buffer is free. Returns (acc, m, l, P of the last tile)."""
    o_layout: gl.constexpr = acc.type.layout
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    # -- S of tile lo (masked unconditionally: one tile, and it may be on-band or on a
    #    window's left edge) --
    qk = _c_s_issue(q2, k_smem, k_bars, lo - shift, HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES)
    qk = warpgroup_mma_wait(num_outstanding=0, deps=(qk,))
    p, m_i, l_i = _c_first_softmax(qk, lo, rows, seqlen_k, diag, qk_scale, q2.dtype,
                                   p_layout, BLOCK_N, CAUSAL, left, HAS_LEFT, cap_scale,
                                   SOFTCAP)
    if V_STAGES > 0:  # K_lo's S GEMM has retired in every warp
        gl.thread_barrier()
        mbarrier.arrive(empty_bars.index((lo - shift) % NUM_STAGES), count=1)
    if TRACE is not None:
        trace_stamp(TRACE, 3)
    for j in range(lo + 1, a):
        acc, p, m_i, l_i = _c_step(
            j, k0 + j - lo - 1, acc, p, m_i, l_i, q2, k_smem, v_smem, k_bars, v_bars,
            empty_bars, turn_bars, m_other, rows, seqlen_k, diag, qk_scale, WG, HEAD_DIM,
            BLOCK_M, BLOCK_N, NUM_STAGES, True, CAUSAL, shift, left, HAS_LEFT, cap_scale,
            SOFTCAP, K_FIRST, V_STAGES, v_empty,
        )
    for j in range(gl.maximum(a, lo + 1), n_full):
        acc, p, m_i, l_i = _c_step(
            j, k0 + j - lo - 1, acc, p, m_i, l_i, q2, k_smem, v_smem, k_bars, v_bars,
            empty_bars, turn_bars, m_other, rows, seqlen_k, diag, qk_scale, WG, HEAD_DIM,
            BLOCK_M, BLOCK_N, NUM_STAGES, False, CAUSAL, shift, 0, False, cap_scale,
            SOFTCAP, K_FIRST, V_STAGES, v_empty,
        )
    for j in range(gl.maximum(n_full, lo + 1), n_tiles):
        acc, p, m_i, l_i = _c_step(
            j, k0 + j - lo - 1, acc, p, m_i, l_i, q2, k_smem, v_smem, k_bars, v_bars,
            empty_bars, turn_bars, m_other, rows, seqlen_k, diag, qk_scale, WG, HEAD_DIM,
            BLOCK_M, BLOCK_N, NUM_STAGES, True, CAUSAL, shift, left, HAS_LEFT, cap_scale,
            SOFTCAP, K_FIRST, V_STAGES, v_empty,
        )
    if TRACE is not None:
        trace_stamp(TRACE, 4)
        trace_stamp(TRACE, 6, n_tiles - lo - 1)
    if LAST_PV:
        acc = _c_last_pv(acc, p, v_smem, v_bars, empty_bars, n_tiles, shift, HEAD_DIM,
                         BLOCK_N, NUM_STAGES, V_STAGES, v_empty)
    return acc, m_i, l_i, p


@gluon.jit
def _c_last_pv(acc, p, v_smem, v_bars, empty_bars, n_tiles, shift, HEAD_DIM: gl.constexpr,
               BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr, V_STAGES: gl.constexpr = 0,
               v_empty=None):
    """An item's last PV (tile n_tiles - 1 at ring position n_tiles - 1 - shift), then
    its V slot (or shared slot) released."""
    t = n_tiles - 1 - shift
    V_SLOTS: gl.constexpr = V_STAGES if V_STAGES > 0 else NUM_STAGES
    sv = t % V_SLOTS
    mbarrier.wait(v_bars.index(sv), (t // V_SLOTS) & 1)
    acc = warpgroup_mma(p, v_smem.index(sv).reshape([BLOCK_N, HEAD_DIM]), acc, is_async=True)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    gl.thread_barrier()
    if V_STAGES > 0:
        mbarrier.arrive(v_empty.index(sv), count=1)
    else:
        mbarrier.arrive(empty_bars.index(sv), count=1)
    return acc


@gluon.jit
def _c_consumer(WG: gl.constexpr, q_smems, q_bars, o_desc, lse_rows, k_smem, v_smem, k_bars,
                v_bars, empty_bars, turn_bars, b, h, start_cta, seqlen_q, seqlen_k, qk_scale,
                HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr, PINGPONG: gl.constexpr,
                left=0, HAS_LEFT: gl.constexpr = False, cap_scale=1.0,
                SOFTCAP: gl.constexpr = False, K_FIRST: gl.constexpr = False, TRACE=None):
    """One consumer warpgroup: query rows [start_cta + WG * BLOCK_M, + BLOCK_M), its own
    online softmax and epilogue. TRACE (scripts/trace_stage_c.py; None in every real
    launch): 8 int64 per (program, warpgroup) at TRACE + 8 * (2 * program + WG): the SM,
    then global-timer stamps at the start, Q ready, the prologue's softmax done, the
    loops done, the end, then the number of steps. Its key tiles are [lo, n_tiles)
    (``_c_tiles``: lo > 0 only under a sliding window, HAS_LEFT); the producer loads
    [base, n_cta), the union of both warpgroups' tiles, and tile t sits at ring position
    t - base."""
    s_layout: gl.constexpr = _mma_layout(gl.num_warps(), BLOCK_N)
    o_layout: gl.constexpr = _mma_layout(gl.num_warps(), HEAD_DIM)
    diag = seqlen_k - seqlen_q
    start_m = start_cta + WG * BLOCK_M
    lo, a, n_full, n_tiles = _c_tiles(start_m, seqlen_q, seqlen_k, left, BLOCK_M, BLOCK_N,
                                      CAUSAL, HAS_LEFT)
    lo_other, _a_other, _b_other, n_other = _c_tiles(
        start_cta + (1 - WG) * BLOCK_M, seqlen_q, seqlen_k, left, BLOCK_M, BLOCK_N, CAUSAL,
        HAS_LEFT)
    # main-loop iterations of the other warpgroup
    m_other = gl.maximum(n_other - lo_other - 1, 0)
    if not PINGPONG:
        m_other = 0  # no turn is ever awaited: the warpgroups run free (A/B, debugging)
    base = gl.minimum(lo, lo_other)  # the first tile the producer loads
    n_cta = gl.maximum(n_tiles, n_other)  # past the last one
    q_smem = q_smems.index(WG)
    if TRACE is not None:
        TRACE += 8 * (2 * (gl.program_id(0) + gl.program_id(1) * gl.num_programs(0)) + WG)
        trace_stamp(TRACE, 0, smid())
        trace_stamp(TRACE, 1)
    rows = start_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_layout))
    m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, gl.SliceLayout(1, s_layout))
    l_i = gl.zeros([BLOCK_M], gl.float32, gl.SliceLayout(1, s_layout))
    acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, o_layout)
    # -- tiles only the other warpgroup needs, before this one's first (a window's left
    #    edge; none without one): release each once it is loaded, so its slot completes
    #    its 2 arrivals in order --
    _c_release(k_bars, empty_bars, base, lo, base, NUM_STAGES)
    mbarrier.wait(q_bars.index(WG), 0)
    if TRACE is not None:
        trace_stamp(TRACE, 2)
    q2 = q_smem.reshape([BLOCK_M, HEAD_DIM])
    if n_tiles > lo:
        acc, m_i, l_i, _p = _c_item(
            q2, acc, m_i, l_i, k_smem, v_smem, k_bars, v_bars, empty_bars, turn_bars, lo, a,
            n_full, n_tiles, base, 0, m_other, rows, seqlen_k, diag, qk_scale, WG, HEAD_DIM,
            BLOCK_M, BLOCK_N, NUM_STAGES, CAUSAL, left, HAS_LEFT, cap_scale, SOFTCAP,
            K_FIRST, TRACE)
    # -- tiles only the other warpgroup needs, after this one's last (causal) --
    _c_release(k_bars, empty_bars, n_tiles, n_cta, base, NUM_STAGES)
    _epilogue(acc, m_i, l_i, q_smem, o_desc, lse_rows, b, h, start_m, seqlen_q, BLOCK_M,
              HEAD_DIM)
    if TRACE is not None:
        trace_stamp(TRACE, 5)


@gluon.jit
def _c_shared(q_desc, k_desc, v_desc, NUM_STAGES: gl.constexpr, V_STAGES: gl.constexpr = 0,
              O_VIA_Q: gl.constexpr = False):
    """Stage C's shared memory, both grids: the two warpgroups' Q tiles, the K / V ring,
    and their barriers initialised (Q, turn; per ring slot K, V, and the slot-free
    barrier, which counts one arrive per consumer warpgroup), fenced for TMA. V_STAGES >
    0 (the persistent grid's split ring): V gets a ring of its own that deep, with its
    own slot-free barriers, and (not O_VIA_Q) the warpgroups two O staging tiles.
    Returns (q_smems, k_smem, v_smem, q_bars, turn_bars, k_bars, v_bars, empty_bars,
    v_empty, o_smems); without V_STAGES v_empty is empty_bars, and without V_STAGES or
    with O_VIA_Q o_smems is q_smems."""
    dtype: gl.constexpr = q_desc.dtype
    V_SLOTS: gl.constexpr = V_STAGES if V_STAGES > 0 else NUM_STAGES
    q_smems = gl.allocate_shared_memory(dtype, [2] + q_desc.block_type.shape, q_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES] + k_desc.block_type.shape,
                                       k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [V_SLOTS] + v_desc.block_type.shape,
                                       v_desc.layout)
    q_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    turn_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    k_bars = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    v_bars = gl.allocate_shared_memory(gl.int64, [V_SLOTS, 1], mbarrier.MBarrierLayout())
    empty_bars = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = empty_bars
    o_smems = q_smems
    if V_STAGES > 0:
        v_empty = gl.allocate_shared_memory(gl.int64, [V_STAGES, 1], mbarrier.MBarrierLayout())
        if not O_VIA_Q:
            o_smems = gl.allocate_shared_memory(dtype, [2] + q_desc.block_type.shape,
                                                q_desc.layout)
    for i in gl.static_range(2):
        mbarrier.init(q_bars.index(i), count=1)
    for i in gl.static_range(2):
        mbarrier.init(turn_bars.index(i), count=1)
    if V_STAGES > 0:
        for i in gl.static_range(NUM_STAGES):
            mbarrier.init(k_bars.index(i), count=1)
            mbarrier.init(empty_bars.index(i), count=2)
        for i in gl.static_range(V_STAGES):
            mbarrier.init(v_bars.index(i), count=1)
            mbarrier.init(v_empty.index(i), count=2)
    else:
        for i in gl.static_range(NUM_STAGES):
            mbarrier.init(k_bars.index(i), count=1)
            mbarrier.init(v_bars.index(i), count=1)
            mbarrier.init(empty_bars.index(i), count=2)
    fence_async_shared()  # barrier inits visible to the async proxy (TMA)
    gl.thread_barrier()
    return (q_smems, k_smem, v_smem, q_bars, turn_bars, k_bars, v_bars, empty_bars, v_empty,
            o_smems)


@gluon.jit(do_not_specialize=["seqlen_q", "seqlen_k", "left"])
def _fwd_c_kernel(
    q_desc, k_desc, v_desc, o_desc,  # TMA descriptors: q, o (B, M, H, D); k, v (B, N, Hkv, D)
    LSE,  # (B, H, M) fp32; VARLEN: (H, TQ)
    Q, K, V, O, CU_Q, CU_K,  # VARLEN: packed base pointers, cu_seqlens (else None)
    seqlen_q, seqlen_k, nheads, group, qk_scale,  # qk_scale = softmax_scale * log2(e)
    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
    NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr, LOAD_REGS: gl.constexpr,
    MMA_REGS: gl.constexpr, PINGPONG: gl.constexpr, VARLEN: gl.constexpr = False,
    left=0, HAS_LEFT: gl.constexpr = False,  # a sliding window: keys from row + diag - left
    cap_scale=1.0, SOFTCAP: gl.constexpr = False,  # softcap: tanh(qk * sm_scale / softcap)
    K_FIRST: gl.constexpr = False,  # HopperFwdConfig.c_k_wait_first
    TRACE=None,  # int64 timeline buffer (_c_consumer; scripts/trace_stage_c.py), else None
):
    """Stage C. BLOCK_M is the tile of one consumer warpgroup (64 rows: the kernel runs
    with num_warps=4, warpgroup 0; warpgroup 1 and the producer are workers); a program
    covers 2 * BLOCK_M rows. Per warpgroup, iteration j issues S_j = Q K_j^T and
    O += P_{j-1} V_{j-1} together, then runs the softmax of S_j while PV_{j-1} is in
    flight (FA3 3.2); the two warpgroups take turns issuing GEMMs through two mbarriers
    (turn_bars), so one's softmax runs under the other's GEMMs (FA3 3.1).
    PINGPONG=False (HopperFwdConfig.turn_waits; FLASHTILE_HOPPER_C_PINGPONG=0 forces it)
    skips the turn waits: the same kernel with free-running warpgroups (shipped at hd 256
    non-causal, where it measured +7-8%).

    Its first prediction and outcome are docs/performance.md step 5. Where it ships and
    what chose each config: configs.hopper_fwd_schedule and hopper_fwd_config_c (hd 128
    from 1k queries non-causal and 2k causal, hd 256 from 1k; hd 64 stays on stage A,
    which measured 5-10% ahead of it, s36a).
    """
    gl.static_assert(gl.num_warps() == 4, "one consumer warpgroup per partition")
    gl.static_assert(BLOCK_M == 64, "each consumer warpgroup owns one 64-row wgmma tile")
    gl.static_assert(HEAD_DIM <= 256 and BLOCK_N <= 256, "wgmma n is at most 256")
    pid_m = gl.program_id(0)
    if CAUSAL:
        pid_m = gl.num_programs(0) - 1 - pid_m  # longest rows first: better tail balance
    start_cta = pid_m * (2 * BLOCK_M)
    if _past_seq_end(CU_Q, start_cta, nheads, VARLEN):
        return
    (b, h, hk, seqlen_q, seqlen_k, lse_rows, q_desc, k_desc, v_desc,
     o_desc) = _program_seq(gl.program_id(1), q_desc, k_desc, v_desc, o_desc, LSE, Q, K, V,
                            O, CU_Q, CU_K, seqlen_q, seqlen_k, nheads, group, VARLEN)
    # the later warpgroup's tile needs the most key tiles, the earlier one (under a
    # sliding window) the leftmost: the producer loads [base, n_cta)
    base, _a, _b, _n = _c_tiles(start_cta, seqlen_q, seqlen_k, left, BLOCK_M, BLOCK_N, CAUSAL,
                                HAS_LEFT)
    _lo, _a, _b, n_cta = _c_tiles(start_cta + BLOCK_M, seqlen_q, seqlen_k, left, BLOCK_M,
                                  BLOCK_N, CAUSAL, HAS_LEFT)

    (q_smems, k_smem, v_smem, q_bars, turn_bars, k_bars, v_bars, empty_bars, _v_empty,
     _o_smems) = _c_shared(q_desc, k_desc, v_desc, NUM_STAGES)
    for i in gl.static_range(2):
        mbarrier.expect(q_bars.index(i), q_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(q_desc, [b, start_cta + i * BLOCK_M, h, 0],
                                        q_bars.index(i), q_smems.index(i))

    # warpgroup 0 is the default partition; warpgroup 1 a 4-warp worker (warps 4-7, so
    # its wgmma is warpgroup-aligned), then the 1-warp producer
    gl.warp_specialize(
        [
            (_c_consumer, (0, q_smems, q_bars, o_desc, lse_rows, k_smem, v_smem, k_bars, v_bars,
                            empty_bars, turn_bars, b, h, start_cta, seqlen_q, seqlen_k,
                            qk_scale, HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES, CAUSAL,
                            PINGPONG, left, HAS_LEFT, cap_scale, SOFTCAP, K_FIRST, TRACE)),
            (_c_consumer, (1, q_smems, q_bars, o_desc, lse_rows, k_smem, v_smem, k_bars, v_bars,
                            empty_bars, turn_bars, b, h, start_cta, seqlen_q, seqlen_k,
                            qk_scale, HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES, CAUSAL,
                            PINGPONG, left, HAS_LEFT, cap_scale, SOFTCAP, K_FIRST, TRACE)),
            (_c_producer, (k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, empty_bars, b, hk,
                           base, n_cta, BLOCK_N, NUM_STAGES, HAS_LEFT)),
        ],
        [4, 1],
        [MMA_REGS, LOAD_REGS],
    )


# ==================================================================================
# stage C, persistent (HopperFwdConfig.persistent): one program per SM walks its tiles
# ==================================================================================


@gluon.jit
def _cp_tile(t, m_tiles, CAUSAL: gl.constexpr):
    """Work item ``t`` of the persistent grid -> (query tile index, b * H + h). Items run
    query tile fastest, so the programs working at one time share a few heads' K / V in
    L2 (the order of the one-shot grid); causal heads start at their bottom (longest)
    tile, as the one-shot grid does."""
    pid_m = t % m_tiles
    if CAUSAL:
        pid_m = m_tiles - 1 - pid_m
    return pid_m, t // m_tiles


@gluon.jit
def _cp_pair_item(i, pid, P, m_tiles, n_bh):
    """The i-th work item of program ``pid`` of P in the paired causal order (an even
    number of query tiles per head): units u = pid, pid + P, ... of n_bh * m_tiles / 2,
    each a head's j-th longest query tile followed by its j-th shortest, so every unit
    holds the same causal work (m_tiles + 1 key tiles) and the round robin over units
    balances. Returns (query tile index, b * H + h)."""
    half = m_tiles // 2
    u = pid + (i // 2) * P
    j = u % half
    pid_m = gl.where(i % 2 == 0, m_tiles - 1 - j, j)
    return pid_m, u // half


@gluon.jit
def _cp_item(t, first, step, m_tiles, n_work, CAUSAL: gl.constexpr, PAIRED: gl.constexpr):
    """Work item of loop slot ``t`` = first + i * step of a persistent program: the round
    robin's item t (``_cp_tile``), or with PAIRED the i-th item of the paired order."""
    if PAIRED:
        return _cp_pair_item((t - first) // step, first, step, m_tiles, n_work // m_tiles)
    else:
        return _cp_tile(t, m_tiles, CAUSAL)


@gluon.jit
def _cp_end(first, step, m_tiles, n_work, PAIRED: gl.constexpr):
    """Past the last loop slot of a persistent program: n_work for the round robin; with
    PAIRED, first + (2 x its units) x step (units u = first + k * step below n_work / 2)."""
    if PAIRED:
        return first + 2 * ((n_work // 2 - first + step - 1) // step) * step
    else:
        return n_work


@gluon.jit
def _cp_ring(start_cta, seqlen_q, seqlen_k, left, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
             CAUSAL: gl.constexpr, HAS_LEFT: gl.constexpr):
    """(base, count, cycles) of one work item: the producer loads key tiles [base, base +
    count) into the ring; each warpgroup makes ``cycles`` turns (its steps, then empty
    turns up to the other's count), so both arrive on the turn barriers equally often
    per item and their turn order carries over from item to item."""
    lo0, _a0, _f0, n0 = _c_tiles(start_cta, seqlen_q, seqlen_k, left, BLOCK_M, BLOCK_N, CAUSAL,
                                 HAS_LEFT)
    lo1, _a1, _f1, n1 = _c_tiles(start_cta + BLOCK_M, seqlen_q, seqlen_k, left, BLOCK_M,
                                 BLOCK_N, CAUSAL, HAS_LEFT)
    base = gl.minimum(lo0, lo1)
    count = gl.maximum(gl.maximum(n0, n1) - base, 0)
    cycles = gl.maximum(gl.maximum(n0 - lo0 - 1, n1 - lo1 - 1), 0)
    return base, count, cycles


@gluon.jit
def _cp_producer(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, empty_bars, seqlen_q, seqlen_k,
                 nheads, group, m_tiles, n_work, left, BLOCK_M: gl.constexpr,
                 BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr,
                 HAS_LEFT: gl.constexpr, V_STAGES: gl.constexpr = 0, v_empty=None,
                 PAIRED: gl.constexpr = False):
    """Every work item's key tiles, in item order, through one ring whose positions run on
    across items (position ``pos`` in slot pos % NUM_STAGES): the next item's first tiles
    load while the consumers finish the current one. V_STAGES > 0: K and V each through
    their own ring (V in slot pos % V_STAGES, behind ``v_empty``)."""
    pos0 = 0
    first = gl.program_id(0)
    step = gl.num_programs(0)
    for t in range(first, _cp_end(first, step, m_tiles, n_work, PAIRED), step):
        pid_m, bh = _cp_item(t, first, step, m_tiles, n_work, CAUSAL, PAIRED)
        base, count, _cycles = _cp_ring(pid_m * (2 * BLOCK_M), seqlen_q, seqlen_k, left,
                                        BLOCK_M, BLOCK_N, CAUSAL, HAS_LEFT)
        b = bh // nheads
        hk = (bh % nheads) // group
        for i in range(0, count):
            pos = pos0 + i
            use = pos // NUM_STAGES
            mbarrier.wait(empty_bars.index(pos % NUM_STAGES), (use & 1) ^ 1, pred=use > 0)
            if V_STAGES > 0:
                sk = pos % NUM_STAGES
                mbarrier.expect(k_bars.index(sk), k_desc.block_type.nbytes)
                tma.async_copy_global_to_shared(k_desc, [b, (base + i) * BLOCK_N, hk, 0],
                                                k_bars.index(sk), k_smem.index(sk))
                sv = pos % V_STAGES
                vuse = pos // V_STAGES
                mbarrier.wait(v_empty.index(sv), (vuse & 1) ^ 1, pred=vuse > 0)
                mbarrier.expect(v_bars.index(sv), v_desc.block_type.nbytes)
                tma.async_copy_global_to_shared(v_desc, [b, (base + i) * BLOCK_N, hk, 0],
                                                v_bars.index(sv), v_smem.index(sv))
            else:
                issue_kv_slot(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars,
                              pos % NUM_STAGES, base + i, b, hk, True, BLOCK_N)
        pos0 += count


@gluon.jit
def _cp_load_q(q_desc, q_smem, q_bar, t, m_tiles, nheads, WG: gl.constexpr,
               BLOCK_M: gl.constexpr, CAUSAL: gl.constexpr, first=0, step=1, n_work=0,
               PAIRED: gl.constexpr = False):
    """TMA-load warpgroup WG's query tile of the work item of loop slot ``t``
    (``_cp_item``; zero rows past the end)."""
    pid_m, bh = _cp_item(t, first, step, m_tiles, n_work, CAUSAL, PAIRED)
    mbarrier.expect(q_bar, q_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(
        q_desc, [bh // nheads, pid_m * (2 * BLOCK_M) + WG * BLOCK_M, bh % nheads, 0], q_bar,
        q_smem)


@gluon.jit
def _cp_consumer(WG: gl.constexpr, q_desc, q_smems, q_bars, LSE, k_smem, v_smem, k_bars,
                 v_bars, empty_bars, turn_bars, seqlen_q, seqlen_k, nheads, m_tiles, n_work,
                 qk_scale, HEAD_DIM: gl.constexpr,
                 BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr,
                 CAUSAL: gl.constexpr, PINGPONG: gl.constexpr, left=0,
                 HAS_LEFT: gl.constexpr = False, cap_scale=1.0, SOFTCAP: gl.constexpr = False,
                 K_FIRST: gl.constexpr = False, TRACE=None, o_desc=None,
                 V_STAGES: gl.constexpr = 0, v_empty=None,
                 o_smems=None, PAIRED: gl.constexpr = False, O_VIA_Q: gl.constexpr = False,
                 O_LAG: gl.constexpr = False, Q_EARLY: gl.constexpr = False):
    """``_c_consumer`` over the program's work items t = pid, pid + P, ... Ring positions
    (``pos0``: the item's first) and turns (``k0``: this warpgroup's turns so far) run on
    across items, so ``_c_step`` serves unchanged: it gets base - pos0 as its ``base`` and
    k0 + its step as ``k``. O goes through the Q buffer and a TMA store as in
    ``_c_consumer`` (``_epilogue``), and the next item's Q is loaded after the store has
    read it. V_STAGES > 0 (the split ring, HopperFwdConfig.v_stages): O goes through its
    own buffer (``o_smems``), and the next Q loads right after the last PV; with O_VIA_Q
    (HopperFwdConfig.o_stage False) through the Q buffer as without V_STAGES. (Session 20
    also stored O from registers so that Q could load early: 4-byte stores, a tail of
    3.0-3.2 us against 1.4-2.0, measured level with the one-shot grid; removed.) TRACE: as
    ``_c_consumer``'s, one row of 8 per (work item, warpgroup), the last field the
    program. With the O buffers: O_LAG (HopperFwdConfig.o_lag) waits for an O store to
    read its buffer only before the next item's epilogue (``_epilogue``'s LAG), and
    Q_EARLY (HopperFwdConfig.q_early) loads the next Q before the item's last PV instead
    of after it."""
    s_layout: gl.constexpr = _mma_layout(gl.num_warps(), BLOCK_N)
    o_layout: gl.constexpr = _mma_layout(gl.num_warps(), HEAD_DIM)
    diag = seqlen_k - seqlen_q
    q_smem = q_smems.index(WG)
    q_bar = q_bars.index(WG)
    q2 = q_smem.reshape([BLOCK_M, HEAD_DIM])
    first = gl.program_id(0)
    step = gl.num_programs(0)
    end = _cp_end(first, step, m_tiles, n_work, PAIRED)
    _cp_load_q(q_desc, q_smem, q_bar, first, m_tiles, nheads, WG, BLOCK_M, CAUSAL, first,
               step, n_work, PAIRED)
    STAGED: gl.constexpr = V_STAGES > 0 and not O_VIA_Q  # O through its own buffer
    pos0 = 0
    k0 = 0
    it = 0
    for t in range(first, end, step):
        pid_m, bh = _cp_item(t, first, step, m_tiles, n_work, CAUSAL, PAIRED)
        row = TRACE
        if TRACE is not None:
            if PAIRED:  # the item itself: slots run past n_work
                row = TRACE + 8 * (2 * (bh * m_tiles + pid_m) + WG)
            else:
                row = TRACE + 8 * (2 * t + WG)
            trace_stamp(row, 1)
        b = bh // nheads
        h = bh % nheads
        start_cta = pid_m * (2 * BLOCK_M)
        start_m = start_cta + WG * BLOCK_M
        lo, a, n_full, n_tiles = _c_tiles(start_m, seqlen_q, seqlen_k, left, BLOCK_M, BLOCK_N,
                                          CAUSAL, HAS_LEFT)
        base, count, cycles = _cp_ring(start_cta, seqlen_q, seqlen_k, left, BLOCK_M, BLOCK_N,
                                       CAUSAL, HAS_LEFT)
        shift = base - pos0  # key tile j sits at ring position j - shift
        m_other = k0 + cycles  # every turn of this item has its counterpart
        if not PINGPONG:
            m_other = 0
        rows = start_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_layout))
        m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, gl.SliceLayout(1, s_layout))
        l_i = gl.zeros([BLOCK_M], gl.float32, gl.SliceLayout(1, s_layout))
        acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, o_layout)
        _c_release(k_bars, empty_bars, base, lo, shift, NUM_STAGES, V_STAGES, v_empty, v_bars)
        mbarrier.wait(q_bar, it & 1)
        if TRACE is not None:
            trace_stamp(row, 2)
        steps = 0
        EARLY: gl.constexpr = STAGED and Q_EARLY
        if n_tiles > lo:
            steps = n_tiles - lo - 1
            acc, m_i, l_i, p = _c_item(
                q2, acc, m_i, l_i, k_smem, v_smem, k_bars, v_bars, empty_bars, turn_bars, lo,
                a, n_full, n_tiles, shift, k0, m_other, rows, seqlen_k, diag, qk_scale, WG,
                HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES, CAUSAL, left, HAS_LEFT, cap_scale,
                SOFTCAP, K_FIRST, row, V_STAGES, v_empty, not EARLY)
            if EARLY:  # Q is free (every S GEMM retired): the next one loads under the PV
                if t + step < end:
                    _cp_load_q(q_desc, q_smem, q_bar, t + step, m_tiles, nheads, WG, BLOCK_M,
                               CAUSAL, first, step, n_work, PAIRED)
                acc = _c_last_pv(acc, p, v_smem, v_bars, empty_bars, n_tiles, shift, HEAD_DIM,
                                 BLOCK_N, NUM_STAGES, V_STAGES, v_empty)
            elif STAGED and t + step < end:
                _cp_load_q(q_desc, q_smem, q_bar, t + step, m_tiles, nheads, WG, BLOCK_M,
                           CAUSAL, first, step, n_work, PAIRED)
        elif STAGED and t + step < end:
            _cp_load_q(q_desc, q_smem, q_bar, t + step, m_tiles, nheads, WG, BLOCK_M, CAUSAL,
                       first, step, n_work, PAIRED)
        # -- empty turns up to the other warpgroup's count --
        for c in range(steps, cycles):
            _c_turn_wait(turn_bars, k0 + c, m_other, WG)
            mbarrier.arrive(turn_bars.index(1 - WG), count=1)
        _c_release(k_bars, empty_bars, gl.maximum(n_tiles, lo), base + count, shift,
                   NUM_STAGES, V_STAGES, v_empty, v_bars)
        o_smem = q_smem
        if STAGED:
            o_smem = o_smems.index(WG)
        _epilogue(acc, m_i, l_i, o_smem, o_desc, LSE + bh.to(gl.int64) * seqlen_q, b, h,
                  start_m, seqlen_q, BLOCK_M, HEAD_DIM, LAG=STAGED and O_LAG)
        if not STAGED:
            gl.thread_barrier()  # the store has read the buffer: the next Q may land
            if t + step < end:
                _cp_load_q(q_desc, q_smem, q_bar, t + step, m_tiles, nheads, WG, BLOCK_M,
                           CAUSAL, first, step, n_work, PAIRED)
        if TRACE is not None:
            trace_stamp(row, 5)
            trace_stamp(row, 0, smid())
            trace_stamp(row, 7, first)
        pos0 += count
        k0 += cycles
        it += 1
    if STAGED and O_LAG:  # the last O store has read its buffer before the program exits
        tma.store_wait(pendings=0)


@gluon.jit(do_not_specialize=["seqlen_q", "seqlen_k", "left", "m_tiles", "n_work"])
def _fwd_cp_kernel(
    q_desc, k_desc, v_desc,  # TMA descriptors: q (B, M, H, D); k, v (B, N, Hkv, D)
    o_desc,  # TMA descriptor of out (B, M, H, D)
    LSE,  # (B, H, M) fp32
    seqlen_q, seqlen_k, nheads, group, m_tiles, n_work, qk_scale,
    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
    NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr, LOAD_REGS: gl.constexpr,
    MMA_REGS: gl.constexpr, PINGPONG: gl.constexpr,
    left=0, HAS_LEFT: gl.constexpr = False, cap_scale=1.0, SOFTCAP: gl.constexpr = False,
    K_FIRST: gl.constexpr = False, TRACE=None,
    V_STAGES: gl.constexpr = 0,  # HopperFwdConfig.v_stages: V's own ring, an O buffer
    PAIRED: gl.constexpr = False,  # HopperFwdConfig.paired: the causal paired item order
    O_VIA_Q: gl.constexpr = False,  # HopperFwdConfig.o_stage False: no O buffer
    O_LAG: gl.constexpr = False,  # HopperFwdConfig.o_lag
    Q_EARLY: gl.constexpr = False,  # HopperFwdConfig.q_early
):
    """Stage C on a persistent grid (HopperFwdConfig.persistent): min(SMs, work items)
    programs, each walking items t = pid, pid + P, ... of n_work = m_tiles * B * H (one
    item: 2 * BLOCK_M query rows of one head, as a stage C program). The one-shot grid
    pays, per program, the launch of a new CTA, its barrier setup and the first Q and K
    loads before any GEMM, and a ring that drains empty at the end; here the producer
    streams the next item's K / V into the ring while the consumers finish the current
    one, and each consumer loads its next Q tile after its O store. Dense calls only
    (varlen keeps the one-shot grid).

    Prediction (H200, bf16, hd 128, before any run): +2-4% at 4k (32 steps per item, ~1-2
    us of exposed start-up per item of ~60 us), +5-10% at 1k, under +1% at 16k; causal
    about the same, its balance left to the static item order. Measured (docs/
    performance.md steps 59-61): with O stored from registers level non-causal, 0.72-0.96x
    causal (the round robin's imbalance); with O through TMA +4% at 1k, level from 4k: shipped
    at hd 128 non-causal below 4k. V_STAGES (a split ring with an O buffer) and PAIRED
    (the balanced causal order) are built, not yet measured."""
    gl.static_assert(gl.num_warps() == 4, "one consumer warpgroup per partition")
    gl.static_assert(BLOCK_M == 64, "each consumer warpgroup owns one 64-row wgmma tile")
    (q_smems, k_smem, v_smem, q_bars, turn_bars, k_bars, v_bars, empty_bars, v_empty,
     o_smems) = _c_shared(q_desc, k_desc, v_desc, NUM_STAGES, V_STAGES, O_VIA_Q)
    producer_args = (k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, empty_bars, seqlen_q,
                     seqlen_k, nheads, group, m_tiles, n_work, left, BLOCK_M, BLOCK_N,
                     NUM_STAGES, CAUSAL, HAS_LEFT, V_STAGES, v_empty, PAIRED)
    gl.warp_specialize(
        [
            (_cp_consumer, (0, q_desc, q_smems, q_bars, LSE, k_smem, v_smem, k_bars,
                            v_bars, empty_bars, turn_bars,
                            seqlen_q, seqlen_k, nheads, m_tiles, n_work, qk_scale, HEAD_DIM,
                            BLOCK_M, BLOCK_N, NUM_STAGES, CAUSAL, PINGPONG, left, HAS_LEFT,
                            cap_scale, SOFTCAP, K_FIRST, TRACE, o_desc, V_STAGES,
                            v_empty, o_smems, PAIRED, O_VIA_Q, O_LAG, Q_EARLY)),
            (_cp_consumer, (1, q_desc, q_smems, q_bars, LSE, k_smem, v_smem, k_bars,
                            v_bars, empty_bars, turn_bars,
                            seqlen_q, seqlen_k, nheads, m_tiles, n_work, qk_scale, HEAD_DIM,
                            BLOCK_M, BLOCK_N, NUM_STAGES, CAUSAL, PINGPONG, left, HAS_LEFT,
                            cap_scale, SOFTCAP, K_FIRST, TRACE, o_desc, V_STAGES,
                            v_empty, o_smems, PAIRED, O_VIA_Q, O_LAG, Q_EARLY)),
            (_cp_producer, producer_args),
        ],
        [4, 1],
        [MMA_REGS, LOAD_REGS],
    )


# ==================================================================================
# cross-compilation for sm_90 without a GPU (CI and scripts/compile_sm90.py)
# ==================================================================================


def compile_sm90(head_dim: int, causal: bool, dtype=torch.bfloat16, config=None,
                 varlen: bool = False, window: bool = False, softcap: bool = False,
                 dropout: str | None = None):
    """Compile the Gluon forward for sm_90 on any machine (no GPU needed) with the
    argument types a real launch produces (``varlen``: hopper_varlen_forward's;
    ``window``: a sliding window's left bound, ``softcap``: SOFTCAP, stages A / C;
    ``dropout``: "seed" (host ints), "pair" (the on-device int64 pair) or "bits" (a
    dropout_bits_buffer, whose words the kernel writes), stage A). Returns
    Triton's compiled kernel (``.asm`` holds ttgir/ptx/cubin, ``.metadata.shared`` the
    shared memory in bytes)."""
    from triton.backends.compiler import GPUTarget

    cfg = config or configs.hopper_fwd_config(head_dim, causal, 4096)
    kernel, block_m, num_warps, extra = _kernel_args(cfg, persistent_ok=not varlen)
    gdt = _GL_DTYPES[dtype]
    tys = {torch.float16: "fp16", torch.bfloat16: "bf16"}

    def desc(rows):
        block = [1, rows, 1, head_dim]
        layout = gl.NVMMASharedLayout.get_default_for(block, gdt)
        return f"tensordesc<{tys[dtype]}[{','.join(map(str, block))}],{layout!r}>"

    stages = cfg.num_stages if kernel is _fwd_cp_kernel else cfg.one_shot_stages
    constexprs = dict(HEAD_DIM=head_dim, BLOCK_M=block_m, BLOCK_N=cfg.block_n,
                      NUM_STAGES=stages, CAUSAL=bool(causal), **extra)
    if kernel is _fwd_cp_kernel:  # the persistent stage C (dense only)
        sig = dict(q_desc=desc(block_m), k_desc=desc(cfg.block_n), v_desc=desc(cfg.block_n),
                   o_desc=desc(block_m),
                   LSE="*fp32", seqlen_q="i32", seqlen_k="i32", nheads="i32", group="i32",
                   m_tiles="i32", n_work="i32", qk_scale="fp32", left="i32",
                   cap_scale="fp32")
        constexprs.update(HAS_LEFT=window, SOFTCAP=softcap)
        if cfg.paired and causal:  # the launch's choice for an even query-tile count
            constexprs["PAIRED"] = True
        sig.update({name: "constexpr" for name in constexprs})
        attrs = {(kernel.arg_names.index("LSE"),): [["tt.divisibility", 16]]}
        src = sm90_source(kernel, sig, constexprs, attrs)
        return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                              options=dict(num_warps=num_warps))
    ptrs = ("Q", "K", "V", "O", "CU_Q", "CU_K")
    sig = dict(q_desc=desc(block_m), k_desc=desc(cfg.block_n), v_desc=desc(cfg.block_n),
               o_desc=desc(block_m), LSE="*fp32")
    if varlen:  # torch allocations: 16-byte aligned, as the launch specialises them
        sig.update({n: f"*{tys[dtype]}" for n in ptrs[:4]}, CU_Q="*i32", CU_K="*i32")
        constexprs["VARLEN"] = True
        attrs = {(i,): [["tt.divisibility", 16]] for i in range(4, 11)}
    else:  # None: constexpr arguments the dense kernel never reads
        constexprs.update({n: None for n in ptrs})
        attrs = {(4,): [["tt.divisibility", 16]]}
    sig.update(seqlen_q="i32", seqlen_k="i32", nheads="i32", group="i32", qk_scale="fp32")
    if kernel is not _fwd_ws_kernel:
        sig["left"] = "i32"
        constexprs["HAS_LEFT"] = window
        sig["cap_scale"] = "fp32"
        constexprs["SOFTCAP"] = softcap
    if kernel is _fwd_kernel and cfg.tile_heads and causal and not varlen:
        sig["tile_heads"] = "i32"  # the launch's tile-major order
        constexprs["TILE_MAJOR"] = True
    if dropout:
        seed = {"seed": "i32", "pair": "*i64", "bits": "*i32", "bits-ws": "*i32"}[dropout]
        sig.update(seed=seed, rng_offset="i32", drop_thr="i32",
                   keep_p="fp32")
        if dropout == "bits-ws":  # the dropout partition
            constexprs.update(DROP_WS=True, DROP_REGS=DROP_WS_REGS)
            dropout = "bits"
        if dropout == "bits":  # the words, 16-byte aligned (a torch allocation + 16 bytes)
            sig["BITS"] = "*i32"
            attrs[(kernel.arg_names.index("BITS"),)] = [["tt.divisibility", 16]]
        else:
            constexprs["BITS"] = None
        constexprs["DROPOUT"] = True
    sig.update({name: "constexpr" for name in constexprs})
    src = sm90_source(kernel, sig, constexprs, attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options=dict(num_warps=num_warps, **_options(cfg)))
