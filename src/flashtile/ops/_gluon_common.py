"""Pieces shared by the Gluon sm_90 kernels (ops/hopper_fwd.py, ops/hopper_bwd.py):
host-side TMA descriptors and alignment checks, the wgmma accumulator layout, tile
ranges and score masks. Index conventions as ops/_common.py: query row i, key column j,
``diag = seqlen_k - seqlen_q``; causal keeps j <= i + diag (bottom-right aligned).
"""

from __future__ import annotations

import contextlib
import functools
import os

import torch
from triton._C.libtriton import ir
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language._core import builtin
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
from triton.runtime import _allocation

from ._common import _bits_block
from ._launch import cached_launch_kw, run_compiled

GL_DTYPES = {torch.float16: gl.float16, torch.bfloat16: gl.bfloat16, torch.float32: gl.float32,
             torch.int32: gl.int32}
_TY_NAMES = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32",
             torch.int32: "i32"}


# ----------------------------------------------------------------------------------
# host side
# ----------------------------------------------------------------------------------


def sm90_source(kernel, signature: dict, constexprs: dict, attrs: dict | None = None):
    """The GluonASTSource of a CPU sm_90 build of ``kernel`` (hopper_fwd / hopper_bwd
    ``compile_sm90``): every constexpr parameter the build does not name takes its
    default, as a real launch binds it. An ASTSource binds no defaults: such a parameter
    compiled unspecialised, so a default of True built the other branch's code than the
    GPU runs (session 33: the persistent stage C's O buffers dropped in the CPU build)."""
    from triton.experimental.gluon._runtime import GluonASTSource

    constexprs = dict(constexprs)
    for p in kernel.params:
        if p.is_constexpr and p.has_default and p.name not in signature \
                and p.name not in constexprs:
            constexprs[p.name] = p.default
    sig = {n: "constexpr" if n in constexprs else signature[n] for n in kernel.arg_names
           if n in signature or n in constexprs}
    return GluonASTSource(fn=kernel, signature=sig, constexprs=constexprs, attrs=attrs or {})


def tma_addressable(x: torch.Tensor) -> bool:
    """A TMA descriptor needs a 16-byte aligned base and 16-byte aligned strides (all but
    the last, which must be 1)."""
    es = x.element_size()
    return (
        x.stride(-1) == 1
        and x.data_ptr() % 16 == 0
        and all((s * es) % 16 == 0 for s in x.stride()[:-1])
    )


@functools.cache
def _box_layout(block: tuple, dtype: torch.dtype):
    """The NVMMA shared layout of a TMA box (a pure function of the box and dtype;
    building it costs ~10 us of Python per call, a descriptor's largest share). Kept for
    the life of the process: the cached launch keys descriptors by their layout's id."""
    return gl.NVMMASharedLayout.get_default_for(list(block), GL_DTYPES[dtype])


def tma_desc(x: torch.Tensor, block_rows: int, block_cols: int | None = None) -> TensorDescriptor:
    """4D TMA descriptor over (B, S, H, D) with box (1, block_rows, 1, block_cols or D).
    The callers have checked ``tma_addressable`` (or copied) and that no dimension is
    empty, so the dataclass's own validation (``__post_init__``: the same checks, ~15 us
    of Python per descriptor, up to 11 descriptors per forward+backward) is skipped:
    the fields are the ones ``TensorDescriptor(x, shape, strides, block, layout)`` sets
    (tests/test_hopper.py compares them)."""
    block = [1, block_rows, 1, block_cols or x.shape[-1]]
    return _unchecked_desc(x, block, _box_layout(tuple(block), x.dtype))


def _unchecked_desc(x: torch.Tensor, block: list, layout) -> TensorDescriptor:
    """``TensorDescriptor(x, x.shape, x.stride(), block, layout)`` with zero padding,
    without its validation (``tma_desc``'s reason)."""
    desc = object.__new__(TensorDescriptor)
    desc.base = x
    desc.shape = list(x.shape)
    desc.strides = list(x.stride())
    desc.block_shape = block
    desc.layout = layout
    desc.padding = "zero"
    return desc


STATS_LAYOUT = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=2)


def stats_desc(x: torch.Tensor, block_rows: int) -> TensorDescriptor:
    """TMA descriptor over per-row statistics, unswizzled, box (1, block_rows): (B, H, M)
    fp32 viewed as (B * H, M) (the backward's lse / delta beside each Q / dO tile; M a
    multiple of 4, so that rows are 16-byte aligned: ``stats_tma_ok``), or a 2D tensor
    as it is (the preprocess's (lse2, delta) blocks, one box each)."""
    flat = x if x.dim() == 2 else x.view(-1, x.shape[-1])
    return _unchecked_desc(flat, [1, block_rows], STATS_LAYOUT)


def stats_tma_ok(x: torch.Tensor) -> bool:
    """Whether ``stats_desc`` can address (B, H, M) ``x``: contiguous, M % 4 == 0."""
    return x.is_contiguous() and x.shape[-1] % 4 == 0 and x.data_ptr() % 16 == 0


def stats_desc_signature(block_rows: int) -> str:
    """The signature string of a ``stats_desc(x, block_rows)`` argument (cross-compiling)."""
    return f"tensordesc<fp32[1,{block_rows}],{STATS_LAYOUT!r}>"


# The Gluon launches (and the delta preprocess of their backward) skip Triton's per-call
# argument binding once a kernel is cached (ops/_launch.cached_launch_kw), under the
# switch the portable kernels use (FLASHTILE_FAST_LAUNCH=0 turns it off). Session 10
# (scripts/host_split.py --ab on the GPU machine, 443fab5; B2 S640 H16 D128 causal, off /
# on in one process): forward launcher 95.7 -> 76.5 us of host time, backward (delta,
# dK/dV, dQ) 226.5 -> 184.7, autograd.grad 481.4 -> 409.0.
FAST_LAUNCH = os.environ.get("FLASHTILE_FAST_LAUNCH", "1") not in ("", "0")
_FAST_LAUNCH_DEVICES = ("cuda",)  # the CPU check (scripts/host_overhead.py) adds "cpu"
_KERNELS: dict = {}
_run_compiled = run_compiled  # the CPU check replaces it with a spy


def launch(fn, grid, device, *args, **kwargs) -> None:
    """``fn[grid](*args, **kwargs)``, through the cached launch when FAST_LAUNCH is on for
    ``device``'s type."""
    if FAST_LAUNCH and device.type in _FAST_LAUNCH_DEVICES:
        cached_launch_kw(_KERNELS, fn, grid, device, args, kwargs, _run_compiled)
    else:
        fn[grid](*args, **kwargs)


def desc_signature(dtype: torch.dtype, rows: int, head_dim: int) -> str:
    """The signature string of a ``tma_desc(x, rows)`` argument (box width ``head_dim``),
    for cross-compiling with ``GluonASTSource`` (no GPU, no tensor)."""
    block = [1, rows, 1, head_dim]
    layout = gl.NVMMASharedLayout.get_default_for(block, GL_DTYPES[dtype])
    return f"tensordesc<{_TY_NAMES[dtype]}[{','.join(map(str, block))}],{layout!r}>"


# ----------------------------------------------------------------------------------
# device side
# ----------------------------------------------------------------------------------


@builtin
def tma_reduce_add(tensor_desc, coord, src, _semantic=None):
    """TMA reduce-add (``cp.reduce.async.bulk.tensor ... .add``) of the shared-memory tile
    ``src`` into the global box of ``tensor_desc`` at ``coord``: the asynchronous,
    whole-tile counterpart of ``tma.async_copy_shared_to_global`` (same rules: ``src`` in
    the descriptor's layout, written before a ``fence_async_shared``; reuse it after
    ``tma.store_wait``). Triton 3.6's Gluon builds the op (GluonOpBuilder.
    create_async_tma_reduce) but exports no wrapper for it."""
    coord = _semantic._convert_to_ir_values(coord, require_i64=False)
    _semantic.builder.create_async_tma_reduce(ir.DESCRIPTOR_REDUCE_KIND.ADD,
                                              tensor_desc.handle, coord, src.handle)


# 2^f on [-0.5, 0.5], c0 = 1 (so 2^-127 comes out exactly 0): a degree-4 polynomial fitted
# for relative error (numpy, iteratively reweighted least squares; 2.9e-6 at most in fp32
# Horner form, against MUFU.EX2's ~1e-7)
_EXP2_C1 = gl.constexpr(0.6931242346763611)
_EXP2_C2 = gl.constexpr(0.24024099111557007)
_EXP2_C3 = gl.constexpr(0.055906228721141815)
_EXP2_C4 = gl.constexpr(0.009582766331732273)


@gluon.jit
def exp2_fma(x):
    """2^x on the FMA and integer pipes instead of the MUFU unit (FA4's trick for head
    dims where the exponentials, not the GEMMs, set the pace): round x to an integer j
    with the 1.5 * 2^23 add (its low mantissa bits then hold j), a polynomial in the
    fraction f = x - j, and j added to the exponent field. x below -127 gives exactly 0
    (-inf included); the result is for x <= 0 (softmax arguments)."""
    x = gl.maximum(x, -127.0)
    t = x + 12582912.0
    f = x - (t - 12582912.0)
    p = f * _EXP2_C4 + _EXP2_C3
    p = p * f + _EXP2_C2
    p = p * f + _EXP2_C1
    p = p * f + 1.0
    bits = p.to(gl.int32, bitcast=True) + (t.to(gl.int32, bitcast=True) << 23)
    return bits.to(gl.float32, bitcast=True)


@gluon.jit
def _halves(x):
    """The two column halves of a 2-D tensor (in the wgmma accumulator layout a thread
    holds columns of both, so this moves no data)."""
    M: gl.constexpr = x.shape[0]
    N: gl.constexpr = x.shape[1]
    return x.reshape([M, 2, N // 2]).permute(0, 2, 1).split()


@gluon.jit
def _join_halves(a, b):
    M: gl.constexpr = a.shape[0]
    N: gl.constexpr = a.shape[1]
    return gl.join(a, b).permute(0, 2, 1).reshape([M, 2 * N])


@gluon.jit
def exp2_mixed(x, EMU: gl.constexpr):
    """2^x with EMU of its four column quarters on ``exp2_fma`` and the rest on MUFU
    (EMU = 0: all MUFU, and none of the splitting is traced)."""
    if EMU == 0:
        y = gl.exp2(x)
    else:
        a, b = _halves(x)
        a0, a1 = _halves(a)
        b0, b1 = _halves(b)
        a0 = _exp2_either(a0, EMU >= 1)
        b0 = _exp2_either(b0, EMU >= 2)
        a1 = _exp2_either(a1, EMU >= 3)
        b1 = _exp2_either(b1, EMU >= 4)
        # the joins give x's layout with its registers in another order: the conversion
        # back renames registers (no data leaves its thread)
        y = gl.convert_layout(_join_halves(_join_halves(a0, a1), _join_halves(b0, b1)),
                              x.type.layout)
    return y


@gluon.jit
def _exp2_either(x, FMA: gl.constexpr):
    if FMA:
        y = exp2_fma(x)
    else:
        y = gl.exp2(x)
    return y


@gluon.constexpr_function
def mma_layout(num_warps, n):
    """wgmma accumulator layout: each warp 16 rows, n columns per instruction (n <= 256;
    k = 16 for 16-bit inputs)."""
    return gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, n, 16]
    )


@gluon.jit
def tile_ids(TILE_MAJOR: gl.constexpr, tile_heads=1, rows=None):
    """(tile, batch * head, tile count) of this program on the grid (tiles, B * heads).
    The block scheduler launches blockIdx.x fastest, so that grid runs head-major: a
    head's tiles in order, then the next head's, and with causal masks the last heads'
    heaviest tiles start near the end. TILE_MAJOR (HopperBwdConfig.tile_major, the
    backward's key tiles; HopperFwdConfig.tile_heads, stage A's query tiles) reorders
    the launch in blocks of ``tile_heads`` heads (the last block what is left): within a
    block tile t of every head goes before tile t + 1 of any, so the heaviest tiles of
    the block's heads start first, and a block's heads still share their reads in L2.
    ``tile_heads`` = B * heads is a fully tile-major order. ``rows``: the grid's first
    rows that are tiles (the dK/dV kernel's finishing programs, HopperBwdConfig.dq_finish,
    come after them); None: every row."""
    n_tiles = gl.num_programs(0)
    if TILE_MAJOR:
        if rows is None:
            heads = gl.num_programs(1)
        else:
            heads = rows
        lin = gl.program_id(1) * n_tiles + gl.program_id(0)  # the launch order
        block = lin // (n_tiles * tile_heads)
        r = lin - block * n_tiles * tile_heads
        width = gl.minimum(tile_heads, heads - block * tile_heads)
        tile = r // width
        return tile, block * tile_heads + r - tile * width, n_tiles
    else:
        return gl.program_id(0), gl.program_id(1), n_tiles


@gluon.jit
def kv_tile_range(start_m, seqlen_q, seqlen_k, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                  CAUSAL: gl.constexpr):
    """(n_full, n_tiles) of the query tile at start_m: key tiles [0, n_full) need no
    mask, [n_full, n_tiles) do (causal band, ragged last tile)."""
    if CAUSAL:
        diag = seqlen_k - seqlen_q
        hi = gl.maximum(gl.minimum(seqlen_k, start_m + BLOCK_M + diag), 0)
        full = gl.maximum(gl.minimum(seqlen_k, start_m + diag + 1), 0)
    else:
        hi = seqlen_k
        full = seqlen_k
    n_tiles = (hi + BLOCK_N - 1) // BLOCK_N
    n_full = gl.minimum(full // BLOCK_N, n_tiles)
    return n_full, n_tiles


@gluon.jit
def scores_masked(qk, t, rows, seqlen_k, diag, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr,
                  left=0, HAS_LEFT: gl.constexpr = False):
    """-inf where key t * BLOCK_N + c is past seqlen_k, (causal) right of the diagonal,
    or (HAS_LEFT, a sliding window) more than ``left`` keys left of it. ``qk`` is (rows,
    keys); ``rows`` the query indices in SliceLayout(1, qk's layout)."""
    c = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, qk.type.layout))
    cols = t * BLOCK_N + c
    keep = cols[None, :] < seqlen_k
    if CAUSAL:
        keep = keep & (cols[None, :] <= rows[:, None] + diag)
    if HAS_LEFT:
        keep = keep & (cols[None, :] >= rows[:, None] + diag - left)
    return gl.where(keep, qk, float("-inf"))


@gluon.jit
def window_tile_range(start_m, seqlen_q, seqlen_k, left, n_full, n_tiles,
                      BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr):
    """A sliding window's key tiles for the query tile at start_m (rows see keys from
    row + diag - left on): (lo, a, b). Tiles [lo, a) are cut by the window's left edge
    (masked), [a, b) need no mask, [b, n_tiles) the causal band or the ragged end
    (masked); ``n_full`` / ``n_tiles`` from ``kv_tile_range``. Tiles left of lo hold no
    key any row of the tile sees."""
    diag = seqlen_k - seqlen_q
    first = start_m + diag - left  # the lowest key the tile's first row sees
    lo = gl.minimum(gl.maximum(first, 0) // BLOCK_N, n_tiles)
    b = gl.maximum(n_full, lo)
    # tiles from `full` on start at or right of the last row's lowest key
    full = gl.maximum(first + BLOCK_M - 1 + BLOCK_N - 1, 0) // BLOCK_N
    a = gl.minimum(gl.maximum(full, lo), b)
    return lo, a, b


@gluon.jit
def issue_kv(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, t, b, hk, pred,
             BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr):
    """TMA-load key/value tile ``t`` of (batch b, KV head hk) into ring slot
    t % NUM_STAGES, each behind its own barrier (skipped if not pred): the K/V ring of
    the forward kernels and of the backward's dQ kernel."""
    issue_kv_slot(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, t % NUM_STAGES, t, b, hk,
                  pred, BLOCK_N)


@gluon.jit
def issue_kv_slot(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, s, t, b, hk, pred,
                  BLOCK_N: gl.constexpr, EARLY: gl.constexpr = False,
                  BARRIER: gl.constexpr = False):
    """``issue_kv`` into ring slot ``s``, for loops that visit tiles out of order.

    EARLY: both barriers armed (expect) before either copy, and with BARRIER the step's
    CTA barrier (every warp done reading the slot) between the two: Triton's barrier pass
    then puts fewer bar.sync around the expects (ptxas sm_90, the backward kernels' step
    loop: 3 instead of 4). Arming before the CTA barrier is safe: each warp has passed
    its wait on the slot's current phase, and the next phase cannot complete before the
    copies, which come after the barrier."""
    load_pair(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, s, b, t * BLOCK_N, hk, pred,
              EARLY, BARRIER)


@gluon.jit
def load_pair(a_desc, b_desc, a_smem, b_smem, a_bars, b_bars, s, b, row, head, pred,
              EARLY: gl.constexpr = False, BARRIER: gl.constexpr = False):
    """TMA-load two streamed tiles sharing coordinates (K / V, Q / dO) at (batch b, row,
    head) into ring slot ``s``, each behind its own barrier (skipped if not pred); with
    BARRIER the step's CTA barrier first (every warp done reading the slot). EARLY
    (``issue_kv_slot``'s): both barriers armed, then the CTA barrier, then both copies;
    else the barrier, then expect and copy per tile."""
    if EARLY:
        mbarrier.expect(a_bars.index(s), a_desc.block_type.nbytes, pred=pred)
        mbarrier.expect(b_bars.index(s), b_desc.block_type.nbytes, pred=pred)
        if BARRIER:
            gl.thread_barrier()
        tma.async_copy_global_to_shared(a_desc, [b, row, head, 0], a_bars.index(s),
                                        a_smem.index(s), pred=pred)
        tma.async_copy_global_to_shared(b_desc, [b, row, head, 0], b_bars.index(s),
                                        b_smem.index(s), pred=pred)
    else:
        if BARRIER:
            gl.thread_barrier()
        mbarrier.expect(a_bars.index(s), a_desc.block_type.nbytes, pred=pred)
        tma.async_copy_global_to_shared(a_desc, [b, row, head, 0], a_bars.index(s),
                                        a_smem.index(s), pred=pred)
        mbarrier.expect(b_bars.index(s), b_desc.block_type.nbytes, pred=pred)
        tma.async_copy_global_to_shared(b_desc, [b, row, head, 0], b_bars.index(s),
                                        b_smem.index(s), pred=pred)


@gluon.jit
def seq_bounds(CU_Q, CU_K, b):
    """(first query row, query length, first key row, key length) of sequence ``b`` of a
    packed varlen batch (int32 cu_seqlens)."""
    q0 = gl.load(CU_Q + b)
    k0 = gl.load(CU_K + b)
    return q0, gl.load(CU_Q + b + 1) - q0, k0, gl.load(CU_K + b + 1) - k0


@gluon.jit
def seq_desc(base, row0, rows, like):
    """Device-side TMA descriptor over rows [row0, row0 + rows) of the packed tensor at
    ``base`` that host descriptor ``like`` ((1, T, H, D)) spans (the varlen forward's and
    backward's per-sequence descriptors; the launch needs ``scratch_allocator``): same
    box, layout and strides (at least one row: a descriptor needs a non-empty shape; an
    empty sequence gets no tiles that read it, or reads it masked)."""
    return tma.make_tensor_descriptor(
        base + row0.to(gl.int64) * like.strides[1],
        shape=[1, gl.maximum(rows, 1), like.shape[2], like.shape[3]],
        strides=[like.strides[0], like.strides[1], like.strides[2], 1],
        block_shape=like.block_type.shape, layout=like.layout)


@gluon.jit
def alloc_ring_pair(a_desc, b_desc, NUM_STAGES: gl.constexpr):
    """A NUM_STAGES-deep shared-memory ring of two streamed tiles (K and V, or Q and dO)
    shaped like the descriptors' blocks, and one barrier per slot and tile, initialised
    (count 1). Returns (a_ring, b_ring, a_bars, b_bars); the caller makes all its barrier
    inits visible (fence_async_shared, thread_barrier) before the first TMA load."""
    a_ring = gl.allocate_shared_memory(a_desc.dtype, [NUM_STAGES] + a_desc.block_type.shape,
                                       a_desc.layout)
    b_ring = gl.allocate_shared_memory(b_desc.dtype, [NUM_STAGES] + b_desc.block_type.shape,
                                       b_desc.layout)
    a_bars = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    b_bars = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(a_bars.index(i), count=1)
        mbarrier.init(b_bars.index(i), count=1)
    return a_ring, b_ring, a_bars, b_bars


@contextlib.contextmanager
def scratch_allocator(device: torch.device):
    """Global scratch for kernels that build TMA descriptors on the device (128 bytes per
    descriptor and program; hopper_fwd's varlen launch): Triton asks the allocator set in
    this context, a torch allocation on ``device`` (so CUDA graphs and the caching
    allocator see it). The caller's own allocator, if any, is restored on exit."""
    def alloc(size: int, alignment: int, stream):
        return torch.empty(size, dtype=torch.int8, device=device)

    token = _allocation._allocator.set(alloc)
    try:
        yield
    finally:
        _allocation._allocator.reset(token)


# ----------------------------------------------------------------------------------
# attention dropout in the wgmma accumulator layout (the Gluon forward): the draw of
# _common.dropout_keep, bit for bit, and the bit words of _common.store_dropout_bits
# ----------------------------------------------------------------------------------

_PHILOX_KEY_A = gl.constexpr(0x9E3779B9)
_PHILOX_KEY_B = gl.constexpr(0xBB67AE85)
_PHILOX_ROUND_A = gl.constexpr(0xD2511F53)
_PHILOX_ROUND_B = gl.constexpr(0xCD9E8D57)


@gluon.jit
def philox4x32(k0, k1, c0, c1, c2, c3):
    """Ten rounds of Philox-4x32 on uint32 counters (c0..c3, tensors of one shape and
    layout) under the key (k0, k1) (uint32 scalars): tl.philox's rounds, written for
    Gluon (which has no tl.random); four uint32 outputs."""
    for _ in gl.static_range(10):
        pb = c2.to(gl.uint64) * _PHILOX_ROUND_B
        pa = c0.to(gl.uint64) * _PHILOX_ROUND_A
        c0 = (pb >> 32).to(gl.uint32) ^ c1 ^ k0
        c2 = (pa >> 32).to(gl.uint32) ^ c3 ^ k1
        c1 = pb.to(gl.uint32)
        c3 = pa.to(gl.uint32)
        k0 = k0 + _PHILOX_KEY_A
        k1 = k1 + _PHILOX_KEY_B
    return c0, c1, c2, c3


@gluon.jit
def _quarter(x):
    """The (R // 16, 8, C // 16, 4) part of an (R, C) wgmma-layout tile at rows i % 16 < 8
    and even columns j % 16 < 8 (a thread holds rows r, r + 8 and columns c, c + 1, c +
    8, c + 9, c even: the reshape / permute / splits move no data)."""
    R: gl.constexpr = x.shape[0]
    C: gl.constexpr = x.shape[1]
    # (R16, row half, 8 rows, C16, key half, 4 key pairs, parity) -> halves and parity last
    y = x.reshape([R // 16, 2, 8, C // 16, 2, 4, 2]).permute(0, 2, 3, 5, 6, 4, 1)
    y, _ = y.split()  # row half 0
    y, _ = y.split()  # key half 0
    y, _ = y.split()  # even keys
    return y


@gluon.jit
def _unquarter(a, b, c, d, layout: gl.constexpr):
    """The (R, C) tile in ``layout`` (the wgmma accumulator layout) from four (R // 16, 8,
    C // 16, 4, 2) parts: rows i % 16 < 8 / >= 8 and columns j % 16 < 8 / >= 8 in a (low,
    low), b (low, high), c (high, low), d (high, high), the last axis the column's parity:
    _quarter's inverse (a renaming of registers)."""
    R: gl.constexpr = a.shape[0] * 16
    C: gl.constexpr = a.shape[2] * 16
    # (R16, 8 rows, C16, 4 key pairs, parity, key half, row half)
    x = gl.join(gl.join(a, b), gl.join(c, d)).permute(0, 6, 1, 2, 5, 3, 4).reshape([R, C])
    return gl.convert_layout(x, layout, assert_trivial=True)


@gluon.jit
def _keeps16(r, thr16):
    """The keep masks (-1 kept, 0 dropped; int32) of the two 16-bit numbers of Philox
    number ``r`` (uint32), low half then high half, against the threshold ``thr16`` = T
    << 16 (_common.dropout_threshold): h >= T tested as (r << 16) >= T << 16 and r >= T <<
    16, one unsigned compare and a select each, in inline PTX so that the masks stay
    integers (LLVM would fold a mask ANDed with constants back into selects on a
    predicate that ptxas then saves and restores: P2R / ISETP pairs)."""
    return gl.inline_asm_elementwise(
        "{ .reg .pred p, q; .reg .b32 t; shl.b32 t, $2, 16; setp.ge.u32 p, t, $3;"
        " setp.ge.u32 q, $2, $3; selp.b32 $0, -1, 0, p; selp.b32 $1, -1, 0, q; }",
        "=r,=r,r,r", [r, thr16.to(gl.uint32, bitcast=True)], dtype=(gl.int32, gl.int32),
        is_pure=True, pack=1)


@gluon.jit
def _keep_pair(r, thr16):
    lo, hi = _keeps16(r, thr16)
    return gl.join(lo, hi)


@gluon.jit
def dropout_keeps_mma(seed, rng_offset, bh, rows, cols, thr16):
    """The keep mask (-1 kept, 0 dropped; int32) of _common.dropout_keep, bit for bit, for
    query ``rows`` and key ``cols`` of batch * head ``bh``, as an (R, C) tile in their
    parent layout (the wgmma accumulator layout; rows / cols 1-D in its slices, aligned
    runs of 16): one Philox call per (row pair, key quad), counter (8 * (i // 16) + i %
    8, 4 * (j // 16) + (j % 8) // 2, bh, rng_offset), key (seed low, seed high), whose
    four numbers hold the 16-bit draws of rows i, i + 8 and keys j, j + 1, j + 8, j + 9,
    all eight in the thread that holds them; ``thr16``: the threshold T << 16 (int32
    bits; T < 65536)."""
    layout: gl.constexpr = rows.type.layout.parent
    R: gl.constexpr = rows.shape[0]
    C: gl.constexpr = cols.shape[0]
    zero = gl.zeros([R, C], gl.int32, layout)
    rp = _quarter(((rows // 16) * 8 + rows % 8)[:, None] + zero)
    cp = _quarter(((cols // 16) * 4 + (cols % 8) // 2)[None, :] + zero)
    seed64 = seed.to(gl.int64)
    k0 = (seed64 & 0xFFFFFFFF).to(gl.uint32)
    k1 = ((seed64 >> 32) & 0xFFFFFFFF).to(gl.uint32)
    c2 = (rp * 0 + bh).to(gl.uint32, bitcast=True)
    c3 = (rp * 0 + rng_offset.to(gl.int32)).to(gl.uint32, bitcast=True)
    a, b, c, d = philox4x32(k0, k1, rp.to(gl.uint32, bitcast=True),
                            cp.to(gl.uint32, bitcast=True), c2, c3)
    return _unquarter(_keep_pair(a, thr16), _keep_pair(b, thr16), _keep_pair(c, thr16),
                      _keep_pair(d, thr16), layout)


def dropout_thr16(dropout_p: float):
    """The Gluon forward's threshold argument for ``dropout_p``: T << 16 as an int32 bit
    pattern (T = _common.dropout_threshold), or None where no element can be kept (T =
    65536: dropout_p within 2^-17 of 1; the caller runs the portable kernel)."""
    from flashtile.ops._common import dropout_threshold

    t = dropout_threshold(dropout_p)
    if t >= 65536:
        return None
    t16 = t << 16
    return t16 - 2**32 if t16 >= 2**31 else t16


@gluon.constexpr_function
def _along(layout, dim, rank):
    """The 1-D slice of a rank-``rank`` layout along ``dim`` (every other dim sliced out,
    the last first, so that x[None, .., :, .., None] expands it back)."""
    for d in reversed(range(rank)):
        if d != dim:
            layout = gl.SliceLayout(d, layout)
    return layout


@gluon.jit
def _idx(n: gl.constexpr, dim: gl.constexpr, layout: gl.constexpr, RANK: gl.constexpr = 5):
    """arange(n) along ``dim`` of a rank-RANK ``layout``, expanded to that rank (the other
    dims in increasing order, as _along sliced them)."""
    x = gl.arange(0, n, layout=_along(layout, dim, RANK))
    for d in gl.static_range(RANK):
        if d != dim:
            x = gl.expand_dims(x, d)
    return x


@gluon.jit
def _block_view(x, TRANS: gl.constexpr):
    """An (R, C) wgmma-layout tile renamed (no data moves) to the rank-5 view of its bit
    blocks (_common.BITS_PAD): (block row, block column, word (r % 16) // 8 * 2 + c % 2,
    the lane bits that pick the bit: r % 8, (c % 8) // 2). R, C: query rows and keys, or
    with TRANS keys and query rows (the dK/dV kernel's tiles: there c % 2 and (c % 8) //
    2 are lane bits and r % 8 is a lane pair and a register, so the view is (block row,
    block column, word, r % 8, (c % 8) // 2) all the same)."""
    R: gl.constexpr = x.shape[0]
    C: gl.constexpr = x.shape[1]
    if TRANS:  # rows are keys c = 16a + 8kh + 2lk + cb, columns rows r = 16b + 8rh + 2lq + e
        y = x.reshape([R // 16, 2, 4, 2, C // 16, 2, 4, 2])  # a, kh, lk, cb, b, rh, lq, e
        y = y.permute(4, 0, 1, 5, 3, 6, 7, 2)  # b, a, kh, rh, cb, lq, e, lk
        y = y.reshape([C // 16, R // 8, 4, 8, 4])  # b, c8, (rh, cb), r % 8, (c % 8) // 2
    else:  # rows r = 16b + 8rh + rr, columns c = 8a + 2cq + e
        y = x.reshape([R // 16, 2, 8, C // 8, 4, 2])  # b, rh, rr, a, cq, e
        y = y.permute(0, 3, 1, 5, 2, 4)  # b, a, rh, e, rr, cq
        y = y.reshape([R // 16, C // 8, 4, 8, 4])
    return y


@gluon.jit
def _block_unview(y, R: gl.constexpr, C: gl.constexpr, layout: gl.constexpr,
                  TRANS: gl.constexpr):
    """_block_view's inverse, back in ``layout`` (a renaming of registers)."""
    if TRANS:
        x = y.reshape([C // 16, R // 16, 2, 2, 2, 4, 2, 4])  # b, a, kh, rh, cb, lq, e, lk
        x = x.permute(1, 2, 7, 4, 0, 3, 5, 6).reshape([R, C])
    else:
        x = y.reshape([R // 16, C // 8, 2, 2, 8, 4])  # b, a, rh, e, rr, cq
        x = x.permute(0, 2, 4, 1, 5, 3).reshape([R, C])
    return gl.convert_layout(x, layout, assert_trivial=True)


@gluon.jit
def _block_offsets(view_layout: gl.constexpr, B: gl.constexpr, A: gl.constexpr, b0, a0,
                   NC8):
    """Word offsets (from the head's base) of a rank-5 block view: ((b0 + b) * NC8 + a0 +
    a) * 4 + w, broadcast over the lane dims (3, 4): every lane of a warp addresses the
    same words, and the 4 words of a block are contiguous (16-byte accesses)."""
    b = _idx(B, 0, view_layout)
    a = _idx(A, 1, view_layout)
    w = _idx(4, 2, view_layout)
    full = gl.zeros([B, A, 4, 8, 4], gl.int32, view_layout)
    return ((b0 + b) * NC8 + a0 + a) * 4 + w + full


@gluon.jit
def _ballot(keep):
    """Each element's warp ballot of keep != 0 (vote.sync over the 32 lanes holding the
    same register)."""
    return gl.inline_asm_elementwise(
        "{ .reg .pred p; setp.ne.s32 p, $1, 0; vote.sync.ballot.b32 $0, p, 0xffffffff; }",
        "=r,r", [keep], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def store_bits_mma(BITS, keep, bh, row0, col0, seqlen_q, seqlen_k):
    """Write an (R, C) tile of dropout_keeps_mma's masks (-1 kept; the wgmma accumulator
    layout, query rows x keys, at row0 / col0 multiples of R / C, both dividing
    _common.BITS_PAD) into its bit blocks: each word is one warp ballot of one register,
    and a thread stores its warp's words 4 at a time (the same from every lane). Bits
    past seqlen_q / seqlen_k fall in the padding or are read masked."""
    R: gl.constexpr = keep.shape[0]
    C: gl.constexpr = keep.shape[1]
    gl.static_assert(128 % R == 0 and 128 % C == 0, "bit blocks: tiles dividing 128")
    base, NC8 = _bits_block(BITS, bh, seqlen_q, seqlen_k)
    view = _block_view(_ballot(keep), False)
    view_layout: gl.constexpr = view.type.layout
    offs = _block_offsets(view_layout, R // 16, C // 8, row0 // 16, col0 // 8, NC8)
    gl.store(base + offs, view)


_TRANSPOSE32 = gl.constexpr(
    "{ .reg .b32 y, a, mm; .reg .pred p; mov.b32 $0, $1;"
    + "".join(
        f" shfl.sync.bfly.b32 y, $0, {j}, 0x1f, -1; and.b32 a, $2, {j};"
        f" setp.ne.u32 p, a, 0; @p shr.b32 y, y, {j}; @!p shl.b32 y, y, {j};"
        f" selp.b32 mm, {m}, {~m & 0xFFFFFFFF}, p; lop3.b32 $0, $0, y, mm, 0xD8;"
        for j, m in ((16, 0x0000FFFF), (8, 0x00FF00FF), (4, 0x0F0F0F0F), (2, 0x33333333),
                     (1, 0x55555555)))
    + " }"
)


@gluon.jit
def _transpose32(x, lane):
    """A warp's 32 x 32 bit transpose: lane L gets bit L of every lane's word, lane k's
    as bit k. Five butterfly stages (a shuffle, a shift, one LOP3 each): stage j swaps
    the j-blocks off the diagonal between lanes L and L ^ j."""
    return gl.inline_asm_elementwise(_TRANSPOSE32, "=r,r,r", [x, lane], dtype=gl.int32,
                                     is_pure=False, pack=1)


@gluon.constexpr_function
def _lane_words(R, C, TRANS):
    """Whether a tile reads its bit blocks a warp's 32 words at a time, one per lane,
    and transposes them: query rows x keys tiles of 64 keys or a multiple (8 blocks of 4
    words per 16-row band and 64 keys)."""
    return (not TRANS) and C % 64 == 0


@gluon.jit
def bits_words_mma(bits, row0, col0, layout: gl.constexpr, R: gl.constexpr, C: gl.constexpr,
                   TRANS: gl.constexpr, CG: gl.constexpr = False):
    """The bit-block words of an (R, C) tile in the wgmma layout ``layout``: query rows x
    keys at (row0, col0) (the dQ kernel), or with TRANS keys x query rows at (col0, row0)
    (the dK/dV kernel); ``bits`` = (base, NC8) of the head (_common._bits_block). Every
    element gets a word holding its bit at ``bits_keep``'s position. Query rows x keys
    tiles of 64 keys or a multiple (_lane_words): each lane loads one of its band's 32
    words per 64 keys (128 coalesced bytes per warp) and a warp transpose hands it its
    own bit of all 32, as bit (block, word) of one word: one load and five shuffles per
    32 elements. CG: the loads cached in L2 only (words that another warp of this CTA
    wrote while it runs, which a stale L1 line must not hide). Otherwise each thread loads
    the words it needs (4 at a time per block without TRANS), the same by every lane
    that needs them. Tiles past seqlen_q / seqlen_k read padding or stale words: their
    scores are masked anyway. Issued before the tile's GEMMs are waited for, so the
    loads overlap them."""
    base, NC8 = bits
    like = _block_view(gl.zeros([R, C], gl.int32, layout), TRANS)
    view_layout: gl.constexpr = like.type.layout
    if _lane_words(R, C, TRANS):  # the view as (band, 64-key group, block, word, lanes)
        G: gl.constexpr = C // 64
        like6 = like.reshape([R // 16, G, 8, 4, 8, 4])
        l6: gl.constexpr = like6.type.layout
        band_layout: gl.constexpr = gl.SliceLayout(2, gl.SliceLayout(3, l6))
        b = _idx(R // 16, 0, band_layout, 4)
        g = _idx(G, 1, band_layout, 4)
        lane = 4 * _idx(8, 2, band_layout, 4) + _idx(4, 3, band_layout, 4)
        offs = ((row0 // 16 + b) * NC8 + col0 // 8 + 8 * g) * 4 + lane
        if CG:
            w = gl.load(base + offs, cache_modifier=".cg")
        else:
            w = gl.load(base + offs)
        t = _transpose32(w, lane + 0 * (b + g))
        words6 = t[:, :, None, None, :, :] + gl.zeros([R // 16, G, 8, 4, 8, 4], gl.int32, l6)
        words = _block_unview(words6.reshape([R // 16, C // 8, 4, 8, 4]), R, C, layout,
                              TRANS)
    else:
        if TRANS:
            offs = _block_offsets(view_layout, C // 16, R // 8, row0 // 16, col0 // 8, NC8)
        else:
            offs = _block_offsets(view_layout, R // 16, C // 8, row0 // 16, col0 // 8, NC8)
        words = _block_unview(gl.load(base + offs), R, C, layout, TRANS)
    return words


@gluon.jit
def bits_keep(words, layout: gl.constexpr, MASK: gl.constexpr = False):
    """keep of each element of a query rows x keys bits_words_mma tile (the TRANS tiles of
    the dK/dV kernel: bits_masks_t): its bit there, 4 * (r % 8) + (c % 8) // 2 (the
    element's own lane), or for tiles of 64 keys or a multiple (transposed words) its
    block and word, 4 * (c // 8) + 2 * ((r % 16) // 8) + c % 2 (a register constant).
    MASK: int32 masks (-1 kept, 0 dropped; for `dropped`): the bit shifted to the sign,
    then shifted back arithmetically."""
    R: gl.constexpr = words.shape[0]
    C: gl.constexpr = words.shape[1]
    i = gl.arange(0, R, layout=gl.SliceLayout(1, layout))[:, None]
    j = gl.arange(0, C, layout=gl.SliceLayout(0, layout))[None, :]
    if _lane_words(R, C, False):
        bit = 4 * ((j // 8) % 8) + 2 * ((i % 16) // 8) + j % 2
    else:
        bit = 4 * (i % 8) + (j % 8) // 2
    if MASK:
        keep = (words << (31 - bit)) >> 31
    else:
        keep = ((words >> bit) & 1) != 0
    return keep


_PAIR_MASKS = gl.constexpr(
    "{ .reg .b32 t; shr.b32 t, $2, $3; shl.b32 $0, t, 31; shr.s32 $0, $0, 31;"
    " shl.b32 $1, t, 27; shr.s32 $1, $1, 31; }")
_PAIR_MASKS_AGAIN = gl.constexpr(  # the same masks written otherwise (bits_masks_t)
    "{ .reg .b32 t; shr.b32 t, $2, $3; bfe.s32 $0, t, 0, 1; bfe.s32 $1, t, 4, 1; }")


@gluon.jit
def bits_masks_t(words, layout: gl.constexpr, AGAIN: gl.constexpr = False):
    """The keep masks (-1 kept, 0 dropped; int32, for `dropped`) of a TRANS
    bits_words_mma tile (keys i x query rows j, the dK/dV kernel): bits_keep's bit 4 * (j
    % 8) + (i % 8) // 2 as masks. A thread's two columns j, j + 1 (j even) share their
    word, and their bits sit 4 apart from a position that is the same in every register
    of the thread (its lane): one shift per word pair, then two shifts per mask (inline
    PTX, so that the masks stay integers). AGAIN: the same masks by another instruction
    sequence, so that a second use recomputes them from the words (half the registers)
    instead of keeping the first use's tile alive."""
    R: gl.constexpr = words.shape[0]
    C: gl.constexpr = words.shape[1]
    w, _ = words.reshape([R, C // 2, 2]).split()  # the even columns' words
    pl: gl.constexpr = w.type.layout
    i = gl.arange(0, R, layout=gl.SliceLayout(1, pl))[:, None]
    jp = gl.arange(0, C // 2, layout=gl.SliceLayout(0, pl))[None, :]
    bit = 4 * ((2 * jp) % 8) + (i % 8) // 2
    m0, m1 = gl.inline_asm_elementwise(_PAIR_MASKS_AGAIN if AGAIN else _PAIR_MASKS,
                                       "=r,=r,r,r", [w, bit],
                                       dtype=(gl.int32, gl.int32), is_pure=True, pack=1)
    return gl.convert_layout(gl.join(m0, m1).reshape([R, C]), layout, assert_trivial=True)


@gluon.jit
def dropped(p, keep):
    """fp32 ``p`` with 0 where ``keep`` (dropout_keeps_mma's mask: -1 kept, 0 dropped) is 0:
    one AND of the bits."""
    return (p.to(gl.int32, bitcast=True) & keep).to(gl.float32, bitcast=True)


# ----------------------------------------------------------------------------------
# intra-kernel timing (scripts/trace_stage_c.py): one partition's clock, stored once
# ----------------------------------------------------------------------------------


@gluon.jit
def trace_stamp(TRACE, slot, value=None):
    """Store the global nanosecond timer (``%globaltimer``; or ``value`` when given) at
    TRACE[slot] from the partition's thread 0: a timestamp of where this warpgroup's
    program is, for diagnosing a kernel's timeline on the GPU. Every thread reads the
    timer; one stores it."""
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
    offs = gl.arange(0, 32 * gl.num_warps(), layout=layout)
    if value is None:
        t = gl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [offs],
                                      dtype=gl.int64, is_pure=False, pack=1)
    else:
        t = gl.zeros([32 * gl.num_warps()], gl.int64, layout) + value
    gl.store(TRACE + slot + offs * 0, t, mask=offs == 0)


@gluon.jit
def smid():
    """The SM this thread runs on (``%smid``), an int32 scalar-like tensor per thread."""
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
    offs = gl.arange(0, 32 * gl.num_warps(), layout=layout)
    return gl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [offs], dtype=gl.int32,
                                     is_pure=False, pack=1)
