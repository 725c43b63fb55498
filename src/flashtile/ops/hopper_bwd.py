"""The Hopper (sm_90) backward: Gluon dK/dV and dQ kernels with TMA, mbarrier-guarded
shared-memory rings and asynchronous wgmma. The default on sm_90 where
configs.hopper_bwd_preferred measured it faster than the portable backward of
ops/flash.py (hd 64 and 128 since 2026-11-30, hd 256 from 512 keys since session 32),
which stays the path for everything this
one does not cover (dropout without the forward's bits, other head dims; sliding windows
anywhere with FLASHTILE_HOPPER_WINDOW=0: otherwise they run here, HAS_LEFT,
_q_window_range; a softcap runs here too unless FLASHTILE_HOPPER_SOFTCAP=0: SOFTCAP; at hd
256 both since session 33 unless FLASHTILE_HOPPER_BWD_HD256_MASKS=0), for hd 64 below 1k
keys and hd 256 below 512 keys. FLASHTILE_HOPPER_BWD=1 forces it wherever
it can run, =0 switches it off. A fused variant (one kernel in FA3's roles, dQ through fp32 atomics,
ordered by default; _bwd_fused_kernel, FLASHTILE_HOPPER_BWD_FUSED=1) is opt-in: measured
slower than the two kernels at every DESIGN.md shape (benchmarks/results.md, sessions 4
and 8; docs/performance.md steps 8 and 22).

Layers, top to bottom:
    hopper_bwd_supported          does this backward take the Gluon path? (sm_90, table)
    hopper_attention_backward     launcher: (dq, dk, dv), no autograd; flash's
                                  attention_backward calls it first when supported
    _bwd_dkdv_kernel              one program per key tile: K, V resident, Q/dO streamed;
                                  with DQ_REDUCE (deterministic=False, hd 128 non-causal
                                  from 4k: configs.hopper_bwd_reduce_preferred) 128 keys
                                  over two warpgroups that also compute dQ = dS K and add
                                  it by TMA reduce-adds into fp32 (no dQ kernel); with
                                  DQ_FIXED (opt-in, deterministic) into int32, each
                                  share scaled by a power of two (ops/fixed_dq.py)
    _bwd_dq_kernel                one program per query tile: Q, dO resident, K/V streamed
    hopper_varlen_backward        (opt-in, FLASHTILE_HOPPER_VARLEN_BWD=1) the two kernels
                                  over packed varlen sequences: VARLEN programs build TMA
                                  descriptors over their own sequence's rows
    _bwd_fused_kernel             (opt-in) one program per 128-key tile: a TMA producer
                                  warp, two consumer warpgroups (64 keys, dK, dV each,
                                  half of each dQ tile's columns), dQ writer warps

Same conventions as the portable backward (ops/flash.py): lse in natural log from the
forward (-inf on rows that see no key), delta = rowsum(dO * O) from flash's preprocess
kernel, scores in log2 units: P = exp2(qk * scale * log2(e) - lse * log2(e));
dS = P * (dP - delta); dV = P^T dO, dK = scale * dS^T Q, dQ = scale * dS K.

Notation: B batch, H query heads, Hkv key/value heads (H = group * Hkv), M = seqlen_q,
N = seqlen_k, D head dim (64, 128 or 256). Causal keeps key j for row i when
j <= i + N - M (bottom-right). Each warp owns 16 rows of its accumulators, so a program's
resident tile has 16 * num_warps rows (one warpgroup of 64 at 4 warps, two at 8), each
warpgroup issuing its own wgmma.
    dK/dV grid (cdiv(N, BLOCK_N), B * Hkv). The program keeps K, V (BLOCK_N x D) in shared
        memory and loops over the group's query heads in order (GQA sums without atomics:
        deterministic), and per head over the query tiles that see its keys: the causal
        diagonal band first (masked), then the rest (no mask). Iteration it = g * n_m + j
        streams Q and dO tile j of head g through a NUM_STAGES-deep TMA ring. Dense GQA
        at hd 64 / 128 instead runs one program per query head (grid (cdiv(N, BLOCK_N),
        B * H), EXPAND; HopperBwdConfig.gqa_expand): per-head dK / dV partials, summed
        over each group by the launcher (still deterministic); at hd 64 only below
        configs.GQA_LOOP_MIN_SEQLEN keys, where the loop's fewer programs cost more than
        the partials' traffic.
        Transposed scores: S^T = K Q^T and dP^T = V dO^T (smem x smem, both in flight),
        then dV += P^T dO and dK += dS^T Q with P^T, dS^T as register A operands.
    dQ grid (cdiv(M, BLOCK_M), B * H), heaviest (causal: last) query tiles first. Q and dO
        resident, K/V tiles through the ring as in the forward; S = Q K^T, dP = dO V^T,
        dQ += dS K. Key tiles [0, n_full) unmasked, [n_full, n_tiles) masked.
Rows past a sequence end: TMA zero-fills them on load and clips them on store, per
(batch, head); query rows past M get lse = +inf in log2 units, so P = 0 there. Key rows
past N in the dK/dV kernel need no mask (their rows of dK/dV are never stored).

Resources of the shipped configs (configs.hopper_bwd_config), sm_90 cross-compile with
Triton 3.6's ptxas -v, bf16 and fp16 alike (`scripts/compile_sm90.py --hopper-bwd`):
    config         warps  dK/dV tile  ring  regs  spill  smem    dQ tile   ring  regs  smem
    hd 64            4    64k x 64q    2    168   20 B  48 KB    64q x 64k   3   122   64 KB
    hd 64 causal     4    64k x 64q    2    168   52 B  48 KB    64q x 64k   3   122   64 KB
    hd 128           4    64k x 64q    2    251    0    96 KB    64q x 64k   2   164   96 KB
    hd 128 causal    4    64k x 64q    2    255   28 B  96 KB    64q x 64k   2   164   96 KB
    hd 256 cols      8    64k x 64q    2    219    0   208 KB    64q x 64k   2   196  200 KB
    hd 256 causal    8    64k x 64q    2    255  100 B  208 KB    64q x 64k   2   191  200 KB
Every program is one warpgroup, so two or three share an SM and overlap each other's
softmax and GEMMs (+13-29% at hd 64, bdcf4c2; +8-35% at hd 128, e8aa9d8; against
two-warpgroup tiles, one program per SM). At hd 64 the dK/dV kernel is capped at 168
registers (HopperBwdConfig.max_regs -> ptxas maxnreg): three programs per SM, +5-15%
(604b370), without GQA only (with it, 12-19% slower: 5d10687); uncapped it takes 182 /
191. At hd 128 non-causal the dK/dV kernel loads the next step's lse / delta a step
ahead (prefetch_stats, +2-5%). At hd 256 a 64-key dK and dV do not fit one
warpgroup's registers. Since session 32 the dK/dV kernel's two warpgroups split the
columns (col_split, FA3's layout there): both hold the same 64 keys, each computes S^T
and dP^T for half of the query columns and accumulates half of dK's and dV's columns,
with P^T and dS^T exchanged through shared memory. Before that (d_split = 2, still
buildable; 0.50-0.61x cuDNN's backward at 0e01b69) the kernel ran twice, each launch
accumulating 128 columns with S^T and dP^T recomputed over all 256.
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
from . import fixed_dq, hopper_fwd, tail_split
from ._common import (
    _bits_block,
    device_capability,
    device_ctx,
    env_mode,
    is_interpreting,
    sm_count,
    tanh_f32,
)
from ._gluon_common import (
    alloc_ring_pair,
    bits_keep,
    bits_masks_t,
    bits_words_mma,
    desc_signature,
    dropped,
    issue_kv_slot,
    kv_tile_range,
    launch,
    load_pair,
    mma_layout,
    scores_masked,
    scratch_allocator,
    seq_bounds,
    seq_desc,
    sm90_source,
    stats_desc,
    stats_desc_signature,
    stats_tma_ok,
    tile_ids,
    tma_addressable,
    tma_desc,
    tma_reduce_add,
    window_tile_range,
)
from ._launch import record as _record

__all__ = [
    "hopper_bwd_supported", "hopper_bwd_problem_ok", "hopper_bwd_mode",
    "hopper_attention_backward", "varlen_bwd_mode", "hopper_varlen_bwd_supported",
    "hopper_varlen_backward",
    "HOPPER_BWD_HEAD_DIMS", "ENV_VAR", "VARLEN_ENV_VAR",
]

HOPPER_BWD_HEAD_DIMS = (64, 128, 256)
ENV_VAR = "FLASHTILE_HOPPER_BWD"
# Sliding windows and softcaps at hd 256 run on the Gluon backward's column-split kernels
# (HAS_LEFT / SOFTCAP builds: ptxas sm_90 233-253 registers, no spills); =0 sends them to
# the portable backward. `s33a` (c8a0c2e, scripts/env_ab.py, 3 interleaved rounds,
# backward TFLOPS Gluon / portable): Gemma-2's sliding layers (causal, window 4096,
# softcap 50) 259.7 / 192.4 at 4k and 363.2 / 279.4 at 8k, softcap 30 alone 312.9 / 224.8
# non-causal and 270.0 / 208.8 causal at 4k (+30% to +39%); 32 GPU tests passed
HD256_MASKS_ENV_VAR = "FLASHTILE_HOPPER_BWD_HD256_MASKS"
_LOG2E = 1.4426950408889634


# ==================================================================================
# dispatch
# ==================================================================================


def hopper_bwd_mode() -> str:
    """"auto" (FLASHTILE_HOPPER_BWD unset: the Gluon backward where
    configs.hopper_bwd_preferred measured it faster), "on" (=1: wherever it can run) or
    "off" (=0 or empty, or FLASHTILE_DISABLE_HOPPER=1, which switches off the forward
    too)."""
    if hopper_fwd._hopper_disabled():
        return "off"
    return env_mode(ENV_VAR)


def hopper_bwd_supported(
    q, k, v, causal=False, window=(None, None), softcap=0.0, dropout_p=0.0, softmax_scale=None,
    seqlen_k=None, windows=False, softcaps=False, bits=False,
):
    """True when the Gluon backward runs this call: not switched off (``hopper_bwd_mode``),
    not the interpreter, an sm_90 device, a covered problem (``hopper_bwd_problem_ok``),
    and in "auto" mode a shape where configs.hopper_bwd_preferred holds at ``seqlen_k``
    keys (default k.shape[1]; a varlen call's longest key sequence).
    ``window`` is the launchers' ``(left, right)`` as in ``hopper_fwd.hopper_supported``;
    ``windows``: the caller passes a left bound on (``hopper_attention_backward``'s
    ``left``), which the two-kernel backward runs at hd 64 / 128 unless
    FLASHTILE_HOPPER_WINDOW=0 (``hopper_fwd.window_mode``); ``softcaps``: a softcap too,
    at hd 64 / 128 unless FLASHTILE_HOPPER_SOFTCAP=0 (``hopper_fwd.softcap_mode``);
    ``bits``: dropout whose decisions the forward wrote as bit words
    (flash.dropout_bits_buffer), which the two-kernel backward reads at hd 64 / 128
    unless FLASHTILE_HOPPER_BWD_DROPOUT=0 (``dropout_mode``)."""
    mode = hopper_bwd_mode()
    if mode == "off" or is_interpreting():
        return False
    if not (q.is_cuda and k.is_cuda and v.is_cuda):
        return False
    if device_capability(q.device) != (9, 0):
        return False
    if not hopper_bwd_problem_ok(q, k, v, causal, window, softcap, dropout_p, softmax_scale,
                                 windows, softcaps, bits and dropout_mode() != "off"):
        return False
    # with the bits, at every length: `s17f` (08c7316), the backward kernels' us per call
    # with dropout 0.2 at MiniGPT's 64 x 256 (hd 64 causal, where the portable backward
    # wins without dropout) 80.2 Gluon against 107.7 portable (s17a), both reading bits;
    # 174.2 / 238.8 at 16 x 1024 (Gluon uncapped). Shorter sequences: not measured
    return mode == "on" or (bits and dropout_p > 0) or configs.hopper_bwd_preferred(
        q.shape[-1], bool(causal) or window[1] == 0,
        k.shape[1] if seqlen_k is None else seqlen_k)


def hopper_bwd_problem_ok(
    q, k, v, causal=False, window=(None, None), softcap=0.0, dropout_p=0.0, softmax_scale=None,
    windows=False, softcaps=False, bits=False,
):
    """Device-independent half: what the Gluon forward covers (fp16/bf16, full or causal,
    with ``windows`` a sliding window and with ``softcaps`` a softcap as
    ``hopper_fwd.hopper_problem_ok`` takes them, not in the fused kernel; TMA-addressable
    q/k/v, non-empty) at head dim 64, 128 or 256 (256: windows and softcaps on the
    column-split kernels unless FLASHTILE_HOPPER_BWD_HD256_MASKS=0;
    configs.hopper_bwd_preferred picks the lengths).
    Dropout only with ``bits`` (the forward's decisions as bit words), in the two-kernel
    backward at hd 64 / 128.
    dout and the gradient buffers need no alignment: the launcher copies if they do."""
    if q.shape[-1] not in HOPPER_BWD_HEAD_DIMS:
        return False
    fused = os.environ.get(FUSED_ENV_VAR) == "1"
    masks_256 = (q.shape[-1] > 128 and not fused and not dropout_p
                 and os.environ.get(HD256_MASKS_ENV_VAR) != "0")
    if ((window[0] is not None or softcap or dropout_p > 0)
            and (q.shape[-1] > 128 or fused) and not masks_256):
        return False  # no window / softcap / dropout in the hd 256 (when opted out) or
        # fused kernels
    if dropout_p > 0:
        if not bits:
            return False
        dropout_p = 0.0  # (the forward's check: the bits stand for the draw)
    return hopper_fwd.hopper_problem_ok(q, k, v, causal, window, softcap, dropout_p,
                                        softmax_scale, windows, softcaps)


# ==================================================================================
# launcher
# ==================================================================================


def hopper_attention_backward(dout, q, k, v, out, lse, softmax_scale, causal, dq, dk, dv,
                              config=None, deterministic=True, left=None, softcap=0.0,
                              dropout_p=0.0, bits=None):
    """Write dq, dk, dv ((B, M, H, D) / (B, N, Hkv, D), any strides with a unit last one)
    for ``lse`` ((B, H, M) fp32 contiguous, natural log, as the forwards return it).
    ``left``: a sliding window's left bound, ``softcap`` > 0 a softcap (the two-kernel
    backward, whole head dims).
    ``dropout_p`` > 0 with ``bits``: the int32 bit words the forward wrote (a
    dropout_bits_buffer after its header), read by both kernels (two-kernel backward).
    Call only when ``hopper_bwd_supported`` holds. Returns ``(dq, dk, dv)``.
    With a fused config (``config.fused``) dQ goes through fp32 atomics, in key-tile
    order unless ``deterministic=False``; the two-kernel path is deterministic anyway.
    ``deterministic=False`` picks the one-kernel dQ_REDUCE tiles where
    ``reduce_mode`` allows them, deterministic calls the same tiles with fixed-point dQ
    (``reduce_fixed``) where ``fixed_mode`` does (``default_config``); an explicit
    ``config`` with ``dq_reduce`` runs them regardless (A/B runs)."""
    batch, seqlen_q, nheads, head_dim = q.shape
    seqlen_k, nheads_kv = k.shape[1], k.shape[2]
    if dropout_p > 0 and bits is None:
        raise ValueError("dropout in the Gluon backward needs the forward's bit words")
    cfg = config or default_config(head_dim, causal, seqlen_k, nheads // nheads_kv,
                                   bool(softcap), dropout_p > 0, deterministic,
                                   window=left is not None)
    if cfg.reduce_ordered and config is None and not reduce_ordered_ok(q, k, causal, left,
                                                                       cfg):
        # the ordered adds wait on other programs of their head: all must be resident
        cfg = default_config(head_dim, causal, seqlen_k, nheads // nheads_kv, bool(softcap),
                             dropout_p > 0, True, ordered=False, window=left is not None)
    if not _tma_ok(dout):  # e.g. an expanded (stride 0) gradient from a .sum()
        dout = dout.contiguous()
    lse = lse.contiguous()  # the kernels index it as (B * H, M)
    outs = [g if _tma_ok(g) else torch.empty(g.shape, dtype=g.dtype, device=g.device)
            for g in (dq, dk, dv)]
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(head_dim)
    group = nheads // nheads_kv
    if not (cfg.fused or cfg.dq_reduce or dropout_p > 0):  # what a plan may replay: the
        # preprocess, the dK/dV launches, the dQ one (ops/_launch.make_plan)
        _record("expect", 2 + cfg.d_split)
    with device_ctx(q):
        lse2 = pre = None
        if cfg.dq_reduce and cfg.reduce_fixed and cfg.fixed_prologue and not cfg.fused:
            # delta, the bounds and the zeroed int32 sum from one launch
            pre = fixed_dq.prologue(out, dout, lse, k, v, group,
                                    cfg.gqa_expand and group > 1, _lse2_pre(cfg, False),
                                    num_warps=cfg.prologue_warps)
            delta, lse2 = pre.delta, pre.st
        elif _lse2_pre(cfg, False):
            delta, lse2 = _delta(out, dout, lse)
        else:
            delta = _delta(out, dout)
        if cfg.fused:
            if left is not None or softcap or dropout_p > 0:
                raise ValueError("a sliding window, softcap or dropout runs on the "
                                 f"two-kernel backward, not {cfg}")
            _launch_fused(q, k, v, dout, lse, delta, outs, cfg, scale, causal, group,
                          deterministic)
        else:
            _launch_split(q, k, v, dout, lse, delta, outs, cfg, scale, causal, group,
                          left=left, softcap=softcap, lse2=lse2,
                          bits=bits if dropout_p > 0 else None, dropout_p=dropout_p,
                          pre=pre)
    for g, tmp in zip((dq, dk, dv), outs):
        if tmp is not g:  # a caller's buffer TMA cannot store to
            g.copy_(tmp)
    return dq, dk, dv


VARLEN_ENV_VAR = "FLASHTILE_HOPPER_VARLEN_BWD"


def varlen_bwd_mode() -> str:
    """"auto" (FLASHTILE_HOPPER_VARLEN_BWD unset: the Gluon varlen backward from
    configs.HOPPER_VARLEN_MIN_SEQLEN on, where it measured faster than the portable varlen
    backward), "on" (=1: wherever it can run) or "off" (=0 or empty)."""
    return env_mode(VARLEN_ENV_VAR)


def hopper_varlen_bwd_supported(q, k, v, dout, causal, window, softcap, softmax_scale=None,
                                max_seqlen_q=0, max_seqlen_k=None) -> bool:
    """May ops/varlen.py's backward take the Gluon two-kernel backward over per-sequence
    device-side TMA descriptors (``hopper_varlen_backward``)? Not when ``varlen_bwd_mode``
    is "off", nor in "auto" mode where configs.hopper_varlen_bwd_preferred does not
    hold at ``max_seqlen_q`` (the forward's 8k threshold, 2k at hd 128 non-causal); then what
    ``hopper_bwd_supported`` asks of the packed tensors as (1, T, H, D) views (sm_90,
    fp16/bf16, head dim 64 or 128, full or causal, or a sliding window as the dense
    backward takes it, no softcap; in its "auto" mode the measured dense
    table at the longest key sequence, ``max_seqlen_k``), with a TMA-addressable dout."""
    mode = varlen_bwd_mode()
    if mode == "off" or q.shape[-1] > 128:
        return False  # hd 256's column-split dK/dV kernel: not tested over varlen
    if mode == "auto" and not configs.hopper_varlen_bwd_preferred(q.shape[-1], causal,
                                                                   max_seqlen_q):
        return False
    views = [x.unsqueeze(0) for x in (q, k, v)]
    # sliding windows: the dense window build's HAS_LEFT over per-sequence descriptors
    # (session 13, 7386e40 `varlenwin`: its 12 GPU cases and the 60 varlen window / Gluon
    # tests beside them passed; not timed apart from the dense window backward)
    return (hopper_bwd_supported(*views, causal, window, softcap, 0.0, softmax_scale,
                                 seqlen_k=max_seqlen_k, windows=True)
            and _tma_ok(dout))


def hopper_varlen_backward(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k,
                           max_seqlen_q, max_seqlen_k, softmax_scale, causal, dq, dk, dv,
                           config=None, left=None):
    """The Gluon two-kernel backward over packed variable-length sequences (ops/varlen.py's
    layout: q / out / dout / dq (TQ, H, D), k / v / dk / dv (TK, Hkv, D), lse (H, TQ) fp32,
    int32 cu_seqlens). Grids (key tiles of the longest key sequence, B * Hkv) and (query
    tiles of the longest query sequence, B * H); each program builds descriptors over its
    own sequence's rows and returns at once past its end, so dq / dk / dv rows outside
    every sequence, and of sequences without queries (dk, dv) or keys (dq), keep what the
    caller put there: pass zeros. delta = rowsum(dO * O) from
    flash's preprocess over the packed rows as one batch ((1, H, TQ) = lse's layout).
    ``left``: a sliding window's left bound (HAS_LEFT, per sequence as the dense call's).
    Call only when ``hopper_varlen_bwd_supported`` holds. Returns (dq, dk, dv)."""
    nheads, head_dim = q.shape[1:]
    nheads_kv = k.shape[1]
    batch = cu_seqlens_q.shape[0] - 1
    group = nheads // nheads_kv
    # the two-kernel tiles even under FLASHTILE_HOPPER_BWD_FUSED=1 (no fused varlen build)
    cfg = config or _default_config(head_dim, causal, max_seqlen_k, group, False,
                                    os.environ.get(OVERRIDES_ENV_VAR, ""), expand=False)
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(head_dim)
    lse = lse.contiguous()  # the kernels index it as (H, TQ)
    q4, k4, v4, do4, o4, dq4, dk4, dv4 = (x.unsqueeze(0) for x in (q, k, v, dout, out, dq,
                                                                    dk, dv))
    with device_ctx(q), scratch_allocator(q.device):
        delta = _delta(o4, do4)  # (1, H, TQ): lse's layout
        _launch_split(q4, k4, v4, do4, lse, delta, (dq4, dk4, dv4), cfg, scale, causal,
                      group, varlen=(batch, max_seqlen_q, max_seqlen_k, cu_seqlens_q,
                                     cu_seqlens_k), left=left)
    return dq, dk, dv


def _scratch(shape, dtype, device, zero=False):
    """A scratch buffer of the backward (torch.empty, or zeros), recorded for a launch
    plan (ops/_launch.make_plan), which allocates it again on each replay."""
    t = (torch.zeros if zero else torch.empty)(shape, dtype=dtype, device=device)
    _record("alloc", t, zero)
    return t


def _delta(out, dout, lse=None):
    """delta = rowsum(dO * O), (B, H, M) fp32, from flash's preprocess kernel over
    (B, M, H, D) tensors (a varlen call's (1, TQ, H, D) views give lse's (H, TQ) layout).
    With ``lse`` ((B, H, M) contiguous) returns (delta, st): st holds, per PRE_ROWS query
    rows of each (batch, head), their lse in log2 units (+inf on rows with no key or past
    M) then their delta (0 past M): one TMA box per ring slot of the dK/dV kernel's tiles
    of as many rows (HopperBwdConfig.lse2_pre, ``_lse2_pre``)."""
    from . import flash  # flash imports this module at load

    batch, seqlen_q, nheads, head_dim = out.shape
    delta = _scratch((batch, nheads, seqlen_q), torch.float32, out.device)
    if lse is None:
        kernel, ptrs = flash._attn_bwd_preprocess_kernel, (out, dout, delta)
    else:  # per PRE_ROWS query rows: their lse2, then their delta (lse2_pre)
        lse2 = _scratch((batch * nheads * triton.cdiv(seqlen_q, PRE_ROWS), 2 * PRE_ROWS),
                        torch.float32, out.device)
        kernel, ptrs = flash._attn_bwd_preprocess_lse2_kernel, (out, dout, delta, lse, lse2)
    launch(
        kernel, (triton.cdiv(seqlen_q, PRE_ROWS), batch * nheads), out.device, *ptrs,
        out.stride(0), out.stride(1), out.stride(2), dout.stride(0), dout.stride(1),
        dout.stride(2), seqlen_q, nheads, HEAD_DIM=head_dim, BLOCK_D=head_dim,
        BLOCK_M=PRE_ROWS,
    )
    return delta if lse is None else (delta, lse2)


def _launch_split(q, k, v, dout, lse, delta, outs, cfg, scale, causal, group, varlen=None,
                  left=None, softcap=0.0, lse2=None, bits=None, dropout_p=0.0, pre=None):
    """The dK/dV kernel, then the dQ kernel (7 GEMMs per tile pair, no atomics), over 4D
    (B, S, H, D) tensors; ``varlen`` = (batch, max_seqlen_q, max_seqlen_k, cu_seqlens_q,
    cu_seqlens_k) when they are (1, T, H, D) views of packed sequences
    (hopper_varlen_backward): the kernels then also take the tensors as base pointers.
    ``left``: a sliding window's left bound (HAS_LEFT), ``softcap`` > 0 a softcap
    (SOFTCAP); whole head dims. ``lse2``: lse in log2 units from ``_delta`` (lse2_pre),
    for the dK/dV kernel's stats rows. ``bits``: dropout at ``dropout_p`` read from the
    forward's bit words (DROPOUT; dense, whole head dims). ``pre``: fixed_dq.prologue's
    output (HopperBwdConfig.fixed_prologue): the zeroed int32 sum and the bounds."""
    batch, seqlen_q, nheads, head_dim = q.shape
    seqlen_k, nheads_kv = k.shape[1], k.shape[2]
    rows_q, rows_k = seqlen_q, seqlen_k
    # Q, K, V, DO, DQ, DK, DV, CU_Q, CU_K: constexpr None when dense
    pq = pk = pv = pdo = pdq = pdk = pdv = cu_q = cu_k = None
    flag = {}
    if varlen is not None:
        batch, rows_q, rows_k, cu_q, cu_k = varlen
        pq, pk, pv, pdo, (pdq, pdk, pdv) = q, k, v, dout, outs
        flag = dict(VARLEN=True)
    if left is not None:
        if cfg.d_split > 1:
            raise ValueError("a sliding window: whole head dims only (no column blocks)")
        flag = dict(flag, left=int(left), HAS_LEFT=True)
    qk_scale = float(scale) * _LOG2E
    if softcap:  # scores tanh(qk * scale / softcap), softmax scale softcap * log2(e)
        if cfg.d_split > 1:
            raise ValueError("a softcap: whole head dims only (no column blocks)")
        flag = dict(flag, cap_scale=float(scale) / float(softcap), SOFTCAP=True)
        qk_scale = float(softcap) * _LOG2E
    if bits is not None:
        if varlen is not None or cfg.d_split > 1:
            raise ValueError("dropout bits: dense calls, whole head dims only")
        flag = dict(flag, BITS=bits, keep_scale=1.0 / (1.0 - float(dropout_p)), DROPOUT=True)
    cols = head_dim // cfg.d_split  # dK / dV columns per launch (all but at hd 256)
    dk_t, dv_t, key_heads, dkdv_flag = outs[1], outs[2], nheads_kv, dict(flag)
    dq_acc = None
    if cfg.dq_rotate and (not cfg.dq_reduce or cfg.reduce_ordered or causal
                          or left is not None):
        raise ValueError(f"dq_rotate: the one-kernel backward's (dq_reduce), non-causal, "
                         f"no window, not with reduce_ordered: {cfg}")
    if cfg.dq_reduce:  # dQ in the dK/dV kernel, racing TMA reduce-adds into fp32
        if varlen is not None or cfg.d_split > 1 or bits is not None:
            raise ValueError(f"dq_reduce: dense calls, whole head dims, no dropout: {cfg}")
        if cfg.reduce_fixed and cfg.reduce_ordered:
            raise ValueError(f"reduce_fixed or reduce_ordered, not both: {cfg}")
        # fixed point: an int32 sum, each row's shares scaled by its 2^e_i
        dq_acc = pre.acc if pre is not None else torch.zeros(
            q.shape, dtype=torch.int32 if cfg.reduce_fixed else torch.float32, device=q.device)
        dkdv_flag.update(dq_desc=tma_desc(dq_acc, cfg.block_m), DQ_REDUCE=True,
                         DQ_LATE=bool(cfg.reduce_late))
        if cfg.reduce_ordered:  # one counter per (batch, query head, query tile)
            if not reduce_ordered_ok(q, k, causal, left, cfg):
                raise ValueError(f"reduce_ordered: non-causal, no window, at most one key "
                                 f"tile per SM ({triton.cdiv(seqlen_k, cfg.block_n)} here): "
                                 f"{cfg}")
            dkdv_flag.update(SEM=torch.zeros((batch * nheads, triton.cdiv(seqlen_q,
                                                                          cfg.block_m)),
                                             dtype=torch.int32, device=q.device),
                             DQ_ORDERED=True)
        if cfg.dq_rotate:  # the rotated visiting order alone (no counters)
            dkdv_flag["DQ_ROT"] = True
    if cfg.gqa_expand and group > 1:
        # per-query-head partials (HopperBwdConfig.gqa_expand), summed over groups below;
        # varlen: zeroed, as the rows no sequence's program writes must sum to the zeros
        # the caller passed
        dk_t, dv_t = (_scratch((k.shape[0], k.shape[1], nheads, head_dim), k.dtype,
                               k.device, zero=varlen is not None) for _ in range(2))
        key_heads = nheads
        dkdv_flag["EXPAND"] = True
        if varlen is not None:  # the per-sequence store descriptors over the partials
            pdk, pdv = dk_t, dv_t
    n_kt = triton.cdiv(rows_k, cfg.block_n)
    grid = (n_kt, batch * key_heads)
    tail = _tail_plan(cfg, grid, seqlen_q, head_dim, causal, left, q.device)
    if tail is not None:  # the last tiles in pieces (HopperBwdConfig.tail_split)
        n_full, split, part = tail
        dkdv_flag.update(PART=part, n_full=n_full, TAIL=split)
        grid = (n_full + part.shape[0],)
    fixed = None
    if cfg.dq_reduce and cfg.reduce_fixed:  # each row's 2^e_i from a bound on its |dQ|
        expand = key_heads != nheads_kv
        bound = (pre.rows, pre.heads) if pre is not None else fixed_dq.bounds(dout, k, v,
                                                                              group, expand)
        fixed = fixed_dq.mults(*bound, fixed_dq.scale_exponent(scale), group, expand)
        dkdv_flag.update(FIXED=fixed, DQ_FIXED=True)
        if cfg.dq_finish and tail is None:  # dequantized by finishing programs
            n_rows = grid[1]  # + the finishing programs: one per SM, or as configured
            n_fin = cfg.finish_programs or (sm_count(q.device) if q.is_cuda else 1)
            grid = (n_kt, n_rows + triton.cdiv(n_fin, n_kt))
            dkdv_flag.update(DQ_SUM=dq_acc, DQ_OUT=outs[0], s_dqb=outs[0].stride(0),
                             s_dqm=outs[0].stride(1), s_dqh=outs[0].stride(2),
                             s_dqd=outs[0].stride(3),
                             DONE=torch.zeros(n_rows, dtype=torch.int32, device=q.device),
                             n_rows=n_rows, n_fin=n_fin, FINISH=True)
    descs = (tma_desc(q, cfg.block_m), tma_desc(k, cfg.block_n), tma_desc(v, cfg.block_n),
             tma_desc(dout, cfg.block_m), tma_desc(dk_t, cfg.block_n, cols),
             tma_desc(dv_t, cfg.block_n, cols))
    prefetch = cfg.prefetch_stats
    stats = _stats_tma(cfg, varlen is not None)  # (lse2 given exactly when _lse2_pre)
    if stats and lse2 is not None:  # the preprocess's (lse2, delta) blocks, one box each
        dkdv_flag.update(lse_desc=stats_desc(lse2, 2 * cfg.block_m), STATS=True,
                         LSE2_PRE=True)
        prefetch = False
    elif stats and stats_tma_ok(lse) and stats_tma_ok(delta):
        dkdv_flag.update(lse_desc=stats_desc(lse, cfg.block_m),
                         delta_desc=stats_desc(delta, cfg.block_m), STATS=True)
        prefetch = False
    if _tile_major(cfg, varlen is not None):  # every head, or blocks of cfg.tile_heads
        dkdv_flag.update(TILE_MAJOR=True, tile_heads=cfg.tile_heads or batch * key_heads)
        flag = dict(flag, TILE_MAJOR=True, tile_heads=cfg.tile_heads or batch * nheads)
    if _one_loop(cfg, causal, left is not None):
        dkdv_flag["ONE_LOOP"] = cfg.one_loop
    if cfg.softcap_fold and softcap:
        dkdv_flag["CAP_FOLD"] = True
    if cfg.dq_reduce and cfg.dq_stage2:
        dkdv_flag["DQ_STAGE2"] = True
    if cfg.col_split:
        dkdv_flag["COLS"] = True
    for half in range(cfg.d_split):  # the same descriptors; HALF picks the columns
        launch(
            _bwd_dkdv_kernel, grid, q.device,
            *descs, lse, delta, pq, pk, pv, pdo, pdk, pdv, cu_q, cu_k, seqlen_q, seqlen_k,
            nheads, group, qk_scale, float(scale), HEAD_DIM=head_dim,
            BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, NUM_STAGES=cfg.num_stages,
            CAUSAL=bool(causal), PREFETCH=prefetch, D_SPLIT=cfg.d_split,
            HALF=half, EARLY_EXPECT=cfg.early_expect,
            GROUP_BRANCH=_group_branch(cfg, varlen is not None),
            num_warps=cfg.num_warps,
            **_maxnreg(cfg.max_regs), **dkdv_flag,
        )
    if tail is not None:  # the split tiles' dK / dV: their pieces summed in order
        tail_split.combine(part, split, n_full, n_kt, key_heads, dk_t, dv_t, cfg.block_n)
    if key_heads != nheads_kv:  # fp32 accumulation, one rounding (torch's sum of bf16)
        shape = (k.shape[0], k.shape[1], nheads_kv, group, head_dim)
        for part, grad in ((dk_t, outs[1]), (dv_t, outs[2])):
            torch.sum(part.view(shape), dim=3, out=grad)
            _record("sum", part, shape, 3, grad)
    if dq_acc is not None:  # dQ came from the dK/dV kernel: no dQ kernel
        if "FINISH" in dkdv_flag:  # ... and its finishing programs dequantized it
            return
        if fixed is not None:
            fixed_dq.dequantize(dq_acc, fixed, outs[0])
        else:
            outs[0].copy_(dq_acc)
        return
    launch(
        _bwd_dq_kernel, (triton.cdiv(rows_q, cfg.dq_block_m), batch * nheads), q.device,
        tma_desc(q, cfg.dq_block_m), tma_desc(k, cfg.dq_block_n),
        tma_desc(v, cfg.dq_block_n), tma_desc(dout, cfg.dq_block_m),
        tma_desc(outs[0], cfg.dq_block_m), lse, delta, pq, pk, pv, pdo, pdq, cu_q, cu_k,
        seqlen_q, seqlen_k, nheads, group, qk_scale, float(scale),
        HEAD_DIM=head_dim, BLOCK_M=cfg.dq_block_m, BLOCK_N=cfg.dq_block_n,
        NUM_STAGES=cfg.dq_num_stages, CAUSAL=bool(causal), EARLY_EXPECT=cfg.early_expect,
        num_warps=cfg.dq_num_warps, **_maxnreg(cfg.dq_max_regs), **flag,
        **(dict(COLS=True) if cfg.dq_col_split else {}),
    )


def _tail_plan(cfg, grid, seqlen_q, head_dim, causal, left, device):
    """(n_full, pieces per tile, workspace) of HopperBwdConfig.tail_split for a dK/dV
    launch on ``grid`` (key tiles, program heads), or None: off, a mask it does not take
    (causal, a window) or no split worth it (ops/tail_split.plan)."""
    if cfg.tail_split < 2 or causal or left is not None:
        return None
    if not cfg.dq_reduce or cfg.reduce_ordered or cfg.dq_rotate or cfg.tile_major:
        raise ValueError(f"tail_split: the one-kernel backward (dq_reduce), head-major, "
                         f"not reduce_ordered or dq_rotate: {cfg}")
    programs = grid[0] * grid[1]
    slots = cfg.tail_slots or sm_count(device)
    r, split = tail_split.plan(programs, slots, triton.cdiv(seqlen_q, cfg.block_m),
                               cfg.tail_split)
    if r == 0:
        return None
    return programs - r, split, tail_split.workspace(r, split, cfg.block_n, head_dim, device)


def _maxnreg(cap: int | None) -> dict:
    """Launch/compile option of a config's register cap (none when uncapped)."""
    return {} if cap is None else dict(maxnreg=cap)


def _launch_fused(q, k, v, dout, lse, delta, outs, cfg, scale, causal, group, deterministic):
    """One kernel (5 GEMMs per tile pair): dK/dV per key tile, dQ accumulated in fp32
    through atomics (ordered by a per-tile counter when deterministic), then cast."""
    batch, seqlen_q, nheads, head_dim = q.shape
    seqlen_k, nheads_kv = k.shape[1], k.shape[2]
    dq_acc = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    n_mt = triton.cdiv(seqlen_q, cfg.block_m)
    sem = (torch.zeros((batch * nheads, n_mt), dtype=torch.int32, device=q.device)
           if deterministic else dq_acc)
    half = cfg.block_n // 2  # K, V and dK, dV boxes: one warpgroup's 64 keys
    _bwd_fused_kernel[(triton.cdiv(seqlen_k, cfg.block_n), batch * nheads_kv)](
        tma_desc(q, cfg.block_m), tma_desc(k, half), tma_desc(v, half),
        tma_desc(dout, cfg.block_m), tma_desc(outs[1], half), tma_desc(outs[2], half),
        tma_desc(dq_acc, cfg.block_m, head_dim // 2), lse, delta, dq_acc, sem, seqlen_q,
        seqlen_k, nheads, group, float(scale) * _LOG2E, float(scale),
        **_fused_constexprs(cfg, head_dim, causal, deterministic), num_warps=4,
    )
    outs[0].copy_(dq_acc)


def _fused_constexprs(cfg, head_dim, causal, deterministic) -> dict:
    """Constexpr arguments of _bwd_fused_kernel."""
    return dict(HEAD_DIM=head_dim, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
                NUM_STAGES=cfg.num_stages, CAUSAL=bool(causal),
                DETERMINISTIC=bool(deterministic), LOAD_REGS=cfg.load_regs,
                MMA_REGS=hopper_fwd._mma_regs(cfg.load_regs), WRITER_WARPS=cfg.writer_warps,
                TMA_REDUCE=bool(cfg.dq_tma_reduce and not deterministic),
                DEFER_DQ=bool(cfg.dq_defer))


def _stats_tma(cfg, varlen) -> bool:
    """Whether the dK/dV kernel takes its row statistics by TMA (HopperBwdConfig.stats_tma):
    two-kernel dense calls, with or without a window or softcap (bitwise the global-load
    path on the H200: test_stats_tma_masks, s15e)."""
    return cfg.stats_tma and not cfg.fused and not varlen


# query rows per block of the delta preprocess, and so per (lse2, delta) box of lse2_pre
PRE_ROWS = 64


def _lse2_pre(cfg, varlen) -> bool:
    """Whether the preprocess writes the (lse2, delta) boxes the dK/dV kernel loads
    (HopperBwdConfig.lse2_pre): with stats_tma, on tiles of the preprocess's rows."""
    return _stats_tma(cfg, varlen) and cfg.lse2_pre and cfg.block_m == PRE_ROWS


def _one_loop(cfg, causal, window) -> int:
    """The dK/dV kernel's ONE_LOOP (HopperBwdConfig.one_loop): causal calls without a
    window; else 0 (the loops apart)."""
    return cfg.one_loop if causal and not window else 0


def _tile_major(cfg, varlen) -> bool:
    """Whether both kernels launch tile-major (HopperBwdConfig.tile_major, ``tile_ids``):
    dense calls, not with the ordered adds (they need all of a head's programs resident
    at once)."""
    return cfg.tile_major and not varlen and not cfg.reduce_ordered


def _group_branch(cfg, varlen) -> bool:
    """HopperBwdConfig.group_branch, dense calls only (the varlen builds keep their code)."""
    return cfg.group_branch and not varlen


FUSED_ENV_VAR = "FLASHTILE_HOPPER_BWD_FUSED"
DROPOUT_ENV_VAR = "FLASHTILE_HOPPER_BWD_DROPOUT"


def dropout_mode() -> str:
    """"auto" (FLASHTILE_HOPPER_BWD_DROPOUT unset: dropout with the forward's bit words
    runs on the two-kernel backward wherever the backward would without dropout), "on"
    or "off" (=0: the portable backward reads the bits, as before session 17)."""
    return env_mode(DROPOUT_ENV_VAR)
OVERRIDES_ENV_VAR = "FLASHTILE_HOPPER_BWD_OVERRIDES"


REDUCE_ENV_VAR = "FLASHTILE_HOPPER_BWD_REDUCE"
ORDERED_ENV_VAR = "FLASHTILE_HOPPER_BWD_REDUCE_ORDERED"
FIXED_ENV_VAR = "FLASHTILE_HOPPER_BWD_REDUCE_FIXED"


def reduce_mode() -> str:
    """"auto" (FLASHTILE_HOPPER_BWD_REDUCE unset: ``configs.hopper_bwd_reduce_preferred``
    decides where ``deterministic=False`` calls take the one-kernel dQ_REDUCE tiles),
    "on" (=1: every such call they cover) or "off" (=0)."""
    return env_mode(REDUCE_ENV_VAR)


def ordered_mode() -> str:
    """"auto" (FLASHTILE_HOPPER_BWD_REDUCE_ORDERED unset: ``configs.hopper_bwd_ordered_preferred``
    decides where deterministic calls take the one-kernel tiles with ordered adds), "on"
    (=1: wherever ``reduce_ordered_ok`` allows) or "off" (=0)."""
    return env_mode(ORDERED_ENV_VAR)


def fixed_mode() -> str:
    """"auto" (FLASHTILE_HOPPER_BWD_REDUCE_FIXED unset: ``configs.hopper_bwd_fixed_preferred``
    decides where deterministic calls take the one-kernel tiles with fixed-point adds),
    "on" (=1: every deterministic call they cover, ahead of the ordered adds) or "off"."""
    return env_mode(FIXED_ENV_VAR)


def reduce_ordered_ok(q, k, causal, left, cfg) -> bool:
    """Can the ordered reduce run this call? Non-causal without a window (every program
    visits every query tile, in its rotated order), and at most one 128-key program per
    SM for each head (its programs wait on each other's adds, so all of a head's must be
    resident at once: one per SM, the 193 KB of shared memory)."""
    return (not causal and left is None and q.is_cuda
            and triton.cdiv(k.shape[1], cfg.block_n) <= sm_count(q.device))


def default_config(head_dim: int, causal: bool, seqlen_k: int,
                   group: int = 1, softcap: bool = False,
                   dropout: bool = False, deterministic: bool = True, ordered: bool = True,
                   window: bool = False) -> configs.HopperBwdConfig:
    """The shipped tiles (configs.hopper_bwd_config: the two-kernel backward);
    FLASHTILE_HOPPER_BWD_FUSED=1 picks the fused kernel's (configs.hopper_bwd_fused_config).
    ``softcap``: the tiles of a softcapped call (configs.hopper_bwd_config's: uncapped at
    hd 64).
    FLASHTILE_HOPPER_BWD_OVERRIDES="max_regs=none,..." replaces fields of either, for A/B
    runs of whole models (configs.parse_overrides). Memoised per environment value, as
    hopper_fwd.default_config."""
    fmode = "off" if dropout else fixed_mode()
    fixed_auto = fmode == "auto" and configs.hopper_bwd_fixed_preferred(
        head_dim, causal, seqlen_k, window=window, softcap=softcap)
    if deterministic:  # fixed-point adds (reduce_fixed), else the ordered adds
        fixed = fmode == "on" or fixed_auto
        mode = "off" if dropout or causal or not ordered else ordered_mode()
        reduce = fixed or mode == "on" or (
            mode == "auto" and configs.hopper_bwd_ordered_preferred(head_dim, causal, seqlen_k))
    else:
        mode = "off" if dropout else reduce_mode()
        reduce = mode == "on" or (mode == "auto" and configs.hopper_bwd_reduce_preferred(
            head_dim, causal, seqlen_k))
        # where the racing adds are not preferred but the fixed-point ones are (causal at
        # hd 128 since session 28), the fixed-point kernel: faster than two kernels, and
        # repeatable as a bonus
        fixed = not reduce and mode == "auto" and fixed_auto
        reduce = reduce or fixed
    return _default_config(head_dim, causal, seqlen_k, group,
                           os.environ.get(FUSED_ENV_VAR) == "1",
                           os.environ.get(OVERRIDES_ENV_VAR, ""), softcap=softcap,
                           dropout=dropout,
                           reduce=reduce and ("fixed" if fixed else "racing"
                                              if not deterministic else "ordered"))


@functools.lru_cache(maxsize=1024)
def _default_config(head_dim, causal, seqlen_k, group, fused, overrides, expand=True,
                    softcap=False, dropout=False, reduce=False):
    # no fused tiles (None) at hd 256: the two-kernel backward runs there; no dQ_REDUCE
    # tiles (None) there either
    cfg = (fused and configs.hopper_bwd_fused_config(head_dim, causal)
           or reduce and configs.hopper_bwd_reduce_config(head_dim, causal, seqlen_k, group,
                                                          ordered=reduce == "ordered",
                                                          fixed=reduce == "fixed",
                                                          softcap=softcap)
           or configs.hopper_bwd_config(head_dim, causal, seqlen_k, group, expand, softcap,
                                        dropout))
    return dataclasses.replace(cfg, **configs.parse_overrides(overrides))


def _tma_ok(x: torch.Tensor) -> bool:
    """TMA-addressable with no broadcast (stride 0) dimension."""
    return tma_addressable(x) and all(st > 0 or n == 1 for st, n in zip(x.stride(), x.shape))


# ==================================================================================
# device helpers
# ==================================================================================


@gluon.constexpr_function
def _kt_layout(num_warps, n, cols):
    """Accumulator layout of the backward kernels' (resident rows, n) tiles (keys in the
    dK/dV kernel, queries in the dQ kernel): each warp 16 rows (mma_layout), or with
    ``cols`` (HopperBwdConfig.col_split / dq_col_split) the two warpgroups side by side
    over the same 64 rows, each n / 2 of the columns."""
    if not cols:
        return mma_layout(num_warps, n)
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, num_warps // 4],
                                     instr_shape=[16, n // (num_warps // 4), 16])


@gluon.jit
def _shared_operand(buf, x):
    """``x`` (every warpgroup's part of a column-split tile, _kt_layout) stored into the
    shared tile ``buf`` and made visible to wgmma, behind a CTA barrier so each
    warpgroup's GEMM reads the whole tile; returns ``buf``. The GEMMs that read ``buf``
    in the previous step were waited for before the step's refill barrier."""
    buf.store(x)
    fence_async_shared()  # generic-proxy stores -> visible to wgmma
    gl.thread_barrier()
    return buf


@gluon.jit
def _row_lse2(LSE, bh, rows, seqlen_q, stride):
    """lse of query ``rows`` of (batch * head) ``bh`` (row ``stride`` apart: seqlen_q,
    or a varlen call's total rows) in log2 units; +inf on rows past seqlen_q or with no
    key, so P = exp2(s - lse2) = 0 there."""
    lse = gl.load(LSE + bh.to(gl.int64) * stride + rows, mask=rows < seqlen_q,
                  other=float("-inf"))
    return gl.where(lse == float("-inf"), float("inf"), lse * 1.4426950408889634)


@gluon.jit
def _row_delta(DELTA, bh, rows, seqlen_q, stride):
    """delta = rowsum(dO * O) of query ``rows`` (0 past seqlen_q), laid out as lse."""
    return gl.load(DELTA + bh.to(gl.int64) * stride + rows, mask=rows < seqlen_q, other=0.0)


@gluon.jit
def _probs_t(s_t, lse2, keys, rows, diag, qk_scale, dtype: gl.constexpr,
             a_layout: gl.constexpr, MASKED: gl.constexpr, CAUSAL: gl.constexpr = True,
             left=0, HAS_LEFT: gl.constexpr = False, band=True, OP: gl.constexpr = True):
    """P^T = exp2(S^T * qk_scale - lse2) of a key tile's scores (when MASKED: zero above
    the causal diagonal, the band tiles, and with HAS_LEFT more than ``left`` keys left
    of it, a sliding window's far edge), in fp32 and as the ``dtype`` register A operand
    of the dV wgmma (``a_layout``; not OP: in ``dtype`` as computed, for a store to
    shared memory). ``band``: a runtime flag puts the causal mask behind a
    branch (HopperBwdConfig.one_loop = 2). Shared by the key-tile kernels' steps."""
    p_t = gl.exp2(s_t * qk_scale - lse2[None, :])
    if MASKED:
        if CAUSAL:
            if band:
                p_t = gl.where(keys[:, None] <= rows[None, :] + diag, p_t, 0.0)
        if HAS_LEFT:
            p_t = gl.where(keys[:, None] >= rows[None, :] + diag - left, p_t, 0.0)
    if OP:
        p_op = gl.convert_layout(p_t.to(dtype), a_layout)
    else:
        p_op = p_t.to(dtype)
    return p_t, p_op


@gluon.jit
def _varlen_inputs(Q, K, V, DO, LSE, DELTA, q0, seqlen_q, k0, seqlen_k, q_desc, do_desc,
                   k_desc, v_desc):
    """VARLEN: (lse row stride, LSE and DELTA at the sequence's first row, and device-side
    descriptors of Q, dO, K, V over its rows) for the backward kernels; ``q_desc`` is the
    host descriptor over (1, TQ, H, D), so its shape[1] is lse / delta's (H, TQ) stride."""
    return (q_desc.shape[1], LSE + q0, DELTA + q0, seq_desc(Q, q0, seqlen_q, q_desc),
            seq_desc(DO, q0, seqlen_q, do_desc), seq_desc(K, k0, seqlen_k, k_desc),
            seq_desc(V, k0, seqlen_k, v_desc))


@gluon.jit
def _q_tile_range(start_n, seqlen_q, diag, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                  CAUSAL: gl.constexpr):
    """(m_lo, n_band, n_m) of the key tile at start_n: query tiles m_lo .. m_lo + n_m - 1
    see some of its keys; the first n_band of them straddle the causal diagonal (masked),
    the rest see every key of the tile. n_m >= 1 whenever seqlen_q >= 1."""
    m_hi = (seqlen_q + BLOCK_M - 1) // BLOCK_M
    if CAUSAL:
        m_lo = gl.maximum(start_n - diag, 0) // BLOCK_M  # first row seeing key start_n
        full_row = gl.maximum(start_n + BLOCK_N - 1 - diag, 0)  # first row seeing them all
        m_full = (full_row + BLOCK_M - 1) // BLOCK_M
    else:
        m_lo = 0
        m_full = 0
    m_lo = gl.minimum(m_lo, m_hi)
    m_full = gl.minimum(gl.maximum(m_full, m_lo), m_hi)
    return m_lo, m_full - m_lo, m_hi - m_lo


@gluon.jit
def _q_window_range(start_n, diag, left, m_lo, n_band, n_m, BLOCK_M: gl.constexpr,
                    BLOCK_N: gl.constexpr):
    """A sliding window's cut of ``_q_tile_range``'s query tiles for the key tile at
    start_n (row i sees keys from i + diag - left on): (n_mid, n_m). Tiles m_lo +
    [n_band, n_mid) see every key of the tile, m_lo + [n_mid, n_m) the window's far edge
    (masked); rows past start_n + BLOCK_N - 1 - diag + left see none of its keys, so
    their tiles are dropped."""
    last = start_n + BLOCK_N - 1 - diag + left  # the last row seeing a key of the tile
    m_end = gl.minimum((gl.maximum(last + 1, 0) + BLOCK_M - 1) // BLOCK_M, m_lo + n_m)
    m_end = gl.maximum(m_end, m_lo)
    # rows up to start_n - diag + left see the tile's first key, hence all of them
    m_mid = gl.maximum(start_n - diag + left + 1, 0) // BLOCK_M
    m_mid = gl.minimum(gl.maximum(m_mid, m_lo + n_band), m_end)
    return m_mid - m_lo, m_end - m_lo


@gluon.jit
def _key_tile_coords(seqlen_q, seqlen_k, nheads, group, BLOCK_M: gl.constexpr,
                     BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr, left=0,
                     HAS_LEFT: gl.constexpr = False, TILE_MAJOR: gl.constexpr = False,
                     tile_heads=1, TAIL: gl.constexpr = 1, n_full=0, rows=None):
    """A key-tile program's (pid_n, b, hk, start_n, diag, m_lo, n_band, n_mid, n_m,
    n_iter): grid (key tiles, B * Hkv), the query tiles it visits (``_q_tile_range``, cut
    by a sliding window's far edge with HAS_LEFT: ``_q_window_range``, whose masked
    tiles start at n_mid; n_mid = n_m without one; n_m at least 1 so it // n_m stays
    defined) and its ring iterations over the group's heads. TILE_MAJOR: the launch
    order in blocks of ``tile_heads`` heads (``tile_ids``). TAIL > 1
    (HopperBwdConfig.tail_split; non-causal, no window): a 1D grid whose programs from
    ``n_full`` on are TAIL pieces each of the head-major order's last tiles, piece p
    taking query tiles [p * n_m // TAIL, (p + 1) * n_m // TAIL) (ops/tail_split.py)."""
    if TAIL > 1:
        gl.static_assert(not (CAUSAL or HAS_LEFT or TILE_MAJOR),
                         "tail_split: non-causal, no window, head-major")
        lin = gl.program_id(0)
        over = gl.maximum(lin - n_full, 0)
        t = gl.minimum(lin, n_full) + over // TAIL
        n_kt = (seqlen_k + BLOCK_N - 1) // BLOCK_N
        pid_n = t % n_kt
        pid_bhk = t // n_kt
    else:
        pid_n, pid_bhk, _n_tiles = tile_ids(TILE_MAJOR, tile_heads, rows)
    nheads_kv = nheads // group
    b = pid_bhk // nheads_kv
    hk = pid_bhk % nheads_kv
    start_n = pid_n * BLOCK_N
    diag = seqlen_k - seqlen_q
    m_lo, n_band, n_m = _q_tile_range(start_n, seqlen_q, diag, BLOCK_M, BLOCK_N, CAUSAL)
    if HAS_LEFT:
        n_mid, n_m = _q_window_range(start_n, diag, left, m_lo, n_band, n_m, BLOCK_M,
                                     BLOCK_N)
    if TAIL > 1:  # a piece: its share of the query tiles (the launcher: TAIL <= n_m)
        piece = over % TAIL
        ways = 1 + (TAIL - 1) * (lin >= n_full).to(gl.int32)
        lo = piece * n_m // ways
        m_lo = m_lo + lo
        n_m = (piece + 1) * n_m // ways - lo
    n_m = gl.maximum(n_m, 1)  # never 0 (seqlen_q >= 1); keeps it // n_m defined
    if not HAS_LEFT:
        n_mid = n_m
    return pid_n, b, hk, start_n, diag, m_lo, n_band, n_mid, n_m, group * n_m


@gluon.jit
def _issue_qdo(q_desc, do_desc, q_smem, do_smem, q_bars, do_bars, it, n_m, m_lo, b, hk,
               group, pred, BLOCK_M: gl.constexpr, NUM_STAGES: gl.constexpr,
               REVERSE: gl.constexpr, EARLY: gl.constexpr = False,
               BARRIER: gl.constexpr = False, STATS: gl.constexpr = False, stats=None,
               nheads=0, GROUP_BRANCH: gl.constexpr = False, LSE2_PRE: gl.constexpr = False,
               rot=0, ROT: gl.constexpr = False):
    """TMA-load the Q and dO tiles of iteration ``it`` (head hk * group + it // n_m,
    query tile m_lo + it % n_m, or m_lo + n_m - 1 - it % n_m if REVERSE) into ring slot
    it % NUM_STAGES (skipped if not pred). EARLY, BARRIER: as in
    _gluon_common.issue_kv_slot (both barriers armed first; the CTA barrier, with
    BARRIER, between the expects and the copies). STATS: also the tile's lse and delta
    rows (``stats`` = (lse_desc, delta_desc, lse_ring, delta_ring); (B * H, M) views)
    behind the Q and dO barriers, always in the EARLY order; with LSE2_PRE one box of the
    tile's lse2 then delta rows (``stats`` = (st_desc, st_ring, st_bars, query tiles per
    head); the preprocess's (B * H * tiles, 2 * BLOCK_M) blocks) behind its own barrier
    (Triton's barrier pass puts a bar.sync between two copies that signal one barrier).
    GROUP_BRANCH: one query head per program (group 1, a runtime value) takes a branch
    without the integer division (~36 instructions per step; HopperBwdConfig.group_branch).
    ROT: the query tiles rotated by ``rot`` (tile (j + rot) mod n_m at step j; the
    ordered reduce's visiting order, ``_reduce_rotation``)."""
    s = it % NUM_STAGES
    if GROUP_BRANCH:
        if group == 1:
            h = hk
            j = it
        else:
            h = hk * group + it // n_m
            j = it % n_m
    else:
        h = hk * group + it // n_m
        j = it % n_m
    if REVERSE:
        j = n_m - 1 - j
    if ROT:
        j = _rotate(j, rot, n_m)
    start_m = (m_lo + j) * BLOCK_M
    if STATS and LSE2_PRE:  # one (lse2, delta) box behind its own barrier
        st_desc, st_ring, st_bars, n_blocks = stats
        mbarrier.expect(st_bars.index(s), st_desc.block_type.nbytes, pred=pred)
        load_pair(q_desc, do_desc, q_smem, do_smem, q_bars, do_bars, s, b, start_m, h, pred,
                  True, BARRIER)
        tma.async_copy_global_to_shared(
            st_desc, [(b * nheads + h) * n_blocks + start_m // BLOCK_M, 0],
            st_bars.index(s), st_ring.index(s), pred=pred)
    elif STATS:
        lse_desc, delta_desc, lse_ring, delta_ring = stats
        mbarrier.expect(q_bars.index(s), q_desc.block_type.nbytes + lse_desc.block_type.nbytes,
                        pred=pred)
        mbarrier.expect(do_bars.index(s),
                        do_desc.block_type.nbytes + delta_desc.block_type.nbytes, pred=pred)
        if BARRIER:
            gl.thread_barrier()
        tma.async_copy_global_to_shared(q_desc, [b, start_m, h, 0], q_bars.index(s),
                                        q_smem.index(s), pred=pred)
        tma.async_copy_global_to_shared(lse_desc, [b * nheads + h, start_m], q_bars.index(s),
                                        lse_ring.index(s), pred=pred)
        tma.async_copy_global_to_shared(do_desc, [b, start_m, h, 0], do_bars.index(s),
                                        do_smem.index(s), pred=pred)
        tma.async_copy_global_to_shared(delta_desc, [b * nheads + h, start_m],
                                        do_bars.index(s), delta_ring.index(s), pred=pred)
    else:
        load_pair(q_desc, do_desc, q_smem, do_smem, q_bars, do_bars, s, b, start_m, h, pred,
                  EARLY, BARRIER)


@gluon.jit
def _rotate(j, rot, n_m):
    """(j + rot) mod n_m for 0 <= j, rot < n_m, without a division."""
    j = j + rot
    return j - n_m * (j >= n_m).to(gl.int32)


@gluon.jit
def _store_tile(x, smem, desc, coords, ROWS: gl.constexpr, HEAD_DIM: gl.constexpr):
    """Registers -> ``smem`` (free by now) -> TMA store at ``coords`` (clips rows past the
    sequence end). The caller waits with tma.store_wait."""
    smem.reshape([ROWS, HEAD_DIM]).store(x.to(smem.dtype))
    fence_async_shared()  # generic-proxy stores -> visible to the TMA engine
    gl.thread_barrier()
    tma.async_copy_shared_to_global(desc, coords, smem)


# ==================================================================================
# dK / dV: one program per key tile
# ==================================================================================


@gluon.jit
def _resident_and_ring(res_a_desc, res_b_desc, ring_a_desc, ring_b_desc,
                       NUM_STAGES: gl.constexpr):
    """Shared memory of a backward program: two resident tiles (K, V or Q, dO) behind one
    barrier, and a NUM_STAGES-deep ring of the two streamed tiles, one barrier per slot
    and tile; barriers initialised and visible to TMA. Returns (res_a, res_b, ring_a,
    ring_b, res_bar, ring_a_bars, ring_b_bars)."""
    dtype: gl.constexpr = res_a_desc.dtype
    res_a = gl.allocate_shared_memory(dtype, res_a_desc.block_type.shape, res_a_desc.layout)
    res_b = gl.allocate_shared_memory(dtype, res_b_desc.block_type.shape, res_b_desc.layout)
    res_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(res_bar, count=1)
    ring_a, ring_b, a_bars, b_bars = alloc_ring_pair(ring_a_desc, ring_b_desc, NUM_STAGES)
    fence_async_shared()  # barrier inits visible to the async proxy (TMA)
    gl.thread_barrier()
    return res_a, res_b, ring_a, ring_b, res_bar, a_bars, b_bars


@gluon.jit
def _key_tile_setup(q_desc, k_desc, v_desc, do_desc, seqlen_q, seqlen_k, nheads, group,
                    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                    NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr, REVERSE: gl.constexpr,
                    ACC_DIM: gl.constexpr, VARLEN: gl.constexpr = False,
                    EXPAND: gl.constexpr = False, left=0, HAS_LEFT: gl.constexpr = False,
                    EARLY_EXPECT: gl.constexpr = False, STATS: gl.constexpr = False,
                    lse_desc=None, delta_desc=None, GROUP_BRANCH: gl.constexpr = False,
                    LSE2_PRE: gl.constexpr = False, ROT: gl.constexpr = False,
                    TILE_MAJOR: gl.constexpr = False, tile_heads=1,
                    COLS: gl.constexpr = False, TAIL: gl.constexpr = 1, n_full=0,
                    rows=None):
    """What the dK/dV kernel starts with: this program's (batch, KV head, the query heads
    per KV head it visits, key tile), the
    query tiles it visits (``_q_tile_range``), shared memory for the resident K, V and
    the Q/dO ring with their barriers, the TMA loads of K, V and the first NUM_STAGES
    Q/dO tiles in flight, zeroed dK / dV accumulators (ACC_DIM columns: HEAD_DIM, or a
    column block of it), and K, V waited for. VARLEN: the descriptors span one sequence
    (batch coordinate 0). EXPAND (GQA): the program owns one query head (grid axis 1 is
    B * H), which is returned in place of the KV head: its Q/dO tiles are that head's,
    its K / V those of head // group. ROT: the query tiles in the ordered reduce's rotated
    order (``_reduce_rotation``; returned last, 0 without ROT). COLS: the accumulators in
    the column-split layout (``_kt_layout``). TAIL, n_full, rows: ``_key_tile_coords``'s."""
    if EXPAND:
        pid_n, b, hk, start_n, diag, m_lo, n_band, n_mid, n_m, n_iter = _key_tile_coords(
            seqlen_q, seqlen_k, nheads, 1, BLOCK_M, BLOCK_N, CAUSAL, left, HAS_LEFT,
            TILE_MAJOR, tile_heads, TAIL, n_full, rows)
        kv_head = hk // group
        q_group = 1
    else:
        pid_n, b, hk, start_n, diag, m_lo, n_band, n_mid, n_m, n_iter = _key_tile_coords(
            seqlen_q, seqlen_k, nheads, group, BLOCK_M, BLOCK_N, CAUSAL, left, HAS_LEFT,
            TILE_MAJOR, tile_heads, TAIL, n_full, rows)
        kv_head = hk
        q_group = group
    if VARLEN:
        b = 0
    rot = 0
    if ROT:
        rot = _reduce_rotation(pid_n, n_m, (seqlen_k + BLOCK_N - 1) // BLOCK_N)

    if STATS and LSE2_PRE:  # (lse2, delta) per ring slot, its barriers made visible
        # below (_resident_and_ring's fence)
        st_bars = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1],
                                            mbarrier.MBarrierLayout())
        for i in gl.static_range(NUM_STAGES):
            mbarrier.init(st_bars.index(i), count=1)
        stats = (lse_desc,
                 gl.allocate_shared_memory(gl.float32, [NUM_STAGES] + lse_desc.block_type.shape,
                                           lse_desc.layout), st_bars,
                 (seqlen_q + BLOCK_M - 1) // BLOCK_M)
    elif STATS:  # the lse / delta rows of each ring slot (allocated before the barriers)
        stats = (lse_desc, delta_desc,
                 gl.allocate_shared_memory(gl.float32, [NUM_STAGES] + lse_desc.block_type.shape,
                                           lse_desc.layout),
                 gl.allocate_shared_memory(gl.float32,
                                           [NUM_STAGES] + delta_desc.block_type.shape,
                                           delta_desc.layout))
    else:
        stats = 0  # (unused)
    k_smem, v_smem, q_smem, do_smem, kv_bar, q_bars, do_bars = _resident_and_ring(
        k_desc, v_desc, q_desc, do_desc, NUM_STAGES)

    # -- K and V, and the first NUM_STAGES Q/dO tiles in flight --
    mbarrier.expect(kv_bar, k_desc.block_type.nbytes + v_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(k_desc, [b, start_n, kv_head, 0], kv_bar, k_smem)
    tma.async_copy_global_to_shared(v_desc, [b, start_n, kv_head, 0], kv_bar, v_smem)
    for i in gl.static_range(NUM_STAGES):
        _issue_qdo(q_desc, do_desc, q_smem, do_smem, q_bars, do_bars, i, n_m, m_lo, b, hk,
                   q_group, i < n_iter, BLOCK_M, NUM_STAGES, REVERSE, EARLY_EXPECT, False,
                   STATS, stats, nheads, GROUP_BRANCH, LSE2_PRE, rot, ROT)

    # -- the key indices, zeroed dK / dV accumulators, and K, V once they have landed --
    s_layout: gl.constexpr = _kt_layout(gl.num_warps(), BLOCK_M, COLS)
    d_layout: gl.constexpr = _kt_layout(gl.num_warps(), ACC_DIM, COLS)
    keys = start_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, s_layout))
    dk = gl.zeros([BLOCK_N, ACC_DIM], gl.float32, d_layout)
    dv = gl.zeros([BLOCK_N, ACC_DIM], gl.float32, d_layout)
    mbarrier.wait(kv_bar, 0)
    k2 = k_smem.reshape([BLOCK_N, HEAD_DIM])
    v2 = v_smem.reshape([BLOCK_N, HEAD_DIM])
    return (pid_n, b, hk, q_group, start_n, diag, m_lo, n_band, n_mid, n_m, n_iter, k_smem,
            v_smem, q_smem, do_smem, q_bars, do_bars, keys, dk, dv, k2, v2, stats, rot)


@gluon.jit
def _store_dkdv(dk, dv, k_smem, v_smem, dk_desc, dv_desc, b, start_n, hk, col, sm_scale,
                BLOCK_N: gl.constexpr, WIDTH: gl.constexpr):
    """Epilogue of both key-tile kernels: dK (scaled) and dV, WIDTH columns from column
    ``col``, staged through ``k_smem`` / ``v_smem`` (the K and V buffers, free by now, or
    tiles of the column block's box), TMA stores, waited."""
    gl.thread_barrier()  # every warpgroup is done reading K and V
    _store_tile(dk * sm_scale, k_smem, dk_desc, [b, start_n, hk, col], BLOCK_N, WIDTH)
    _store_tile(dv, v_smem, dv_desc, [b, start_n, hk, col], BLOCK_N, WIDTH)
    tma.store_wait(pendings=0)


@gluon.jit
def _store_partials(dk, dv, PART, slot, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr):
    """A tail piece's dK (scaled) and dV, fp32 from registers, into row ``slot`` of the
    (pieces, 2, BLOCK_N, HEAD_DIM) workspace (ops/tail_split.workspace)."""
    layout: gl.constexpr = _kt_layout(gl.num_warps(), HEAD_DIM, False)
    rows = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, layout))
    offs = rows[:, None] * HEAD_DIM + cols[None, :]
    base = PART + slot.to(gl.int64) * (2 * BLOCK_N * HEAD_DIM)
    gl.store(base + offs, dk)
    gl.store(base + BLOCK_N * HEAD_DIM + offs, dv)


@gluon.jit
def _iter_stats(LSE, DELTA, it, m_lo, n_m, n_iter, bh0, seqlen_q, stride,
                layout: gl.constexpr, BLOCK_M: gl.constexpr):
    """lse2 and delta of ring iteration ``it`` (clamped to the last one; head bh0 +
    it // n_m, query tile m_lo + it % n_m), in ``layout`` (the query axis of S^T)."""
    it = gl.minimum(it, n_iter - 1)
    rows = (m_lo + it % n_m) * BLOCK_M + gl.arange(0, BLOCK_M, layout=layout)
    bh = bh0 + it // n_m
    return (_row_lse2(LSE, bh, rows, seqlen_q, stride),
            _row_delta(DELTA, bh, rows, seqlen_q, stride))


@gluon.jit
def _dkdv_step(it, j, dk, dv, lse2_in, delta_in, k2, v2, q_smem, do_smem, q_bars, do_bars, q_desc,
               do_desc, LSE, DELTA, bh, keys, m_lo, n_m, n_iter, b, hk, group, seqlen_q,
               lse_stride, diag, qk_scale, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
               BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr, MASKED: gl.constexpr,
               PREFETCH: gl.constexpr, D_SPLIT: gl.constexpr, HALF: gl.constexpr,
               CAUSAL: gl.constexpr = True, left=0, HAS_LEFT: gl.constexpr = False,
               cap_scale=1.0, SOFTCAP: gl.constexpr = False,
               EARLY_EXPECT: gl.constexpr = False, STATS: gl.constexpr = False, stats=None,
               nheads=0, LSE2_PRE: gl.constexpr = False, GROUP_BRANCH: gl.constexpr = False,
               bits=0, keep_scale=1.0, DROPOUT: gl.constexpr = False, dqr=None,
               DQ_REDUCE: gl.constexpr = False, dq_scale=1.0, dql=0,
               DQ_LATE: gl.constexpr = False, DQ_ORDERED: gl.constexpr = False,
               DQ_FIXED: gl.constexpr = False, BAND_BRANCH: gl.constexpr = False,
               n_band=0, CAP_FOLD: gl.constexpr = False,
               DQ_STAGE2: gl.constexpr = False, COLS: gl.constexpr = False, pds=None,
               ROT: gl.constexpr = False):
    """Consume ring iteration ``it`` (query tile m_lo + j of head bh): accumulate dV and
    dK of the resident key tile, then refill the slot with iteration it + NUM_STAGES.
    DQ_REDUCE (``dqr`` = (dS^T tile, fp32 dQ staging tile, dQ accumulator descriptor)):
    also this tile pair's dQ = dq_scale * dS K, the fifth GEMM (dS^T through shared
    memory, every warpgroup's keys), added to the fp32 dQ by a TMA reduce-add (racing
    with the other key tiles' programs; ``_dq_reduce``). DQ_LATE (HopperBwdConfig.
    reduce_late): the step returns its dQ tile and coordinates (``dql`` = (dQ, row, head,
    then the ordered mode's rank, counter seen, counter in flight, counter)) instead, and
    adds the previous step's under this one's S^T GEMM (none when it = 0;
    the kernel adds the last one after the loops), so the staging store leaves the
    tensor cores' path. DQ_ORDERED (HopperBwdConfig.reduce_ordered; ``dqr`` also holds the
    counters, this program's rotation and the key tiles per head): the step visits query
    tile (j + rotation) mod n_m, and its dQ joins that tile's sum in a fixed order
    (``_reduce_rank``, ``_late_reduce``): deterministic. Returns (dk, dv, lse2, delta,
    dql).
    DROPOUT: the forward's keep decisions from its bit blocks (``bits``: base, blocks
    per band, the key tile's first key; _gluon_common.bits_words_mma, bits_masks_t), P^T
    and dP^T of the dropped entries zeroed, with ``keep_scale`` = 1 / (1 - p) taken out
    of the step: dV += (P^T o M) dO and dS^T = P^T o (dP^T o M - delta (1 - p)), both
    times keep_scale once in the kernel's epilogue.
    STATS: the row statistics come from the slot's lse / delta rows (``stats``, loaded by
    TMA with Q and dO; rows past seqlen_q read TMA's zero fill there, harmless as those Q
    / dO rows are zero too; with LSE2_PRE the preprocess's +inf / 0) instead of
    per-thread global loads.
    PREFETCH: ``lse2_in``, ``delta_in`` are this iteration's row statistics, and the next
    iteration's are loaded here (returned), a whole step ahead of their use; otherwise
    they are loaded here under the S^T GEMM (and the arguments are unused scalars).
    D_SPLIT > 1: dK, dV hold columns [HALF * HEAD_DIM / D_SPLIT, ...) only; S^T and dP^T
    still use the whole head dim.
    BAND_BRANCH (HopperBwdConfig.one_loop = 2): MASKED steps apply the causal mask only
    when the step is one of the first ``n_band`` (the diagonal band).
    CAP_FOLD (HopperBwdConfig.softcap_fold): with SOFTCAP, dS^T = (P^T o (1 - t^2)) o
    (dP^T - delta), the product taken before the dV GEMM instead of after dP^T.
    DQ_STAGE2 (HopperBwdConfig.dq_stage2, with DQ_LATE): two dQ staging tiles, step it's
    dQ through tile it % 2 (``_dq_reduce``).
    COLS (HopperBwdConfig.col_split): each warpgroup computes S^T and dP^T for half of
    the query columns and holds half of dK's and dV's columns; P^T and dS^T go through
    ``pds`` (two (BLOCK_N, BLOCK_M) shared tiles) as the A operands of dV and dK, a CTA
    barrier after each store (the previous step's GEMMs on them were waited for before
    the refill's barrier).
    ROT (DQ_ORDERED or HopperBwdConfig.dq_rotate): query tile (j + rotation) mod n_m,
    the rotation ``dqr[4]``."""
    s_layout: gl.constexpr = _kt_layout(gl.num_warps(), BLOCK_M, COLS)
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=dk.type.layout,
                                                 k_width=2)
    sj = j  # the step within its head; j the query tile (rotated with ROT)
    if ROT:
        j = _rotate(j, dqr[4], n_m)
    s = it % NUM_STAGES
    phase = (it // NUM_STAGES) & 1
    q_buf = q_smem.index(s).reshape([BLOCK_M, HEAD_DIM])
    do_buf = do_smem.index(s).reshape([BLOCK_M, HEAD_DIM])
    # -- S^T = K Q^T and dP^T = V dO^T, both in flight --
    zero = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, s_layout)
    mbarrier.wait(q_bars.index(s), phase)
    s_t = warpgroup_mma(k2, q_buf.permute((1, 0)), zero, use_acc=False, is_async=True)
    if DQ_LATE:  # the previous step's dQ, added under S^T
        pend = dql[5]
        if it > 0:
            pend = _late_reduce(dql, dqr, dq_scale, b, nheads, BLOCK_M, HEAD_DIM,
                                DQ_ORDERED, (it - 1) % 2, DQ_STAGE2)
        if DQ_ORDERED:  # this step's query tile: its add's rank, and its counter now
            rank = _reduce_rank(dqr[4], sj, n_m, dqr[5], dqr[6])
            seen = gl.load(dqr[3] + (bh * n_m + j), volatile=True)  # used a step later
    mbarrier.wait(do_bars.index(s), phase)
    dp_t = warpgroup_mma(v2, do_buf.permute((1, 0)), zero, use_acc=False, is_async=True)
    if DROPOUT:  # this tile's bit-block words, loaded under the GEMMs
        base, NC8, start_n = bits
        words = bits_words_mma((base, NC8), (m_lo + j) * BLOCK_M, start_n, s_layout, BLOCK_N,
                               BLOCK_M, True)
    # -- row statistics of the query tile (global loads under the GEMMs), or of the next
    #    one (PREFETCH: this one's came with the arguments) --
    rows = (m_lo + j) * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, s_layout))
    if STATS and LSE2_PRE:  # already log2 units, +inf on rows with no key (_delta's)
        mbarrier.wait(stats[2].index(s), phase)
        st = stats[1].index(s).reshape([2 * BLOCK_M])  # lse2 rows, then delta rows
        lse2 = st.slice(0, BLOCK_M).load(gl.SliceLayout(0, s_layout))
    elif STATS:
        lse = stats[2].index(s).reshape([BLOCK_M]).load(gl.SliceLayout(0, s_layout))
        lse2 = gl.where(lse == float("-inf"), float("inf"), lse * 1.4426950408889634)
    elif PREFETCH:
        lse2 = lse2_in
        delta = delta_in
        lse2_next, delta_next = _iter_stats(LSE, DELTA, it + 1, m_lo, n_m, n_iter,
                                            bh - it // n_m, seqlen_q, lse_stride,
                                            gl.SliceLayout(0, s_layout), BLOCK_M)
    else:
        lse2 = _row_lse2(LSE, bh, rows, seqlen_q, lse_stride)
    # -- P^T, then dV += P^T dO (P^T from registers) --
    s_t = warpgroup_mma_wait(num_outstanding=1, deps=(s_t,))
    if SOFTCAP:  # scores tanh(s * cap_scale) (qk_scale: softcap * log2 e); ds/ds_raw = 1 - t^2
        s_t = tanh_f32(s_t * cap_scale, True)
        grad_t = 1.0 - s_t * s_t
    band = True  # (a constant: the mask, where MASKED, on every step)
    if BAND_BRANCH:
        band = sj < n_band
    p_t, p_op = _probs_t(s_t, lse2, keys, rows, diag, qk_scale, q_buf.dtype, a_layout,
                         MASKED, CAUSAL, left, HAS_LEFT, band, not COLS)
    if DROPOUT:  # P^T o M unscaled: dV and dK take 1 / (1 - p) at the end
        keep = bits_masks_t(words, s_layout)
        p_op = gl.convert_layout(dropped(p_t, keep).to(q_buf.dtype), a_layout)
    if SOFTCAP and CAP_FOLD:  # only dS^T reads P^T from here on: 1 - t^2 folded in now,
        p_t = p_t * grad_t  # so one fp32 tile stays live across the dV GEMM, not two
    if D_SPLIT > 1:  # this launch's column block of dO and Q (B operands of dV, dK)
        ACC_DIM: gl.constexpr = HEAD_DIM // D_SPLIT
        do_b = do_buf.slice(HALF * ACC_DIM, ACC_DIM, dim=1)
        q_b = q_buf.slice(HALF * ACC_DIM, ACC_DIM, dim=1)
    else:
        do_b = do_buf
        q_b = q_buf
    if COLS:  # every warpgroup's query columns of P^T in, then dV's column half
        dv = warpgroup_mma(_shared_operand(pds.index(0), p_op), do_b, dv, is_async=True)
    else:
        dv = warpgroup_mma(p_op, do_b, dv, is_async=True)
    # -- dS^T = P^T (dP^T - delta), then dK += dS^T Q (delta loaded once lse2 is dead) --
    if STATS and LSE2_PRE:
        delta = st.slice(BLOCK_M, BLOCK_M).load(gl.SliceLayout(0, s_layout))
    elif STATS:  # (the dO barrier, waited above, covers the slot's delta row)
        delta = stats[3].index(s).reshape([BLOCK_M]).load(gl.SliceLayout(0, s_layout))
    elif not PREFETCH:
        delta = _row_delta(DELTA, bh, rows, seqlen_q, lse_stride)
    dp_t = warpgroup_mma_wait(num_outstanding=1, deps=(dp_t,))
    if DROPOUT:  # dS^T = P^T o (dP^T o M / (1 - p) - delta), with 1 / (1 - p) taken out
        if HEAD_DIM > 64:  # recomputed from the words: the masks' tile live across the
            keep = bits_masks_t(words, s_layout, True)  # dV GEMM spills at hd 128
        dp_t = dropped(dp_t, keep)
        delta = delta * (1.0 / keep_scale)
    ds_t = p_t * (dp_t - delta[None, :])
    if SOFTCAP and not CAP_FOLD:
        ds_t = ds_t * grad_t
    ds_lp = ds_t.to(q_buf.dtype)
    if COLS:  # as P^T: dS^T through shared memory
        dk = warpgroup_mma(_shared_operand(pds.index(1), ds_lp), q_b, dk, is_async=True)
    else:
        ds_op = gl.convert_layout(ds_lp, a_layout)
        dk = warpgroup_mma(ds_op, q_b, dk, is_async=True)
    if DQ_REDUCE:  # -- dQ = dS K over all BLOCK_N keys (dS^T of every warpgroup) --
        ds_smem = dqr[0].index(it % 2)
        ds_smem.store(ds_lp)
        fence_async_shared()  # generic-proxy stores -> visible to wgmma
        if DQ_STAGE2:  # all but this step's add have read their staging tiles: the next
            tma.store_wait(pendings=1)  # step's add may take the other one
        gl.thread_barrier()  # every warpgroup's keys are in
        # dV done (its P^T operand's registers free) before dQ's accumulator is taken
        dv, p_op = warpgroup_mma_wait(num_outstanding=1, deps=(dv, p_op))
        dq_l: gl.constexpr = _dq_mma_layout(gl.num_warps(), HEAD_DIM)
        dq = warpgroup_mma(ds_smem.permute((1, 0)), k2,
                           gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, dq_l),
                           use_acc=False, is_async=True)
        if DQ_FIXED:  # the rows' 2^e_i (dqr[7]), loaded under the dQ GEMM
            rq = (m_lo + j) * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, dq_l))
            mult = gl.load(dqr[7] + bh.to(gl.int64) * seqlen_q + rq, mask=rq < seqlen_q,
                           other=0.0)
        dk, ds_op, dq = warpgroup_mma_wait(num_outstanding=0, deps=(dk, ds_op, dq))
        if DQ_FIXED:
            dq = dq * mult[:, None]
    elif COLS:
        dv, dk = warpgroup_mma_wait(num_outstanding=0, deps=(dv, dk))
    else:
        dv, dk, p_op, ds_op = warpgroup_mma_wait(num_outstanding=0, deps=(dv, dk, p_op, ds_op))
    # -- refill: every warpgroup must be done with slot s before TMA overwrites it --
    nxt = it + NUM_STAGES
    _issue_qdo(q_desc, do_desc, q_smem, do_smem, q_bars, do_bars, nxt, n_m, m_lo, b, hk,
               group, nxt < n_iter, BLOCK_M, NUM_STAGES, False, EARLY_EXPECT, True, STATS,
               stats, nheads, GROUP_BRANCH, LSE2_PRE, dqr[4] if ROT else 0, ROT)
    if DQ_ORDERED:
        dql = (dq, (m_lo + j) * BLOCK_M, bh - b * nheads, rank, seen, pend, bh * n_m + j)
    elif DQ_LATE:
        dql = (dq, (m_lo + j) * BLOCK_M, bh - b * nheads, 0, 0, pend, 0)
    elif DQ_REDUCE:
        _dq_reduce(dq * dq_scale, dqr[1], dqr[2], [b, (m_lo + j) * BLOCK_M, bh - b * nheads, 0],
                   BLOCK_M, HEAD_DIM)
    if PREFETCH and not STATS:
        return dk, dv, lse2_next, delta_next, dql
    return dk, dv, lse2_in, delta_in, dql


@gluon.constexpr_function
def _dq_mma_layout(num_warps, head_dim):
    """wgmma accumulator layout of a DQ_REDUCE step's dQ tile (64 query rows, head_dim
    columns): one warpgroup per head_dim / (num_warps / 4) columns."""
    wgs = num_warps // 4
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, wgs],
                                     instr_shape=[16, head_dim // wgs, 16])


@gluon.jit
def _rint_i32(x):
    """fp32 -> int32, rounded to nearest-even (cvt.rni; Triton's cast truncates), saturating
    at the int32 range; NaN gives 0."""
    return gl.inline_asm_elementwise("cvt.rni.s32.f32 $0, $1;", "=r,r", [x], dtype=gl.int32,
                                     is_pure=True, pack=1)


@gluon.jit
def _dq_reduce(dq, dq_smem, dq_desc, coords, BLOCK_M: gl.constexpr, HEAD_DIM: gl.constexpr,
               buf=0, STAGE2: gl.constexpr = False):
    """Add a finished dQ tile to the accumulator: registers -> the staging tile (once the
    previous reduce has read it) -> TMA reduce-add at ``coords`` (rows past the sequence
    end clipped); the next call (or the epilogue's store_wait) waits for it. An int32
    accumulator (DQ_FIXED: ``dq``'s rows already scaled by their 2^e_i) takes it rounded
    to integers. STAGE2 (HopperBwdConfig.dq_stage2; reduce_late steps only): ``dq_smem``
    holds two staging tiles and this add goes through tile ``buf``, free without a wait
    here: ``_dkdv_step`` waits for the add before this one (the other tile's) right before
    its dS^T barrier, which passes that on to every thread. The single tile needs a wait
    and a CTA barrier before its store instead: one barrier per step more."""
    if STAGE2:
        smem = dq_smem.index(buf)
    else:
        tma.store_wait(pendings=0)  # the previous reduce has read the staging tile
        gl.thread_barrier()
        smem = dq_smem
    if smem.dtype == gl.int32:
        smem.reshape([BLOCK_M, HEAD_DIM]).store(_rint_i32(dq))
    else:
        smem.reshape([BLOCK_M, HEAD_DIM]).store(dq)
    fence_async_shared()  # generic-proxy stores -> visible to the TMA engine
    gl.thread_barrier()
    tma_reduce_add(dq_desc, coords, smem)


@gluon.jit
def _reduce_rotation(pid_n, n_m, n_kt):
    """The ordered reduce's visiting order (HopperBwdConfig.reduce_ordered): key tile
    pid_n of n_kt visits query tile (s + rotation) mod n_m at its step s, the rotations
    spread evenly over the query tiles, so that at any time the programs of one head
    add to different tiles, and a tile's adds come one program after the other a few
    steps apart."""
    return (pid_n * n_m) // n_kt


@gluon.jit
def _rotations_upto(x, n_m, n_kt):
    """How many of a head's n_kt programs have a rotation (``_reduce_rotation``) <= x, for
    0 <= x < 2 n_m, counting the rotations of the next turn (+ n_m) past n_m - 1: rotation
    t * n_m // n_kt <= x exactly for the first ceil((x + 1) * n_kt / n_m) programs."""
    wrap = (x >= n_m).to(gl.int32)
    return wrap * n_kt + ((x - wrap * n_m + 1) * n_kt + n_m - 1) // n_m


@gluon.jit
def _rank_base(rot, n_m, n_kt, pid_n):
    """The per-program constant of ``_reduce_rank``."""
    return pid_n - (rot * n_kt + n_m - 1) // n_m - _rotations_upto(rot, n_m, n_kt)


@gluon.jit
def _reduce_rank(rot, sj, n_m, n_kt, base):
    """The place of the program with rotation ``rot`` (``base`` = ``_rank_base``), at its
    step ``sj``, among the n_kt adds into the query tile it visits there: the programs
    reaching that tile at an earlier step of their own come first (their rotations lie in
    (rot, rot + sj], cyclically), ties (equal rotations, when n_m < n_kt) in key tile
    order. A fixed order, so the fp32 sums are bitwise the same from run to run; and in
    lock step each program finds its predecessors' adds done."""
    return _rotations_upto(rot + sj, n_m, n_kt) + base


@gluon.jit
def _bulk_wait_all():
    """Every bulk async-group this thread committed has completed, its writes performed
    (``cp.async.bulk.wait_group 0``: ``tma.store_wait`` waits only until the source tile is
    read); a no-op in the threads that issued none."""
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
    offs = gl.arange(0, 32 * gl.num_warps(), layout=layout)
    gl.inline_asm_elementwise("cp.async.bulk.wait_group 0;\n\tmov.u32 $0, $1;", "=r,r", [offs],
                              dtype=gl.int32, is_pure=False, pack=1)


_WAIT_TURN = gl.constexpr("""{
    .reg .pred p;
    .reg .u32 v;
    WAIT:
    ld.acquire.gpu.global.u32 v, [$1];
    setp.lt.u32 p, v, $2;
    @p bra WAIT;
    mov.u32 $0, v;
}""")


@gluon.jit
def _wait_turn(ptr, rank):
    """Spin until the int32 counter at ``ptr`` reaches ``rank`` (acquire, every thread;
    a loop inside one asm statement: as a Gluon while loop around an atomic the step's
    other values spilled, 300 against 108 bytes at hd 128)."""
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
    offs = gl.arange(0, 32 * gl.num_warps(), layout=layout)
    gl.inline_asm_elementwise(_WAIT_TURN, "=r,l,r", [ptr + offs * 0, offs * 0 + rank],
                              dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _release_reduce(SEM, off, FENCE: gl.constexpr = False):
    """The reduce-add of counter ``off`` (issued by this program, the last it issued) is
    complete: the next program in that query tile's order may add. FENCE (dq_finish's
    done counts, which generic loads in ``_finish_dq`` wait on): a proxy fence orders the
    async proxy's writes before the release in the issuing thread."""
    _bulk_wait_all()
    if FENCE:
        layout: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
        offs = gl.arange(0, 32 * gl.num_warps(), layout=layout)
        gl.inline_asm_elementwise("fence.proxy.async.global;\n\tmov.u32 $0, $1;", "=r,r",
                                  [offs], dtype=gl.int32, is_pure=False, pack=1)
    gl.thread_barrier()  # the issuing thread has seen its writes performed
    gl.atomic_add(SEM + off, 1, sem="release", scope="gpu")


@gluon.constexpr_function
def _finish_layout(num_warps, head_dim):
    """_finish_dq's tile: 16-byte vectors, a warp over whole rows (up to 128 columns)."""
    t = min(32, head_dim // 4)
    return gl.BlockedLayout([1, 4], [32 // t, t], [num_warps, 1], [1, 0])


# query rows per unit of _finish_dq (a unit: one query head's rows, loads all in flight)
FINISH_ROWS = gl.constexpr(128)


@gluon.jit
def _finish_dq(ACC, MULT, DQ, DONE, s_b, s_m, s_h, s_d, seqlen_q, nheads, n_rows, qpr, n_f,
               HEAD_DIM: gl.constexpr, ROWS: gl.constexpr):
    """dq_finish: a finishing program (grid rows n_rows on, launched after every key-tile
    program): dQ = the int32 sum / 2^e_i (``MULT``), cast, as fixed_dq.dequantize does, for
    its share of the (query head, ROWS rows) units, in head order (the order the heads'
    programs finish in). A unit waits until every key-tile program of its grid row
    (``DONE``: one count per program, ``_release_reduce``) has added its shares. Row y of
    the grid holds query heads y * qpr .. y * qpr + qpr - 1 (qpr: the group, or 1 with
    EXPAND); ACC (B, M, H, D) int32 contiguous, DQ any strides. The first ``n_f``
    finishing programs share the units; the others have none."""
    layout: gl.constexpr = _finish_layout(gl.num_warps(), HEAD_DIM)
    n_x = gl.num_programs(0)
    f = (gl.program_id(1) - n_rows) * n_x + gl.program_id(0)
    n_mb = (seqlen_q + ROWS - 1) // ROWS
    units = n_rows * qpr * n_mb
    lo = gl.minimum((f * units) // n_f, units)  # (programs from n_f on: none)
    hi = gl.minimum(((f + 1) * units) // n_f, units)
    r = gl.arange(0, ROWS, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, layout))
    seen = -1
    for u in range(lo, hi):
        bh = u // n_mb  # b * nheads + h
        y = bh // qpr
        if y != seen:  # every program of its grid row has added
            _wait_turn(DONE + y, n_x)
            seen = y
        m = (u - bh * n_mb) * ROWS + r
        b = bh // nheads
        h = bh - b * nheads
        ok = m < seqlen_q
        mult = gl.load(MULT + bh.to(gl.int64) * seqlen_q + m, mask=ok, other=1.0)
        src = ((b * seqlen_q + m).to(gl.int64) * nheads + h) * HEAD_DIM
        acc = gl.load(ACC + src[:, None] + cols[None, :], mask=ok[:, None], other=0,
                      cache_modifier=".cg")
        out = acc.to(gl.float32) / mult[:, None]
        dst = (b.to(gl.int64) * s_b + h.to(gl.int64) * s_h + m.to(gl.int64)[:, None] * s_m
               + cols[None, :] * s_d)
        gl.store(DQ + dst, out.to(DQ.dtype.element_ty), mask=ok[:, None])


@gluon.jit
def _late_reduce(dql, dqr, dq_scale, b, nheads, BLOCK_M: gl.constexpr, HEAD_DIM: gl.constexpr,
                 ORDERED: gl.constexpr, buf=0, STAGE2: gl.constexpr = False):
    """reduce_late: add the previous step's dQ (``dql`` = (dQ, row, head, rank, counter
    seen, counter of the reduce in flight, its own counter)). ORDERED: first release the
    reduce in flight (issued a step ago, so complete by now in all but rare cases), then
    wait for this add's turn in its query tile's order, unless the counter seen a step
    ago already showed it. Returns the counter of the reduce now in flight (-1 when not
    ORDERED). ``buf`` / STAGE2: ``_dq_reduce``'s."""
    off = -1
    if ORDERED:
        SEM = dqr[3]
        if dql[5] >= 0:
            _release_reduce(SEM, dql[5])
        off = dql[6]
        if dql[4] < dql[3]:  # not its turn a step ago: wait for it
            _wait_turn(SEM + off, dql[3])
    _dq_reduce(dql[0] * dq_scale, dqr[1], dqr[2], [b, dql[1], dql[2], 0], BLOCK_M, HEAD_DIM,
               buf, STAGE2)
    return off


@gluon.jit(do_not_specialize=["seqlen_q", "seqlen_k"])
def _bwd_dkdv_kernel(
    q_desc, k_desc, v_desc, do_desc,  # TMA: q, do (B, M, H, D); k, v (B, N, Hkv, D)
    dk_desc, dv_desc,  # TMA: dk, dv (B, N, Hkv, D)
    LSE, DELTA,  # (B, H, M) fp32: lse (natural log), rowsum(dO * O); VARLEN: (H, TQ)
    Q, K, V, DO, DK, DV, CU_Q, CU_K,  # VARLEN: packed base pointers, cu_seqlens (else None)
    seqlen_q, seqlen_k, nheads, group,
    qk_scale, sm_scale,  # qk_scale = sm_scale * log2(e)
    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
    NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr, PREFETCH: gl.constexpr,
    D_SPLIT: gl.constexpr = 1, HALF: gl.constexpr = 0, VARLEN: gl.constexpr = False,
    EXPAND: gl.constexpr = False,
    left=0, HAS_LEFT: gl.constexpr = False,  # a sliding window: keys from row + diag - left
    cap_scale=1.0, SOFTCAP: gl.constexpr = False,  # softcap: tanh(qk * sm_scale / softcap)
    EARLY_EXPECT: gl.constexpr = False,  # HopperBwdConfig.early_expect
    lse_desc=None, delta_desc=None,  # STATS: TMA over LSE / DELTA as (B * H, M)
    STATS: gl.constexpr = False,  # HopperBwdConfig.stats_tma (dense only)
    LSE2_PRE: gl.constexpr = False,  # STATS: lse_desc over _delta's (lse2, delta) blocks
    GROUP_BRANCH: gl.constexpr = False,  # HopperBwdConfig.group_branch
    BITS=None, keep_scale=1.0,  # DROPOUT: the forward's bit words (after the header)
    DROPOUT: gl.constexpr = False,  # attention dropout read from BITS (dense only)
    dq_desc=None,  # DQ_REDUCE: TMA over the dQ accumulator (B, M, H, D), zeroed: fp32, or
    #                int32 with DQ_FIXED
    DQ_REDUCE: gl.constexpr = False,  # HopperBwdConfig.dq_reduce: dQ here (5 GEMMs)
    DQ_LATE: gl.constexpr = False,  # HopperBwdConfig.reduce_late: each dQ a step late
    SEM=None,  # DQ_ORDERED: (B * H, cdiv(M, BLOCK_M)) int32, zeroed: adds per query tile
    DQ_ORDERED: gl.constexpr = False,  # HopperBwdConfig.reduce_ordered: deterministic
    FIXED=None,  # DQ_FIXED: (B, H, M) fp32, each row's 2^e_i (ops/fixed_dq.mults)
    DQ_FIXED: gl.constexpr = False,  # HopperBwdConfig.reduce_fixed: int32 adds (dq_desc)
    DQ_ROT: gl.constexpr = False,  # HopperBwdConfig.dq_rotate: the rotated order alone
    TILE_MAJOR: gl.constexpr = False,  # HopperBwdConfig.tile_major: launch order in
    tile_heads=1,  # blocks of this many heads (tile_ids)
    ONE_LOOP: gl.constexpr = 0,  # HopperBwdConfig.one_loop (causal, no window)
    CAP_FOLD: gl.constexpr = False,  # HopperBwdConfig.softcap_fold
    DQ_STAGE2: gl.constexpr = False,  # HopperBwdConfig.dq_stage2: two dQ staging tiles
    COLS: gl.constexpr = False,  # HopperBwdConfig.col_split: warpgroups split the columns
    PART=None, n_full=0,  # TAIL: the pieces' (dK, dV) partials (ops/tail_split.workspace),
    TAIL: gl.constexpr = 1,  # programs from n_full on: pieces of the last tiles, TAIL each
    DQ_SUM=None, DQ_OUT=None,  # FINISH: the int32 sum (B, M, H, D), contiguous; dQ
    s_dqb=0, s_dqm=0, s_dqh=0, s_dqd=0,  # FINISH: dQ's strides
    DONE=None, n_rows=0,  # FINISH: per grid row, its programs done; the key-tile rows
    n_fin=1,  # FINISH: the finishing programs with units (HopperBwdConfig.finish_programs)
    FINISH: gl.constexpr = False,  # HopperBwdConfig.dq_finish: rows n_rows on dequantize
):
    # EXPAND (GQA): one program per (key tile, query head), grid (key tiles, B * H); dk /
    # dv descriptors (and with VARLEN the DK / DV pointers) over (B, N, H, D) per-query-head
    # partials, which the launcher sums over each group
    if COLS:  # two warpgroups over the same 64 keys, each half of the columns
        gl.static_assert(gl.num_warps() == 8 and BLOCK_N == 64, "col_split: 8 warps, 64 keys")
        gl.static_assert(D_SPLIT == 1 and not DQ_REDUCE and not DROPOUT,
                         "col_split: whole head dims, no dq_reduce, no dropout")
    else:
        gl.static_assert(BLOCK_N == 16 * gl.num_warps(), "each warp owns 16 key rows")
    gl.static_assert(HEAD_DIM <= 256 and BLOCK_M <= 256, "wgmma n is at most 256")
    gl.static_assert(HEAD_DIM % (64 * D_SPLIT) == 0 and HALF < D_SPLIT,
                     "column blocks of whole 64-column swizzle atoms")
    ACC_DIM: gl.constexpr = HEAD_DIM // D_SPLIT
    gl.static_assert(not FINISH or (DQ_FIXED and TAIL == 1 and not VARLEN),
                     "dq_finish: fixed-point dQ, no tail pieces, dense")
    if FINISH:  # the grid's last rows: dQ from the int32 sum, after the key tiles' adds
        if gl.program_id(1) >= n_rows:
            _finish_dq(DQ_SUM, FIXED, DQ_OUT, DONE, s_dqb, s_dqm, s_dqh, s_dqd, seqlen_q, nheads,
                       n_rows, 1 if EXPAND else group, n_fin, HEAD_DIM, FINISH_ROWS)
            return
        rows = n_rows
    else:
        rows = None
    lse_stride = seqlen_q
    if VARLEN:  # sequence b of the packed batch: its own descriptors, b = 0 from here
        if EXPAND:  # grid axis 1 is B * H
            heads_per_seq = nheads
        else:
            heads_per_seq = nheads // group
        q0, seqlen_q, k0, seqlen_k = seq_bounds(CU_Q, CU_K,
                                                 gl.program_id(1) // heads_per_seq)
        if (gl.program_id(0) * BLOCK_N >= seqlen_k) | (seqlen_q == 0):
            # past this sequence's keys, or no query sees them: no descriptor built,
            # nothing to store (the caller's dk / dv are zeros)
            return
        lse_stride, LSE, DELTA, q_desc, do_desc, k_desc, v_desc = _varlen_inputs(
            Q, K, V, DO, LSE, DELTA, q0, seqlen_q, k0, seqlen_k, q_desc, do_desc, k_desc,
            v_desc)
        dk_desc = seq_desc(DK, k0, seqlen_k, dk_desc)
        dv_desc = seq_desc(DV, k0, seqlen_k, dv_desc)
    # causal: low key tiles (the most query tiles) start first
    # EXPAND: hk is this program's query head and q_group 1 (else the group)
    ROT: gl.constexpr = DQ_ORDERED or DQ_ROT  # the query tiles in the rotated order
    (pid_n, b, hk, q_group, start_n, diag, m_lo, n_band, n_mid, n_m, n_iter, k_smem, v_smem,
     q_smem, do_smem, q_bars, do_bars, keys, dk, dv, k2, v2, stats, rot) = _key_tile_setup(
        q_desc, k_desc, v_desc, do_desc, seqlen_q, seqlen_k, nheads, group, HEAD_DIM,
        BLOCK_M, BLOCK_N, NUM_STAGES, CAUSAL, False, ACC_DIM, VARLEN, EXPAND, left, HAS_LEFT,
        EARLY_EXPECT, STATS, lse_desc, delta_desc, GROUP_BRANCH, LSE2_PRE, ROT,
        TILE_MAJOR, tile_heads, COLS, TAIL, n_full, rows)
    gl.static_assert(not (STATS and (VARLEN or PREFETCH)), "STATS: dense, no PREFETCH")
    gl.static_assert(TAIL == 1 or (DQ_REDUCE and not (ROT or COLS or D_SPLIT > 1)),
                     "tail_split: the one-kernel backward, not rotated, whole columns")
    gl.static_assert(not (TILE_MAJOR and VARLEN), "TILE_MAJOR: dense grids only")

    # -- the group's query heads in order (deterministic); per head the diagonal band
    #    (masked), then the query tiles that see every key of this tile --
    bh0 = b * nheads + hk * q_group
    s_layout: gl.constexpr = _kt_layout(gl.num_warps(), BLOCK_M, COLS)
    if COLS:  # the P^T and dS^T tiles every warpgroup reads
        pds = gl.allocate_shared_memory(q_desc.dtype, [2, BLOCK_N, BLOCK_M],
                                        _ds_smem_layout(BLOCK_N, BLOCK_M, q_desc.dtype))
    else:
        pds = 0
    if PREFETCH:  # the first iteration's row statistics; each step loads the next's
        lse2, delta = _iter_stats(LSE, DELTA, 0, m_lo, n_m, n_iter, bh0, seqlen_q,
                                  lse_stride, gl.SliceLayout(0, s_layout), BLOCK_M)
    else:
        lse2 = 0.0
        delta = 0.0
    gl.static_assert(not (DROPOUT and (VARLEN or D_SPLIT > 1)), "dropout: dense, whole D")
    gl.static_assert(not (DQ_REDUCE and (VARLEN or D_SPLIT > 1)), "dq_reduce: dense, whole D")
    if DQ_REDUCE:  # this step's dS^T (all keys) and the dQ staging tile (two: DQ_STAGE2),
        # allocated in that order
        ds_all = gl.allocate_shared_memory(q_desc.dtype, [2, BLOCK_N, BLOCK_M],
                                           _ds_smem_layout(BLOCK_N, BLOCK_M, q_desc.dtype))
        if DQ_STAGE2:
            stage = gl.allocate_shared_memory(dq_desc.dtype, [2] + dq_desc.block_type.shape,
                                              dq_desc.layout)
        else:
            stage = gl.allocate_shared_memory(dq_desc.dtype, dq_desc.block_type.shape,
                                              dq_desc.layout)
        dqr = (ds_all, stage, dq_desc, SEM, rot, (seqlen_k + BLOCK_N - 1) // BLOCK_N, 0)
        if DQ_ORDERED:
            dqr = dqr[:6] + (_rank_base(rot, n_m, dqr[5], pid_n),)
        if DQ_FIXED:  # rows' shares scaled into the int32 range (ops/fixed_dq.py)
            dqr = dqr + (FIXED,)
        dq_scale = sm_scale * keep_scale if DROPOUT else sm_scale
    else:
        dqr = 0
        dq_scale = 1.0
    gl.static_assert(DQ_REDUCE or not DQ_LATE, "reduce_late: with dq_reduce")
    gl.static_assert(DQ_LATE or not DQ_ORDERED, "reduce_ordered: with reduce_late")
    gl.static_assert(DQ_REDUCE or not DQ_FIXED, "reduce_fixed: with dq_reduce")
    gl.static_assert(not (DQ_FIXED and DQ_ORDERED), "reduce_fixed or reduce_ordered")
    gl.static_assert(not DQ_STAGE2 or (DQ_LATE and not DQ_ORDERED),
                     "dq_stage2: with reduce_late, not reduce_ordered")
    gl.static_assert(not (ROT and (CAUSAL or HAS_LEFT)),
                     "reduce_ordered / dq_rotate: every program visits every query tile")
    gl.static_assert(not (DQ_ROT and (DQ_ORDERED or not DQ_REDUCE or PREFETCH)),
                     "dq_rotate: with dq_reduce, not reduce_ordered, no PREFETCH")
    if DQ_LATE:  # the previous step's (dQ, row, head, rank, counter seen), none yet; the
        #          counter of the reduce in flight (-1: none); the previous step's counter
        dql = (gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, _dq_mma_layout(gl.num_warps(),
                                                                         HEAD_DIM)),
               0, 0, 0, 0, -1, 0)
    else:
        dql = 0
    # ONE_LOOP (causal, no window): the band's steps run in the second loop, masked
    ONE: gl.constexpr = CAUSAL and not HAS_LEFT and ONE_LOOP > 0
    n_sep = 0 if ONE else n_band
    for g in range(0, q_group):
        bh = bh0 + g
        if DROPOUT:  # this head's bit blocks (_common.BITS_PAD), and the key tile
            base, NC8 = _bits_block(BITS, bh, seqlen_q, seqlen_k)
            bits = (base, NC8, start_n)
        else:
            bits = 0
        for j in range(0, n_sep):
            dk, dv, lse2, delta, dql = _dkdv_step(
                g * n_m + j, j, dk, dv, lse2, delta, k2, v2, q_smem, do_smem, q_bars,
                do_bars, q_desc, do_desc, LSE, DELTA, bh, keys, m_lo, n_m, n_iter, b, hk,
                q_group, seqlen_q, lse_stride, diag, qk_scale, HEAD_DIM, BLOCK_M, BLOCK_N,
                NUM_STAGES, True, PREFETCH, D_SPLIT, HALF, True, left, HAS_LEFT, cap_scale,
                SOFTCAP, EARLY_EXPECT, STATS, stats, nheads, LSE2_PRE, GROUP_BRANCH,
                bits, keep_scale, DROPOUT, dqr, DQ_REDUCE, dq_scale, dql, DQ_LATE,
                DQ_ORDERED, DQ_FIXED, CAP_FOLD=CAP_FOLD, DQ_STAGE2=DQ_STAGE2, COLS=COLS,
                pds=pds, ROT=ROT)
        for j in range(n_sep, n_mid):
            dk, dv, lse2, delta, dql = _dkdv_step(
                g * n_m + j, j, dk, dv, lse2, delta, k2, v2, q_smem, do_smem, q_bars,
                do_bars, q_desc, do_desc, LSE, DELTA, bh, keys, m_lo, n_m, n_iter, b, hk,
                q_group, seqlen_q, lse_stride, diag, qk_scale, HEAD_DIM, BLOCK_M, BLOCK_N,
                NUM_STAGES, ONE, PREFETCH, D_SPLIT, HALF, True, 0, False, cap_scale,
                SOFTCAP, EARLY_EXPECT, STATS, stats, nheads, LSE2_PRE, GROUP_BRANCH,
                bits, keep_scale, DROPOUT, dqr, DQ_REDUCE, dq_scale, dql, DQ_LATE,
                DQ_ORDERED, DQ_FIXED, ONE and ONE_LOOP == 2, n_band, CAP_FOLD,
                DQ_STAGE2, COLS, pds, ROT)
        # a window's far edge: query tiles that see part of this key tile (none without
        # one: n_mid = n_m)
        for j in range(n_mid, n_m):
            dk, dv, lse2, delta, dql = _dkdv_step(
                g * n_m + j, j, dk, dv, lse2, delta, k2, v2, q_smem, do_smem, q_bars,
                do_bars, q_desc, do_desc, LSE, DELTA, bh, keys, m_lo, n_m, n_iter, b, hk,
                q_group, seqlen_q, lse_stride, diag, qk_scale, HEAD_DIM, BLOCK_M, BLOCK_N,
                NUM_STAGES, True, PREFETCH, D_SPLIT, HALF, CAUSAL, left, HAS_LEFT, cap_scale,
                SOFTCAP, EARLY_EXPECT, STATS, stats, nheads, LSE2_PRE, GROUP_BRANCH,
                bits, keep_scale, DROPOUT, dqr, DQ_REDUCE, dq_scale, dql, DQ_LATE,
                DQ_ORDERED, DQ_FIXED, CAP_FOLD=CAP_FOLD, DQ_STAGE2=DQ_STAGE2, COLS=COLS,
                pds=pds, ROT=ROT)

    if DQ_LATE:  # the last step's dQ (n_iter >= 1)
        pend = _late_reduce(dql, dqr, dq_scale, b, nheads, BLOCK_M, HEAD_DIM, DQ_ORDERED,
                            (n_iter - 1) % 2, DQ_STAGE2)
        if DQ_ORDERED:  # ... complete, then its query tile's next program may add
            _release_reduce(SEM, pend)
    if DROPOUT:  # the steps' P^T o M and dS^T left out 1 / (1 - p)
        dv = dv * keep_scale
        dk = dk * keep_scale
    # -- epilogue: dK (scaled) and dV through the K and V buffers, or (a column block)
    #    through staging tiles of the dK / dV descriptors' box --
    if D_SPLIT > 1:
        k_out = gl.allocate_shared_memory(dk_desc.dtype, dk_desc.block_type.shape,
                                          dk_desc.layout)
        v_out = gl.allocate_shared_memory(dv_desc.dtype, dv_desc.block_type.shape,
                                          dv_desc.layout)
    else:
        k_out = k_smem
        v_out = v_smem
    if TAIL > 1:  # a piece: fp32 partials for ops/tail_split.combine (slot >= 0)
        slot = gl.program_id(0) - n_full
        if slot >= 0:
            _store_partials(dk * sm_scale, dv, PART, slot, BLOCK_N, HEAD_DIM)
        else:
            _store_dkdv(dk, dv, k_out, v_out, dk_desc, dv_desc, b, start_n, hk, 0,
                        sm_scale, BLOCK_N, ACC_DIM)
    else:
        _store_dkdv(dk, dv, k_out, v_out, dk_desc, dv_desc, b, start_n, hk, HALF * ACC_DIM,
                    sm_scale, BLOCK_N, ACC_DIM)
    if FINISH:  # this program's dQ shares are in: count it in its grid row
        _release_reduce(DONE, b * (nheads if EXPAND else nheads // group) + hk, True)


# ==================================================================================
# fused: one program per 128-key tile (FA3's roles), dQ through fp32 atomics
# ==================================================================================


@gluon.constexpr_function
def _add_layout(num_warps, head_dim):
    """Blocked layout of a dQ chunk for the atomics: 4 consecutive fp32 per thread
    (one 16-byte vector add), threads of a warp along a row, warps down the rows."""
    per_row = min(head_dim // 4, 32)
    return gl.BlockedLayout(size_per_thread=[1, 4], threads_per_warp=[32 // per_row, per_row],
                            warps_per_cta=[num_warps, 1], order=[1, 0])


@gluon.constexpr_function
def _ds_smem_layout(block_n, block_m, dtype):
    """Shared layout of a dS^T tile: stored as computed, read by dQ = dS K through its
    transposed view."""
    return gl.NVMMASharedLayout.get_default_for([block_n, block_m], dtype)


@gluon.jit
def _fused_producer(q_desc, do_desc, q_smem, do_smem, q_bars, do_bars, empty_bars, n_m, m_lo,
                    b, hk, group, n_iter, BLOCK_M: gl.constexpr, NUM_STAGES: gl.constexpr):
    """The 1-warp producer: Q / dO tiles of every iteration (query tiles from the last
    down, as the consumers visit them) into the ring, each slot once both consumer
    warpgroups released its previous tile (empty barrier, count 2)."""
    for it in range(0, n_iter):
        use = it // NUM_STAGES
        mbarrier.wait(empty_bars.index(it % NUM_STAGES), (use & 1) ^ 1, pred=use > 0)
        _issue_qdo(q_desc, do_desc, q_smem, do_smem, q_bars, do_bars, it, n_m, m_lo, b, hk,
                   group, True, BLOCK_M, NUM_STAGES, True)


@gluon.constexpr_function
def _writer_rows(cols, warps):
    """Rows of the dQ staging tile the writer moves per chunk (``_add_layout`` over its
    ``warps``, two rows per lane: 8 fp32 in registers)."""
    return 2 * warps * (32 // min(cols // 4, 32))


@gluon.jit
def _fused_writer(dq_smem, dq_full, dq_empty, DQ_ACC, SEM, pid_n, b, hk, m_lo, n_m, group,
                  seqlen_q, nheads, n_iter, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
                  DETERMINISTIC: gl.constexpr, TMA_REDUCE: gl.constexpr):
    """The dQ writer (1 or 2 warps): per iteration, once both consumer warpgroups staged their
    column half of the (scaled) dQ tile, add it to the fp32 DQ_ACC with 16-byte vector
    atomics (rows past seqlen_q masked), then free the staging tile. DETERMINISTIC: the
    adds to a query tile happen in key-tile order (a per-(head, query tile) counter in
    SEM: wait for pid_n, add, release pid_n + 1); the wait stalls this warp only.
    TMA_REDUCE: idle (the consumers issue TMA reduce-adds themselves)."""
    DQ_COLS: gl.constexpr = HEAD_DIM // 2
    layout: gl.constexpr = _add_layout(gl.num_warps(), DQ_COLS)
    CH: gl.constexpr = _writer_rows(DQ_COLS, gl.num_warps())
    n_mt = (seqlen_q + BLOCK_M - 1) // BLOCK_M
    if not TMA_REDUCE:  # (traced only when the writer has work)
        for it in range(0, n_iter):
            g = it // n_m
            j = n_m - 1 - it % n_m
            h = hk * group + g
            start_m = (m_lo + j) * BLOCK_M
            mbarrier.wait(dq_full, it & 1)
            if DETERMINISTIC:
                sem = SEM + (b * nheads + h).to(gl.int64) * n_mt + m_lo + j
                while gl.atomic_add(sem, 0, sem="acquire", scope="gpu") < pid_n:
                    pass
            for w in gl.static_range(2):
                for r in gl.static_range(BLOCK_M // CH):
                    x = dq_smem.index(w).slice(r * CH, CH, dim=0).load(layout)
                    rows = start_m + r * CH + gl.arange(0, CH, layout=gl.SliceLayout(1, layout))
                    cols = w * DQ_COLS + gl.arange(0, DQ_COLS, layout=gl.SliceLayout(0, layout))
                    offs = ((b * seqlen_q + rows).to(gl.int64) * nheads + h) * HEAD_DIM
                    gl.atomic_add(DQ_ACC + offs[:, None] + cols[None, :], x,
                                  mask=rows[:, None] < seqlen_q, sem="relaxed", scope="gpu")
            mbarrier.arrive(dq_empty, count=1)  # the tile is in registers: free to refill
            if DETERMINISTIC:
                gl.thread_barrier()  # every lane's adds are issued
                gl.atomic_add(sem, 1, sem="release", scope="gpu")


@gluon.jit
def _fused_dq_issue(itq, valid, k_smem, ds_smem, ds_bars, WG: gl.constexpr,
                    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, HALF_N: gl.constexpr):
    """Issue (async) columns [WG * D/2, (WG + 1) * D/2) of iteration ``itq``'s dQ = dS K
    over all 128 keys, once both warpgroups stored their half of its dS^T (ds_bars).
    Not ``valid`` (iteration -1): the GEMM runs on a stale buffer (its result unused)."""
    DQ_COLS: gl.constexpr = HEAD_DIM // 2
    dq_layout: gl.constexpr = mma_layout(gl.num_warps(), DQ_COLS)
    itq = gl.maximum(itq, 0)
    buf = itq % 4
    mbarrier.wait(ds_bars.index(buf), (itq // 4) & 1, pred=valid)
    k0 = k_smem.index(0).reshape([HALF_N, HEAD_DIM]).slice(WG * DQ_COLS, DQ_COLS, dim=1)
    k1 = k_smem.index(1).reshape([HALF_N, HEAD_DIM]).slice(WG * DQ_COLS, DQ_COLS, dim=1)
    dq = warpgroup_mma(ds_smem.index(2 * buf).permute((1, 0)), k0,
                       gl.zeros([BLOCK_M, DQ_COLS], gl.float32, dq_layout),
                       use_acc=False, is_async=True)
    return warpgroup_mma(ds_smem.index(2 * buf + 1).permute((1, 0)), k1, dq, is_async=True)


@gluon.jit
def _fused_dq_store(dq, itq, valid, dq_smem, dq_full, dq_empty, dqacc_desc, b, hk, group,
                    n_m, m_lo, sm_scale, WG: gl.constexpr, HEAD_DIM: gl.constexpr,
                    BLOCK_M: gl.constexpr, TMA_REDUCE: gl.constexpr):
    """Iteration ``itq``'s finished dQ columns (``dq``), scaled, to the writer's staging
    tile, or (TMA_REDUCE) to this warpgroup's own staging tile, added to the fp32 dQ by a
    TMA reduce-add the warpgroup issues itself (FA3's way; racing). Not ``valid``:
    nothing is added."""
    DQ_COLS: gl.constexpr = HEAD_DIM // 2
    itq = gl.maximum(itq, 0)
    if TMA_REDUCE:
        buf = dq_smem.index(WG)
        tma.store_wait(pendings=0)  # the previous reduce has read the staging tile
        gl.thread_barrier()
        buf.reshape([BLOCK_M, DQ_COLS]).store(dq * sm_scale)
        fence_async_shared()  # generic-proxy stores -> visible to the TMA engine
        gl.thread_barrier()
        if valid:
            g = itq // n_m
            j = n_m - 1 - itq % n_m  # query tiles from the last down
            tma_reduce_add(dqacc_desc, [b, (m_lo + j) * BLOCK_M, hk * group + g,
                                        WG * DQ_COLS], buf)
    else:  # to the writer's staging tile, once the writer drained the previous one
        mbarrier.wait(dq_empty, (itq & 1) ^ 1, pred=valid & (itq > 0))
        dq_smem.index(WG).store(dq * sm_scale)
        gl.thread_barrier()
        mbarrier.arrive(dq_full, count=1, pred=valid)


@gluon.jit
def _fused_dq(itq, valid, k_smem, ds_smem, ds_bars, dq_smem, dq_full, dq_empty, dqacc_desc,
              b, hk, group, n_m, m_lo, sm_scale, WG: gl.constexpr, HEAD_DIM: gl.constexpr,
              BLOCK_M: gl.constexpr, HALF_N: gl.constexpr, TMA_REDUCE: gl.constexpr):
    """Iteration ``itq``'s dQ columns of this warpgroup: issued, waited for, stored
    (``_fused_dq_issue``, ``_fused_dq_store``)."""
    dq = _fused_dq_issue(itq, valid, k_smem, ds_smem, ds_bars, WG, HEAD_DIM, BLOCK_M, HALF_N)
    dq = warpgroup_mma_wait(num_outstanding=0, deps=(dq,))
    _fused_dq_store(dq, itq, valid, dq_smem, dq_full, dq_empty, dqacc_desc, b, hk, group,
                    n_m, m_lo, sm_scale, WG, HEAD_DIM, BLOCK_M, TMA_REDUCE)


@gluon.jit
def _fused_step(it, j, dk, dv, k_w, k_smem, v_w, q_smem, do_smem, ds_smem, dq_smem, q_bars,
                do_bars, empty_bars, ds_bars, dq_full, dq_empty, dqacc_desc, LSE, DELTA, bh,
                b, hk, group, n_m, keys, m_lo, seqlen_q, diag, qk_scale, sm_scale,
                WG: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
                HALF_N: gl.constexpr, NUM_STAGES: gl.constexpr, MASKED: gl.constexpr,
                TMA_REDUCE: gl.constexpr, DEFER_DQ: gl.constexpr = False):
    """Warpgroup WG's iteration ``it`` (query tile m_lo + j of head bh) over its 64 keys:
    S^T, dP^T (both in flight), P^T and dS^T in registers, dV += P^T dO and dK += dS^T Q
    (register A operands), dS^T to shared memory (four buffers by iteration), then the
    dQ columns of the *previous* iteration (``_fused_dq``): its dS^T halves were stored a
    step ago, so the warpgroups rarely wait on each other and drift out of phase (one's
    softmax under the other's GEMMs). Four buffers: a warpgroup overwrites buffer it % 4
    after waiting (in _fused_dq of iteration it - 2) for the other's dS^T of it - 2, which
    the other stores only after finishing its dQ of it - 4 from that buffer.

    DEFER_DQ: the step starts with the dQ GEMMs of iteration it - 2 (the other
    warpgroup's dS^T of it - 2 was stored a whole step ago) and issues S^T right behind
    them, then stores that dQ while S^T runs: one tensor-core drain per step instead of
    two, and the dQ store off the GEMMs' path. (The buffer argument above holds: a dQ
    finishes in the step that issues it, before this warpgroup stores its dS^T. Nothing
    stays in flight across steps: with an accumulator in flight over the loop's back
    edge, ptxas 12.x serializes every wgmma of the kernel, for want of registers.)"""
    s_layout: gl.constexpr = mma_layout(gl.num_warps(), BLOCK_M)
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=dk.type.layout,
                                                 k_width=2)
    s = it % NUM_STAGES
    phase = (it // NUM_STAGES) & 1
    q_buf = q_smem.index(s).reshape([BLOCK_M, HEAD_DIM])
    do_buf = do_smem.index(s).reshape([BLOCK_M, HEAD_DIM])
    # -- S^T = K_WG Q^T and dP^T = V_WG dO^T, both in flight --
    zero = gl.zeros([HALF_N, BLOCK_M], gl.float32, s_layout)
    if DEFER_DQ:  # iteration it - 2's dQ, S^T right behind it
        dq = _fused_dq_issue(it - 2, it >= 2, k_smem, ds_smem, ds_bars, WG, HEAD_DIM,
                             BLOCK_M, HALF_N)
    mbarrier.wait(q_bars.index(s), phase)
    s_t = warpgroup_mma(k_w, q_buf.permute((1, 0)), zero, use_acc=False, is_async=True)
    if DEFER_DQ:  # dQ done (S^T in flight): stored under S^T
        dq = warpgroup_mma_wait(num_outstanding=1, deps=(dq,))
        _fused_dq_store(dq, it - 2, it >= 2, dq_smem, dq_full, dq_empty, dqacc_desc, b, hk,
                        group, n_m, m_lo, sm_scale, WG, HEAD_DIM, BLOCK_M, TMA_REDUCE)
    mbarrier.wait(do_bars.index(s), phase)
    dp_t = warpgroup_mma(v_w, do_buf.permute((1, 0)), zero, use_acc=False, is_async=True)
    rows = (m_lo + j) * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, s_layout))
    lse2 = _row_lse2(LSE, bh, rows, seqlen_q, seqlen_q)
    # -- P^T, then dV += P^T dO --
    s_t = warpgroup_mma_wait(num_outstanding=1, deps=(s_t,))
    p_t, p_op = _probs_t(s_t, lse2, keys, rows, diag, qk_scale, q_buf.dtype, a_layout,
                         MASKED)
    dv = warpgroup_mma(p_op, do_buf, dv, is_async=True)
    # -- dS^T = P^T (dP^T - delta): dK += dS^T Q from registers, and to shared memory --
    delta = _row_delta(DELTA, bh, rows, seqlen_q, seqlen_q)
    dp_t = warpgroup_mma_wait(num_outstanding=1, deps=(dp_t,))
    ds_t = (p_t * (dp_t - delta[None, :])).to(q_buf.dtype)
    ds_op = gl.convert_layout(ds_t, a_layout)
    dk = warpgroup_mma(ds_op, q_buf, dk, is_async=True)
    ds_smem.index(2 * (it % 4) + WG).store(ds_t)
    fence_async_shared()  # generic-proxy stores -> visible to wgmma
    gl.thread_barrier()  # the warpgroup's four warps all stored their rows
    mbarrier.arrive(ds_bars.index(it % 4), count=1)
    # -- slot s released once this warpgroup's GEMMs on Q / dO are done --
    dv, dk, p_op, ds_op = warpgroup_mma_wait(num_outstanding=0, deps=(dv, dk, p_op, ds_op))
    gl.thread_barrier()
    mbarrier.arrive(empty_bars.index(s), count=1)
    if not DEFER_DQ:  # the previous iteration's dQ columns
        _fused_dq(it - 1, it > 0, k_smem, ds_smem, ds_bars, dq_smem, dq_full, dq_empty,
                  dqacc_desc, b, hk, group, n_m, m_lo, sm_scale, WG, HEAD_DIM, BLOCK_M,
                  HALF_N, TMA_REDUCE)
    return dk, dv


@gluon.jit
def _fused_consumer(WG: gl.constexpr, k_smem, v_smem, kv_bar, q_smem, do_smem, ds_smem, dq_smem,
                    q_bars, do_bars, empty_bars, ds_bars, dq_full, dq_empty, end_bar, dk_desc,
                    dv_desc, dqacc_desc, LSE, DELTA, b, hk, start_n, diag, m_lo, n_band, n_m,
                    group, seqlen_q, nheads, qk_scale, sm_scale, HEAD_DIM: gl.constexpr,
                    BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr,
                    TMA_REDUCE: gl.constexpr, DEFER_DQ: gl.constexpr):
    """Consumer warpgroup WG: keys [start_n + WG * 64, + 64), dK and dV resident in
    registers; every query tile of the group's heads (last tile first, the causal band
    last), then dK (scaled) and dV through its half of the K / V buffers."""
    HALF_N: gl.constexpr = BLOCK_N // 2
    s_layout: gl.constexpr = mma_layout(gl.num_warps(), BLOCK_M)
    d_layout: gl.constexpr = mma_layout(gl.num_warps(), HEAD_DIM)
    keys = start_n + WG * HALF_N + gl.arange(0, HALF_N, layout=gl.SliceLayout(1, s_layout))
    dk = gl.zeros([HALF_N, HEAD_DIM], gl.float32, d_layout)
    dv = gl.zeros([HALF_N, HEAD_DIM], gl.float32, d_layout)
    mbarrier.wait(kv_bar, 0)
    k_w = k_smem.index(WG).reshape([HALF_N, HEAD_DIM])
    v_w = v_smem.index(WG).reshape([HALF_N, HEAD_DIM])
    for g in range(0, group):
        bh = b * nheads + hk * group + g
        for t in range(0, n_m - n_band):
            dk, dv = _fused_step(g * n_m + t, n_m - 1 - t, dk, dv, k_w, k_smem, v_w, q_smem,
                                 do_smem, ds_smem, dq_smem, q_bars, do_bars, empty_bars,
                                 ds_bars, dq_full, dq_empty, dqacc_desc, LSE, DELTA, bh, b,
                                 hk, group, n_m, keys, m_lo, seqlen_q, diag, qk_scale,
                                 sm_scale, WG, HEAD_DIM, BLOCK_M, HALF_N, NUM_STAGES, False,
                                 TMA_REDUCE, DEFER_DQ)
        for t in range(n_m - n_band, n_m):
            dk, dv = _fused_step(g * n_m + t, n_m - 1 - t, dk, dv, k_w, k_smem, v_w, q_smem,
                                 do_smem, ds_smem, dq_smem, q_bars, do_bars, empty_bars,
                                 ds_bars, dq_full, dq_empty, dqacc_desc, LSE, DELTA, bh, b,
                                 hk, group, n_m, keys, m_lo, seqlen_q, diag, qk_scale,
                                 sm_scale, WG, HEAD_DIM, BLOCK_M, HALF_N, NUM_STAGES, True,
                                 TMA_REDUCE, DEFER_DQ)
    n_iter = group * n_m
    if DEFER_DQ:  # the second-to-last iteration's dQ
        _fused_dq(n_iter - 2, n_iter >= 2, k_smem, ds_smem, ds_bars, dq_smem, dq_full,
                  dq_empty, dqacc_desc, b, hk, group, n_m, m_lo, sm_scale, WG, HEAD_DIM,
                  BLOCK_M, HALF_N, TMA_REDUCE)
    # the last iteration's dQ (n_m > 0 always: a runtime True); the other warpgroup's
    # last dQ GEMM reads this one's K half
    _fused_dq(n_iter - 1, n_m > 0, k_smem, ds_smem, ds_bars, dq_smem, dq_full, dq_empty,
              dqacc_desc, b, hk, group, n_m, m_lo, sm_scale, WG, HEAD_DIM, BLOCK_M, HALF_N,
              TMA_REDUCE)
    mbarrier.arrive(end_bar, count=1)
    mbarrier.wait(end_bar, 0)
    _store_dkdv(dk, dv, k_smem.index(WG), v_smem.index(WG), dk_desc, dv_desc, b,
                start_n + WG * HALF_N, hk, 0, sm_scale, HALF_N, HEAD_DIM)


@gluon.constexpr_function
def _dq_stage_layout(cols, warps):
    """Shared layout of the fp32 dQ staging tile (``cols`` wide): 16-byte vectors (the
    writer's ``warps``' loads), XOR-swizzled by row so the consumers' 8-byte stores from the wgmma
    layout spread over the banks; the pattern repeats every writer chunk (a chunk must
    not split it)."""
    return gl.SwizzledSharedLayout(vec=4, per_phase=1,
                                   max_phase=min(8, _writer_rows(cols, warps)), order=[1, 0])


@gluon.jit(do_not_specialize=["seqlen_q", "seqlen_k"])
def _bwd_fused_kernel(
    q_desc, k_desc, v_desc, do_desc,  # TMA: q, do (B, M, H, D); k, v (B, N, Hkv, D), 64 rows
    dk_desc, dv_desc,  # TMA: dk, dv (B, N, Hkv, D), 64-row boxes
    dqacc_desc,  # TMA: DQ_ACC, box (1, BLOCK_M, 1, D / 2) (TMA_REDUCE)
    LSE, DELTA,  # (B, H, M) fp32: lse (natural log), rowsum(dO * O)
    DQ_ACC,  # (B, M, H, D) fp32, zeroed: dQ accumulates here
    SEM,  # (B * H, cdiv(M, BLOCK_M)) int32, zeroed (DETERMINISTIC only)
    seqlen_q, seqlen_k, nheads, group,
    qk_scale, sm_scale,  # qk_scale = sm_scale * log2(e)
    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
    NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr, DETERMINISTIC: gl.constexpr,
    LOAD_REGS: gl.constexpr, MMA_REGS: gl.constexpr, WRITER_WARPS: gl.constexpr,
    TMA_REDUCE: gl.constexpr = False, DEFER_DQ: gl.constexpr = False,
):
    """FA3's backward roles in Gluon: per program one key tile of BLOCK_N = 128 keys of
    one KV head; a 1-warp producer streams Q / dO through a NUM_STAGES ring; two
    consumer warpgroups (the default partition and a 4-warp worker) each own 64 keys
    and their dK, dV, and compute half the columns of each query tile's dQ (5 GEMMs per
    tile pair, against the two-kernel backward's 7). dQ goes to an fp32 buffer: ordered
    (DETERMINISTIC), WRITER_WARPS writer warps add the staged tile with atomics in
    key-tile order, off the consumers' path; racing with TMA_REDUCE, the consumers issue
    TMA reduce-adds themselves (FA3's way) and the writers idle."""
    gl.static_assert(gl.num_warps() == 4, "one consumer warpgroup per partition")
    gl.static_assert(BLOCK_N == 128 and BLOCK_M == 64, "64 keys per warpgroup, 64-row Q tiles")
    dtype: gl.constexpr = q_desc.dtype
    HALF_N: gl.constexpr = BLOCK_N // 2
    pid_n, b, hk, start_n, diag, m_lo, n_band, _n_mid, n_m, n_iter = _key_tile_coords(
        seqlen_q, seqlen_k, nheads, group, BLOCK_M, BLOCK_N, CAUSAL)

    k_smem = gl.allocate_shared_memory(dtype, [2] + k_desc.block_type.shape, k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [2] + v_desc.block_type.shape, v_desc.layout)
    q_smem, do_smem, q_bars, do_bars = alloc_ring_pair(q_desc, do_desc, NUM_STAGES)
    ds_smem = gl.allocate_shared_memory(dtype, [8, HALF_N, BLOCK_M],  # 4 x both halves
                                        _ds_smem_layout(HALF_N, BLOCK_M, dtype))
    if TMA_REDUCE:  # each warpgroup's staging tile, in the reduce's box and layout
        dq_smem = gl.allocate_shared_memory(gl.float32, [2] + dqacc_desc.block_type.shape,
                                            dqacc_desc.layout)
    else:  # the writer's
        dq_smem = gl.allocate_shared_memory(gl.float32, [2, BLOCK_M, HEAD_DIM // 2],
                                            _dq_stage_layout(HEAD_DIM // 2, WRITER_WARPS))
    kv_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    end_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    dq_full = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    dq_empty = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    empty_bars = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    ds_bars = gl.allocate_shared_memory(gl.int64, [4, 1], mbarrier.MBarrierLayout())
    mbarrier.init(kv_bar, count=1)
    mbarrier.init(end_bar, count=2)  # one arrive per consumer warpgroup
    mbarrier.init(dq_full, count=2)
    mbarrier.init(dq_empty, count=1)  # the writer
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(empty_bars.index(i), count=2)
    for i in gl.static_range(4):
        mbarrier.init(ds_bars.index(i), count=2)
    fence_async_shared()  # barrier inits visible to the async proxy (TMA)
    gl.thread_barrier()
    mbarrier.expect(kv_bar, 2 * (k_desc.block_type.nbytes + v_desc.block_type.nbytes))
    for i in gl.static_range(2):
        tma.async_copy_global_to_shared(k_desc, [b, start_n + i * HALF_N, hk, 0], kv_bar,
                                        k_smem.index(i))
        tma.async_copy_global_to_shared(v_desc, [b, start_n + i * HALF_N, hk, 0], kv_bar,
                                        v_smem.index(i))

    # warpgroup 0 is the default partition, warpgroup 1 a 4-warp worker (warps 4-7, so
    # its wgmma is warpgroup-aligned), then the producer (warp 8) and the writer
    gl.warp_specialize(
        [
            (_fused_consumer, (0, k_smem, v_smem, kv_bar, q_smem, do_smem, ds_smem, dq_smem,
                               q_bars, do_bars, empty_bars, ds_bars, dq_full, dq_empty,
                               end_bar, dk_desc, dv_desc, dqacc_desc, LSE, DELTA, b, hk,
                               start_n, diag, m_lo, n_band, n_m, group, seqlen_q, nheads,
                               qk_scale, sm_scale, HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES,
                               TMA_REDUCE, DEFER_DQ)),
            (_fused_consumer, (1, k_smem, v_smem, kv_bar, q_smem, do_smem, ds_smem, dq_smem,
                               q_bars, do_bars, empty_bars, ds_bars, dq_full, dq_empty,
                               end_bar, dk_desc, dv_desc, dqacc_desc, LSE, DELTA, b, hk,
                               start_n, diag, m_lo, n_band, n_m, group, seqlen_q, nheads,
                               qk_scale, sm_scale, HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES,
                               TMA_REDUCE, DEFER_DQ)),
            (_fused_producer, (q_desc, do_desc, q_smem, do_smem, q_bars, do_bars, empty_bars,
                             n_m, m_lo, b, hk, group, n_iter, BLOCK_M, NUM_STAGES)),
            (_fused_writer, (dq_smem, dq_full, dq_empty, DQ_ACC, SEM, pid_n, b, hk, m_lo, n_m,
                             group, seqlen_q, nheads, n_iter, HEAD_DIM, BLOCK_M,
                             DETERMINISTIC, TMA_REDUCE)),
        ],
        [4, 1, WRITER_WARPS],
        [MMA_REGS, LOAD_REGS, LOAD_REGS],
    )


# ==================================================================================
# dQ: one program per query tile
# ==================================================================================


@gluon.jit
def _dq_step(t, dq, q2, do2, k_smem, v_smem, k_bars, v_bars, k_desc, v_desc, lse2, delta,
             rows, b, hk, n_tiles, seqlen_k, diag, qk_scale, HEAD_DIM: gl.constexpr,
             BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr,
             MASKED: gl.constexpr, CAUSAL: gl.constexpr, lo=0, left=0,
             HAS_LEFT: gl.constexpr = False, cap_scale=1.0, SOFTCAP: gl.constexpr = False,
             EARLY_EXPECT: gl.constexpr = False, bits=0, keep_scale=1.0,
             DROPOUT: gl.constexpr = False, COLS: gl.constexpr = False, ds_smem=None):
    """Consume key tile t: S = Q K^T and dP = dO V^T (in flight together), dS, then
    dQ += dS K (dS from registers; COLS, HopperBwdConfig.dq_col_split: each warpgroup
    S and dP for half of the keys, dS through ``ds_smem``, each half of dQ's columns);
    refill the slot with tile t + NUM_STAGES. The tiles
    start at ``lo`` (ring position t - lo; 0 without a sliding window, HAS_LEFT).
    DROPOUT: dP of the dropped entries zeroed (the kernel took ``keep_scale`` = 1 / (1 -
    p) out of the step: delta times (1 - p), dQ times keep_scale at the end), decided by
    the forward's bit blocks (``bits``: base, blocks per band, the query tile's
    first row; _gluon_common.bits_words_mma)."""
    s_layout: gl.constexpr = _kt_layout(gl.num_warps(), BLOCK_N, COLS)
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=dq.type.layout,
                                                 k_width=2)
    s = (t - lo) % NUM_STAGES
    phase = ((t - lo) // NUM_STAGES) & 1
    k_buf = k_smem.index(s).reshape([BLOCK_N, HEAD_DIM])
    v_buf = v_smem.index(s).reshape([BLOCK_N, HEAD_DIM])
    zero = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    mbarrier.wait(k_bars.index(s), phase)
    qk = warpgroup_mma(q2, k_buf.permute((1, 0)), zero, use_acc=False, is_async=True)
    mbarrier.wait(v_bars.index(s), phase)
    dp = warpgroup_mma(do2, v_buf.permute((1, 0)), zero, use_acc=False, is_async=True)
    if DROPOUT:  # this tile's bit-block words, loaded under the GEMMs
        base, NC8, start_m = bits
        words = bits_words_mma((base, NC8), start_m, t * BLOCK_N, s_layout, BLOCK_M, BLOCK_N,
                               False)
    qk = warpgroup_mma_wait(num_outstanding=1, deps=(qk,))
    if SOFTCAP:  # scores tanh(s * cap_scale) (qk_scale: softcap * log2 e); ds/ds_raw = 1 - t^2
        qk = tanh_f32(qk * cap_scale, True)
        grad = 1.0 - qk * qk
    if MASKED:  # causal band, keys past seqlen_k, a window's left edge
        qk = scores_masked(qk, t, rows, seqlen_k, diag, BLOCK_N, CAUSAL, left, HAS_LEFT)
    p = gl.exp2(qk * qk_scale - lse2[:, None])
    dp = warpgroup_mma_wait(num_outstanding=0, deps=(dp,))
    if DROPOUT:  # dS = P o (dP o M / (1 - p) - delta), with 1 / (1 - p) taken out
        dp = dropped(dp, bits_keep(words, s_layout, MASK=True))
    ds = p * (dp - delta[:, None])
    if SOFTCAP:
        ds = ds * grad
    if COLS:  # every warpgroup's keys of dS in, then its half of dQ's columns
        dq = warpgroup_mma(_shared_operand(ds_smem, ds.to(q2.dtype)), k_buf, dq,
                           is_async=True)
        dq = warpgroup_mma_wait(num_outstanding=0, deps=(dq,))
    else:
        ds_op = gl.convert_layout(ds.to(q2.dtype), a_layout)
        dq = warpgroup_mma(ds_op, k_buf, dq, is_async=True)
        dq, ds_op = warpgroup_mma_wait(num_outstanding=0, deps=(dq, ds_op))
    # every warpgroup is done with slot s (the CTA barrier inside issue_kv_slot): refill it
    nxt = t + NUM_STAGES
    if not (HAS_LEFT or EARLY_EXPECT):  # the same slot, as the shipped hd 128 PTX computes it
        s = nxt % NUM_STAGES
    issue_kv_slot(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, s, nxt, b, hk,
                  nxt < n_tiles, BLOCK_N, EARLY_EXPECT, True)
    return dq


@gluon.jit(do_not_specialize=["seqlen_q", "seqlen_k"])
def _bwd_dq_kernel(
    q_desc, k_desc, v_desc, do_desc,  # TMA: q, do (B, M, H, D); k, v (B, N, Hkv, D)
    dq_desc,  # TMA: dq (B, M, H, D)
    LSE, DELTA,  # (B, H, M) fp32: lse (natural log), rowsum(dO * O); VARLEN: (H, TQ)
    Q, K, V, DO, DQ, CU_Q, CU_K,  # VARLEN: packed base pointers, cu_seqlens (else None)
    seqlen_q, seqlen_k, nheads, group,
    qk_scale, sm_scale,  # qk_scale = sm_scale * log2(e)
    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
    NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr, VARLEN: gl.constexpr = False,
    left=0, HAS_LEFT: gl.constexpr = False,  # a sliding window: keys from row + diag - left
    cap_scale=1.0, SOFTCAP: gl.constexpr = False,  # softcap: tanh(qk * sm_scale / softcap)
    EARLY_EXPECT: gl.constexpr = False,  # HopperBwdConfig.early_expect
    BITS=None, keep_scale=1.0,  # DROPOUT: the forward's bit words (after the header)
    DROPOUT: gl.constexpr = False,  # attention dropout read from BITS (dense only)
    TILE_MAJOR: gl.constexpr = False,  # HopperBwdConfig.tile_major: launch order in
    tile_heads=1,  # blocks of this many heads (tile_ids)
    COLS: gl.constexpr = False,  # HopperBwdConfig.dq_col_split: warpgroups split columns
):
    if COLS:  # two warpgroups over the same 64 query rows (_kt_layout)
        gl.static_assert(gl.num_warps() == 8 and BLOCK_M == 64, "col_split: 8 warps, 64 rows")
    else:
        gl.static_assert(BLOCK_M == 16 * gl.num_warps(), "each warp owns 16 query rows")
    gl.static_assert(HEAD_DIM <= 256 and BLOCK_N <= 256, "wgmma n is at most 256")
    gl.static_assert(not (DROPOUT and VARLEN), "dropout: dense calls only")
    gl.static_assert(not (TILE_MAJOR and VARLEN), "TILE_MAJOR: dense grids only")
    d_layout: gl.constexpr = _kt_layout(gl.num_warps(), HEAD_DIM, COLS)
    s_layout: gl.constexpr = _kt_layout(gl.num_warps(), BLOCK_N, COLS)
    pid_m, pid_bh, n_tiles = tile_ids(TILE_MAJOR, tile_heads)
    if CAUSAL:
        pid_m = n_tiles - 1 - pid_m  # longest rows first: better tail balance
    b = pid_bh // nheads
    h = pid_bh % nheads
    hk = h // group
    start_m = pid_m * BLOCK_M
    lse_stride = seqlen_q
    if VARLEN:  # sequence b of the packed batch: its own descriptors, b = 0 from here
        q0, seqlen_q, k0, seqlen_k = seq_bounds(CU_Q, CU_K, b)
        if (start_m >= seqlen_q) | (seqlen_k == 0):
            # past this sequence's queries, or no key to see: no descriptor built,
            # nothing to store (the caller's dq is zeros)
            return
        lse_stride, LSE, DELTA, q_desc, do_desc, k_desc, v_desc = _varlen_inputs(
            Q, K, V, DO, LSE, DELTA, q0, seqlen_q, k0, seqlen_k, q_desc, do_desc, k_desc,
            v_desc)
        dq_desc = seq_desc(DQ, q0, seqlen_q, dq_desc)
        b = 0
        pid_bh = h  # the row of lse / delta
    diag = seqlen_k - seqlen_q
    n_full, n_tiles = kv_tile_range(start_m, seqlen_q, seqlen_k, BLOCK_M, BLOCK_N, CAUSAL)
    if HAS_LEFT:  # tiles [lo, a) masked (the window's left edge), [a, n_full) not
        lo, a, n_full = window_tile_range(start_m, seqlen_q, seqlen_k, left, n_full,
                                          n_tiles, BLOCK_M, BLOCK_N)
    else:
        lo = 0
        a = 0

    # -- shared memory: resident Q, dO (Q's buffer later holds dQ), a K/V ring --
    q_smem, do_smem, k_smem, v_smem, q_bar, k_bars, v_bars = _resident_and_ring(
        q_desc, do_desc, k_desc, v_desc, NUM_STAGES)
    if COLS:  # the dS tile every warpgroup reads
        ds_smem = gl.allocate_shared_memory(q_desc.dtype, [BLOCK_M, BLOCK_N],
                                            _ds_smem_layout(BLOCK_M, BLOCK_N, q_desc.dtype))
    else:
        ds_smem = 0

    # -- prologue: Q and dO, and the first NUM_STAGES key/value tiles in flight --
    mbarrier.expect(q_bar, q_desc.block_type.nbytes + do_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(q_desc, [b, start_m, h, 0], q_bar, q_smem)
    tma.async_copy_global_to_shared(do_desc, [b, start_m, h, 0], q_bar, do_smem)
    for i in gl.static_range(NUM_STAGES):
        issue_kv_slot(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, i, lo + i, b, hk,
                      lo + i < n_tiles, BLOCK_N, EARLY_EXPECT)

    rows = start_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_layout))
    if DROPOUT:  # this head's bit blocks (_common.BITS_PAD), and the query tile
        base, NC8 = _bits_block(BITS, pid_bh, seqlen_q, seqlen_k)
        bits = (base, NC8, start_m)
    else:
        bits = 0
    lse2 = _row_lse2(LSE, pid_bh, rows, seqlen_q, lse_stride)
    delta = _row_delta(DELTA, pid_bh, rows, seqlen_q, lse_stride)
    if DROPOUT:  # the steps' dS leave out 1 / (1 - p): delta takes (1 - p), dQ 1 / (1 - p)
        delta = delta * (1.0 / keep_scale)
        sm_scale = sm_scale * keep_scale
    dq = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, d_layout)
    mbarrier.wait(q_bar, 0)
    q2 = q_smem.reshape([BLOCK_M, HEAD_DIM])
    do2 = do_smem.reshape([BLOCK_M, HEAD_DIM])

    # -- a window's left-edge tiles (masked; none without one), the off-band key tiles (no
    #    mask), then the causal band / ragged last tile --
    for t in range(lo, a):
        dq = _dq_step(t, dq, q2, do2, k_smem, v_smem, k_bars, v_bars, k_desc, v_desc, lse2,
                      delta, rows, b, hk, n_tiles, seqlen_k, diag, qk_scale, HEAD_DIM,
                      BLOCK_M, BLOCK_N, NUM_STAGES, True, CAUSAL, lo, left, HAS_LEFT, cap_scale,
                      SOFTCAP, EARLY_EXPECT, bits, keep_scale, DROPOUT, COLS, ds_smem)
    for t in range(a, n_full):
        dq = _dq_step(t, dq, q2, do2, k_smem, v_smem, k_bars, v_bars, k_desc, v_desc, lse2,
                      delta, rows, b, hk, n_tiles, seqlen_k, diag, qk_scale, HEAD_DIM,
                      BLOCK_M, BLOCK_N, NUM_STAGES, False, CAUSAL, lo, left, HAS_LEFT, cap_scale,
                      SOFTCAP, EARLY_EXPECT, bits, keep_scale, DROPOUT, COLS, ds_smem)
    for t in range(n_full, n_tiles):
        dq = _dq_step(t, dq, q2, do2, k_smem, v_smem, k_bars, v_bars, k_desc, v_desc, lse2,
                      delta, rows, b, hk, n_tiles, seqlen_k, diag, qk_scale, HEAD_DIM,
                      BLOCK_M, BLOCK_N, NUM_STAGES, True, CAUSAL, lo, left, HAS_LEFT, cap_scale,
                      SOFTCAP, EARLY_EXPECT, bits, keep_scale, DROPOUT, COLS, ds_smem)

    gl.thread_barrier()  # every warpgroup is done reading Q
    _store_tile(dq * sm_scale, q_smem, dq_desc, [b, start_m, h, 0], BLOCK_M, HEAD_DIM)
    tma.store_wait(pendings=0)


# ==================================================================================
# cross-compilation for sm_90 without a GPU (tests and scripts/compile_sm90.py)
# ==================================================================================


def compile_sm90(head_dim: int, causal: bool, dtype=torch.bfloat16, config=None,
                 deterministic: bool = True, varlen: bool = False,
                 window: bool = False, softcap: bool = False, dropout: bool = False,
                 ints: dict | None = None) -> dict:
    """Compile both backward kernels for sm_90 on any machine (no GPU) with the argument
    types a real launch produces (``varlen``: hopper_varlen_backward's; ``window``: a
    sliding window's left bound, HAS_LEFT). Returns
    {"dkdv": kernel, "dq": kernel} (Triton compiled kernels: ``.asm`` holds
    ttgir/ptx/cubin, ``.metadata.shared`` shared memory bytes).
    ``ints``: values of the specialised int arguments (``nheads``, ``group``,
    ``tile_heads``) as a launch at one shape passes them, specialised as Triton does (1:
    a constant; a multiple of 16: divisible by 16); without it they stay plain i32, so
    the build may keep arithmetic a real launch folds away."""
    from triton.backends.compiler import GPUTarget

    cfg = config or configs.hopper_bwd_config(head_dim, causal, 4096)
    elem = {torch.float16: "*fp16", torch.bfloat16: "*bf16"}[dtype]
    scalars = dict(LSE="*fp32", DELTA="*fp32", seqlen_q="i32", seqlen_k="i32", nheads="i32",
                   group="i32", qk_scale="fp32", sm_scale="fp32")
    jobs = {
        "dkdv": (_bwd_dkdv_kernel, cfg.block_m, cfg.block_n, cfg.num_stages, cfg.num_warps,
                 cfg.max_regs, ["q", "k", "v", "do", "dk", "dv"]),
        "dq": (_bwd_dq_kernel, cfg.dq_block_m, cfg.dq_block_n, cfg.dq_num_stages,
               cfg.dq_num_warps, cfg.dq_max_regs, ["q", "k", "v", "do", "dq"]),
    }
    if cfg.dq_reduce:  # dQ in the dK/dV kernel: no dQ kernel
        jobs = {"dkdv": jobs["dkdv"][:-1] + (jobs["dkdv"][-1] + ["dq"],)}
    if cfg.fused:  # 64-row K / V boxes (one consumer warpgroup's keys)
        jobs = {"fused": (_bwd_fused_kernel, cfg.block_m, cfg.block_n // 2, cfg.num_stages,
                          cfg.num_warps, cfg.max_regs,
                          ["q", "k", "v", "do", "dk", "dv", "dqacc"])}
        scalars = dict(LSE="*fp32", DELTA="*fp32", DQ_ACC="*fp32", SEM="*i32", **{
            n: t for n, t in scalars.items() if n not in ("LSE", "DELTA")})
    out = {}
    for name, (kernel, bm, bn, stages, warps, cap, descs) in jobs.items():
        rows = dict(q=bm, do=bm, dq=bm, k=bn, v=bn, dk=bn, dv=bn, dqacc=bm)
        width = dict(dk=head_dim // cfg.d_split, dv=head_dim // cfg.d_split,
                     dqacc=head_dim // 2)
        fp32 = ("dqacc", "dq") if cfg.dq_reduce else ("dqacc",)  # fp32 accumulators
        acc = torch.int32 if cfg.reduce_fixed else torch.float32  # (fixed point: int32)
        types = {f"{d}_desc": desc_signature(acc if d in fp32 else dtype,
                                             rows[d], width.get(d, head_dim))
                 for d in descs}
        types.update(scalars)
        constexprs = dict(HEAD_DIM=head_dim, BLOCK_M=bm, BLOCK_N=bn, NUM_STAGES=stages,
                          CAUSAL=bool(causal))
        if name == "fused":
            constexprs = _fused_constexprs(cfg, head_dim, causal, deterministic)
        if name == "dkdv":
            constexprs["PREFETCH"] = bool(cfg.prefetch_stats)
            if _stats_tma(cfg, varlen):  # as _launch_split
                if _lse2_pre(cfg, varlen):  # one (lse2, delta) box
                    types["lse_desc"] = stats_desc_signature(2 * bm)
                    constexprs.update(STATS=True, PREFETCH=False, LSE2_PRE=True,
                                      delta_desc=None)
                else:
                    types["lse_desc"] = types["delta_desc"] = stats_desc_signature(bm)
                    constexprs.update(STATS=True, PREFETCH=False)
            else:
                constexprs.update(lse_desc=None, delta_desc=None)
            constexprs.update(D_SPLIT=cfg.d_split, HALF=cfg.d_split - 1)  # the last block
            if cfg.gqa_expand:
                constexprs["EXPAND"] = True
            constexprs["GROUP_BRANCH"] = bool(_group_branch(cfg, varlen))
            if cfg.dq_reduce:
                constexprs.update(DQ_REDUCE=True, DQ_LATE=bool(cfg.reduce_late))
                if cfg.reduce_ordered:
                    types["SEM"] = "*i32"
                    constexprs["DQ_ORDERED"] = True
                else:
                    constexprs["SEM"] = None
                if cfg.reduce_fixed:
                    types["FIXED"] = "*fp32"
                    constexprs["DQ_FIXED"] = True
                else:
                    constexprs["FIXED"] = None
                if cfg.dq_rotate:
                    constexprs["DQ_ROT"] = True
                tail = cfg.tail_split > 1 and not (causal or window)
                if cfg.reduce_fixed and cfg.dq_finish and not (varlen or tail):  # as
                    # _launch_split
                    types.update(DQ_SUM="*i32", DQ_OUT=elem, DONE="*i32", n_rows="i32",
                                 n_fin="i32",
                                 **{f"s_dq{a}": "i32" for a in "bmhd"})
                    constexprs["FINISH"] = True
            else:
                constexprs["dq_desc"] = None
            if "FINISH" not in constexprs:
                constexprs.update(DQ_SUM=None, DQ_OUT=None, DONE=None)
        if name != "fused":
            constexprs["EARLY_EXPECT"] = bool(cfg.early_expect)
            types["left"] = "i32"
            constexprs["HAS_LEFT"] = window
            types["cap_scale"] = "fp32"
            constexprs["SOFTCAP"] = softcap
            if dropout:  # the forward's bit words (_launch_split's BITS)
                types.update(BITS="*i32", keep_scale="fp32")
                constexprs["DROPOUT"] = True
            else:
                constexprs["BITS"] = None
            types["tile_heads"] = "i32"
            if _tile_major(cfg, varlen):
                constexprs["TILE_MAJOR"] = True
            if name == "dq":
                constexprs["COLS"] = bool(cfg.dq_col_split)
            if name == "dkdv":
                constexprs["ONE_LOOP"] = _one_loop(cfg, causal, window)
                constexprs["CAP_FOLD"] = bool(cfg.softcap_fold and softcap)
                constexprs["DQ_STAGE2"] = bool(cfg.dq_reduce and cfg.dq_stage2)
                constexprs["COLS"] = bool(cfg.col_split)
                types["n_full"] = "i32"
                if cfg.tail_split > 1 and not (causal or window or varlen):  # as _tail_plan
                    # with a split (the launch's TAIL is the plan's count: the config's here)
                    types["PART"] = "*fp32"
                    constexprs["TAIL"] = cfg.tail_split
                else:
                    constexprs["PART"] = None
        # the varlen pointers (packed tensors, cu_seqlens): constexpr None when dense
        ptrs = [n for n in ("Q", "K", "V", "DO", "DQ", "DK", "DV", "CU_Q", "CU_K")
                if n in kernel.arg_names]
        if varlen:
            types.update({n: "*i32" if n.startswith("CU") else elem for n in ptrs})
            constexprs["VARLEN"] = True
        else:
            constexprs.update({n: None for n in ptrs})
        divisible = []
        for n, value in (ints or {}).items():  # as JITFunction.run specialises them
            if n in kernel.arg_names and types.get(n) == "i32":
                if value == 1:
                    constexprs[n] = 1
                elif value % 16 == 0:
                    divisible.append(n)
        types.update({n: "constexpr" for n in constexprs})
        sig = {n: types[n] for n in kernel.arg_names if n in types}  # parameter order
        # LSE, DELTA (DQ_ACC, SEM; the varlen pointers): torch allocations, 16-byte aligned
        aligned = [kernel.arg_names.index(n) for n in sig
                   if sig[n].startswith("*") or n in divisible]
        src = sm90_source(kernel, sig, constexprs,
                          {(i,): [["tt.divisibility", 16]] for i in aligned})
        out[name] = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                                   options=dict(num_warps=warps, **_maxnreg(cap)))
    return out
