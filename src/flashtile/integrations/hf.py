"""flashtile inside HuggingFace transformers, through one ``attn_implementation`` argument.

    from transformers import AutoModelForCausalLM
    from flashtile.integrations import hf

    name = hf.register()                      # "tile_attention"; call once, before loading
    model = AutoModelForCausalLM.from_pretrained(path, attn_implementation=name)

``register()`` adds two entries under one name: ``attention_forward`` to transformers'
``AttentionInterface`` (every attention layer calls it) and ``mask_interface`` to its
``AttentionMaskInterface`` (the model builds its mask once per forward with it). Nothing
happens at import time.

The name contains no "flash": transformers routes every implementation name containing
"flash" to its own flash-attn loader (and many models then take flash-attn-only code
paths), so "flashtile" itself cannot be the name.

What maps onto what:
    causal / bidirectional      ``causal`` of flash_attn_func (bottom-right aligned: the
                                queries are the last keys, as with the model's KV cache)
    sliding_window W            ``window_size=(W - 1, 0)`` (HF keeps q - W < k <= q)
    softcap, scaling            ``softcap``, ``softmax_scale``
    GQA / MQA                   native (no repeat_kv)
    padding (2-D mask)          unpad -> flash_attn_varlen_func -> pad back
    decode (1 query, no grad)   flash_attn_with_kvcache over the model's cache (split-KV)
Anything else (a custom or packed-sequence mask pattern, a static cache, a mask with
holes, attention sinks, a position bias, unsupported dtypes or head dims, dropout with
padding) runs on PyTorch's SDPA for that call (a small math path where softcap is
needed, which SDPA lacks), logged once per model and reason on the
``flashtile.integrations.hf`` logger.

Layouts: transformers passes query/key/value as (batch, heads, seqlen, head_dim) and
expects (batch, seqlen, heads, head_dim) back (its sdpa path ends in transpose(1, 2)).
"""

from __future__ import annotations

import logging
import math
import sys
import weakref
from dataclasses import dataclass

import torch
import torch.nn.functional as F

__all__ = ["NAME", "register", "attention_forward", "mask_interface", "fallback_reasons"]

NAME = "tile_attention"

logger = logging.getLogger(__name__)

# names transformers treats specially: "flash" -> flash-attn loader, "sdpa" / "flex_attention"
# -> their dispatch checks, "paged|" -> continuous batching, "/" -> a hub kernel repository
_RESERVED_PARTS = ("flash", "sdpa", "flex_attention", "paged|", "/")

_warned: set[tuple[str, str]] = set()


def register(name: str = NAME) -> str:
    """Register flashtile with transformers under ``name`` and return the name, to pass as
    ``attn_implementation=`` to ``from_pretrained`` / ``from_config`` / ``_from_config``,
    or to ``model.set_attn_implementation``. Safe to call more than once."""
    if not isinstance(name, str) or not name or name == "eager" or any(
        part in name for part in _RESERVED_PARTS
    ):
        raise ValueError(
            f"name must be a non-empty string that is not 'eager' and contains none of "
            f"{_RESERVED_PARTS} (transformers gives those other meanings), got {name!r}"
        )
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(name, attention_forward)
    AttentionMaskInterface.register(name, mask_interface)
    return name


def fallback_reasons() -> list[tuple[str, str]]:
    """The (model, reason) pairs that fell back to PyTorch so far (each logged once)."""
    return sorted(_warned)


# ==================================================================================
# the attention function
# ==================================================================================


def attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    sliding_window: int | None = None,
    softcap: float | None = None,
    is_causal: bool | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """transformers' attention-function contract, run on flashtile.

    Args:
        module: the calling attention layer (``is_causal``, ``config`` are read).
        query: (batch, heads, seqlen_q, head_dim).
        key, value: (batch, heads_kv, seqlen_k, head_dim), the model's cache included;
            heads % heads_kv == 0 (GQA / MQA).
        attention_mask: None, a (batch, seqlen_k) bool padding mask from
            ``mask_interface``, or a 4-D mask (falls back to SDPA).
        scaling: scale of q.k (default 1 / sqrt(head_dim)).
        dropout: attention dropout probability (0.0 in eval).
        sliding_window: keep key k for query q when q - sliding_window < k <= q.
        softcap: logit soft-capping, scores -> softcap * tanh(scores / softcap).
        is_causal: overrides ``module.is_causal``.

    Returns:
        (out, None): out (batch, seqlen_q, heads, head_dim) in query's dtype; no weights.
    """
    causal = bool(is_causal if is_causal is not None else getattr(module, "is_causal", True))
    softcap = float(softcap) if softcap else 0.0
    reason = _unsupported(query, key, value, attention_mask, causal, sliding_window, dropout,
                          kwargs)
    plan = None
    if reason is None and attention_mask is not None:
        plan = padding_plan(attention_mask, query.shape[2], key.shape[2])
        reason = plan if isinstance(plan, str) else None
    if reason is not None:
        _warn_once(module, reason)
        return _fallback(module, query, key, value, attention_mask, causal, scaling, dropout,
                         sliding_window, softcap, kwargs)

    window = (sliding_window - 1, -1) if sliding_window else (-1, -1)
    scale = float(scaling) if scaling is not None else 1.0 / math.sqrt(query.shape[-1])
    # (B, H, S, D) -> (B, S, H, D) views: the kernels need only the last dim packed
    q, k, v = (t.transpose(1, 2) if t.stride(-1) == 1 else t.contiguous().transpose(1, 2)
               for t in (query, key, value))
    opts = dict(softmax_scale=scale, causal=causal, window_size=window, softcap=softcap)
    if plan is not None:
        out = _varlen(q, k, v, plan, opts)
    elif q.shape[1] == 1 and not _needs_grad(q, k, v):
        from ..ops.kvcache import flash_attn_with_kvcache

        out = flash_attn_with_kvcache(q, k, v, **opts)  # the whole cache, split-KV
    else:
        from ..ops.flash import flash_attn_func

        out = flash_attn_func(q, k, v, dropout_p=float(dropout), **opts)
    return out, None


def _needs_grad(*tensors) -> bool:
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def _unsupported(query, key, value, attention_mask, causal, sliding_window, dropout, kwargs):
    """Why flashtile cannot take this call, or None (shapes, dtypes, flags only)."""
    from ..ops.sdpa import _unsupported as sdpa_unsupported

    if attention_mask is not None and attention_mask.dim() != 2:
        return _mask_reasons.get(attention_mask) or (
            f"a {attention_mask.dim()}-D attention mask from the caller"
        )
    reason = sdpa_unsupported(query, key, value, None, True)
    if reason is not None:
        return reason
    if kwargs.get("s_aux") is not None:
        return "attention sinks (s_aux)"
    if kwargs.get("position_bias") is not None:
        return "an additive position bias"
    if sliding_window and not causal:
        return "a bidirectional sliding window"
    if dropout and attention_mask is not None:
        return "attention dropout with a padding mask (the varlen kernel has no dropout)"
    return None


def _warn_once(module, reason: str) -> None:
    config = getattr(module, "config", None)
    model = f"{getattr(config, 'model_type', None) or 'model'} ({type(module).__name__})"
    if (model, reason) not in _warned:
        _warned.add((model, reason))
        logger.warning("flashtile: %s falls back to PyTorch attention for %s", model, reason)


# ==================================================================================
# padding: unpad -> varlen -> pad back
# ==================================================================================


@dataclass
class PaddingPlan:
    """Where a padded batch's valid tokens are, for the varlen kernel.

    The valid keys of each row must be one contiguous run (left or right padding, or
    both); the valid queries are then a suffix of that run, so the kernel's bottom-right
    alignment puts every query at its true key position."""

    q_index: tuple[torch.Tensor, torch.Tensor]  # (batch idx, position idx) of valid queries
    k_index: tuple[torch.Tensor, torch.Tensor]  # the same for valid keys
    cu_seqlens_q: torch.Tensor  # (batch + 1,) int32
    cu_seqlens_k: torch.Tensor
    max_seqlen_q: int
    max_seqlen_k: int


# the model reuses its mask tensors for every layer (Gemma-2: one sliding, one full):
# plan once per (mask, its version, seqlen_q, seqlen_k); entries (weakref to mask, key, plan)
_plan_cache: list = []
_PLAN_CACHE_SIZE = 4


def padding_plan(mask: torch.Tensor, seqlen_q: int, seqlen_k: int) -> PaddingPlan | str:
    """The plan for a (batch, seqlen_k) padding mask (True = valid), or why there is none.
    Reads the mask on the host (one synchronisation per mask, as transformers' own
    flash-attention path does)."""
    key = (mask._version, seqlen_q, seqlen_k)  # _version: in-place edits make a new plan
    for ref, seen, plan in _plan_cache:
        if ref() is mask and seen == key:
            return plan
    plan = _make_plan(mask, seqlen_q, seqlen_k)
    _plan_cache[:] = [*_plan_cache[-(_PLAN_CACHE_SIZE - 1):], (weakref.ref(mask), key, plan)]
    return plan


def _make_plan(mask, seqlen_q, seqlen_k):
    if mask.shape[0] == 0:
        return "an empty batch"
    if mask.shape[1] != seqlen_k or seqlen_q > seqlen_k:
        return (f"a padding mask of {mask.shape[1]} columns for {seqlen_k} keys and "
                f"{seqlen_q} queries (a static cache?)")
    valid = mask if mask.dtype == torch.bool else mask != 0  # (B, Sk)
    pos = torch.arange(seqlen_k, device=mask.device)
    count_k = valid.sum(1, dtype=torch.int32)
    first = torch.where(valid, pos, seqlen_k).amin(1)
    last = torch.where(valid, pos, -1).amax(1)
    holes = ((last - first + 1 != count_k) & (count_k > 0)).any()
    valid_q = valid[:, seqlen_k - seqlen_q:]  # (B, Sq): the queries are the last keys
    count_q = valid_q.sum(1, dtype=torch.int32)
    has_holes, max_q, max_k = torch.stack(
        [holes.to(torch.int32), count_q.max(), count_k.max()]
    ).tolist()
    if has_holes:
        return "a padding mask with holes (valid tokens not contiguous)"
    return PaddingPlan(
        q_index=valid_q.nonzero(as_tuple=True), k_index=valid.nonzero(as_tuple=True),
        cu_seqlens_q=F.pad(count_q.cumsum(0, dtype=torch.int32), (1, 0)),
        cu_seqlens_k=F.pad(count_k.cumsum(0, dtype=torch.int32), (1, 0)),
        max_seqlen_q=int(max_q), max_seqlen_k=int(max_k),
    )


def _varlen(q, k, v, plan: PaddingPlan, opts) -> torch.Tensor:
    from ..ops.varlen import flash_attn_varlen_func

    batch, seqlen_q, nheads, head_dim = q.shape
    out_packed = flash_attn_varlen_func(
        q[plan.q_index], k[plan.k_index], v[plan.k_index],  # (total, heads, D) each
        plan.cu_seqlens_q, plan.cu_seqlens_k, plan.max_seqlen_q, plan.max_seqlen_k, **opts,
    )
    out = q.new_zeros((batch, seqlen_q, nheads, head_dim))  # padded queries get zeros
    return out.index_put(plan.q_index, out_packed)


# ==================================================================================
# the mask function
# ==================================================================================


class _MaskReasons:
    """Why ``mask_interface`` returned a dense mask, keyed by the mask object (weakly)."""

    def __init__(self, size: int = 8):
        self.entries: list[tuple[weakref.ref, str]] = []
        self.size = size

    def put(self, mask, reason: str) -> None:
        if isinstance(mask, torch.Tensor):
            self.entries = [*self.entries[-(self.size - 1):], (weakref.ref(mask), reason)]

    def get(self, mask) -> str | None:
        return next((r for ref, r in self.entries if ref() is mask), None)


_mask_reasons = _MaskReasons()


def mask_interface(
    batch_size: int,
    q_length: int,
    kv_length: int,
    q_offset: int = 0,
    kv_offset: int = 0,
    mask_function=None,
    attention_mask: torch.Tensor | None = None,
    **kwargs,
):
    """transformers' mask-function contract (``AttentionMaskInterface``).

    For the patterns flashtile runs natively (causal, sliding-window causal,
    bidirectional; keys ending where the queries end) returns what transformers'
    flash-attention path returns: None, or the (batch, kv_length) bool padding mask.
    For anything else it returns SDPA's dense 4-D mask, and ``attention_forward`` then
    falls back to SDPA with it.
    """
    pattern = _mask_pattern(mask_function)
    reason = None
    if pattern is None:
        reason = ("a mask pattern other than causal / sliding-window / padding (an or/and "
                  "overlay, packed sequences, chunked attention)")
    elif pattern != "full" and not (
        isinstance(q_offset, int) and isinstance(kv_offset, int)
        and kv_offset + kv_length == q_offset + q_length
    ):
        reason = "keys that do not end where the queries end (a static or offset cache)"
    elif attention_mask is not None and attention_mask.shape[-1] < kv_length:
        reason = "a padding mask shorter than the keys (a static cache)"
    if reason is not None:
        from transformers.masking_utils import sdpa_mask

        kwargs.update(allow_is_causal_skip=False, allow_is_bidirectional_skip=False)
        mask = sdpa_mask(
            batch_size=batch_size, q_length=q_length, kv_length=kv_length, q_offset=q_offset,
            kv_offset=kv_offset, mask_function=mask_function, attention_mask=attention_mask,
            **kwargs,
        )
        _mask_reasons.put(mask, reason)
        return mask
    if attention_mask is None:
        return None
    attention_mask = attention_mask[:, -kv_length:]
    return None if bool(attention_mask.all()) else attention_mask


def _mask_pattern(fn) -> str | None:
    """"causal", "sliding", "full" for transformers' own mask functions, else None."""
    from transformers import masking_utils as mu

    if fn is None or fn is mu.causal_mask_function:
        return "causal"
    if fn is getattr(mu, "bidirectional_mask_function", None):
        return "full"
    # sliding_window_causal_mask_function(W) = and_masks(sliding_window_overlay(W), causal)
    parts = _closure(fn).get("mask_functions")
    if (
        getattr(fn, "__qualname__", "") == "and_masks.<locals>.and_mask"
        and isinstance(parts, tuple) and len(parts) == 2
        and getattr(parts[0], "__qualname__", "") == "sliding_window_overlay.<locals>.inner_mask"
        and parts[1] is mu.causal_mask_function
    ):
        return "sliding"
    return None


def _closure(fn) -> dict:
    code, cells = getattr(fn, "__code__", None), getattr(fn, "__closure__", None)
    if code is None or not cells:
        return {}
    return {name: cell.cell_contents for name, cell in zip(code.co_freevars, cells)}


# ==================================================================================
# fallback: PyTorch attention with a dense mask
# ==================================================================================


def _fallback(module, query, key, value, attention_mask, causal, scaling, dropout,
              sliding_window, softcap, kwargs):
    seqlen_q, seqlen_k = query.shape[2], key.shape[2]
    if attention_mask is not None and attention_mask.dim() == 4:
        mask = attention_mask
    else:
        mask = dense_mask(attention_mask, causal, sliding_window, seqlen_q, seqlen_k,
                          query.device)
    if kwargs.get("s_aux") is not None:  # sinks: the model's own eager function knows them
        eager = sys.modules[type(module).__module__].eager_attention_forward
        if mask is not None and mask.dtype == torch.bool:
            mask = torch.zeros(mask.shape, dtype=query.dtype, device=query.device).masked_fill(
                ~mask, torch.finfo(query.dtype).min)
        return eager(module, query, key, value, mask, dropout=dropout, scaling=scaling,
                     sliding_window=sliding_window, **kwargs)
    if softcap:
        return _math_attention(module, query, key, value, mask, scaling, softcap, dropout), None
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    return sdpa_attention_forward(module, query, key, value, mask, dropout=dropout,
                                  scaling=scaling, is_causal=False, **kwargs)


def dense_mask(padding, causal, sliding_window, seqlen_q, seqlen_k, device):
    """(batch or 1, 1, seqlen_q, seqlen_k) bool keep-mask, bottom-right aligned (the
    queries are the last keys), or None when nothing is masked."""
    if not causal and not sliding_window and padding is None:
        return None
    from ..reference import attention_mask

    # transformers' window W keeps keys j > i - W: a left window of W - 1
    left = sliding_window - 1 if sliding_window else None
    keep = attention_mask(seqlen_q, seqlen_k, causal, (left, None), device)[None, None]
    if padding is not None:
        keep = keep & padding[:, None, None, -seqlen_k:].to(torch.bool)
    return keep


def _math_attention(module, query, key, value, mask, scaling, softcap, dropout):
    """Plain attention with logit softcap (SDPA has none): (B, Sq, H, D) out."""
    groups = query.shape[1] // key.shape[1]
    key, value = (t.repeat_interleave(groups, dim=1) for t in (key, value))
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    scores = torch.matmul(query, key.transpose(-1, -2)).float() * scale  # (B, H, Sq, Sk)
    scores = softcap * torch.tanh(scores / softcap)
    if mask is not None:
        scores = (scores.masked_fill(~mask, -math.inf) if mask.dtype == torch.bool
                  else scores + mask.float())
    probs = torch.softmax(scores, dim=-1).nan_to_num(0.0).to(value.dtype)
    probs = F.dropout(probs, p=dropout, training=module.training)
    return torch.matmul(probs, value).transpose(1, 2)
