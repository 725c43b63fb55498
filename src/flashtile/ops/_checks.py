"""Host-side argument checks shared by every public op.

They read only shapes, dtypes, strides and devices: nothing that lives in device memory,
so they never synchronise with the GPU (CUDA graphs and torch.compile stay intact).
"""

from __future__ import annotations

import torch

from ._common import is_interpreting

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
MAX_HEAD_DIM = 256


def check_tensor(name: str, x, ndim: int, layout: str) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions {layout}, got shape {tuple(x.shape)}")
    if x.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"{name} has dtype {x.dtype}; supported: float16, bfloat16, float32")
    if x.shape[-1] > 0 and x.stride(-1) != 1:
        raise ValueError(
            f"{name} must be contiguous in its last dimension (stride 1), got strides "
            f"{tuple(x.stride())}; call .contiguous() or pass a view with stride(-1) == 1"
        )


def check_device(names_and_tensors) -> torch.device:
    """All tensors on one device; CUDA, or CPU only under the Triton interpreter."""
    (name0, t0), *rest = names_and_tensors
    for name, t in rest:
        if t.device != t0.device:
            raise ValueError(f"{name} is on {t.device} but {name0} is on {t0.device}")
    if t0.device.type == "cpu" and not is_interpreting():
        raise ValueError(
            f"{name0} is on the CPU; flashtile's kernels need a CUDA device "
            "(or TRITON_INTERPRET=1, set before triton is imported, to run them slowly "
            "under Triton's interpreter)"
        )
    if t0.device.type not in ("cpu", "cuda"):
        raise ValueError(f"{name0} is on {t0.device}; flashtile supports cuda devices")
    return t0.device


def _qkv_ok(q, k, v, ndim: int) -> bool:
    """A quick sufficient condition for ``check_qkv`` to pass (every call of a training
    step): one pass over the attributes, no error formatting. False says nothing; then
    the full checks run and raise their usual errors."""
    if not (isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor)
            and isinstance(v, torch.Tensor)):
        return False
    dtype = q.dtype
    if dtype not in SUPPORTED_DTYPES or k.dtype != dtype or v.dtype != dtype:
        return False
    device = q.device
    if k.device != device or v.device != device:
        return False
    if device.type != "cuda" and not (device.type == "cpu" and is_interpreting()):
        return False
    qs, ks = q.shape, k.shape
    if len(qs) != ndim or len(ks) != ndim or ks != v.shape:
        return False
    if q.stride(-1) != 1 or k.stride(-1) != 1 or v.stride(-1) != 1:
        return False
    head_dim, nheads_kv = qs[-1], ks[-2]
    return (head_dim % 8 == 0 and 8 <= head_dim <= MAX_HEAD_DIM and ks[-1] == head_dim
            and nheads_kv != 0 and qs[-2] % nheads_kv == 0
            and (ndim != 4 or qs[0] == ks[0]))


def check_qkv(q, k, v, ndim: int = 4, layout: str = "(batch, seqlen, nheads, headdim)") -> None:
    if _qkv_ok(q, k, v, ndim):
        return
    for name, x in (("q", q), ("k", k), ("v", v)):
        check_tensor(name, x, ndim, layout)
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    check_device([("q", q), ("k", k), ("v", v)])
    head_dim = q.shape[-1]
    if head_dim % 8 != 0 or not (8 <= head_dim <= MAX_HEAD_DIM):
        raise ValueError(
            f"head_dim (q.shape[-1]) must be a multiple of 8 in [8, {MAX_HEAD_DIM}], got {head_dim}"
        )
    if k.shape[-1] != head_dim or v.shape[-1] != head_dim:
        raise ValueError(
            f"q, k, v must share head_dim, got {head_dim}, {k.shape[-1]}, {v.shape[-1]}"
        )
    if k.shape != v.shape:
        raise ValueError(
            f"k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}"
        )
    nheads, nheads_kv = q.shape[-2], k.shape[-2]
    if nheads_kv == 0 or nheads % nheads_kv != 0:
        raise ValueError(
            f"nheads of q ({nheads}) must be a multiple of nheads of k/v ({nheads_kv})"
        )
    if ndim == 4 and q.shape[0] != k.shape[0]:
        raise ValueError(f"batch mismatch: q has {q.shape[0]}, k/v have {k.shape[0]}")


def check_window(window_size) -> tuple[int | None, int | None]:
    """(left, right) with -1 = unbounded -> (left or None, right or None)."""
    try:
        left, right = window_size
    except (TypeError, ValueError):
        raise TypeError(f"window_size must be a pair (left, right), got {window_size!r}") from None
    out = []
    for side, w in (("left", left), ("right", right)):
        if not isinstance(w, int) or isinstance(w, bool):
            raise TypeError(f"window_size {side} must be an int, got {w!r}")
        if w < -1:
            raise ValueError(f"window_size {side} must be >= 0, or -1 for unbounded; got {w}")
        out.append(None if w == -1 else w)
    return out[0], out[1]


def check_scalars(dropout_p: float, softcap: float, softmax_scale) -> None:
    if not (0.0 <= float(dropout_p) < 1.0):
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p}")
    if float(softcap) < 0:
        raise ValueError(f"softcap must be >= 0 (0 disables it), got {softcap}")
    if softmax_scale is not None and not float(softmax_scale) > 0:
        raise ValueError(f"softmax_scale must be > 0, got {softmax_scale}")
