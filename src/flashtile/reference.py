"""Plain-PyTorch references with the same arguments as flashtile's kernels.

Reference-only keywords come last: ``upcast=True`` computes in float64 (the "truth" of
the tolerance rule, DESIGN.md section 5), ``upcast=False`` in the input precision (the
noise-floor baseline: how far PyTorch itself lands from the truth); ``dropout_mask``
(bool, ``(batch, nheads, seqlen_q, seqlen_k)``) replays a kernel's dropout pattern.
Gradients come from autograd through these functions.
"""

from __future__ import annotations

import math

import torch


def attention_mask(
    seqlen_q: int,
    seqlen_k: int,
    causal: bool = False,
    window_size: tuple[int | None, int | None] = (None, None),
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """Boolean keep-mask ``(seqlen_q, seqlen_k)`` with bottom-right alignment.

    ``window_size=(left, right)`` as the launchers take it: None is unbounded, any int
    is a bound (negative ones too: ``sdpa``'s top-left causal is right = Sq - Sk).
    ``causal`` sets right = 0.
    """
    left, right = window_size
    if causal:
        right = 0
    i = torch.arange(seqlen_q, device=device)[:, None]
    j = torch.arange(seqlen_k, device=device)[None, :]
    diag = seqlen_k - seqlen_q
    keep = torch.ones(seqlen_q, seqlen_k, dtype=torch.bool, device=device)
    if right is not None:
        keep &= j <= i + diag + right
    if left is not None:
        keep &= j >= i + diag - left
    return keep


def attention_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    softmax_scale: float | None = None,
    causal: bool = False,
    window_size: tuple[int | None, int | None] = (None, None),
    softcap: float = 0.0,
    dropout_p: float = 0.0,
    dropout_mask: torch.Tensor | None = None,
    upcast: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Reference twin of ``flashtile.ops.flash.attention_forward``: returns ``(out, lse)``.

    q: (B, Sq, H, D); k, v: (B, Sk, Hkv, D) with H % Hkv == 0. out: like q (in q's
    dtype); lse: (B, H, Sq) float32, natural log, -inf on fully masked rows.
    """
    _, seqlen_q, nheads, head_dim = q.shape
    seqlen_k, nheads_kv = k.shape[1], k.shape[2]
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(head_dim)
    dtype = torch.float64 if upcast else q.dtype
    qf, kf, vf = q.to(dtype), k.to(dtype), v.to(dtype)
    if nheads != nheads_kv:
        group = nheads // nheads_kv
        kf = kf.repeat_interleave(group, dim=2)
        vf = vf.repeat_interleave(group, dim=2)
    s = torch.einsum("bihd,bjhd->bhij", qf, kf) * scale  # (B, H, Sq, Sk)
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    keep = attention_mask(seqlen_q, seqlen_k, causal, window_size, device=q.device)
    s = s.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)  # (B, H, Sq)
    p = torch.softmax(s, dim=-1)
    p = torch.where(keep.any(dim=-1)[:, None], p, torch.zeros_like(p))  # no NaN rows
    if dropout_p > 0:
        if dropout_mask is None:
            raise ValueError("the reference needs the kernel's dropout_mask to replay dropout")
        p = p * dropout_mask.to(dtype) / (1.0 - dropout_p)
    out = torch.einsum("bhij,bjhd->bihd", p, vf)
    return out.to(q.dtype), lse.float()


def flash_attn_func(
    q,
    k,
    v,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    deterministic=True,
    return_lse=False,
    *,
    dropout_mask=None,
    upcast=True,
):
    """Reference twin of ``flashtile.flash_attn_func`` (same arguments, same returns)."""
    del deterministic  # the reference is deterministic
    window = tuple(None if w == -1 else w for w in window_size)  # public: -1 = unbounded
    out, lse = attention_forward(
        q,
        k,
        v,
        softmax_scale=softmax_scale,
        causal=causal,
        window_size=window,
        softcap=softcap,
        dropout_p=dropout_p,
        dropout_mask=dropout_mask,
        upcast=upcast,
    )
    return (out, lse.detach()) if return_lse else out


def sdpa(
    query,
    key,
    value,
    attn_mask=None,
    dropout_p=0.0,
    is_causal=False,
    scale=None,
    enable_gqa=False,
    *,
    upcast=True,
):
    """Reference twin of ``flashtile.sdpa``: PyTorch's math SDPA, optionally in float64."""
    dtype = torch.float64 if upcast else query.dtype
    out = torch.nn.functional.scaled_dot_product_attention(
        query.to(dtype),
        key.to(dtype),
        value.to(dtype),
        attn_mask=attn_mask
        if attn_mask is None or attn_mask.dtype == torch.bool
        else attn_mask.to(dtype),
        dropout_p=dropout_p,
        is_causal=is_causal,
        scale=scale,
        enable_gqa=enable_gqa,
    )
    return out.to(query.dtype)


def flash_attn_varlen_func(
    q,
    k,
    v,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    return_lse=False,
    *,
    upcast=True,
):
    """Reference twin of ``flashtile.flash_attn_varlen_func``: the dense reference per
    sequence. out (total_q, H, D) (zero past ``cu_seqlens_q[-1]``); lse (H, total_q)."""
    del max_seqlen_q, max_seqlen_k  # the reference reads the lengths themselves
    window = tuple(None if w == -1 else w for w in window_size)
    cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    outs, lses = [], []
    for b in range(len(cq) - 1):
        o, lse = attention_forward(
            q[None, cq[b] : cq[b + 1]],
            k[None, ck[b] : ck[b + 1]],
            v[None, ck[b] : ck[b + 1]],
            softmax_scale=softmax_scale,
            causal=causal,
            window_size=window,
            softcap=softcap,
            upcast=upcast,
        )
        outs.append(o[0])
        lses.append(lse[0])
    tail = q.shape[0] - cq[-1]
    outs.append(q.new_zeros((tail, *q.shape[1:])))
    lses.append(torch.full((q.shape[1], tail), float("-inf"), device=q.device))
    out, lse = torch.cat(outs, 0), torch.cat(lses, 1)
    return (out, lse.detach()) if return_lse else out



def flash_attn_qkvpacked_func(qkv, *args, upcast=True, **kwargs):
    """Reference twin of ``flashtile.flash_attn_qkvpacked_func``: qkv (B, S, 3, H, D)."""
    return flash_attn_func(*qkv.unbind(2), *args, upcast=upcast, **kwargs)


def flash_attn_kvpacked_func(q, kv, *args, upcast=True, **kwargs):
    """Reference twin of ``flashtile.flash_attn_kvpacked_func``: kv (B, S_k, 2, H_kv, D)."""
    return flash_attn_func(q, *kv.unbind(2), *args, upcast=upcast, **kwargs)


def flash_attn_varlen_qkvpacked_func(qkv, cu_seqlens, max_seqlen, *args, upcast=True,
                                     **kwargs):
    """Reference twin of ``flashtile.flash_attn_varlen_qkvpacked_func``: qkv (T, 3, H, D)."""
    return flash_attn_varlen_func(*qkv.unbind(1), cu_seqlens, cu_seqlens, max_seqlen,
                                  max_seqlen, *args, upcast=upcast, **kwargs)


def flash_attn_varlen_kvpacked_func(q, kv, *args, upcast=True, **kwargs):
    """Reference twin of ``flashtile.flash_attn_varlen_kvpacked_func``: kv (T_k, 2, H_kv, D)."""
    return flash_attn_varlen_func(q, *kv.unbind(1), *args, upcast=upcast, **kwargs)

def flash_attn_with_kvcache(
    q,
    k_cache,
    v_cache,
    k=None,
    v=None,
    cache_seqlens=None,
    page_table=None,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    num_splits=0,
    return_lse=False,
    *,
    upcast=True,
):
    """Reference twin of ``flashtile.flash_attn_with_kvcache``. Like the kernel, it
    writes ``k``/``v`` into the cache at ``cache_seqlens`` (through ``page_table`` when
    paged), then attends each sequence to its ``cache_seqlens[b] + seqlen_new`` keys."""
    del num_splits  # a schedule, not semantics
    batch, seqlen_q = q.shape[0], q.shape[1]
    paged = page_table is not None
    page_size = k_cache.shape[1]
    capacity = page_table.shape[1] * page_size if paged else k_cache.shape[1]
    lens = [capacity] * batch if cache_seqlens is None else cache_seqlens.tolist()
    seqlen_new = 0 if k is None else k.shape[1]

    def rows(b, n):  # cache rows of sequence b's first n keys: (index, index) pairs
        pos = torch.arange(n, device=k_cache.device)
        if not paged:
            return torch.full_like(pos, b), pos
        return page_table[b][pos // page_size].long(), pos % page_size

    outs, lses = [], []
    for b in range(batch):
        n = lens[b] + seqlen_new
        if seqlen_new:
            i0, i1 = rows(b, n)
            k_cache[i0[lens[b] :], i1[lens[b] :]] = k[b]
            v_cache[i0[lens[b] :], i1[lens[b] :]] = v[b]
        i0, i1 = rows(b, n)
        o, lse = flash_attn_func(
            q[b : b + 1],
            k_cache[i0, i1][None],
            v_cache[i0, i1][None],
            softmax_scale=softmax_scale,
            causal=causal,
            window_size=window_size,
            softcap=softcap,
            return_lse=True,
            upcast=upcast,
        )
        outs.append(o)
        lses.append(lse)
    out = torch.cat(outs, 0) if outs else q.new_empty(q.shape)
    lse = torch.cat(lses, 0) if lses else q.new_empty((0, q.shape[2], seqlen_q)).float()
    return (out, lse) if return_lse else out


def fixed_dq_bounds(dout, k, v, group, expand):
    """Reference twin of ``flashtile.ops.fixed_dq.bounds``: (rows, heads) in float64, rows
    (B, H, M) = |dO_i|^2, heads (B * program heads, 2) = max |V_j|^2 and max K_jc^2 of
    each program head's key head (program heads: key heads, or query heads with
    ``expand``)."""
    rows = dout.double().square().sum(-1).transpose(1, 2)  # (B, H, M)
    v2 = v.double().square().sum(-1).amax(1)  # (B, Hkv)
    k2 = k.double().square().amax(dim=(1, 3))  # (B, Hkv)
    if expand:
        v2, k2 = v2.repeat_interleave(group, 1), k2.repeat_interleave(group, 1)
    return rows, torch.stack([v2, k2], -1).reshape(-1, 2)


def fixed_dq_mults(rows, heads, es, group, expand):
    """Reference twin of ``flashtile.ops.fixed_dq.mults``: each row's 2^e_i from
    ``fixed_dq_bounds``-shaped fp32 (rows, heads) and ``es`` = fixed_dq.scale_exponent, by
    the same integer formula on the exponent fields (ops/fixed_dq.py's docstring)."""
    from flashtile.ops.fixed_dq import FIXED_LOG2_LIMIT

    batch = rows.shape[0]
    h = heads.view(batch, -1, 2)
    if not expand:
        h = h.repeat_interleave(group, 1)

    def field(x):
        return (x.contiguous().view(torch.int32) >> 23) & 0xFF

    fd, fv, fk = field(rows), field(h[..., 0])[..., None], field(h[..., 1])[..., None]
    t = (fd - 127) + (fv - 127) + (fk - 127) + es + 4
    e = (FIXED_LOG2_LIMIT - ((t + 1) >> 1)).clamp(-126, 127)
    mult = ((e + 127) << 23).view(torch.float32)
    return torch.where((fd == 255) | (fv == 255) | (fk == 255), math.nan, mult)
