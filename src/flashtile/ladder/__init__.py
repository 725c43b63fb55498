"""The kernel ladder: from naive attention to FlashAttention on tensor cores.

Every rung has the launcher's signature and returns ``(out, lse)``::

    rung(q, k, v, *, causal=False, softmax_scale=None) -> (out, lse)

    q, k, v  (batch, seqlen, nheads, headdim), float16 or bfloat16, MHA only (GQA,
             windows and softcap belong to the production kernel); any seqlen >= 1;
             last dimension contiguous, other strides free
    causal   bottom-right aligned: key j kept for query i when j <= i + Sk - Sq
    out      like q (contiguous); lse (batch, nheads, seqlen_q) float32, natural log,
             -inf (with out = 0) on rows that see no key

The rungs, bottom to top (docs/ladder.md explains each step and what it bought)::

    v1_naive            three kernels: S = QK^T -> HBM, softmax -> P in HBM, P V    fp32
    v2_fused_softmax    S -> HBM once; softmax fused into P V                      fp32
    v3_fa1              FlashAttention-1: tiled online softmax, outer loop over
                        K/V tiles, O, m, l rescaled in HBM                          fp32
    v4_fa2_tf32         FlashAttention-2 loop order, O in registers, tf32 MMA       tf32
    v5_fa2_tensorcore   the same on bf16/fp16 tensor cores, fp32 accumulators       input
    v6_tuned            causal tile pruning, exp2, software pipelining, tile table  input
    portable            the production kernel's tile-level Triton path (every GPU,
                        the interpreter; GQA, windows, softcap, dropout)            input
    production          flashtile's forward as dispatched: on sm_90 the Gluon
                        kernel (TMA, async wgmma), elsewhere the portable one       input

``RUNGS`` maps each name to ``Rung(fn, precision)``; the precision is what the rung
promises and what it is validated against (``reference_for``): "fp32" (inputs are
converted to fp32 after loading, IEEE fp32 math), "tf32" (fp32 math with tf32 matrix
products), "input" (products in the input dtype, fp32 accumulation and softmax).

Nothing here imports triton at module import: ``RUNGS`` is built on first use, so
``TRITON_INTERPRET`` can still be set by whoever imports this package.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import NamedTuple

import torch

from ..ops._common import device_ctx  # noqa: F401 (the rungs launch under it)

__all__ = [
    "PRECISIONS", "RUNGS", "Rung", "TileConfig", "check_rung", "portable", "prepare",
    "production",
    "reference_for", "registry", "round_to_tf32", "rung_names",
]

PRECISIONS = ("fp32", "tf32", "input")

# name -> module (attribute ``attention``) and promised precision, bottom to top
_LADDER = (
    ("v1_naive", "flashtile.ladder.v1_naive", "fp32"),
    ("v2_fused_softmax", "flashtile.ladder.v2_fused_softmax", "fp32"),
    ("v3_fa1", "flashtile.ladder.v3_fa1", "fp32"),
    ("v4_fa2_tf32", "flashtile.ladder.v4_fa2_tf32", "tf32"),
    ("v5_fa2_tensorcore", "flashtile.ladder.v5_fa2_tensorcore", "input"),
    ("v6_tuned", "flashtile.ladder.v6_tuned", "input"),
    ("portable", "portable", "input"),
    ("production", None, "input"),
)


class Rung(NamedTuple):
    fn: object  # rung(q, k, v, *, causal=False, softmax_scale=None) -> (out, lse)
    precision: str  # "fp32" | "tf32" | "input"


class TileConfig(NamedTuple):
    """One launch's tile shape: query rows per tile, keys per tile, warps, stages."""

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int


# Under the interpreter every tile op is a numpy call whose cost hardly depends on
# the tile size: fewer, larger tiles run faster, but the tests want several tiles per
# sequence (113 = 3 full tiles + a ragged one) to exercise masks and the rescale.
INTERP_TILE = TileConfig(32, 32, 1, 1)


def rung_names() -> list[str]:
    """The rung names, bottom to top (imports nothing)."""
    return [name for name, _, _ in _LADDER]


_RUNGS: OrderedDict[str, Rung] | None = None


def _build_rungs() -> OrderedDict[str, Rung]:
    from importlib import import_module

    rungs = OrderedDict()
    for name, module, precision in _LADDER:
        if module in (None, "portable"):
            fn = production if module is None else portable
        else:
            fn = import_module(module).attention
        rungs[name] = Rung(fn, precision)
    return rungs


def registry() -> OrderedDict[str, Rung]:
    """``RUNGS``: name -> Rung(fn, precision), bottom to top. Imports the kernels (and
    so fixes the interpreter choice) on the first call."""
    global _RUNGS
    if _RUNGS is None:
        _RUNGS = _build_rungs()
    return _RUNGS


def __getattr__(name):
    if name == "RUNGS":
        return registry()
    raise AttributeError(f"module 'flashtile.ladder' has no attribute {name!r}")


# ----------------------------------------------------------------------------------
# host-side helpers shared by the rungs
# ----------------------------------------------------------------------------------


def prepare(q, k, v, softmax_scale) -> float:
    """Checks every rung runs before launching anything; returns the softmax scale.

    Shapes, dtypes, strides and devices only (no host-device sync)."""
    from ..ops._checks import check_qkv, check_scalars

    check_qkv(q, k, v)
    if q.dtype not in (torch.float16, torch.bfloat16):
        raise TypeError(
            f"ladder rungs take float16 or bfloat16 q, k, v, got {q.dtype} "
            "(the fp32 rungs convert to fp32 after loading)"
        )
    if q.shape[2] != k.shape[2]:
        raise ValueError(
            f"ladder rungs are MHA only: q has {q.shape[2]} heads, k/v {k.shape[2]}; "
            "GQA/MQA belong to the production kernel (flashtile.flash_attn_func)"
        )
    if q.shape[1] == 0 or k.shape[1] == 0:
        raise ValueError(
            f"ladder rungs need seqlen >= 1, got seqlen_q={q.shape[1]}, seqlen_k={k.shape[1]}"
        )
    check_scalars(0.0, 0.0, softmax_scale)
    return float(softmax_scale) if softmax_scale is not None else 1.0 / math.sqrt(q.shape[-1])


def empty_outputs(q):
    """Fresh ``out`` (like q, contiguous) and ``lse`` ((B, H, Sq) float32)."""
    batch, seqlen_q, nheads, _ = q.shape
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty((batch, nheads, seqlen_q), dtype=torch.float32, device=q.device)
    return out, lse


def block_d(head_dim: int) -> int:
    """Head dim padded to a power of two >= 16 (tl.arange and tl.dot need it)."""
    return max(16, 1 << (head_dim - 1).bit_length())


def production(q, k, v, *, causal=False, softmax_scale=None):
    """The top rung: flashtile's production forward launcher (``flashtile.ops.flash``),
    under the ladder's argument checks."""
    from ..ops import flash

    scale = prepare(q, k, v, softmax_scale)
    return flash.attention_forward(q, k, v, softmax_scale=scale, causal=causal)


def portable(q, k, v, *, causal=False, softmax_scale=None):
    """The production kernel's tile-level Triton path, whatever the GPU: an explicit
    config skips the sm_90 Gluon dispatch of ``flash.attention_forward``."""
    from .. import configs
    from ..ops import flash

    scale = prepare(q, k, v, softmax_scale)
    cfg = configs.fwd_config(block_d(q.shape[-1]), causal, q.dtype, q.device, q.shape[1])
    return flash.attention_forward(q, k, v, softmax_scale=scale, causal=causal, config=cfg)


# ----------------------------------------------------------------------------------
# references in the precision each rung promises, and the check
# ----------------------------------------------------------------------------------


def round_to_tf32(x: torch.Tensor) -> torch.Tensor:
    """fp32 rounded to tf32 (10 explicit mantissa bits), to nearest even; as fp32."""
    bits = x.float().contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    bits = (bits + 0xFFF + ((bits >> 13) & 1)) & 0xFFFFE000
    bits = torch.where(bits >= 2**31, bits - 2**32, bits)
    out = bits.to(torch.int32).view(torch.float32)
    return torch.where(torch.isfinite(x), out, x.float())


def _reference_tf32(q, k, v, causal, softmax_scale):
    """Attention with tf32 matrix products, emulated: both operands of each product
    are rounded to tf32 (q, k for the scores; P, v for the output), products and
    sums in fp32, softmax in fp32. bf16 and fp16 values are exact in tf32, so for
    the ladder's inputs only P is rounded."""
    from .. import reference

    _, seqlen_q, _, head_dim = q.shape
    seqlen_k = k.shape[1]
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(head_dim)
    qt, kt, vt = (round_to_tf32(t) for t in (q, k, v))
    s = torch.einsum("bihd,bjhd->bhij", qt, kt) * scale
    keep = reference.attention_mask(seqlen_q, seqlen_k, causal, device=q.device)
    s = s.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.softmax(s, dim=-1)
    p = torch.where(keep.any(dim=-1)[:, None], p, torch.zeros_like(p))
    out = torch.einsum("bhij,bjhd->bihd", round_to_tf32(p), vt)
    return out, lse


def reference_for(precision: str, q, k, v, *, causal=False, softmax_scale=None):
    """``(out, lse)`` of the reference computed in ``precision``: the ``ref_lp`` of
    the DESIGN.md tolerance rule for a rung that promises it.

    fp32: the reference on fp32 copies of the inputs, in fp32 (out stays fp32).
    tf32: ``_reference_tf32`` (tf32 products emulated by rounding operands).
    input: the reference in the input dtype (``upcast=False``).
    """
    from .. import reference

    kw = dict(causal=causal, softmax_scale=softmax_scale)
    if precision == "fp32":
        return reference.attention_forward(q.float(), k.float(), v.float(), upcast=False, **kw)
    if precision == "tf32":
        return _reference_tf32(q, k, v, **kw)
    if precision == "input":
        return reference.attention_forward(q, k, v, upcast=False, **kw)
    raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")


def check_rung(name: str, q, k, v, *, causal=False, softmax_scale=None) -> list:
    """Run rung ``name`` and check out and lse by the DESIGN.md rule against the fp64
    reference, with ``ref_lp`` computed in the precision the rung promises.

    The bound also gets the fp32 accumulator's resolution at the problem's scale
    (8 * 2^-23 * max|ref64|, as ``validate.run_case`` gives gradients): a fp32 rung's
    lse is held to a fp32 reference, and on a row or two (seqlen 1) that reference can
    land within an ulp of the truth by luck. It is far below any real bug.
    """
    from .. import reference
    from ..validate import check_close

    rung = registry()[name]
    out, lse = rung.fn(q, k, v, causal=causal, softmax_scale=softmax_scale)
    kw = dict(causal=causal, softmax_scale=softmax_scale)
    # fp64 inputs, so out stays fp64 (the reference returns out in q's dtype)
    o64, l64 = reference.attention_forward(q.double(), k.double(), v.double(), **kw)
    olp, llp = reference_for(rung.precision, q, k, v, **kw)
    checks = []
    for what, x, r64, rlp in (("out", out, o64, olp), ("lse", lse, l64, llp)):
        finite = r64[torch.isfinite(r64)]
        scale = float(finite.abs().max()) if finite.numel() else 0.0
        checks.append(check_close(what, x, r64, rlp, atol=8 * 2.0**-23 * scale))
    return checks
