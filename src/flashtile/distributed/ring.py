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

Forward: partial (out, lse) of each block merge in fp32 through their log-sum-exp, one
fused Triton pass per block (``merge_partial``; ``merge_partial_torch`` is the reference).
The first block's (out, lse) is the state as it is (step 0, the rank's own block, covers
every local query row), the last merge writes q's dtype: a ring of one is one kernel call.
Backward: with the final out and lse saved, each block's gradients are exact partials
(P = exp(S - lse) with the global lse, delta = rowsum(dO * O) with the final O); dQ sums
locally, and the dK/dV partials travel the ring with the K/V block, fp32, one step
behind it, so after W steps (one extra hop) each owner holds the sum for its keys. The
accumulators start from the first block's gradients (no zeros); a ring of one returns the
kernel's gradients.
"""

from __future__ import annotations

import functools
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
        ctx.set_materialize_grads(False)  # as FlashAttnFunction: no zeros for dlse
        return out, lse

    @staticmethod
    def backward(ctx, dout, dlse):
        if torch.is_grad_enabled():
            raise RuntimeError("flashtile: double backward through ring attention is not "
                               "supported; the backward kernels are not differentiable")
        if dout is None:  # out did not reach the loss
            return (None,) * 6
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
    out (B, L, H, D) in q's dtype, lse (B, H, L) float32.

    The running state starts as the first block's own (out, lse), the kernel's tensors
    (merging into an empty state is an identity; step 0, the rank's own block, covers
    every local query row in both layouts), becomes fp32 at the first merge and takes
    q's dtype again at the last one (the fused merge writes it there), so a ring of one
    returns the kernel's result untouched, and W > 1 still accumulates in fp32."""
    from ..ops.flash import attention_forward

    comm = comm and ring.world > 1
    plans = [ring.plan(ring.source(step)) for step in range(ring.world)]
    last = max((t for t, p in enumerate(plans) if p is not None), default=-1)
    kv = [torch.stack((k, v)), None] if comm else None  # (2, B, L, Hkv, D): one message
    if comm:
        kv[1] = torch.empty_like(kv[0])
    out = lse = None
    for step in range(ring.world):
        works = []
        cur = (k, v)  # without communication every step reads the local block in place
        if comm:
            cur = kv[step % 2]
            if step + 1 < ring.world:  # the next block travels while we compute
                works = ring.exchange(cur, kv[(step + 1) % 2], _TAG_KV)
        plan = plans[step]
        if plan is not None:
            qs, ks, blk_causal = plan
            blk_out, blk_lse = attention_forward(
                q[:, qs], cur[0][:, ks], cur[1][:, ks], softmax_scale=softmax_scale,
                causal=blk_causal,
            )
            out, lse = _merge_step(out, lse, qs, blk_out, blk_lse, q.shape[1],
                                   q.dtype if step == last else torch.float32)
        _wait(works)
    if out is None:  # no block at all (cannot happen for a valid Ring; kept total)
        out = torch.zeros(q.shape, dtype=q.dtype, device=q.device)
        lse = torch.full((q.shape[0], q.shape[2], q.shape[1]), float("-inf"),
                         dtype=torch.float32, device=q.device)
    return out.to(q.dtype), lse


def _covers(sl: slice, n: int) -> bool:
    return sl.start in (0, None) and (sl.stop is None or sl.stop >= n)


def _merge_step(out, lse, qs, blk_out, blk_lse, n, dtype):
    """The running (out, lse) of n query rows after the block (blk_out, blk_lse) of rows
    ``qs``; ``out`` comes back in ``dtype`` (fp32 between merges, q's after the last)."""
    if out is None:
        if _covers(qs, n):  # the first block: nothing to merge with, take it as it is
            return blk_out, blk_lse
        b, _, h, d = blk_out.shape
        out = torch.zeros((b, n, h, d), dtype=torch.float32, device=blk_out.device)
        lse = torch.full((b, h, n), float("-inf"), dtype=torch.float32, device=blk_out.device)
    dst = out
    if out.dtype != dtype:  # up- or down-cast: into a new buffer, rows outside qs copied
        dst = torch.empty(out.shape, dtype=dtype, device=out.device)
        lo, hi = qs.start or 0, qs.stop
        dst[:, :lo].copy_(out[:, :lo])
        dst[:, hi:].copy_(out[:, hi:])
    merge_partial(out[:, qs], lse[:, :, qs], blk_out, blk_lse, dst=dst[:, qs])
    return dst, lse


def merge_partial(out, lse, blk_out, blk_lse, dst=None) -> None:
    """In place, one fused pass (``_merge_kernel``): (dst, lse) <- the softmax-weighted
    union of (out, lse) and a block's (blk_out, blk_lse).

    out (B, M, H, D) any float dtype, lse (B, H, M) float32, blk_out (B, M, H, D),
    blk_lse (B, H, M) float32; ``dst`` (default ``out``) like out, any float dtype (it may
    be ``out`` itself). Views with any strides are fine. Rows empty on both sides get
    dst = 0, lse = -inf (no NaN); a row empty on one side takes the other side exactly.
    Weights exp(lse_i - m) / (exp(lse - m) + exp(blk_lse - m)), m the larger lse, in fp32;
    ``merge_partial_torch`` is the plain-PyTorch reference."""
    import triton

    from ..ops._common import device_ctx, is_interpreting, next_pow2

    dst = out if dst is None else dst
    b, m, h, d = blk_out.shape
    for name, t in (("out", out), ("dst", dst)):
        if t.shape != blk_out.shape:
            raise ValueError(f"merge_partial: {name} {tuple(t.shape)} != blk_out "
                             f"{tuple(blk_out.shape)}")
    for name, t in (("lse", lse), ("blk_lse", blk_lse)):
        if t.shape != (b, h, m) or t.dtype != torch.float32:
            raise ValueError(f"merge_partial: {name} must be float32 {(b, h, m)}, got "
                             f"{t.dtype} {tuple(t.shape)}")
    if blk_out.numel() == 0:
        return
    block_d = max(16, next_pow2(d))
    block_m = max(16, min(128, 4096 // block_d))
    grid = (triton.cdiv(m, block_m), b * h)
    with device_ctx(dst):
        _merge_kernel()[grid](
            out, lse, blk_out, blk_lse, dst, m, h, d, *out.stride(), *lse.stride(),
            *blk_out.stride(), *blk_lse.stride(), *dst.stride(), BLOCK_M=block_m,
            BLOCK_D=block_d, UPCAST=is_interpreting(),
        )


def merge_partial_torch(out, lse, blk_out, blk_lse) -> None:
    """The plain-PyTorch reference of ``merge_partial`` (about eight elementwise passes):
    in place, out (B, M, H, D) float32, lse (B, H, M) float32 (views are fine). Rows that
    are empty on both sides stay out = 0, lse = -inf (no NaN)."""
    new = torch.logaddexp(lse, blk_lse)
    base = torch.where(torch.isneginf(new), 0.0, new)  # exp(-inf - 0) = 0 on empty rows
    w_old = torch.exp(lse - base).transpose(1, 2).unsqueeze(-1)  # (B, M, H, 1)
    w_blk = torch.exp(blk_lse - base).transpose(1, 2).unsqueeze(-1)
    out.mul_(w_old).add_(blk_out.float() * w_blk)
    lse.copy_(new)


@functools.cache
def _merge_kernel():
    """The fused merge, a @triton.jit kernel built on first use (nothing from Triton is
    imported with the module, so TRITON_INTERPRET may still be set before). Triton
    resolves a kernel's names in its module's globals, not in closures: tl and cast_out
    are bound there."""
    global tl, cast_out
    import triton
    import triton.language as tl

    from ..ops._common import cast_out

    @triton.jit
    def kernel(
        O, LSE, BO, BLSE, DST, seqlen, nheads, head_dim,
        so_b, so_m, so_h, so_d, sl_b, sl_h, sl_m,
        sbo_b, sbo_m, sbo_h, sbo_d, sbl_b, sbl_h, sbl_m,
        sd_b, sd_m, sd_h, sd_d,
        BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr, UPCAST: tl.constexpr,
    ):
        """One program: BLOCK_M rows of one (batch, head), all of D."""
        bh = tl.program_id(1)
        b = (bh // nheads).to(tl.int64)
        h = (bh % nheads).to(tl.int64)
        rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
        cols = tl.arange(0, BLOCK_D).to(tl.int64)
        rmask = rows < seqlen
        mask = rmask[:, None] & (cols < head_dim)[None, :]
        lse_a = tl.load(LSE + b * sl_b + h * sl_h + rows * sl_m, mask=rmask,
                        other=float("-inf"))
        lse_b = tl.load(BLSE + b * sbl_b + h * sbl_h + rows * sbl_m, mask=rmask,
                        other=float("-inf"))
        mx = tl.maximum(lse_a, lse_b)
        empty = mx == float("-inf")
        mx = tl.where(empty, 0.0, mx)
        e_a = tl.exp(lse_a - mx)  # one of the two is exp(0) = 1 on a non-empty row
        e_b = tl.exp(lse_b - mx)
        tot = tl.where(empty, 1.0, e_a + e_b)
        new = tl.where(empty, float("-inf"), mx + tl.log(tot))
        w_a = (e_a / tot)[:, None]
        w_b = (e_b / tot)[:, None]
        o = tl.load(O + b * so_b + h * so_h + rows[:, None] * so_m + cols[None, :] * so_d,
                    mask=mask, other=0.0).to(tl.float32)
        bo = tl.load(BO + b * sbo_b + h * sbo_h + rows[:, None] * sbo_m
                     + cols[None, :] * sbo_d, mask=mask, other=0.0).to(tl.float32)
        res = o * w_a + bo * w_b
        tl.store(DST + b * sd_b + h * sd_h + rows[:, None] * sd_m + cols[None, :] * sd_d,
                 cast_out(res, DST.dtype.element_ty, UPCAST), mask=mask)
        tl.store(LSE + b * sl_b + h * sl_h + rows * sl_m, new, mask=rmask)

    return kernel


# ==================================================================================
# backward
# ==================================================================================


def ring_attention_backward(dout, q, k, v, out, lse, *, ring: Ring, softmax_scale: float,
                            comm: bool = True):
    """The backward ring loop; no autograd. Returns ``(dq, dk, dv)`` in the inputs'
    dtypes; ``out`` and ``lse`` are the forward's (final, merged) results.

    Accumulators start from the first block's gradients (a copy, not zeros plus an add):
    dQ keeps the kernel's tensor until a second block adds to it (fp32 from then on), the
    travelling fp32 dK/dV buffer is written by step 0's copy. A ring of one is one kernel
    call whose gradients are returned as they are."""
    from ..ops.flash import attention_backward

    comm = comm and ring.world > 1
    plans = [ring.plan(ring.source(step)) for step in range(ring.world)]
    kv = [torch.stack((k, v)), None] if comm else None
    if comm:
        kv[1] = torch.empty_like(kv[0])
    dkv = [None, None]  # fp32 (2, B, L, Hkv, D); unused by a ring of one
    if ring.world > 1:
        dkv[0] = torch.empty((2, *k.shape), dtype=torch.float32, device=k.device)
        if comm:
            dkv[1] = torch.empty_like(dkv[0])
    dq = dk1 = dv1 = None  # dk1, dv1: a ring of one's gradients
    lse_rows = {}  # query slice -> contiguous lse rows (the kernels index lse densely)
    dkv_works = []
    for step in range(ring.world):
        cur, kv_works = (k, v), []
        if comm:
            cur = kv[step % 2]
            if step + 1 < ring.world:
                kv_works = ring.exchange(cur, kv[(step + 1) % 2], _TAG_KV)
        plan = plans[step]
        grads = None
        if plan is not None:
            qs, ks, blk_causal = plan
            key = (qs.start, qs.stop)
            if key not in lse_rows:
                lse_rows[key] = lse[:, :, qs].contiguous()  # no copy for all rows
            grads = attention_backward(
                dout[:, qs], q[:, qs], cur[0][:, ks], cur[1][:, ks], out[:, qs],
                lse_rows[key], softmax_scale=softmax_scale, causal=blk_causal,
            )
            dq = _add_rows(dq, qs, grads[0], q)
        if ring.world == 1:
            if grads is not None:
                dk1, dv1 = (_add_rows(None, ks, g, t) for g, t in zip(grads[1:], (k, v)))
            continue
        # -- the running dK/dV of this block's owner arrives from the previous rank --
        _wait(dkv_works)
        acc = dkv[step % 2] if comm else dkv[0]
        if step == 0 and grads is not None and _covers(ks, k.shape[1]):
            acc[0].copy_(grads[1])  # the first partial of the rank's own block
            acc[1].copy_(grads[2])
        else:
            if step == 0:
                acc.zero_()
            if grads is not None:
                acc[0][:, ks] += grads[1]
                acc[1][:, ks] += grads[2]
        if comm:  # pass it on; the last hop brings each sum home
            dkv_works = ring.exchange(acc, dkv[(step + 1) % 2], _TAG_DKV)
        _wait(kv_works)
    _wait(dkv_works)
    dq = _add_rows(None, slice(0, 0), None, q) if dq is None else dq
    if ring.world == 1:
        dk1 = _add_rows(None, slice(0, 0), None, k) if dk1 is None else dk1
        dv1 = _add_rows(None, slice(0, 0), None, v) if dv1 is None else dv1
        return dq.to(q.dtype), dk1.to(k.dtype), dv1.to(v.dtype)
    final = dkv[ring.world % 2] if comm else dkv[0]
    return dq.to(q.dtype), final[0].to(k.dtype), final[1].to(v.dtype)


def _add_rows(acc, rows: slice, grad, like):
    """``acc`` (or nothing yet) plus ``grad`` on ``rows`` of dim 1, shaped like ``like``.
    The first gradient that covers every row is taken as it is (the kernel's own tensor,
    in its dtype); a later one turns the sum fp32 first. ``grad`` None: just zeros."""
    if acc is None:
        if grad is not None and _covers(rows, like.shape[1]):
            return grad
        acc = torch.zeros(like.shape, dtype=torch.float32, device=like.device)
    elif acc.dtype != torch.float32:
        acc = acc.float()
    if grad is not None:
        acc[:, rows] += grad
    return acc
