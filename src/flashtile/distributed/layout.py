"""Sequence layouts for context parallelism: which tokens each rank holds.

A global sequence of ``seqlen`` tokens is padded at its end to ``padded_length`` and cut
into chunks; rank ``r`` of ``world`` holds

    contiguous   chunk r of ``world`` equal chunks: tokens [r * L, (r + 1) * L)
    zigzag       chunks r and 2 * world - 1 - r of ``2 * world`` equal chunks, in that
                 order (the load-balanced order for causal attention: every rank holds
                 one early and one late chunk, so every rank has the same causal work)

with ``L = padded_length / world`` tokens per rank. Padding goes to the end of the
global sequence, so on every rank the real tokens form a prefix of the local shard
(``valid_local_length``): the ring masks padded keys by cutting that prefix, and causal
attention never sees them (a real query at position i sees keys j <= i < seqlen).

``shard`` is plain tensor indexing (differentiable); ``unshard`` all-gathers, and its
backward hands each rank its own slice of the incoming gradient.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

LAYOUTS = ("contiguous", "zigzag")

__all__ = [
    "LAYOUTS", "group_info", "local_positions", "padded_length", "shard", "unshard",
    "valid_local_length",
]


def group_info(group=None) -> tuple[int, int]:
    """(rank, world size) in ``group``; (0, 1) when torch.distributed is not initialised."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return 0, 1
    return dist.get_rank(group), dist.get_world_size(group)


def check_layout(layout: str) -> None:
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")


def _n_chunks(world: int, layout: str) -> int:
    check_layout(layout)
    return 2 * world if layout == "zigzag" else world


def padded_length(seqlen: int, world: int, layout: str = "contiguous") -> int:
    """``seqlen`` rounded up to a multiple of ``world`` (contiguous) or ``2 * world``
    (zigzag): the global length the shards cover."""
    n = _n_chunks(world, layout)
    return -(-seqlen // n) * n


def _chunk_ids(rank: int, world: int, layout: str) -> tuple[int, ...]:
    return (rank, 2 * world - 1 - rank) if layout == "zigzag" else (rank,)


def local_positions(seqlen: int, rank: int, world: int, layout: str = "contiguous",
                    device=None) -> torch.Tensor:
    """Global token positions (int64, ``(L,)``) of rank ``rank``'s shard; padded slots
    get positions >= ``seqlen``."""
    chunk = padded_length(seqlen, world, layout) // _n_chunks(world, layout)
    parts = [torch.arange(c * chunk, (c + 1) * chunk, device=device)
             for c in _chunk_ids(rank, world, layout)]
    return torch.cat(parts)


def valid_local_length(seqlen: int, rank: int, world: int, layout: str, local_len: int) -> int:
    """How many real (unpadded) tokens lead rank ``rank``'s shard of ``local_len`` tokens
    when the global sequence has ``seqlen`` real tokens (always a prefix, see above)."""
    chunk = local_len // len(_chunk_ids(rank, world, layout))
    return sum(min(max(seqlen - c * chunk, 0), chunk) for c in _chunk_ids(rank, world, layout))


def shard(x: torch.Tensor, group=None, layout: str = "contiguous", dim: int = 1) -> torch.Tensor:
    """This rank's shard of the full tensor ``x`` along ``dim`` (the sequence dim; 1 for
    ``(batch, seqlen, nheads, headdim)`` and for ``(batch, seqlen)`` token ids).

    Every rank passes the same full ``x``. A length that does not divide by ``world``
    (contiguous) or ``2 * world`` (zigzag) is padded with zeros at the end; pass the
    real length as ``seqlen=`` to ``ring_flash_attn_func`` so those keys are masked.
    Differentiable.
    """
    rank, world = group_info(group)
    dim = dim % x.dim()
    seqlen = x.shape[dim]
    total = padded_length(seqlen, world, layout)
    if total != seqlen:
        pad = [0, 0] * (x.dim() - 1 - dim) + [0, total - seqlen]
        x = F.pad(x, pad)
    chunk = total // _n_chunks(world, layout)
    parts = [x.narrow(dim, c * chunk, chunk) for c in _chunk_ids(rank, world, layout)]
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim)


def unshard(x: torch.Tensor, seqlen: int, group=None, layout: str = "contiguous",
            dim: int = 1) -> torch.Tensor:
    """Inverse of ``shard``: all-gather the shards along ``dim``, put the chunks back in
    sequence order and drop the padding, giving ``seqlen`` entries along ``dim`` on every
    rank. Differentiable: the backward hands each rank its own slice of the gradient
    (as if each rank's loss were computed on the full tensor)."""
    rank, world = group_info(group)
    dim = dim % x.dim()
    check_layout(layout)
    full = _AllGather.apply(x, group, dim) if world > 1 else x  # rank-major
    n = _n_chunks(world, layout)
    chunk = x.shape[dim] * world // n
    pieces = full.split(chunk, dim)  # chunk ids in rank-major order
    order = [c for r in range(world) for c in _chunk_ids(r, world, layout)]
    by_id = dict(zip(order, pieces))
    return torch.cat([by_id[c] for c in range(n)], dim).narrow(dim, 0, seqlen)


class _AllGather(torch.autograd.Function):
    """Concatenate every rank's tensor along ``dim`` (rank order); backward: own slice."""

    @staticmethod
    def forward(ctx, x, group, dim):
        import torch.distributed as dist

        rank, world = group_info(group)
        ctx.rank, ctx.world, ctx.dim = rank, world, dim
        x = x.contiguous()
        parts = [torch.empty_like(x) for _ in range(world)]
        dist.all_gather(parts, x, group=group)
        return torch.cat(parts, dim)

    @staticmethod
    def backward(ctx, grad):
        return grad.chunk(ctx.world, ctx.dim)[ctx.rank], None, None
