"""Device helpers shared by every kernel family: scores, masks, tile ranges, dropout.

Index conventions (every family): query row ``i``, key column ``j``,
``diag = seqlen_k - seqlen_q`` (bottom-right alignment). A key is kept when
``j < seqlen_k``, ``j <= i + diag + right`` (if HAS_RIGHT) and ``j >= i + diag - left``
(if HAS_LEFT). Causal attention is ``right = 0`` with no left bound.

Scores live in log2 units inside the kernels: ``s2 = log2(e) * score`` so that
``exp2`` replaces ``exp`` (one MUFU op, no extra multiply); ``lse`` leaves in natural log.
"""

import contextlib
import functools
import os

import torch
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)
# int32 words a dropout bits buffer starts with (flash.dropout_bits_buffer): the draw's
# (seed, offset), 2 spare (the words stay 16-byte aligned)
DROPOUT_BITS_HEADER = 4
LN2 = tl.constexpr(0.6931471805599453)


_functorch_active = getattr(torch._C, "_are_functorch_transforms_active", lambda: False)


def plain_eager(*tensors) -> bool:
    """True when a launcher may be called directly instead of its torch.library custom op,
    indistinguishably: not tracing (dynamo or torch.jit.trace must see the op), no
    dispatch mode (fake/meta tensors, make_fx, export, FlopCounter, selective
    checkpointing), no functorch transform, and every tensor plain (or a parameter;
    None entries are skipped). The eager fast paths of ops/flash.py and ops/kvcache.py
    ask this; what autograd may record is each caller's own question."""
    if torch.compiler.is_compiling() or torch._C._len_torch_dispatch_stack():
        return False
    if _functorch_active() or torch._C._get_tracing_state():
        return False
    for t in tensors:
        if t is not None and type(t) is not torch.Tensor and type(t) is not torch.nn.Parameter:
            return False
    return True


NULL_CTX = contextlib.nullcontext()  # reusable: entering it does nothing


def device_ctx(t: torch.Tensor):
    """``torch.cuda.device(t.device)`` around a launch, or a no-op when t is not on CUDA
    or its device is already the current one (what the switch would leave unchanged;
    the switch itself costs host time on every launch)."""
    device = t.device
    if device.type != "cuda" or device.index == torch.cuda.current_device():
        return NULL_CTX
    return torch.cuda.device(device)


def env_mode(name: str) -> str:
    """A three-way dispatch switch: "auto" when the variable is unset (the measured
    table decides), "off" when it is empty or 0, "on" otherwise."""
    value = os.environ.get(name)
    if value is None:
        return "auto"
    return "off" if value in ("", "0") else "on"


# Every environment variable the dispatch reads on a call (tests/test_host_plans.py greps
# the package for FLASHTILE_* names and checks that this list holds each one not read at
# import only). The launch plans of ops/flash.py are keyed on their values
# (``dispatch_env``), so setting one between calls (scripts/env_ab.py, tests) never
# replays a plan made under other settings.
DISPATCH_ENV = (
    "TRITON_INTERPRET", "FLASHTILE_DISABLE_HOPPER", "FLASHTILE_DEBUG_CHECKS",
    "FLASHTILE_DROPOUT_BITS", "FLASHTILE_HOPPER_SCHEDULE", "FLASHTILE_HOPPER_FWD_OVERRIDES",
    "FLASHTILE_HOPPER_C_PERSISTENT", "FLASHTILE_HOPPER_C_PINGPONG", "FLASHTILE_HOPPER_WINDOW",
    "FLASHTILE_HOPPER_SOFTCAP", "FLASHTILE_HOPPER_DROPOUT", "FLASHTILE_HOPPER_DROPOUT_WS",
    "FLASHTILE_HOPPER_VARLEN", "FLASHTILE_HOPPER_BWD", "FLASHTILE_HOPPER_BWD_OVERRIDES",
    "FLASHTILE_HOPPER_BWD_FUSED", "FLASHTILE_HOPPER_BWD_DROPOUT",
    "FLASHTILE_HOPPER_BWD_HD256_MASKS", "FLASHTILE_HOPPER_BWD_REDUCE",
    "FLASHTILE_HOPPER_BWD_REDUCE_ORDERED", "FLASHTILE_HOPPER_BWD_REDUCE_FIXED",
    "FLASHTILE_HOPPER_VARLEN_BWD", "FLASHTILE_DECODE_FUSED_COMBINE",
)
# CPython's os.environ keeps its values in a dict of encoded keys: one map over it reads
# them all in ~1 us, where os.environ.get costs ~1.5 us a name
_ENV_DATA = getattr(os.environ, "_data", None)
_ENV_KEYS = (tuple(os.environ.encodekey(n) for n in DISPATCH_ENV)
             if isinstance(_ENV_DATA, dict) and hasattr(os.environ, "encodekey") else None)


def dispatch_env() -> tuple:
    """The values of the ``DISPATCH_ENV`` variables now (None where unset; bytes on the
    fast path, str where os.environ is not CPython's own mapping any more)."""
    if _ENV_KEYS is not None and getattr(os.environ, "_data", None) is _ENV_DATA:
        return tuple(map(_ENV_DATA.get, _ENV_KEYS))
    return tuple(map(os.environ.get, DISPATCH_ENV))


def is_interpreting() -> bool:
    """True when Triton runs kernels under its CPU interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def device_capability(device: torch.device) -> tuple[int, int]:
    """``torch.cuda.get_device_capability(device)`` of a CUDA device, read once per device
    index (the capability of a device never changes; the torch call costs microseconds
    on every dispatch)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    return _capability(index)


@functools.cache
def _capability(index: int) -> tuple[int, int]:
    return tuple(torch.cuda.get_device_capability(index))


def sm_count(device: torch.device) -> int:
    """Streaming multiprocessors of a CUDA device (read once per device index)."""
    return sm_count_of(device.index if device.index is not None else torch.cuda.current_device())


@functools.cache
def sm_count_of(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def next_pow2(x: int) -> int:
    return 1 << (max(int(x), 1) - 1).bit_length()


# ----------------------------------------------------------------------------------
# scores
# ----------------------------------------------------------------------------------


@triton.jit
def delta_rows(O, DO, DELTA, stride_ob, stride_om, stride_oh, stride_dob, stride_dom,
               stride_doh, seqlen_q, nheads, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
               BLOCK_M: tl.constexpr):
    """DELTA = rowsum(dO o O) of this program's BLOCK_M rows, grid (row blocks, B * H):
    the backward preprocess kernels' body (flash.py) and fixed_dq's prologue. O / DO
    (B, M, H, D) with a unit last stride; DELTA (B, H, M). Returns (batch * head, the
    rows, their delta, the rows of dO in fp32)."""
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // nheads
    h = pid_bh % nheads
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    mask = (offs_m < seqlen_q)[:, None] & (offs_d < HEAD_DIM)[None, :]
    rows = offs_m[:, None].to(tl.int64)
    o = tl.load(
        O
        + b.to(tl.int64) * stride_ob
        + h.to(tl.int64) * stride_oh
        + rows * stride_om
        + offs_d[None, :], mask=mask, other=0.0,
    )
    do = tl.load(
        DO
        + b.to(tl.int64) * stride_dob
        + h.to(tl.int64) * stride_doh
        + rows * stride_dom
        + offs_d[None, :], mask=mask, other=0.0,
    )
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), axis=1)
    tl.store(DELTA + pid_bh.to(tl.int64) * seqlen_q + offs_m, delta, mask=offs_m < seqlen_q)
    return pid_bh, offs_m, delta, do.to(tl.float32)


@triton.jit
def lse2_box(LSE, ST, bh, box, n_boxes, offs_m, seqlen_q, delta, BLOCK_M: tl.constexpr):
    """Box ``box`` of ``n_boxes`` per (batch, head) in ST (B * H * n_boxes, 2 * BLOCK_M):
    the rows' lse in log2 units (+inf on rows with no key or past seqlen_q, as the
    kernels compute it per use), then their delta (0 past seqlen_q). The Gluon dK/dV
    kernel (HopperBwdConfig.lse2_pre) loads both with one TMA box."""
    ok = offs_m < seqlen_q
    lse2 = tl.load(LSE + bh.to(tl.int64) * seqlen_q + offs_m, mask=ok,
                   other=float("-inf")) * 1.4426950408889634
    st = (ST + (bh.to(tl.int64) * n_boxes + box) * 2 * BLOCK_M + tl.arange(0, BLOCK_M))
    tl.store(st, tl.where(lse2 == float("-inf"), float("inf"), lse2))
    tl.store(st + BLOCK_M, tl.where(ok, delta, 0.0))


@triton.jit
def tanh_f32(x, FAST: tl.constexpr = False):
    """tanh in fp32. By default accurate to a few ulp everywhere (libdevice is not
    available under the interpreter). FAST: the GPU's tanh.approx.f32 (one MUFU op,
    relative error about 2^-11; what flash-attn's softcap uses), for 16-bit inputs on a
    GPU, whose scores carry more rounding than that: the default's exponential and
    IEEE division cost a softcapped forward 2-4x its time (H200, 7386e40). The Gluon
    kernels call it too (elementwise on their layouts), so a softcapped Gluon forward
    and a portable backward, or the reverse, compute the same scores (``softcap_flag``
    picks the same variant for both)."""
    if FAST:
        return tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=r,r", [x],
                                         dtype=tl.float32, is_pure=True, pack=1)
    ax = tl.abs(x)
    e = tl.exp(-2.0 * ax)
    t_big = (1.0 - e) / (1.0 + e)
    # odd Taylor series where 1 - e cancels; error < 1e-11 for |x| < 0.1
    x2 = ax * ax
    t_small = ax * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0))))
    t = tl.where(ax < 0.1, t_small, t_big)
    return tl.where(x < 0, -t, t)


SOFTCAP_FAST = tl.constexpr(2)  # the SOFTCAP constexpr's value for tanh_f32(FAST=True)


def softcap_flag(softcap: float, dtype: torch.dtype) -> int:
    """The kernels' SOFTCAP constexpr: 0 without a softcap; SOFTCAP_FAST (tanh.approx) for
    16-bit inputs on a GPU; 1 (the accurate tanh) for fp32 inputs and under the
    interpreter, which cannot run inline PTX."""
    if not softcap > 0:
        return 0
    if dtype == torch.float32 or is_interpreting():
        return 1
    return int(SOFTCAP_FAST)


@triton.jit
def scores_log2(qk, sm_scale, softcap, SOFTCAP: tl.constexpr):
    """Raw q.k (fp32) -> scores in log2 units, and tanh of the capped argument (or 0).
    SOFTCAP: ``softcap_flag``'s value (0 off, SOFTCAP_FAST for tanh.approx).

    With SOFTCAP: s = softcap * tanh(sm_scale * qk / softcap); the tanh is returned so
    the backward can form ds/dqk = sm_scale * (1 - tanh^2) without recomputing it.
    """
    if SOFTCAP:
        t = tanh_f32(qk * (sm_scale / softcap), SOFTCAP == SOFTCAP_FAST)
        return t * (softcap * 1.4426950408889634), t
    else:
        return qk * (sm_scale * 1.4426950408889634), qk


# ----------------------------------------------------------------------------------
# masks (rows and cols are broadcastable 2D index tensors, either orientation)
# ----------------------------------------------------------------------------------


@triton.jit
def attn_keep(
    rows, cols, seqlen_q, seqlen_k, diag, left, right, HAS_LEFT: tl.constexpr,
    HAS_RIGHT: tl.constexpr,
):
    """Boolean keep-mask for query indices ``rows`` and key indices ``cols``."""
    keep = (rows < seqlen_q) & (cols < seqlen_k)
    if HAS_RIGHT:
        keep = keep & (cols <= rows + diag + right)
    if HAS_LEFT:
        keep = keep & (cols >= rows + diag - left)
    return keep


@triton.jit
def fwd_scores(
    q, k, rows, cols, seqlen_q, seqlen_k, diag, left, right, sm_scale, softcap,
    MASKED: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
    SOFTCAP: tl.constexpr, DOT_PREC: tl.constexpr,
):
    """One forward tile of scores in log2 units: q (rows, D) against k (cols, D), -inf
    where the mask drops a pair (only on MASKED tiles: the others lie wholly inside).
    The dense, varlen and KV-cache forward loops all score their tiles here."""
    s, _ = scores_log2(tl.dot(q, tl.trans(k), input_precision=DOT_PREC), sm_scale, softcap,
                       SOFTCAP)
    if MASKED:
        keep = attn_keep(rows[:, None], cols[None, :], seqlen_q, seqlen_k, diag, left, right,
                         HAS_LEFT, HAS_RIGHT)
        s = tl.where(keep, s, float("-inf"))
    return s


@triton.jit
def _floor_to(x, B: tl.constexpr):
    return (tl.maximum(x, 0) // B) * B


@triton.jit
def _ceil_to(x, B: tl.constexpr):
    return ((tl.maximum(x, 0) + B - 1) // B) * B


@triton.jit
def kv_tile_ranges(
    start_m, seqlen_q, seqlen_k, diag, left, right, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
):
    """Key range for the query tile [start_m, start_m + BLOCK_M), in three stages:
    masked [lo, a), unmasked [a, b), masked [b, hi). Tiles outside [lo, hi) are fully
    masked and skipped (causal/window tile pruning)."""
    last_m = start_m + BLOCK_M - 1
    hi = seqlen_k
    if HAS_RIGHT:
        hi = tl.minimum(hi, last_m + diag + right + 1)
    hi = tl.maximum(hi, 0)
    lo = 0
    full_lo = 0
    if HAS_LEFT:
        lo = _floor_to(start_m + diag - left, BLOCK_N)
        full_lo = _ceil_to(last_m + diag - left, BLOCK_N)
    full_hi = seqlen_k
    if HAS_RIGHT:
        full_hi = tl.minimum(full_hi, start_m + diag + right + 1)
    full_hi = _floor_to(full_hi, BLOCK_N)
    lo = tl.minimum(lo, hi)
    a = tl.minimum(tl.maximum(full_lo, lo), hi)
    b = tl.minimum(tl.maximum(full_hi, a), hi)
    return lo, a, b, hi


@triton.jit
def q_tile_ranges(
    start_n, seqlen_q, seqlen_k, diag, left, right, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
):
    """Query range for the key tile [start_n, start_n + BLOCK_N) (the backward's dK/dV
    loop), in the same three stages as ``kv_tile_ranges``."""
    last_n = start_n + BLOCK_N - 1
    lo = 0
    full_lo = 0
    if HAS_RIGHT:
        lo = _floor_to(start_n - diag - right, BLOCK_M)
        full_lo = _ceil_to(last_n - diag - right, BLOCK_M)
    hi = seqlen_q
    full_hi = seqlen_q
    if HAS_LEFT:
        hi = tl.minimum(hi, last_n - diag + left + 1)
        full_hi = tl.minimum(full_hi, start_n - diag + left + 1)
    hi = tl.maximum(hi, 0)
    full_hi = _floor_to(full_hi, BLOCK_M)
    # keys past seqlen_k need no mask here: their dK/dV rows are never stored
    lo = tl.minimum(lo, hi)
    a = tl.minimum(tl.maximum(full_lo, lo), hi)
    b = tl.minimum(tl.maximum(full_hi, a), hi)
    return lo, a, b, hi


@triton.jit
def stage_bounds(STAGE: tl.constexpr, lo, a, b, hi):
    """[start, end) of stage STAGE (0 masked, 1 unmasked, 2 masked) of the ranges from
    ``kv_tile_ranges`` / ``q_tile_ranges``; use under ``tl.static_range(3)``."""
    if STAGE == 0:
        return lo, a
    elif STAGE == 1:
        return a, b
    else:
        return b, hi


# ----------------------------------------------------------------------------------
# dropout: counter-based, so the backward regenerates the forward's mask
# ----------------------------------------------------------------------------------


# The bit format (flash.dropout_bits_buffer; "warp ballots"): per batch * head, the (Sq,
# Sk) decisions padded to multiples of BITS_PAD rows and keys, in blocks of 16 rows x 8
# keys, 4 int32 words each: block (r // 16, c // 8) at words ((r // 16) * NC8 + c // 8) * 4
# (NC8 = padded Sk / 8), word (r % 16) // 8 * 2 + c % 2, bit 4 * (r % 8) + (c % 8) // 2.
# In the wgmma accumulator layout a warp holds 16 rows and a thread, lane 4 * (r % 8) +
# (c % 8) // 2, holds rows r and r + 8 and columns c and c + 1 of every 8: so each word is
# one warp ballot of one register (the Gluon forward writes it so, ops/_gluon_common), and
# a kernel in that layout reads its bit at its own lane (the dQ kernel) or at a lane bit
# pattern (the dK/dV kernel's transposed tiles). Padding: a 128 x 128 tile never needs a
# mask to write its blocks.
BITS_PAD = 128


@triton.jit
def _bits_block(BITS, bh, seqlen_q, seqlen_k):
    """(base, NC8): batch * head ``bh``'s bit blocks and the blocks per 16-row band (see
    BITS_PAD)."""
    NR16 = (seqlen_q + 127) // 128 * 8
    NC8 = (seqlen_k + 127) // 128 * 16
    return BITS + bh.to(tl.int64) * (NR16 * NC8 * 4), NC8


@triton.jit
def bits_word_bit(r, c, NC8):
    """(word offset from the head's base, bit) of query row ``r`` and key ``c`` (tensors
    that broadcast) in the bit blocks (see BITS_PAD)."""
    word = ((r // 16) * NC8 + c // 8) * 4 + (r % 16) // 8 * 2 + c % 2
    return word, 4 * (r % 8) + (c % 8) // 2


@triton.jit
def store_dropout_bits(BITS, keep, bh, rows, cols, seqlen_q, seqlen_k, row0, col0):
    """Write a (rows, cols) keep tile into its bit blocks (see BITS_PAD): ``rows`` from
    ``row0`` (a multiple of 16, R of 16 too) and ``cols`` from ``col0`` (of 8), so the tile
    owns whole blocks; bits past seqlen_q / seqlen_k are 0. Each word is the sum of its 32
    elements' distinct powers of two (their OR): two reductions of the tile viewed as
    (R // 16, 2, 8, C // 8, 4, 2) = (block row, row half, row % 8, block column,
    (col % 8) // 2, col % 2)."""
    R: tl.constexpr = rows.shape[0]
    C: tl.constexpr = cols.shape[0]
    tl.static_assert(R % 16 == 0 and C % 8 == 0, "bit blocks need tiles of 16 x 8")
    base, NC8 = _bits_block(BITS, bh, seqlen_q, seqlen_k)
    ok = (rows < seqlen_q)[:, None] & (cols < seqlen_k)[None, :] & keep
    _, bit = bits_word_bit(rows[:, None], cols[None, :], NC8)
    x = tl.reshape(tl.where(ok, 1, 0) << bit, (R // 16, 2, 8, C // 8, 4, 2))
    words = tl.sum(tl.sum(x, axis=4), axis=2)  # (R // 16, 2, C // 8, 2): (.., rh, .., e)
    r16 = (row0 // 16 + tl.arange(0, R // 16))[:, None, None, None]
    rh = tl.arange(0, 2)[None, :, None, None]
    c8 = (col0 // 8 + tl.arange(0, C // 8))[None, None, :, None]
    e = tl.arange(0, 2)[None, None, None, :]
    tl.store(base + (r16 * NC8 + c8) * 4 + rh * 2 + e, words)


# The keep test compares 16 random bits with a threshold: element kept when its 16-bit
# number h (0 .. 65535) is >= DROPOUT_T = floor(fp32(dropout_p) * 2^16 + 1/2), so the
# rate applied is dropout_p rounded to the nearest multiple of 2^-16 (within 7.7e-6) and
# one Philox call (four 32-bit numbers) decides 8 elements. The kernels compute T from
# their fp32 dropout_p (exact: the product is a power-of-two scaling and the sum stays
# below 2^24); dropout_threshold computes it on the host.
DROPOUT_HALF_BITS = 16


def dropout_threshold(dropout_p: float) -> int:
    """The keep test's threshold T (see DROPOUT_HALF_BITS) for ``dropout_p``: an element
    is kept when its 16-bit number is >= T; T = 65536 keeps none."""
    import numpy as np

    return int(np.floor(float(np.float32(dropout_p)) * 65536.0 + 0.5))


@triton.jit
def _counters16(idx, K: tl.constexpr):
    """(N // 16, K) Philox counter words for 1-D ``idx`` made of aligned runs of 16
    consecutive indices: K * (i // 16) + the index of i's group within its run (K = 8:
    row pairs i % 8, shared by i and i + 8; K = 4: key quads (i % 8) // 2, shared by i,
    i + 1, i + 8 and i + 9, i even)."""
    N: tl.constexpr = idx.shape[0]
    group = tl.min(tl.reshape(idx, (N // 16, 16)), axis=1) // 16
    return group[:, None] * K + tl.arange(0, K)[None, :]


@triton.jit
def _halves(x):
    """The two 16-bit numbers of uint32 ``x``, low then high, on a new last axis."""
    return tl.join(x & 0xFFFF, x >> 16)


@triton.jit
def dropout_keep(seed, rng_offset, bh, rows, cols, dropout_p, TRANS: tl.constexpr,
                 seqlen_q=0, seqlen_k=0):
    """Keep-mask of attention dropout for (batch*head ``bh``, query ``rows``, key
    ``cols``), both 1-D in aligned runs of 16 (tiles of 16k rows and keys); shape
    (rows, cols), or (cols, rows) if TRANS (the dK/dV kernel's orientation).

    One Philox call, keyed by ``seed`` with counter (row pair, key quad, bh,
    rng_offset), draws the 16-bit numbers (DROPOUT_HALF_BITS) of rows i and i + 8 and
    keys j, j + 1, j + 8 and j + 9 (i % 16 < 8, j % 16 < 8 and even; row pair 8 * (i //
    16) + i % 8, key quad 4 * (j // 16) + (j % 8) // 2): its four numbers a, b, c, d are
    (i, j), (i, j + 8), (i + 8, j), (i + 8, j + 8), each holding key j (or j + 8) in its
    low half and the next key in its high half. In the wgmma accumulator layout one
    thread holds rows r and r + 8 and columns c, c + 1, c + 8 and c + 9 whichever way
    round the tile is, so the joins / permute / reshape below move no data between
    threads, and the Philox work is an eighth of one call per element. Every (b, h, i,
    j) draws its own number whatever the tiling. ``seed`` may be a pointer to (seed,
    offset) int64 on the device (flash.draw_rng_state inside CUDA graph capture);
    ``rng_offset`` is then unused. Or a pointer to int32 words: the decisions already
    drawn, one bit each, in bit blocks per batch * head (written by a forward:
    flash.dropout_bits_buffer, store_dropout_bits; the format at BITS_PAD): each element
    loads its word and picks its bit (no Philox; the portable kernels read them so only
    when bits are forced on, FLASHTILE_DROPOUT_BITS=1, and in tests: the Gluon backward
    is their reader)."""
    R: tl.constexpr = rows.shape[0]
    C: tl.constexpr = cols.shape[0]
    if seed.dtype.is_ptr():
        if seed.dtype.element_ty == tl.int32:  # the bits (see BITS_PAD)
            base, NC8 = _bits_block(seed, bh, seqlen_q, seqlen_k)
            if TRANS:  # a (cols, rows) tile
                r = rows[None, :]
                c = cols[:, None]
            else:
                r = rows[:, None]
                c = cols[None, :]
            word, bit = bits_word_bit(r, c, NC8)
            w = tl.load(base + word, mask=(r < seqlen_q) & (c < seqlen_k), other=0)
            return ((w >> bit) & 1) != 0
        rng_offset = tl.load(seed + 1).to(tl.int32)
        seed = tl.load(seed)
    rp = _counters16(rows, 8)[:, :, None, None]  # (R // 16, 8, 1, 1)
    cp = _counters16(cols, 4)[None, None, :, :]  # (1, 1, C // 16, 4)
    zero = rp * 0 + cp * 0
    a, b, c, d = tl.philox(seed, rp + zero, cp + zero, zero + bh, zero + rng_offset)
    # (R16, 8 rows, C16, 4 key pairs, key parity, key half, row half)
    r = tl.join(tl.join(_halves(a), _halves(b)), tl.join(_halves(c), _halves(d)))
    if TRANS:
        r = tl.reshape(tl.permute(r, (2, 5, 3, 4, 0, 6, 1)), (C, R))
    else:
        r = tl.reshape(tl.permute(r, (0, 6, 1, 2, 5, 3, 4)), (R, C))
    thr = (tl.cast(dropout_p, tl.float32) * 65536.0 + 0.5).to(tl.int32)  # dropout_threshold
    return r.to(tl.int32) >= thr


# ----------------------------------------------------------------------------------
# stores
# ----------------------------------------------------------------------------------


@triton.jit
def cast_out(x, DTYPE: tl.constexpr, UPCAST: tl.constexpr):
    """fp32 -> output dtype. Triton 3.6's interpreter truncates fp32 -> bf16 (even with
    fp_downcast_rounding="rtne"); round to nearest-even by hand there. On the GPU
    (UPCAST False) this is a plain cast."""
    if UPCAST and DTYPE == tl.bfloat16:
        bits = x.to(tl.uint32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        x = bits.to(tl.float32, bitcast=True)
    return x.to(DTYPE)


# ----------------------------------------------------------------------------------
# the online softmax (written once: the production kernels and the ladder share it)
# ----------------------------------------------------------------------------------


@triton.jit
def online_softmax(m_i, l_i, s, EXP2: tl.constexpr):
    """One online-softmax step over a tile of scores ``s`` (rows x keys, -inf where
    masked), in log2 units with EXP2 else natural. Returns ``(m_new, alpha, p, l_new)``:
    the new running max, the rescale factor for the old state, the tile's unnormalised
    probabilities and the new normaliser. A row with no key seen yet keeps m = -inf and
    gets alpha = p = 0 (no NaN from -inf - -inf)."""
    m_new = tl.maximum(m_i, tl.max(s, 1))
    m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
    if EXP2:
        alpha = tl.exp2(m_i - m_use)
        p = tl.exp2(s - m_use[:, None])
    else:
        alpha = tl.exp(m_i - m_use)
        p = tl.exp(s - m_use[:, None])
    return m_new, alpha, p, l_i * alpha + tl.sum(p, 1)


@triton.jit
def softmax_finish(acc, m_i, l_i, EXP2: tl.constexpr):
    """Normalise once at the end: ``(acc / l, lse)`` with lse in natural log; rows that
    saw no key give 0 and lse = -inf."""
    empty = l_i == 0.0
    l_safe = tl.where(empty, 1.0, l_i)
    if EXP2:
        lse = (m_i + tl.log2(l_safe)) * LN2
    else:
        lse = m_i + tl.log(l_safe)
    return acc / l_safe[:, None], tl.where(empty, float("-inf"), lse)
