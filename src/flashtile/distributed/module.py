"""nn.Module wrappers for ring attention, and context-parallel MiniGPT.

    RingAttention            parameter-free: (q, k, v) local shards -> local output
    RingCausalSelfAttention  MiniGPT's attention block (same parameters and names, so
                             state dicts load either way) running on the ring
    ContextParallelMiniGPT   wraps a MiniGPT (without changing it) and runs it on a
                             sharded sequence: global positions for the embeddings,
                             ring attention in every block, a loss over real tokens

Shapes: B batch, L local tokens per rank, S real global length, C = n_embd, nh heads,
hs = C / nh. Attention dropout is not supported on the ring (each block would need the
kernel's RNG stream of the whole row); build the model with dropout=0 or call eval().
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..models.minigpt import FlashCausalSelfAttention, MiniGPT, MiniGPTConfig
from .layout import check_layout, group_info, local_positions
from .ring import ring_flash_attn_func

__all__ = ["ContextParallelMiniGPT", "RingAttention", "RingCausalSelfAttention"]


class RingAttention(nn.Module):
    """Ring attention as a module: ``forward(q, k, v, seqlen=None)`` on this rank's
    (B, L, nh, hs) shards returns the (B, L, nh, hs) output (``ring_flash_attn_func``)."""

    def __init__(self, group=None, layout: str = "contiguous", causal: bool = True,
                 softmax_scale: float | None = None):
        super().__init__()
        check_layout(layout)
        self.group, self.layout, self.causal = group, layout, causal
        self.softmax_scale = softmax_scale

    def forward(self, q, k, v, seqlen: int | None = None):
        return ring_flash_attn_func(q, k, v, self.group, self.softmax_scale, self.causal,
                                    layout=self.layout, seqlen=seqlen)

    def extra_repr(self) -> str:
        return f"layout={self.layout!r}, causal={self.causal}"


def _ring_self_attention(attn: FlashCausalSelfAttention, x, ring: RingAttention, seqlen):
    """MiniGPT's attention block on a shard: x (B, L, C) -> (B, L, C)."""
    if attn.training and attn.attn_dropout > 0:
        raise ValueError(
            f"attention dropout ({attn.attn_dropout}) is not supported with ring attention; "
            "build the model with dropout=0.0 or call .eval()"
        )
    B, L, C = x.shape
    qkv = attn.c_attn(x).view(B, L, 3, attn.n_head, attn.head_dim)  # (B, L, 3, nh, hs)
    q, k, v = qkv.unbind(2)  # (B, L, nh, hs) each
    y = ring(q, k, v, seqlen)  # (B, L, nh, hs)
    return attn.resid_dropout(attn.c_proj(y.reshape(B, L, C)))


class RingCausalSelfAttention(FlashCausalSelfAttention):
    """``FlashCausalSelfAttention`` on the ring: same parameters, ``forward(x, seqlen)``
    takes this rank's (B, L, C) shard."""

    def __init__(self, cfg: MiniGPTConfig, group=None, layout: str = "zigzag"):
        super().__init__(cfg)
        self.ring = RingAttention(group, layout, causal=True)

    def forward(self, x, seqlen: int | None = None):
        return _ring_self_attention(self, x, self.ring, seqlen)


class ContextParallelMiniGPT(nn.Module):
    """Run ``model`` (a MiniGPT, left unchanged; its parameters are this module's) on a
    sequence sharded over ``group`` with ``shard(idx, group, layout)``.

    ``forward(idx, targets=None, seqlen=None)``: idx, targets (B, L) int64 shards;
    seqlen the real global length (default world * L). Returns (logits (B, L, vocab),
    loss): loss is this rank's share, the sum of the cross-entropy over its real tokens
    divided by B * seqlen, so the shares sum to the model's mean loss over the whole
    sequence. After backward, sum the parameter gradients over the group
    (``dist.all_reduce``), and the loss shares for reporting.
    """

    def __init__(self, model: MiniGPT, group=None, layout: str = "zigzag"):
        super().__init__()
        self.model = model
        self.ring = RingAttention(group, layout, causal=True)
        self.group, self.layout = group, layout

    def forward(self, idx, targets=None, seqlen: int | None = None):
        m = self.model
        B, L = idx.shape
        rank, world = group_info(self.group)
        seqlen = world * L if seqlen is None else seqlen
        if seqlen > m.config.block_size:
            raise ValueError(f"sequence length {seqlen} > block_size {m.config.block_size}")
        pos = local_positions(seqlen, rank, world, self.layout, device=idx.device)  # (L,)
        real = pos < seqlen
        pos = pos.clamp(max=m.config.block_size - 1)  # padded slots: any valid embedding
        x = m.drop(m.wte(idx) + m.wpe(pos))  # (B, L, C)
        for blk in m.blocks:
            x = x + _ring_self_attention(blk.attn, blk.ln_1(x), self.ring, seqlen)
            x = x + blk.mlp(blk.ln_2(x))
        logits = m.lm_head(m.ln_f(x))  # (B, L, vocab)
        loss = None
        if targets is not None:
            low = logits.dtype in (torch.float16, torch.bfloat16)
            flat = (logits.float() if low else logits)[:, real].flatten(0, 1)
            loss = F.cross_entropy(flat, targets[:, real].flatten(), reduction="sum")
            loss = loss / (B * seqlen)
        return logits, loss
