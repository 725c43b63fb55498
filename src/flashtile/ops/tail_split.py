"""The last wave's key tiles split over their query tiles (``HopperBwdConfig.tail_split``).

The one-kernel Gluon backward (ops/hopper_bwd.py, DQ_REDUCE) runs one program of 255
registers per SM, one program per (key tile, head), every program of a non-causal call
the same length. At issue 4's hd 128 shapes that is 2048 programs on 132 SMs: 15 full
waves and a 16th of 68 programs, during which 64 SMs idle, ~3% of the kernel. ncu
(`s31a`, docs/performance.md step 78) read the kernel's time as 16 x (6 us + 64 steps of
2.4 us) at 4k and 16 x (6 + 256 x 2.4) at 16k: the 16 is the wave count, at both lengths.

Here the last ``R`` programs of the launch order are split, each into ``S`` pieces that
take contiguous ranges of its query tiles, so the last wave's work spreads over every SM.
A piece adds its dQ shares as the whole program would (integer adds with fixed point:
dQ is bitwise unchanged), and writes its dK / dV partial sums (fp32, dK already scaled)
to a workspace; ``combine`` then sums each tile's pieces in piece order and writes dK /
dV, so the result is repeatable (a fixed sum order for a given shape and SM count).

``plan`` picks (R, S) with a list-scheduling model of the launch (blocks start in launch
order on the first free SM): a program costs ``FIXED_STEPS`` + its query tiles, a piece
``PIECE_STEPS`` more (its partial stores), the combine ``COMBINE_STEPS`` +
``COMBINE_STEPS_PER_PIECE`` per piece; no split unless it saves ``MIN_GAIN`` of the
modelled time. The constants are step 78's numbers in units of one step (one 64-row
query tile against a 128-key tile, ~2.4 us at hd 128 on an H100), not measured per shape.

Measured (session 47, `s47a`, H100, benchmarks/results.md): the model predicted +1.1% /
+1.5-2.1% backward at hd 128 non-causal 4k / 16k; sustained timing read -0.6% at 4k and
-0.1% / -1.4% at 16k (3 / 7 pieces). At the GPU's power cap SMs idle in the last wave
let the busy ones clock up, so a partial wave costs less time than the model counts.
Opt-in (HopperBwdConfig.tail_split = 0 everywhere shipped).
"""

from __future__ import annotations

import functools
import heapq

import torch
import triton
import triton.language as tl

FIXED_STEPS = 2.5  # a program's fixed cost (6 us / 2.4 us per step, step 78)
PIECE_STEPS = 0.5  # a piece's partial stores (128 keys x D x 2 fp32 from registers)
COMBINE_STEPS = 2.0  # the combine launch
COMBINE_STEPS_PER_PIECE = 0.02  # ... and its reads (2 x 128 x 128 fp32 per piece)
MIN_GAIN = 0.005  # split only if the model saves at least this fraction


def _makespan(n_full: int, full_len: float, pieces: list[float], slots: int) -> float:
    """When the last block ends: ``n_full`` blocks of ``full_len``, then ``pieces``, each
    started in launch order on the first free slot of ``slots``."""
    q, extra = divmod(n_full, slots)
    free = [(q + 1) * full_len] * extra + [q * full_len] * (slots - extra)
    heapq.heapify(free)
    for p in pieces:
        heapq.heappush(free, heapq.heappop(free) + p)
    return max(free)


def piece_bounds(piece: int, split: int, n_m: int) -> tuple[int, int]:
    """Query tiles [lo, hi) of piece ``piece`` of ``split`` over a program's ``n_m`` (the
    kernel's formula: lo = piece * n_m // split)."""
    return piece * n_m // split, (piece + 1) * n_m // split


@functools.lru_cache(maxsize=256)
def plan(programs: int, slots: int, steps: int, max_split: int) -> tuple[int, int]:
    """(R, S): split the last R of ``programs`` equal programs of ``steps`` query tiles,
    on ``slots`` SMs, into S pieces each; (0, 1) for no split. R is the last partial
    wave, or it and one full wave more; 2 <= S <= min(max_split, steps)."""
    if programs < 1 or slots < 1 or steps < 2 or max_split < 2:
        return 0, 1
    full_len = FIXED_STEPS + steps
    best, choice = _makespan(programs, full_len, [], slots), (0, 1)
    base = best
    tail = programs % slots
    for r in (tail, tail + slots):
        if r == 0 or r > programs:
            continue
        for s in range(2, min(max_split, steps) + 1):
            sizes = [b - a for a, b in (piece_bounds(p, s, steps) for p in range(s))]
            pieces = [FIXED_STEPS + PIECE_STEPS + n for n in sizes] * r
            t = (_makespan(programs - r, full_len, pieces, slots) + COMBINE_STEPS
                 + COMBINE_STEPS_PER_PIECE * r * s)
            if t < best:
                best, choice = t, (r, s)
    return choice if best <= base * (1 - MIN_GAIN) else (0, 1)


@triton.jit
def _combine_kernel(PART, DK, DV, n_full, n_kt, key_heads, seqlen_k,
                    s_kb, s_kn, s_kh, s_vb, s_vn, s_vh,
                    SPLIT: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
                    ROWS: tl.constexpr):
    """Program (r, row block): tile n_full + r of the launch order (key tile t % n_kt of
    program head t // n_kt), its pieces' partials summed in piece order, cast, stored."""
    r = tl.program_id(0)
    t = n_full + r
    pid_n = t % n_kt
    bh = t // n_kt
    b = bh // key_heads
    h = bh % key_heads
    rows = tl.program_id(1) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, HEAD_DIM)
    offs = rows[:, None] * HEAD_DIM + cols[None, :]
    acc_k = tl.zeros([ROWS, HEAD_DIM], tl.float32)
    acc_v = tl.zeros([ROWS, HEAD_DIM], tl.float32)
    for s in tl.static_range(SPLIT):
        base = PART + (r * SPLIT + s).to(tl.int64) * (2 * BLOCK_N * HEAD_DIM)
        acc_k += tl.load(base + offs)
        acc_v += tl.load(base + BLOCK_N * HEAD_DIM + offs)
    keys = pid_n * BLOCK_N + rows
    ok = (keys < seqlen_k)[:, None]
    kk = keys.to(tl.int64)[:, None]
    tl.store(DK + b.to(tl.int64) * s_kb + kk * s_kn + h * s_kh + cols[None, :],
             acc_k.to(DK.dtype.element_ty), mask=ok)
    tl.store(DV + b.to(tl.int64) * s_vb + kk * s_vn + h * s_vh + cols[None, :],
             acc_v.to(DV.dtype.element_ty), mask=ok)


def workspace(r: int, s: int, block_n: int, head_dim: int,
              device: torch.device) -> torch.Tensor:
    """The pieces' partials: (R * S, 2, block_n, head_dim) fp32, piece p of tile i at row
    i * S + p, dK (scaled) then dV; every element is written by its piece."""
    return torch.empty((r * s, 2, block_n, head_dim), dtype=torch.float32, device=device)


def combine(part: torch.Tensor, split: int, n_full: int, n_kt: int, key_heads: int,
            dk: torch.Tensor, dv: torch.Tensor, block_n: int, rows: int = 32) -> None:
    """dk / dv ((B, N, key_heads, D), unit last stride) of the split tiles: each the sum
    of its ``split`` partials in ``part`` (``workspace``), in piece order."""
    n_tiles, head_dim = part.shape[0] // split, part.shape[-1]
    if n_tiles == 0:
        return
    _combine_kernel[(n_tiles, triton.cdiv(block_n, rows))](
        part, dk, dv, n_full, n_kt, key_heads, dk.shape[1], *dk.stride()[:3],
        *dv.stride()[:3], SPLIT=split, BLOCK_N=block_n, HEAD_DIM=head_dim, ROWS=rows)


def combine_reference(part: torch.Tensor, split: int, n_full: int, n_kt: int,
                      key_heads: int, dk: torch.Tensor, dv: torch.Tensor,
                      block_n: int) -> None:
    """``combine`` in torch (tests): the same tiles, the same sum order."""
    seqlen_k = dk.shape[1]
    parts = part.view(-1, split, 2, block_n, part.shape[-1])
    for r in range(parts.shape[0]):
        t = n_full + r
        pid_n, bh = t % n_kt, t // n_kt
        b, h = divmod(bh, key_heads)
        acc = torch.zeros_like(parts[r, 0])
        for s in range(split):
            acc = acc + parts[r, s]
        lo, hi = pid_n * block_n, min(pid_n * block_n + block_n, seqlen_k)
        dk[b, lo:hi, h] = acc[0, :hi - lo].to(dk.dtype)
        dv[b, lo:hi, h] = acc[1, :hi - lo].to(dv.dtype)
