"""``flashtile.sdpa``: a drop-in for ``torch.nn.functional.scaled_dot_product_attention``.

Same signature, layout ``(batch, nheads, seqlen, headdim)`` and semantics (top-left
causal, ``scale``, ``enable_gqa``). What flashtile cannot run (an explicit ``attn_mask``,
CPU tensors without the interpreter, head dims it does not support, other ranks) goes
to PyTorch's own SDPA, with one ``warnings`` message per reason; ``last_path()`` says
which path the last call took.
"""

from __future__ import annotations

import math
import warnings

import torch
import torch.nn.functional as F

from ._checks import MAX_HEAD_DIM, SUPPORTED_DTYPES
from ._common import is_interpreting

__all__ = ["sdpa", "last_path"]

_last_path = None
_warned: set[str] = set()


def last_path() -> str | None:
    """``"flashtile"`` or ``"torch: <reason>"`` for the most recent ``sdpa`` call."""
    return _last_path


def sdpa(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> torch.Tensor:
    """Scaled dot-product attention with the exact contract of PyTorch's function.

    Args:
        query: (batch, nheads, seqlen_q, headdim).
        key, value: (batch, nheads_kv, seqlen_k, headdim); nheads_kv == nheads unless
            ``enable_gqa`` (then nheads % nheads_kv == 0).
        attn_mask: not supported by flashtile's kernels: falls back to PyTorch.
        dropout_p: attention dropout probability.
        is_causal: top-left aligned causal mask (key j kept when j <= i), as PyTorch.
        scale: scale of q.k, default 1 / sqrt(headdim).
        enable_gqa: allow nheads_kv to divide nheads.

    Returns:
        (batch, nheads, seqlen_q, headdim) in query's dtype.
    """
    global _last_path
    reason = _unsupported(query, key, value, attn_mask, enable_gqa)
    if reason is not None:
        _last_path = f"torch: {reason}"
        if reason not in _warned and not reason.startswith("heads"):
            _warned.add(reason)
            warnings.warn(f"flashtile.sdpa falls back to PyTorch's SDPA: {reason}", stacklevel=2)
        return F.scaled_dot_product_attention(
            query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
            scale=scale, enable_gqa=enable_gqa,
        )
    from .flash import FlashAttnFunction

    seqlen_q, seqlen_k = query.shape[-2], key.shape[-2]
    # top-left causal is a window with right bound seqlen_q - seqlen_k (bottom-right frame)
    right = (seqlen_q - seqlen_k) if is_causal else None
    softmax_scale = float(scale) if scale is not None else 1.0 / math.sqrt(query.shape[-1])
    # (B, H, S, D) -> (B, S, H, D) views; the kernels need only the last dim packed
    q, k, v = (t.transpose(1, 2) if t.stride(-1) == 1 else t.contiguous().transpose(1, 2)
               for t in (query, key, value))
    out, _ = FlashAttnFunction.apply(
        q, k, v, softmax_scale, None, right, 0.0, float(dropout_p), True
    )
    _last_path = "flashtile"
    return out.transpose(1, 2)


def _unsupported(query, key, value, attn_mask, enable_gqa) -> str | None:
    """Why flashtile cannot take this call, or None. (Written without generators: it
    runs on every call of flashtile.sdpa and of the HF integration, where each
    microsecond of host time shows in host-bound steps.)"""
    if attn_mask is not None:
        return "an explicit attn_mask"
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        return "inputs that are not 4-D (batch, nheads, seqlen, headdim)"
    dtype = query.dtype
    if dtype not in SUPPORTED_DTYPES or key.dtype != dtype or value.dtype != dtype:
        return f"dtypes {query.dtype}/{key.dtype}/{value.dtype}"
    device = query.device
    if key.device != device or value.device != device:
        return "tensors on different devices"
    if device.type != "cuda" and not (device.type == "cpu" and is_interpreting()):
        return f"{device.type} tensors (flashtile needs CUDA or TRITON_INTERPRET=1)"
    qs, ks, vs = query.shape, key.shape, value.shape
    d = qs[3]
    if d % 8 or d > MAX_HEAD_DIM or ks[3] != d or vs[3] != d:
        return f"head dims {d}/{ks[3]}/{vs[3]} (needs equal, a multiple of 8, <= {MAX_HEAD_DIM})"
    if ks != vs or qs[0] != ks[0]:
        return "shapes PyTorch would reject"
    hq, hkv = qs[1], ks[1]
    if hq != hkv and not (enable_gqa and hkv > 0 and hq % hkv == 0):
        return "heads mismatch (PyTorch raises)"
    if query.is_nested or key.is_nested or value.is_nested:
        return "nested tensors"
    return None
