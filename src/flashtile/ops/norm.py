"""Row-wise transformer kernels: LayerNorm, residual-add + LayerNorm, GELU (tanh),
bias + GELU and the token + position embedding gather. Forward only (inference).

Public functions (each takes and returns torch tensors; rows are the last dimension):
    layer_norm(x, weight, bias, eps)                    y = LN(x)
    add_layer_norm(x, residual, weight, bias, eps)      h = x + residual; y = LN(h) -> (h, y)
    gelu_tanh(x)                                        GELU, tanh approximation (GPT-2's)
    bias_gelu(x, bias)                                  gelu_tanh(x + bias), one pass
    embedding(ids, positions, wte, wpe)                 wte[ids] + wpe[positions]

Every kernel computes in fp32 and rounds once on store, so bf16 inputs behave like
PyTorch's fused LayerNorm (and the kernels are correct under Triton's interpreter,
which mishandles bf16 arithmetic). The fused kernels exist to save HBM passes:
add + LN reads x and residual once and writes h and y (eager PyTorch: add, then LN
reading h again); bias + GELU reads the matmul output once (eager: add, then GELU).
Under ``add_layer_norm``, h is rounded to its storage dtype *before* the statistics,
so the normalised value is the LN of exactly the residual stream the next block sees
(the same rounding as eager ``LN(x + r)`` in bf16).

Notation: R rows (tokens), N features; BLOCK_N = N rounded up to a power of two;
grid (cdiv(R, BLOCK_R),) for the row kernels, BLOCK_R rows per program (1 on the GPU;
N <= 8192 fits in registers);
grid (cdiv(numel, BLOCK),) for the elementwise kernels.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._common import cast_out, is_interpreting, next_pow2, tanh_f32

__all__ = ["layer_norm", "add_layer_norm", "gelu_tanh", "bias_gelu", "embedding"]

MAX_ROW = 8192  # one row per program in registers; GPT-2 XL has 1600
_ELEMWISE_BLOCK = 1024


# ==================================================================================
# public API
# ==================================================================================


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
               eps: float = 1e-5) -> torch.Tensor:
    """LayerNorm over the last dimension.

    Args:
        x: (..., N) float16 / bfloat16 / float32, last dimension contiguous.
        weight, bias: (N,) any float dtype (read as fp32); bias may be None.
        eps: added to the variance.
    Returns:
        y like x (contiguous).
    """
    _, y = _launch_ln(x, None, weight, bias, eps, store_h=False)
    return y


def add_layer_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                   bias: torch.Tensor | None, eps: float = 1e-5
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """Residual add fused with the next LayerNorm: ``h = x + residual; y = LN(h)``.

    Args:
        x, residual: (..., N), same shape and dtype, last dimension contiguous.
        weight, bias: (N,) LayerNorm parameters (bias may be None).
    Returns:
        (h, y), both like x: the new residual stream and its normalisation.
    """
    if residual.shape != x.shape or residual.dtype != x.dtype:
        raise ValueError(
            f"residual must match x: got {tuple(residual.shape)} {residual.dtype} vs "
            f"{tuple(x.shape)} {x.dtype}"
        )
    return _launch_ln(x, residual, weight, bias, eps, store_h=True)


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GELU with the tanh approximation (GPT-2's ``gelu_new``), elementwise, in fp32."""
    return _launch_gelu(x, None)


def bias_gelu(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``gelu_tanh(x + bias)`` in one pass. x: (..., N), bias: (N,)."""
    if bias.dim() != 1 or bias.shape[0] != x.shape[-1]:
        raise ValueError(f"bias must be ({x.shape[-1]},), got {tuple(bias.shape)}")
    return _launch_gelu(x, bias)


def embedding(ids: torch.Tensor, positions: torch.Tensor, wte: torch.Tensor,
              wpe: torch.Tensor) -> torch.Tensor:
    """Token + position embedding gather: ``wte[ids] + wpe[positions]``.

    Args:
        ids: (...,) integer token ids in [0, vocab).
        positions: integer positions, same shape as ids, in [0, n_positions).
        wte: (vocab, N); wpe: (n_positions, N); same dtype, rows contiguous.
    Returns:
        (..., N) in wte's dtype. Ids are not range-checked on the device (that would
        synchronise); callers validate host-side inputs.
    """
    if positions.shape != ids.shape:
        raise ValueError(f"positions {tuple(positions.shape)} must match ids {tuple(ids.shape)}")
    if wte.shape[1] != wpe.shape[1] or wte.dtype != wpe.dtype:
        raise ValueError("wte and wpe must share their width and dtype")
    n = wte.shape[1]
    flat_ids, flat_pos = ids.reshape(-1), positions.reshape(-1)
    out = torch.empty((flat_ids.numel(), n), dtype=wte.dtype, device=wte.device)
    if out.numel():
        block, rows = next_pow2(n), _rows_per_program(n)
        _embedding_kernel[(triton.cdiv(out.shape[0], rows),)](
            flat_ids, flat_pos, wte, wpe, out, wte.stride(0), wpe.stride(0), out.stride(0),
            out.shape[0], n, BLOCK_R=rows, BLOCK_N=block, INTERP=is_interpreting(),
            num_warps=_row_warps(block),
        )
    return out.view(*ids.shape, n)


# ==================================================================================
# launchers
# ==================================================================================


def _rows_per_program(n: int) -> int:
    """One row per program on the GPU (every SM busy at prefill sizes; a decode batch is
    a handful of rows either way); under the interpreter, where each program costs
    milliseconds of Python, as many rows as fit a 4096-element tile."""
    return max(1, 4096 // next_pow2(n)) if is_interpreting() else 1


def _elementwise_block() -> int:
    return 16384 if is_interpreting() else _ELEMWISE_BLOCK


def _row_warps(block_n: int) -> int:
    # 4 elements per thread at most keeps the row in registers without spills
    return min(16, max(1, block_n // 256))


def _rows(x: torch.Tensor, name: str) -> torch.Tensor:
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"{name} has dtype {x.dtype}; supported: float16, bfloat16, float32")
    if x.shape[-1] > MAX_ROW:
        raise ValueError(f"{name}: rows of {x.shape[-1]} > {MAX_ROW} features are not supported")
    x2 = x.reshape(-1, x.shape[-1])
    return x2 if x2.stride(-1) == 1 else x2.contiguous()


def _launch_ln(x, residual, weight, bias, eps, store_h):
    n = x.shape[-1]
    if weight.shape != (n,) or (bias is not None and bias.shape != (n,)):
        raise ValueError(f"LayerNorm weight/bias must be ({n},)")
    x2 = _rows(x, "x")
    r2 = _rows(residual, "residual") if residual is not None else x2
    y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    h = torch.empty_like(y) if store_h else y
    if x2.shape[0]:
        block, rows = next_pow2(n), _rows_per_program(n)
        _layer_norm_kernel[(triton.cdiv(x2.shape[0], rows),)](
            x2, r2, weight, bias if bias is not None else weight, h, y, x2.stride(0),
            r2.stride(0), h.stride(0), y.stride(0), x2.shape[0], n, float(eps), BLOCK_R=rows,
            BLOCK_N=block,
            HAS_RES=residual is not None, HAS_BIAS=bias is not None, INTERP=is_interpreting(),
            num_warps=_row_warps(block),
        )
    shape = x.shape
    return (h.view(shape) if store_h else None), y.view(shape)


def _launch_gelu(x, bias):
    x2 = _rows(x, "x")
    if not x2.is_contiguous():
        x2 = x2.contiguous()
    out = torch.empty_like(x2)
    numel = x2.numel()
    if numel:
        block = _elementwise_block()
        grid = (triton.cdiv(numel, block),)
        _bias_gelu_kernel[grid](
            x2, bias if bias is not None else x2, out, numel, x2.shape[-1],
            HAS_BIAS=bias is not None, BLOCK=block, INTERP=is_interpreting(),
            num_warps=4,
        )
    return out.view(x.shape)


# ==================================================================================
# kernels
# ==================================================================================


@triton.jit
def _layer_norm_kernel(
    X, RES, W, B, H,
    Y,  # X, RES, H, Y: (R, N) rows; W, B: (N,)
    stride_x, stride_r, stride_h, stride_y, n_rows, N, eps, BLOCK_R: tl.constexpr,
    BLOCK_N: tl.constexpr, HAS_RES: tl.constexpr, HAS_BIAS: tl.constexpr,
    INTERP: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    offs = tl.arange(0, BLOCK_N)
    col_ok = offs < N
    mask = (rows < n_rows)[:, None] & col_ok[None, :]
    x = tl.load(X + rows[:, None] * stride_x + offs[None, :], mask=mask, other=0.0)
    x = x.to(tl.float32)
    if HAS_RES:
        # -- residual add, rounded to the stream's dtype as the next block will see it --
        r = tl.load(RES + rows[:, None] * stride_r + offs[None, :], mask=mask, other=0.0)
        h = cast_out(x + r.to(tl.float32), H.dtype.element_ty, INTERP)
        tl.store(H + rows[:, None] * stride_h + offs[None, :], h, mask=mask)
        x = h.to(tl.float32)
    # -- statistics: two passes over registers (no E[x^2] - E[x]^2 cancellation) --
    mean = tl.sum(x, axis=1) / N
    xc = tl.where(col_ok[None, :], x - mean[:, None], 0.0)
    var = tl.sum(xc * xc, axis=1) / N
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(W + offs, mask=col_ok, other=0.0).to(tl.float32)
    y = xc * rstd[:, None] * w[None, :]
    if HAS_BIAS:
        y += tl.load(B + offs, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    tl.store(Y + rows[:, None] * stride_y + offs[None, :], cast_out(y, Y.dtype.element_ty, INTERP),
             mask=mask)


@triton.jit
def _bias_gelu_kernel(
    X, BIAS,
    OUT,  # X, OUT: (numel,) contiguous rows of N; BIAS: (N,)
    numel, N, HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr, INTERP: tl.constexpr,
):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
    if HAS_BIAS:
        x += tl.load(BIAS + offs % N, mask=mask, other=0.0).to(tl.float32)
    # -- 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) --
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    y = 0.5 * x * (1.0 + tanh_f32(inner))
    tl.store(OUT + offs, cast_out(y, OUT.dtype.element_ty, INTERP), mask=mask)


@triton.jit
def _embedding_kernel(
    IDS, POS, WTE, WPE,
    OUT,  # IDS, POS: (R,) int; WTE: (V, N); WPE: (P, N); OUT: (R, N)
    stride_wte, stride_wpe, stride_out, n_rows, N, BLOCK_R: tl.constexpr,
    BLOCK_N: tl.constexpr, INTERP: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    row_ok = rows < n_rows
    tok = tl.load(IDS + rows, mask=row_ok, other=0).to(tl.int64)
    pos = tl.load(POS + rows, mask=row_ok, other=0).to(tl.int64)
    offs = tl.arange(0, BLOCK_N)
    mask = row_ok[:, None] & (offs < N)[None, :]
    e = tl.load(WTE + tok[:, None] * stride_wte + offs[None, :], mask=mask, other=0.0)
    p = tl.load(WPE + pos[:, None] * stride_wpe + offs[None, :], mask=mask, other=0.0)
    out = cast_out(e.to(tl.float32) + p.to(tl.float32), OUT.dtype.element_ty, INTERP)
    tl.store(OUT + rows[:, None] * stride_out + offs[None, :], out, mask=mask)
