"""A small pre-LayerNorm GPT (nanoGPT's shape) whose attention runs on flashtile.

One readable model file: config, attention, MLP, block, model. The attention backend is
a config field, so the same weights train or sample with

    "flashtile"     flashtile.flash_attn_func, forward and backward (attention dropout in
                    the kernel, its RNG seeded from torch's default generator)
    "sdpa"          torch.nn.functional.scaled_dot_product_attention, PyTorch's choice of
                    kernel; "sdpa-cudnn", "sdpa-flash", "sdpa-efficient", "sdpa-math"
                    pin one SDPA backend
    "reference"     plain PyTorch (flashtile.reference) in the input precision: what the
                    fp64 "truth" runs of the convergence test use

Shapes: B batch, T sequence length, C = n_embd, nh = n_head, hs = C / nh. Nothing runs
and nothing from Triton is imported at import time.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["BACKENDS", "FlashCausalSelfAttention", "MiniGPT", "MiniGPTConfig", "attend"]

BACKENDS = ("flashtile", "sdpa", "sdpa-cudnn", "sdpa-flash", "sdpa-efficient", "sdpa-math",
            "reference")


@dataclass
class MiniGPTConfig:
    """Model shape and the attention backend (nanoGPT's GPTConfig plus ``backend``)."""

    vocab_size: int = 65
    block_size: int = 256  # longest context
    n_layer: int = 6
    n_head: int = 6
    n_embd: int = 384
    dropout: float = 0.2  # residual, embedding and attention dropout
    bias: bool = False  # biases in Linear and LayerNorm (nanoGPT's shakespeare-char: off)
    backend: str = "flashtile"

    def __post_init__(self):
        if self.backend not in BACKENDS:
            raise ValueError(f"backend={self.backend!r}; allowed: {', '.join(BACKENDS)}")
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd={self.n_embd} must be a multiple of n_head={self.n_head}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout={self.dropout} must lie in [0, 1)")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> MiniGPTConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


# ----------------------------------------------------------------------------------
# attention backends: (q, k, v) (B, T, nh, hs) -> (B, T, nh, hs), causal
# ----------------------------------------------------------------------------------


def _flashtile(q, k, v, dropout_p):
    from flashtile import flash_attn_func  # imported on first use: TRITON_INTERPRET first

    return flash_attn_func(q, k, v, dropout_p=dropout_p, causal=True)


_SDPA_KERNELS = {"sdpa-cudnn": "CUDNN_ATTENTION", "sdpa-flash": "FLASH_ATTENTION",
                 "sdpa-efficient": "EFFICIENT_ATTENTION", "sdpa-math": "MATH"}


def _sdpa(kernel: str | None):
    def run(q, k, v, dropout_p):
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hs): SDPA's layout
        if kernel is None:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)
        else:
            from torch.nn.attention import SDPBackend, sdpa_kernel

            with sdpa_kernel(getattr(SDPBackend, kernel)):
                y = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p,
                                                   is_causal=True)
        return y.transpose(1, 2)  # (B, T, nh, hs)

    return run


def _reference(q, k, v, dropout_p):
    from flashtile import reference

    mask = None
    if dropout_p > 0:  # its own mask: a different RNG stream from the kernels'
        B, T, nh, _ = q.shape
        mask = torch.rand(B, nh, T, T, device=q.device) >= dropout_p
    return reference.flash_attn_func(q, k, v, dropout_p, causal=True, dropout_mask=mask,
                                     upcast=False)


_ATTEND: dict[str, Callable] = {"flashtile": _flashtile, "sdpa": _sdpa(None),
                                "reference": _reference,
                                **{name: _sdpa(k) for name, k in _SDPA_KERNELS.items()}}


def attend(q, k, v, dropout_p: float = 0.0, backend: str = "flashtile") -> torch.Tensor:
    """Causal attention of (B, T, nh, hs) tensors with ``backend``; returns (B, T, nh, hs)."""
    return _ATTEND[backend](q, k, v, dropout_p)


# ----------------------------------------------------------------------------------
# model
# ----------------------------------------------------------------------------------


class LayerNorm(nn.Module):
    """LayerNorm with an optional bias (PyTorch's has no bias=False before 2.1)."""

    def __init__(self, ndim: int, bias: bool):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class FlashCausalSelfAttention(nn.Module):
    """Multi-head causal self-attention; the attention itself goes through ``attend``.

    flashtile takes (B, T, nh, hs) with any strides but the last, so q, k, v are views
    of the fused qkv projection and the output reshapes to (B, T, C) without a copy.
    """

    def __init__(self, cfg: MiniGPTConfig):
        super().__init__()
        self.n_head, self.head_dim = cfg.n_head, cfg.n_embd // cfg.n_head
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=cfg.bias)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.resid_dropout = nn.Dropout(cfg.dropout)
        self.attn_dropout = cfg.dropout
        self.backend = cfg.backend

    def forward(self, x):
        B, T, C = x.shape
        qkv = self.c_attn(x).view(B, T, 3, self.n_head, self.head_dim)  # (B, T, 3, nh, hs)
        q, k, v = qkv.unbind(2)  # (B, T, nh, hs) each, strided views
        p = self.attn_dropout if self.training else 0.0
        y = attend(q, k, v, p, self.backend)  # (B, T, nh, hs)
        return self.resid_dropout(self.c_proj(y.reshape(B, T, C)))


class MLP(nn.Module):
    def __init__(self, cfg: MiniGPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=cfg.bias)
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x))))


class Block(nn.Module):
    """Pre-LN residual block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, cfg: MiniGPTConfig):
        super().__init__()
        self.ln_1 = LayerNorm(cfg.n_embd, cfg.bias)
        self.attn = FlashCausalSelfAttention(cfg)
        self.ln_2 = LayerNorm(cfg.n_embd, cfg.bias)
        self.mlp = MLP(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class MiniGPT(nn.Module):
    """Token + position embeddings, ``n_layer`` blocks, final LayerNorm, tied LM head."""

    def __init__(self, cfg: MiniGPTConfig):
        super().__init__()
        self.config = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = LayerNorm(cfg.n_embd, cfg.bias)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # weight tying
        self.apply(self._init_weights)
        # GPT-2's scaled init of the projections into the residual stream
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init_weights(m):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def set_backend(self, backend: str) -> None:
        """Switch every attention module (and the config) to ``backend``."""
        if backend not in BACKENDS:
            raise ValueError(f"backend={backend!r}; allowed: {', '.join(BACKENDS)}")
        self.config.backend = backend
        for blk in self.blocks:
            blk.attn.backend = backend

    def num_params(self, non_embedding: bool = True) -> int:
        n = sum(p.numel() for p in self.parameters())
        return n - self.wpe.weight.numel() if non_embedding else n

    def forward(self, idx, targets=None):
        """idx, targets: (B, T) int64. Returns (logits (B, T, vocab), loss or None)."""
        B, T = idx.shape
        if T > self.config.block_size:
            raise ValueError(f"sequence length {T} > block_size {self.config.block_size}")
        pos = torch.arange(T, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))  # (B, T, C)
        for blk in self.blocks:
            x = blk(x)
        logits = self.lm_head(self.ln_f(x))  # (B, T, vocab)
        loss = None
        if targets is not None:
            low = logits.dtype in (torch.float16, torch.bfloat16)  # fp64 stays fp64
            loss = F.cross_entropy((logits.float() if low else logits).flatten(0, 1),
                                   targets.flatten())
        return logits, loss
