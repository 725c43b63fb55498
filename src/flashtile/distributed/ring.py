"""Ring attention (context parallelism) on torch.distributed, over flashtile's kernels.

Layers, top to bottom (as in ops/flash.py):
    ring_flash_attn_func        public function, argument checks, docstring
    RingFlashAttnFunction       torch.autograd.Function
    ring_attention_forward / ring_attention_backward   the ring loops: no autograd
    ops.flash.attention_forward / attention_backward   the single-device launchers

Notation: W ranks in ``group``, rank r; every rank holds L = S_padded / W tokens of q, k,
v (``layout.py`` says which). Step t = 0 .. W-1, rank r holds the K/V block of source
s = (r - t) mod W; while it attends to that block it already sends the block on to r + 1
and receives the next one from r - 1 (``dist.batch_isend_irecv``, double-buffered).

Each (query shard, key block) pair is one of a few cases (``Ring.plan``):
    contiguous, causal   s == r: causal (diagonal block); s < r: full; s > r: skipped
    zigzag, causal       (local = chunks r and 2W-1-r, c = L / 2 tokens each)
                         s == r: causal over the whole local block (both chunks are in
                         order); s < r: all L queries x the first c keys, full;
                         s > r: the last c queries x all L keys, full. Every step
                         after the first costs the same c x 2c: balanced.
    not causal           all L queries x the real keys of the block (padding cut off)
The launcher's causal is bottom-right aligned; every causal block here is square, so
bottom-right and top-left agree.

Forward: partial (out, lse) of each block merge in fp32 through their log-sum-exp.
Backward: with the final out and lse saved, each block's gradients are exact partials
(P = exp(S - lse) with the global lse, delta = rowsum(dO * O) with the final O); dQ sums
locally, and the dK/dV partials travel the ring with the K/V block, fp32, one step
behind it, so after W steps (one extra hop) each owner holds the sum for its keys.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .layout import check_layout, group_info, valid_local_length

__all__ = [
    "Ring", "RingFlashAttnFunction", "ring_attention_backward", "ring_attention_forward",
    "ring_flash_attn_func",
]

_TAG_KV, _TAG_DKV = 1, 2  # distinct tags: the K/V and dK/dV messages overlap in flight


# ==================================================================================
# public API
# ==================================================================================


def ring_flash_attn_func(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, group=None,
    softmax_scale: float | None = None, causal: bool = False, return_lse: bool = False,
    *, layout: str = "contiguous", seqlen: int | None = None,
):
    """Exact attention over a sequence split across the ranks of ``group`` (ring attention).

    Every rank calls this with its own shard (see ``flashtile.distributed.shard``).

    Args:
        q: (batch, L, nheads, headdim), this rank's L queries; float16 / bfloat16 /
            float32, on the device the process group communicates from (CUDA for NCCL;
            CPU for gloo, where the kernels need TRITON_INTERPRET=1).
        k: (batch, L, nheads_kv, headdim), this rank's keys (same L: self-attention
            over one sequence); nheads must be a multiple of nheads_kv (GQA / MQA).
        v: (batch, L, nheads_kv, headdim), like k.
        group: a torch.distributed process group (default: the world); when
            torch.distributed is not initialised, a ring of one.
        softmax_scale: scale of q.k, default 1 / sqrt(headdim).
        causal: causal over the global sequence positions (query i sees key j <= i).
        return_lse: also return lse, (batch, nheads, L) float32, natural log of the
            softmax normaliser over the whole sequence; not differentiable.
        layout: ``"contiguous"`` (rank r holds tokens [r L, (r+1) L)) or ``"zigzag"``
            (rank r holds chunks r and 2W-1-r of 2W: balanced causal work; use it for
            causal). All ranks and ``shard`` / ``unshard`` must use the same layout.
        seqlen: the real global length when the shards were padded (``shard`` pads at
            the end to W * L); padded keys are masked. Default W * L (no padding).
            Outputs at padded query slots are finite and meaningless; ``unshard`` drops
            them.

    Returns:
        out (batch, L, nheads, headdim) in q's dtype, or (out, lse).
    """
    from ..ops._checks import check_qkv

    check_qkv(q, k, v)
    check_layout(layout)
    rank, world = group_info(group)
    local_len = q.shape[1]
    if k.shape[1] != local_len:
        raise ValueError(
            f"ring attention is self-attention over one sharded sequence: q and k must "
            f"hold the same number of local tokens, got {local_len} and {k.shape[1]}"
        )
    if layout == "zigzag" and local_len % 2:
        raise ValueError(
            f"layout='zigzag' needs an even local length (two chunks per rank), got "
            f"{local_len}; shard() pads the sequence to a multiple of 2 * world"
        )
    total = world * local_len
    seqlen = total if seqlen is None else int(seqlen)
    if not 1 <= seqlen <= total:
        raise ValueError(f"seqlen must be in [1, world * L = {total}], got {seqlen}")
    if softmax_scale is not None and not float(softmax_scale) > 0:
        raise ValueError(f"softmax_scale must be > 0, got {softmax_scale}")
    scale = float(softmax_scale) if softmax_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    ring = Ring.create(group, layout, bool(causal), seqlen, local_len, rank, world)
    out, lse = RingFlashAttnFunction.apply(q, k, v, scale, ring, True)
    return (out, lse) if return_lse else out


class RingFlashAttnFunction(torch.autograd.Function):
    """Autograd over the two ring loops; saves nothing when no input needs a gradient.
    ``comm=False`` (benchmarks only) runs the same kernels without sending anything."""

    @staticmethod
    def forward(ctx, q, k, v, softmax_scale, ring, comm):
        out, lse = ring_attention_forward(q, k, v, ring=ring, softmax_scale=softmax_scale,
                                          comm=comm)
        if any(ctx.needs_input_grad[:3]):
            ctx.save_for_backward(q, k, v, out, lse)
            ctx.args = (softmax_scale, ring, comm)
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, dout, dlse):
        if torch.is_grad_enabled():
            raise RuntimeError("flashtile: double backward through ring attention is not "
                               "supported; the backward kernels are not differentiable")
        q, k, v, out, lse = ctx.saved_tensors
        softmax_scale, ring, comm = ctx.args
        dq, dk, dv = ring_attention_backward(dout, q, k, v, out, lse, ring=ring,
                                             softmax_scale=softmax_scale, comm=comm)
        return dq, dk, dv, None, None, None


# ==================================================================================
# the ring: peers, per-block cases, exchange
# ==================================================================================


@dataclass(frozen=True)
class Ring:
    """One rank's view of the ring: who it talks to and which block cases it runs."""

    group: object
    layout: str
    causal: bool
    seqlen: int  # real global length (<= world * local_len)
    local_len: int
    rank: int
    world: int
    next_peer: int  # global ranks, as P2POp wants them
    prev_peer: int

    @classmethod
    def create(cls, group, layout, causal, seqlen, local_len, rank=None, world=None) -> Ring:
        if rank is None or world is None:
            rank, world = group_info(group)
        nxt, prev = (rank + 1) % world, (rank - 1) % world
        if world > 1 and group is not None:
            import torch.distributed as dist

            nxt, prev = dist.get_global_rank(group, nxt), dist.get_global_rank(group, prev)
        return cls(group, layout, causal, seqlen, local_len, rank, world, nxt, prev)

    def source(self, step: int) -> int:
        """The rank whose K/V block this rank holds at ``step``."""
        return (self.rank - step) % self.world

    def plan(self, src: int) -> tuple[slice, slice, bool] | None:
        """(query slice, key slice, causal) of the block from ``src``; None: skip it."""
        every = slice(0, self.local_len)
        if not self.causal:
            n = valid_local_length(self.seqlen, src, self.world, self.layout, self.local_len)
            return (every, slice(0, n), False) if n > 0 else None
        if src == self.rank:
            return every, every, True
        if self.layout == "contiguous":
            return (every, every, False) if src < self.rank else None
        half = self.local_len // 2
        if src < self.rank:  # both my chunks come after its first chunk, before its second
            return every, slice(0, half), False
        return slice(half, self.local_len), every, False  # only my late chunk sees it

    def exchange(self, send: torch.Tensor, recv: torch.Tensor, tag: int) -> list:
        """Start sending ``send`` to the next rank and receiving ``recv`` from the previous
        one; returns the requests to wait on."""
        import torch.distributed as dist

        ops = [dist.P2POp(dist.isend, send, self.next_peer, self.group, tag),
               dist.P2POp(dist.irecv, recv, self.prev_peer, self.group, tag)]
        return dist.batch_isend_irecv(ops)


def _wait(works) -> None:
    for w in works:
        w.wait()


# ==================================================================================
# forward
# ==================================================================================


def ring_attention_forward(q, k, v, *, ring: Ring, softmax_scale: float, comm: bool = True):
    """The forward ring loop; no autograd. Returns ``(out, lse)`` as the launcher does:
    out (B, L, H, D) in q's dtype, lse (B, H, L) float32."""
    from ..ops.flash import attention_forward

    batch, local_len, nheads, head_dim = q.shape
    out = torch.zeros((batch, local_len, nheads, head_dim), dtype=torch.float32,
                      device=q.device)
    lse = torch.full((batch, nheads, local_len), float("-inf"), dtype=torch.float32,
                     device=q.device)
    comm = comm and ring.world > 1
    kv = [torch.stack((k, v)), None]  # (2, B, L, Hkv, D): one message per step
    if comm:
        kv[1] = torch.empty_like(kv[0])
    for step in range(ring.world):
        cur = kv[step % 2] if comm else kv[0]
        works = []
        if comm and step + 1 < ring.world:  # the next block travels while we compute
            works = ring.exchange(cur, kv[(step + 1) % 2], _TAG_KV)
        plan = ring.plan(ring.source(step))
        if plan is not None:
            qs, ks, blk_causal = plan
            blk_out, blk_lse = attention_forward(
                q[:, qs], cur[0][:, ks], cur[1][:, ks], softmax_scale=softmax_scale,
                causal=blk_causal,
            )
            merge_partial(out[:, qs], lse[:, :, qs], blk_out, blk_lse)
        _wait(works)
    return out.to(q.dtype), lse


def merge_partial(out, lse, blk_out, blk_lse) -> None:
    """In place: (out, lse) <- the softmax-weighted union of (out, lse) and a block's
    (blk_out, blk_lse). out (B, M, H, D) float32, lse (B, H, M) float32 (views are fine).
    Rows that are empty on both sides stay out = 0, lse = -inf (no NaN)."""
    new = torch.logaddexp(lse, blk_lse)
    base = torch.where(torch.isneginf(new), 0.0, new)  # exp(-inf - 0) = 0 on empty rows
    w_old = torch.exp(lse - base).transpose(1, 2).unsqueeze(-1)  # (B, M, H, 1)
    w_blk = torch.exp(blk_lse - base).transpose(1, 2).unsqueeze(-1)
    out.mul_(w_old).add_(blk_out.float() * w_blk)
    lse.copy_(new)


# ==================================================================================
# backward
# ==================================================================================


def ring_attention_backward(dout, q, k, v, out, lse, *, ring: Ring, softmax_scale: float,
                            comm: bool = True):
    """The backward ring loop; no autograd. Returns ``(dq, dk, dv)`` in the inputs'
    dtypes; ``out`` and ``lse`` are the forward's (final, merged) results."""
    from ..ops.flash import attention_backward

    comm = comm and ring.world > 1
    dq = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    kv = [torch.stack((k, v)), None]
    dkv = [torch.zeros((2, *k.shape), dtype=torch.float32, device=k.device), None]
    if comm:
        kv[1], dkv[1] = torch.empty_like(kv[0]), torch.empty_like(dkv[0])
    lse_rows = {}  # query slice -> contiguous lse rows (the kernels index lse densely)
    dkv_works = []
    for step in range(ring.world):
        cur = kv[step % 2] if comm else kv[0]
        kv_works = []
        if comm and step + 1 < ring.world:
            kv_works = ring.exchange(cur, kv[(step + 1) % 2], _TAG_KV)
        plan = ring.plan(ring.source(step))
        grads = None
        if plan is not None:
            qs, ks, blk_causal = plan
            key = (qs.start, qs.stop)
            if key not in lse_rows:
                lse_rows[key] = lse[:, :, qs].contiguous()
            grads = attention_backward(
                dout[:, qs], q[:, qs], cur[0][:, ks], cur[1][:, ks], out[:, qs],
                lse_rows[key], softmax_scale=softmax_scale, causal=blk_causal,
            )
            dq[:, qs] += grads[0]
        # -- the running dK/dV of this block's owner arrives from the previous rank --
        _wait(dkv_works)
        acc = dkv[step % 2] if comm else dkv[0]
        if step == 0:
            acc.zero_()
        if grads is not None:
            acc[0][:, ks] += grads[1]
            acc[1][:, ks] += grads[2]
        if comm:  # pass it on; the last hop brings each sum home
            dkv_works = ring.exchange(acc, dkv[(step + 1) % 2], _TAG_DKV)
        _wait(kv_works)
    _wait(dkv_works)
    final = dkv[ring.world % 2] if comm else dkv[0]
    return dq.to(q.dtype), final[0].to(k.dtype), final[1].to(v.dtype)
