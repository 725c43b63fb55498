"""flashtile: exact FlashAttention written from scratch in Python with Triton.

Public surface (imported lazily, so ``import flashtile`` compiles nothing and
``TRITON_INTERPRET`` may still be set before the kernels are first touched)::

    flashtile.flash_attn_func(q, k, v, ...)   # (batch, seqlen, nheads, headdim)
    flashtile.sdpa(query, key, value, ...)    # drop-in for F.scaled_dot_product_attention
    flashtile.last_path()                     # which path the last sdpa() call took
"""

from importlib import import_module

__version__ = "0.1.0"

_LAZY = {
    "flash_attn_func": "flashtile.ops.flash",
    "flash_attn_varlen_func": "flashtile.ops.varlen",
    "flash_attn_with_kvcache": "flashtile.ops.kvcache",
    "flash_attn_qkvpacked_func": "flashtile.ops.packed",
    "flash_attn_kvpacked_func": "flashtile.ops.packed",
    "flash_attn_varlen_qkvpacked_func": "flashtile.ops.packed",
    "flash_attn_varlen_kvpacked_func": "flashtile.ops.packed",
    "PagedKVCache": "flashtile.kv",
    "sdpa": "flashtile.ops.sdpa",
    "last_path": "flashtile.ops.sdpa",
    "ring_flash_attn_func": "flashtile.distributed",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'flashtile' has no attribute {name!r}")


def __dir__():
    return sorted(__all__)
