"""flash-attn's packed entry points: Q, K and V (or K and V) in one tensor.

Code written against flash-attn often keeps the projections packed, as one
``(batch, seqlen, 3, nheads, headdim)`` tensor straight out of a fused QKV linear layer.
These functions take that layout and call ``flash_attn_func`` / ``flash_attn_varlen_func``
on views of it: no copy in the forward, since the kernels take any strides but the last.
The backward of the views (``unbind``) stacks dQ, dK and dV into one gradient of the
packed tensor's shape, as flash-attn's packed functions return.

Argument order and names follow flash-attn's functions of the same names, minus the
arguments flashtile does not have (``alibi_slopes``, ``return_attn_probs``; ``return_lse``
returns the log-sum-exp instead).
"""

from __future__ import annotations

import torch

from .flash import flash_attn_func
from .varlen import flash_attn_varlen_func


def _unpack(name: str, x, n: int, ndim: int, layout: str) -> tuple[torch.Tensor, ...]:
    """Split ``x`` along its packed dimension (``ndim - 3``) into ``n`` views."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions {layout}, got shape {tuple(x.shape)}")
    dim = ndim - 3
    if x.shape[dim] != n:
        raise ValueError(
            f"{name} must have size {n} in dimension {dim} {layout}, got shape {tuple(x.shape)}"
        )
    return x.unbind(dim)


def flash_attn_qkvpacked_func(
    qkv: torch.Tensor, dropout_p: float = 0.0, softmax_scale: float | None = None,
    causal: bool = False, window_size: tuple[int, int] = (-1, -1), softcap: float = 0.0,
    deterministic: bool = True, return_lse: bool = False,
):
    """``flash_attn_func`` on Q, K and V packed in one tensor.

    Args:
        qkv: (batch, seqlen, 3, nheads, headdim), float16 / bfloat16 / float32; last
            dimension contiguous. ``qkv[:, :, 0]`` is Q, ``[:, :, 1]`` K, ``[:, :, 2]`` V.
        dropout_p, softmax_scale, causal, window_size, softcap, deterministic, return_lse:
            as in ``flash_attn_func``.

    Returns:
        out (batch, seqlen, nheads, headdim) in qkv's dtype, or (out, lse) with lse
        (batch, nheads, seqlen) float32. The gradient of qkv has qkv's shape.
    """
    q, k, v = _unpack("qkv", qkv, 3, 5, "(batch, seqlen, 3, nheads, headdim)")
    return flash_attn_func(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap,
                           deterministic, return_lse)


def flash_attn_kvpacked_func(
    q: torch.Tensor, kv: torch.Tensor, dropout_p: float = 0.0,
    softmax_scale: float | None = None, causal: bool = False,
    window_size: tuple[int, int] = (-1, -1), softcap: float = 0.0, deterministic: bool = True,
    return_lse: bool = False,
):
    """``flash_attn_func`` with K and V packed in one tensor (GQA / MQA allowed).

    Args:
        q: (batch, seqlen_q, nheads, headdim).
        kv: (batch, seqlen_k, 2, nheads_kv, headdim), q's dtype and device; ``kv[:, :, 0]``
            is K, ``kv[:, :, 1]`` V; nheads a multiple of nheads_kv.
        dropout_p, softmax_scale, causal, window_size, softcap, deterministic, return_lse:
            as in ``flash_attn_func``.

    Returns:
        out (batch, seqlen_q, nheads, headdim), or (out, lse). The gradient of kv has
        kv's shape.
    """
    k, v = _unpack("kv", kv, 2, 5, "(batch, seqlen_k, 2, nheads_kv, headdim)")
    return flash_attn_func(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap,
                           deterministic, return_lse)


def flash_attn_varlen_qkvpacked_func(
    qkv: torch.Tensor, cu_seqlens: torch.Tensor, max_seqlen: int,
    softmax_scale: float | None = None, causal: bool = False,
    window_size: tuple[int, int] = (-1, -1), softcap: float = 0.0, return_lse: bool = False,
):
    """``flash_attn_varlen_func`` on packed sequences whose Q, K and V share one tensor
    (self-attention: the same lengths for queries and keys).

    Args:
        qkv: (total_tokens, 3, nheads, headdim).
        cu_seqlens: int32 (batch + 1,) cumulative sequence lengths, on qkv's device.
        max_seqlen: the longest sequence's length (a host int).
        softmax_scale, causal, window_size, softcap, return_lse: as in
            ``flash_attn_varlen_func``.

    Returns:
        out (total_tokens, nheads, headdim), or (out, lse) with lse (nheads, total_tokens).
    """
    q, k, v = _unpack("qkv", qkv, 3, 4, "(total_tokens, 3, nheads, headdim)")
    return flash_attn_varlen_func(q, k, v, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen,
                                  softmax_scale, causal, window_size, softcap, return_lse)


def flash_attn_varlen_kvpacked_func(
    q: torch.Tensor, kv: torch.Tensor, cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor,
    max_seqlen_q: int, max_seqlen_k: int, softmax_scale: float | None = None,
    causal: bool = False, window_size: tuple[int, int] = (-1, -1), softcap: float = 0.0,
    return_lse: bool = False,
):
    """``flash_attn_varlen_func`` with K and V packed in one tensor.

    Args:
        q: (total_q, nheads, headdim).
        kv: (total_k, 2, nheads_kv, headdim); ``kv[:, 0]`` is K, ``kv[:, 1]`` V.
        cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
            window_size, softcap, return_lse: as in ``flash_attn_varlen_func``.

    Returns:
        out (total_q, nheads, headdim), or (out, lse) with lse (nheads, total_q).
    """
    k, v = _unpack("kv", kv, 2, 4, "(total_k, 2, nheads_kv, headdim)")
    return flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                  max_seqlen_k, softmax_scale, causal, window_size, softcap,
                                  return_lse)
