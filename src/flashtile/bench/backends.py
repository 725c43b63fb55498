"""Backend registry: ``name -> factory(q, k, v, causal, *, dout=None) -> Closures``.

Every factory takes q, k, v in flashtile's layout ``(batch, seqlen, nheads, headdim)``
and does all preparation (layout copies, block masks, ``torch.compile`` wrappers) once,
outside the timed region. It returns two zero-argument closures:

    fwd()       forward only, on inputs that do not require grad (no autograd graph)
    fwd_bwd()   forward, then ``torch.autograd.grad(out, (q, k, v), dout)`` with a fixed
                dout; nothing accumulates in ``.grad`` from call to call

A factory raises ``BackendUnavailable`` with a reason when it cannot run here (no
CUDA device, torch too old). Errors that only show on the first call (no SDPA kernel
for this head dim, shared memory exceeded) are caught by the harness at warm-up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

__all__ = [
    "BACKENDS",
    "BackendUnavailable",
    "Closures",
    "backend_names",
    "get_backend",
    "register",
]


class BackendUnavailable(RuntimeError):
    """This backend cannot run on this machine or for this problem; str() says why."""


@dataclass
class Closures:
    """The two timed calls of one backend on one problem."""

    fwd: Callable[[], object]
    fwd_bwd: Callable[[], object]


Factory = Callable[..., Closures]
BACKENDS: dict[str, Factory] = {}


def register(name: str) -> Callable[[Factory], Factory]:
    """Decorator adding ``factory`` to ``BACKENDS`` under ``name``."""

    def deco(factory: Factory) -> Factory:
        if name in BACKENDS:
            raise ValueError(f"backend {name!r} is already registered")
        BACKENDS[name] = factory
        return factory

    return deco


def backend_names() -> list[str]:
    """Registered backend names, in registration order."""
    return list(BACKENDS)


def get_backend(name: str) -> Factory:
    """The factory registered as ``name``; ``KeyError`` names the known backends."""
    try:
        return BACKENDS[name]
    except KeyError:
        raise KeyError(f"unknown backend {name!r}; known: {', '.join(BACKENDS)}") from None


# ----------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------


def _fixed_dout(like: torch.Tensor, dout: torch.Tensor | None) -> torch.Tensor:
    """``dout`` as given, or a fixed random tensor shaped like ``like`` (seed 0)."""
    if dout is not None:
        return dout
    gen = torch.Generator(device=like.device).manual_seed(0)
    return torch.randn(like.shape, dtype=like.dtype, device=like.device, generator=gen)


def _closures(attn: Callable, inputs: tuple, dout: torch.Tensor) -> Closures:
    """Closures calling ``attn(q, k, v)`` on ``inputs`` (already in attn's layout)."""
    plain = tuple(t.detach() for t in inputs)
    leaves = tuple(t.detach().requires_grad_() for t in inputs)  # share storage

    def fwd():
        return attn(*plain)

    def fwd_bwd():
        out = attn(*leaves)
        return torch.autograd.grad(out, leaves, dout)

    return Closures(fwd=fwd, fwd_bwd=fwd_bwd)


def _require_cuda(q: torch.Tensor, what: str) -> None:
    if q.device.type != "cuda":
        raise BackendUnavailable(f"{what} needs a CUDA device (inputs are on {q.device})")


def _to_bhsd(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Contiguous (B, H, S, D) copies of (B, S, H, D) tensors, made once."""
    return tuple(t.transpose(1, 2).contiguous() for t in tensors)


def raise_recompile_limit(limit: int = 256) -> None:
    """Let dynamo keep one compiled graph per benchmark shape (its default is 8).

    The setting is ``recompile_limit`` (torch >= 2.7) or ``cache_size_limit`` before;
    it only ever goes up, and it is changed when a flex backend is built, not at import.
    """
    cfg = torch._dynamo.config
    for new, old in (
        ("recompile_limit", "cache_size_limit"),
        ("accumulated_recompile_limit", "accumulated_cache_size_limit"),
    ):
        name = new if hasattr(cfg, new) else old
        if hasattr(cfg, name):
            setattr(cfg, name, max(getattr(cfg, name), limit))


# ----------------------------------------------------------------------------------
# backends
# ----------------------------------------------------------------------------------


@register("flashtile")
def flashtile_backend(q, k, v, causal: bool, *, dout=None) -> Closures:
    """``flashtile.ops.flash.flash_attn_func`` (public API, autograd for the backward)."""
    from ..ops.flash import flash_attn_func

    def attn(q_, k_, v_):
        return flash_attn_func(q_, k_, v_, causal=causal)

    return _closures(attn, (q, k, v), _fixed_dout(q, dout))


@register("flashtile-nd")
def flashtile_nd_backend(q, k, v, causal: bool, *, dout=None) -> Closures:
    """``flash_attn_func(..., deterministic=False)``: the backward may add dQ with racing
    reduce-adds (configs.hopper_bwd_reduce_preferred, FLASHTILE_HOPPER_BWD_REDUCE), as
    SDPA's flash and cuDNN backwards do."""
    from ..ops.flash import flash_attn_func

    def attn(q_, k_, v_):
        return flash_attn_func(q_, k_, v_, causal=causal, deterministic=False)

    return _closures(attn, (q, k, v), _fixed_dout(q, dout))


def _sdpa_factory(member: str, label: str) -> Factory:
    """Factory for SDPA pinned to ``SDPBackend.<member>`` (no silent fallback)."""

    def factory(q, k, v, causal: bool, *, dout=None) -> Closures:
        _require_cuda(q, label)
        from torch.nn.attention import SDPBackend, sdpa_kernel

        backend = getattr(SDPBackend, member)
        gqa = q.shape[2] != k.shape[2]

        def attn(q_, k_, v_):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q_, k_, v_, is_causal=causal, enable_gqa=gqa)

        (dout_t,) = _to_bhsd(_fixed_dout(q, dout))
        return _closures(attn, _to_bhsd(q, k, v), dout_t)

    factory.__doc__ = f"{label}: F.scaled_dot_product_attention under SDPBackend.{member}."
    return factory


register("sdpa-cudnn")(_sdpa_factory("CUDNN_ATTENTION", "SDPA cuDNN"))
register("sdpa-flash")(_sdpa_factory("FLASH_ATTENTION", "SDPA flash"))
register("sdpa-efficient")(_sdpa_factory("EFFICIENT_ATTENTION", "SDPA memory-efficient"))


@register("flex")
def flex_backend(q, k, v, causal: bool, *, dout=None) -> Closures:
    """FlexAttention compiled once per shape (``dynamic=False``); causal via a block mask.

    The block mask is built here, outside timing. Compilation happens on the first
    call of each closure, which the harness reports as first-call time.
    """
    _require_cuda(q, "flex_attention")
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    except ImportError as exc:
        raise BackendUnavailable(f"flex_attention not in torch {torch.__version__}") from exc
    raise_recompile_limit()
    seqlen_q, seqlen_k = q.shape[1], k.shape[1]
    offset = seqlen_k - seqlen_q  # bottom-right causal, as flashtile

    def causal_mod(b, h, q_idx, kv_idx):
        return q_idx + offset >= kv_idx

    block_mask = None
    if causal:
        block_mask = create_block_mask(causal_mod, None, None, seqlen_q, seqlen_k, device=q.device)
    compiled = torch.compile(flex_attention, dynamic=False)
    gqa = q.shape[2] != k.shape[2]

    def attn(q_, k_, v_):
        return compiled(q_, k_, v_, block_mask=block_mask, enable_gqa=gqa)

    (dout_t,) = _to_bhsd(_fixed_dout(q, dout))
    return _closures(attn, _to_bhsd(q, k, v), dout_t)
