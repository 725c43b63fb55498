"""Attention calls of the GPT-2 model, per backend: prefill (dense / variable-length,
causal) and decode over a KV cache.

Backends:
    "flashtile"  prefill on ``flashtile.flash_attn_varlen_func`` (packed prompts) or
                 ``flashtile.flash_attn_func``; decode on ``flashtile.flash_attn_with_kvcache``
    "sdpa"       ``torch.nn.functional.scaled_dot_product_attention``, packed prompts
                 padded around it; decode on ``kvcache_attention_torch`` below
    "reference"  ``flashtile.reference`` (fp64 math); decode as "sdpa"

``kvcache_attention_torch`` is the batched plain-PyTorch twin of the KV-cache kernel:
unlike ``flashtile.reference.flash_attn_with_kvcache`` (a per-sequence loop over host
lengths) it never reads device values on the host, so the baselines' decode step can be
captured in a CUDA graph like flashtile's.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

BACKENDS = ("flashtile", "sdpa", "reference")


def decode_attention(backend: str):
    """The KV-cache attention function the decode step of ``backend`` uses."""
    if backend == "flashtile":
        import flashtile

        return flashtile.flash_attn_with_kvcache
    return kvcache_attention_torch


def decode_attention_name(backend: str) -> str:
    return ("flashtile.flash_attn_with_kvcache" if backend == "flashtile"
            else "plain PyTorch (kvcache_attention_torch)")


# ----------------------------------------------------------------------------------
# prefill
# ----------------------------------------------------------------------------------


def dense_causal(q, k, v, backend: str) -> torch.Tensor:
    """Causal attention of equal-length sequences. q, k, v: (B, T, H, D) -> (B, T, H, D)."""
    if backend == "flashtile":
        import flashtile

        return flashtile.flash_attn_func(q, k, v, causal=True)
    if backend == "sdpa":
        out = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
        )
        return out.transpose(1, 2)
    if backend == "reference":
        from .. import reference

        return reference.flash_attn_func(q, k, v, causal=True)
    raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")


def packed_causal(q, k, v, lengths: list[int], cu_seqlens: torch.Tensor, backend: str):
    """Causal attention of packed sequences of different lengths (no attention across
    sequences). q, k, v: (total, H, D); ``lengths`` host ints, ``cu_seqlens`` int32
    (B + 1,) on the device. Returns (total, H, D)."""
    batch, longest = len(lengths), max(lengths)
    if all(n == longest for n in lengths):  # one dense call, no copies
        shape = (batch, longest, *q.shape[1:])
        return dense_causal(q.view(shape), k.view(shape), v.view(shape), backend).view(q.shape)
    if backend == "flashtile":
        import flashtile

        return flashtile.flash_attn_varlen_func(q, k, v, cu_seqlens, cu_seqlens, longest,
                                                longest, causal=True)
    # pad to (B, longest), attend densely (causal: a real row never sees padding that
    # follows it), drop the padding rows
    rows = pad_index(lengths, q.device)  # (total,) rows of the padded (B * longest)
    padded = []
    for t in (q, k, v):
        p = t.new_zeros((batch * longest, *t.shape[1:]))
        p[rows] = t
        padded.append(p.view(batch, longest, *t.shape[1:]))
    out = dense_causal(*padded, backend)
    return out.reshape(batch * longest, *q.shape[1:])[rows]


def pad_index(lengths: list[int], device) -> torch.Tensor:
    """Row of each packed token in the right-padded (B * max(lengths)) layout."""
    longest = max(lengths)
    idx = [b * longest + t for b, n in enumerate(lengths) for t in range(n)]
    return torch.tensor(idx, dtype=torch.long, device=device)


# ----------------------------------------------------------------------------------
# decode for the baselines: the batched plain-PyTorch twin of the KV-cache kernel
# ----------------------------------------------------------------------------------


def kvcache_attention_torch(
    q, k_cache, v_cache, k=None, v=None, cache_seqlens=None, page_table=None,
    softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, num_splits=0,
    return_lse=False,
):
    """Plain-PyTorch attention over a KV cache, with the signature and semantics of
    ``flashtile.flash_attn_with_kvcache`` (fp32 math; no host synchronisation, so it
    can be captured in a CUDA graph).

    q: (B, Sq, H, D). k_cache, v_cache: (B, S_cache, Hkv, D) contiguous, or
    (num_pages, page_size, Hkv, D) with ``page_table`` (B, max_pages) int32. k, v:
    (B, Snew, Hkv, D) new keys/values, written into the cache at ``cache_seqlens``
    (int32 (B,), or an int; lengths before this call, not modified; None = full cache).
    Masks as flash-attn: causal and windows bottom-right aligned on each sequence's
    length ``cache_seqlens + Snew``. ``num_splits`` is accepted and ignored.
    Returns out (B, Sq, H, D) in q's dtype, or (out, lse (B, H, Sq) fp32).
    """
    del num_splits
    batch, seqlen_q, nheads, head_dim = q.shape
    nheads_kv = k_cache.shape[2]
    dev = q.device
    if page_table is not None:
        capacity = page_table.shape[1] * k_cache.shape[1]
    else:
        capacity = k_cache.shape[1]
    if cache_seqlens is None:
        lens = torch.full((batch,), capacity, dtype=torch.long, device=dev)
    elif isinstance(cache_seqlens, int):
        lens = torch.full((batch,), cache_seqlens, dtype=torch.long, device=dev)
    else:
        lens = cache_seqlens.long()
    # -- append the new keys/values at each sequence's length --
    n_new = 0 if k is None else k.shape[1]
    if n_new:
        pos = lens[:, None] + torch.arange(n_new, device=dev)  # (B, Snew)
        if page_table is None:
            rows = torch.arange(batch, device=dev)[:, None].expand_as(pos)
            k_cache[rows, pos] = k
            v_cache[rows, pos] = v
        else:
            page_size = k_cache.shape[1]
            page = page_table.long().gather(1, pos // page_size)
            k_cache[page, pos % page_size] = k
            v_cache[page, pos % page_size] = v
    if page_table is None:
        keys, values = k_cache, v_cache  # (B, S, Hkv, D)
    else:
        pages = page_table.long()
        keys = k_cache[pages].flatten(1, 2)  # (B, max_pages * page_size, Hkv, D)
        values = v_cache[pages].flatten(1, 2)
    seqlen_k = lens + n_new  # (B,)
    # -- scores, masks, softmax in fp32 --
    group = nheads // nheads_kv
    kf = keys.float().repeat_interleave(group, dim=2) if group > 1 else keys.float()
    vf = values.float().repeat_interleave(group, dim=2) if group > 1 else values.float()
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(head_dim)
    s = torch.einsum("bqhd,bkhd->bhqk", q.float(), kf) * scale  # (B, H, Sq, S)
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(seqlen_q, device=dev)[:, None]
    j = torch.arange(kf.shape[1], device=dev)[None, :]
    diag = (seqlen_k - seqlen_q)[:, None, None]  # (B, 1, 1)
    keep = j < seqlen_k[:, None, None]
    left, right = window_size
    if causal:
        right = 0
    if right >= 0:
        keep = keep & (j <= i + diag + right)
    if left >= 0:
        keep = keep & (j >= i + diag - left)
    s = s.masked_fill(~keep[:, None], float("-inf"))
    lse = torch.logsumexp(s, dim=-1)  # (B, H, Sq)
    p = torch.exp(s - lse[..., None]).nan_to_num(0.0)  # fully masked rows -> 0
    out = torch.einsum("bhqk,bkhd->bqhd", p, vf).to(q.dtype)
    return (out, lse) if return_lse else out
