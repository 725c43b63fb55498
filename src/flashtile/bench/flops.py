"""FLOP model and benchmark shapes (DESIGN.md section 6).

The shapes are those of the FlashAttention papers: bf16, 16k tokens in total, hidden
size 2048, so ``nheads = 2048 // head_dim`` and ``batch = 16384 // seqlen``.

FLOP model (the papers' convention, so numbers compare with theirs)::

    forward        4 * B * H * Sq * Sk * D      (two matmuls, 2 FLOPs per MAC)
    causal         half of the above            (the masked triangle is skipped)
    backward       2.5 * forward                (five matmuls instead of two)
    fwd + bwd      3.5 * forward

Recomputation in the backward is not counted, so a kernel that recomputes more scores
shows fewer TFLOPS, as it should.
"""

from __future__ import annotations

from dataclasses import dataclass

TOTAL_TOKENS = 16384
HIDDEN = 2048
SEQLENS = (1024, 4096, 16384)
HEAD_DIMS = (64, 128, 256)
BWD_FACTOR = 2.5
MODES = ("fwd", "fwd_bwd")

_MODE_FACTOR = {"fwd": 1.0, "bwd": BWD_FACTOR, "fwd_bwd": 1.0 + BWD_FACTOR}


@dataclass(frozen=True)
class Shape:
    """One attention problem, layout (batch, seqlen, nheads, head_dim), Sq == Sk."""

    batch: int
    seqlen: int
    nheads: int
    head_dim: int
    causal: bool
    dtype: str = "bfloat16"

    def label(self) -> str:
        """Compact text such as ``B4 S4096 H16 D128``."""
        return f"B{self.batch} S{self.seqlen} H{self.nheads} D{self.head_dim}"


def attn_fwd_flops(
    batch: int, nheads: int, seqlen_q: int, seqlen_k: int, head_dim: int, causal: bool
) -> float:
    """Forward FLOPs: ``4 * B * H * Sq * Sk * D``, halved for causal."""
    flops = 4.0 * batch * nheads * seqlen_q * seqlen_k * head_dim
    return flops / 2 if causal else flops


def attn_flops(shape: Shape, mode: str) -> float:
    """FLOPs of ``mode`` ("fwd", "bwd" or "fwd_bwd") for ``shape``."""
    if mode not in _MODE_FACTOR:
        raise ValueError(f"mode must be one of {sorted(_MODE_FACTOR)}, got {mode!r}")
    fwd = attn_fwd_flops(
        shape.batch, shape.nheads, shape.seqlen, shape.seqlen, shape.head_dim, shape.causal
    )
    return _MODE_FACTOR[mode] * fwd


def matmul_flops(m: int, n: int, k: int) -> float:
    """FLOPs of an (m, k) @ (k, n) matmul: ``2 * m * n * k``."""
    return 2.0 * m * n * k


def tflops(flops: float, ms: float) -> float:
    """Throughput in TFLOP/s of ``flops`` done in ``ms`` milliseconds."""
    return flops / (ms * 1e-3) / 1e12


def paper_shape(seqlen: int, head_dim: int, causal: bool) -> Shape:
    """The DESIGN.md shape for one (seqlen, head_dim, causal).

    ``batch = max(1, 16384 // seqlen)`` and ``nheads = 2048 // head_dim``.
    """
    if seqlen < 1:
        raise ValueError(f"seqlen must be >= 1, got {seqlen}")
    if head_dim < 8 or head_dim > 256 or head_dim % 8:
        raise ValueError(f"head_dim must be a multiple of 8 in [8, 256], got {head_dim}")
    return Shape(
        batch=max(1, TOTAL_TOKENS // seqlen),
        seqlen=seqlen,
        nheads=HIDDEN // head_dim,
        head_dim=head_dim,
        causal=causal,
    )


def paper_shapes(seqlens=SEQLENS, head_dims=HEAD_DIMS, causal=(False, True)) -> list[Shape]:
    """All shapes of the grid, ordered by causal, then head dim, then seqlen."""
    return [paper_shape(s, d, c) for c in causal for d in head_dims for s in seqlens]


# suite name -> function(seqlens, head_dims, causal) -> shapes; more suites (decode,
# varlen) add an entry here.
SUITES = {"core": paper_shapes}
