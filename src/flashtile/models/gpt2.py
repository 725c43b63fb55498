"""GPT-2 (124M ... XL 1.5B) for inference, with every attention call on flashtile.

One readable model file in the nanoGPT / gpt-fast shape: a config dataclass, the
parameter modules (named exactly as HuggingFace's ``GPT2Model``, so checkpoints map
one to one), the block loop, and two entry points for generation:

    logits = model(idx)                                   # (B, T) -> (B, T, vocab)
    cache = model.new_cache(batch, max_seqlen)
    last = model.prefill(prompts, cache)                  # list of 1-D id tensors -> (B, vocab)
    nxt = model.decode_step(tokens, cache)                # (B,) -> (B, vocab); appends to cache

``backend`` switches every non-matmul op: "flashtile" runs our Triton kernels
(``flashtile.ops.norm``: embedding gather, LayerNorm, residual-add + LayerNorm, bias +
GELU) and flashtile attention; "sdpa" and "reference" run PyTorch's own ops with
SDPA or the fp64 reference attention. Dense projections are torch matmuls (cuBLAS)
in every backend. HuggingFace's Conv1D stores weights as (in, out), so ``x @ W + b``.

The residual stream is fused across blocks: each block ends with
``h, y = add_layer_norm(mlp_out, h, next_ln)``, which writes the new residual ``h``
and the next LayerNorm's output ``y`` in one pass (the next block's ``ln_1``, or
``ln_f`` after the last block).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from . import gpt2_attention as attn

__all__ = ["GPT2Config", "GPT2", "KVCache", "CONFIGS", "config_for"]


@dataclass(frozen=True)
class GPT2Config:
    vocab_size: int = 50257
    n_positions: int = 1024
    n_embd: int = 768
    n_layer: int = 12
    n_head: int = 12
    layer_norm_epsilon: float = 1e-5
    tie_word_embeddings: bool = True

    def __post_init__(self):
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd ({self.n_embd}) must be a multiple of n_head ({self.n_head})")
        head_dim = self.n_embd // self.n_head
        if head_dim % 8 or head_dim > 256:
            raise ValueError(f"head dim {head_dim} must be a multiple of 8 up to 256")

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    def num_params(self) -> int:
        c, v, p, layers = self.n_embd, self.vocab_size, self.n_positions, self.n_layer
        per_block = 12 * c * c + 13 * c  # qkv, proj, fc, proj weights + biases + 2 LNs
        head = 0 if self.tie_word_embeddings else v * c
        return v * c + p * c + layers * per_block + 2 * c + head

    @classmethod
    def from_hf(cls, d: dict) -> GPT2Config:
        """From a HuggingFace ``config.json`` dict (``n_ctx`` is ignored: = n_positions)."""
        keys = ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head",
                "layer_norm_epsilon", "tie_word_embeddings")
        return cls(**{k: d[k] for k in keys if k in d})

    def to_hf(self) -> dict:
        return dict(asdict(self), model_type="gpt2", architectures=["GPT2LMHeadModel"],
                    activation_function="gelu_new", n_ctx=self.n_positions)


CONFIGS = {
    "gpt2": GPT2Config(),  # 124M
    "gpt2-medium": GPT2Config(n_embd=1024, n_layer=24, n_head=16),  # 350M
    "gpt2-large": GPT2Config(n_embd=1280, n_layer=36, n_head=20),  # 774M
    "gpt2-xl": GPT2Config(n_embd=1600, n_layer=48, n_head=25),  # 1558M
    # CPU tests and the interpreter: every code path, tiny shapes
    "tiny": GPT2Config(vocab_size=512, n_positions=128, n_embd=64, n_layer=2, n_head=2),
}
ALIASES = {"124m": "gpt2", "350m": "gpt2-medium", "774m": "gpt2-large", "xl": "gpt2-xl",
           "1.5b": "gpt2-xl"}


def config_for(name: str, **overrides) -> GPT2Config:
    """A named config ("gpt2", "124m", "gpt2-xl", "xl", "tiny", ...) with overrides."""
    key = ALIASES.get(name.lower(), name.lower())
    if key not in CONFIGS:
        raise ValueError(f"unknown GPT-2 config {name!r}; known: {', '.join(CONFIGS)}")
    return replace(CONFIGS[key], **overrides)


# ----------------------------------------------------------------------------------
# parameters (HuggingFace names: wte.weight, h.0.attn.c_attn.weight, ln_f.bias, ...)
# ----------------------------------------------------------------------------------


class _Weight(nn.Module):
    def __init__(self, *shape):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(*shape), requires_grad=False)


class _Norm(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n), requires_grad=False)
        self.bias = nn.Parameter(torch.zeros(n), requires_grad=False)


class _Conv1D(nn.Module):
    """HuggingFace's Conv1D: y = x @ weight + bias, weight (in, out)."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out), requires_grad=False)
        self.bias = nn.Parameter(torch.zeros(n_out), requires_grad=False)

    def project(self, x):  # (R, in) -> (R, out); the bias rides in the cuBLAS epilogue
        return torch.addmm(self.bias, x, self.weight)


class _Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_attn = _Conv1D(c, 3 * c)
        self.c_proj = _Conv1D(c, c)


class _MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = _Conv1D(c, 4 * c)
        self.c_proj = _Conv1D(4 * c, c)


class _Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = _Norm(c)
        self.attn = _Attention(c)
        self.ln_2 = _Norm(c)
        self.mlp = _MLP(c)


# ----------------------------------------------------------------------------------
# row ops per backend
# ----------------------------------------------------------------------------------


class _TorchOps:
    """Eager PyTorch: what HuggingFace runs (bias + GELU as two ops, LN after the add)."""

    @staticmethod
    def embedding(ids, pos, wte, wpe):
        return wte[ids] + wpe[pos]

    @staticmethod
    def layer_norm(x, ln, eps):
        return F.layer_norm(x, x.shape[-1:], ln.weight, ln.bias, eps)

    @staticmethod
    def add_layer_norm(x, residual, ln, eps):
        h = residual + x
        return h, F.layer_norm(h, h.shape[-1:], ln.weight, ln.bias, eps)

    @staticmethod
    def fc_gelu(y, fc):
        return F.gelu(fc.project(y), approximate="tanh")


class _TritonOps:
    """flashtile.ops.norm kernels (fp32 math, one rounding on store)."""

    @staticmethod
    def embedding(ids, pos, wte, wpe):
        from ..ops.norm import embedding

        return embedding(ids, pos, wte, wpe)

    @staticmethod
    def layer_norm(x, ln, eps):
        from ..ops.norm import layer_norm

        return layer_norm(x, ln.weight, ln.bias, eps)

    @staticmethod
    def add_layer_norm(x, residual, ln, eps):
        from ..ops.norm import add_layer_norm

        return add_layer_norm(x, residual, ln.weight, ln.bias, eps)

    @staticmethod
    def fc_gelu(y, fc):
        from ..ops.norm import bias_gelu

        return bias_gelu(y @ fc.weight, fc.bias)  # bias + GELU: one pass over (R, 4C)


# ----------------------------------------------------------------------------------
# KV cache
# ----------------------------------------------------------------------------------


class KVCache:
    """Preallocated KV cache for every layer, and the per-sequence lengths.

    Contiguous (default): k, v (n_layer, batch, max_seqlen, n_head, head_dim). Paged
    (``page_size`` a power of two, 16..256): k, v (n_layer, num_pages, page_size,
    n_head, head_dim) and ``page_table`` int32 (batch, pages_per_seq), every sequence
    owning enough pages for max_seqlen, scattered over the pool (a fixed shuffle, so
    the addressing is really exercised). ``seqlens`` int32 (batch,) on the device:
    tokens held per sequence. Fixed addresses, so a decode step reading and appending
    here can be captured in a CUDA graph.
    """

    def __init__(self, config: GPT2Config, batch: int, max_seqlen: int, dtype, device,
                 page_size: int | None = None):
        if max_seqlen > config.n_positions:
            raise ValueError(
                f"max_seqlen {max_seqlen} exceeds the model's n_positions {config.n_positions}"
            )
        heads = (config.n_head, config.head_dim)
        self.page_table = None
        if page_size is None:
            shape = (config.n_layer, batch, max_seqlen, *heads)
        else:
            if page_size & (page_size - 1) or not 16 <= page_size <= 256:
                raise ValueError(f"page_size must be a power of two in [16, 256], got {page_size}")
            per_seq = -(-max_seqlen // page_size)
            shape = (config.n_layer, batch * per_seq, page_size, *heads)
            order = torch.randperm(batch * per_seq, generator=torch.Generator().manual_seed(0))
            self.page_table = order.view(batch, per_seq).to(device=device, dtype=torch.int32)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.seqlens = torch.zeros(batch, dtype=torch.int32, device=device)
        self.batch, self.max_seqlen, self.page_size = batch, max_seqlen, page_size

    def write(self, layer: int, seq: torch.Tensor, pos: torch.Tensor, k, v) -> None:
        """Store packed rows k, v (R, H, D) of sequences ``seq`` at positions ``pos``."""
        if self.page_table is None:
            self.k[layer][seq, pos] = k
            self.v[layer][seq, pos] = v
        else:
            page = self.page_table[seq, pos // self.page_size].long()
            self.k[layer][page, pos % self.page_size] = k
            self.v[layer][page, pos % self.page_size] = v

    def reset(self):
        self.seqlens.zero_()

    def nbytes(self) -> int:
        return 2 * self.k.numel() * self.k.element_size()


# ----------------------------------------------------------------------------------
# the model
# ----------------------------------------------------------------------------------


class GPT2(nn.Module):
    """GPT-2 LM (weights tied to wte unless ``config.tie_word_embeddings`` is False)."""

    def __init__(self, config: GPT2Config, backend: str = "flashtile"):
        super().__init__()
        self.config = config
        c = config.n_embd
        self.wte = _Weight(config.vocab_size, c)
        self.wpe = _Weight(config.n_positions, c)
        self.h = nn.ModuleList(_Block(c) for _ in range(config.n_layer))
        self.ln_f = _Norm(c)
        self.lm_head = None if config.tie_word_embeddings else _Weight(config.vocab_size, c)
        self.backend = backend

    @property
    def backend(self) -> str:
        return self._backend

    @backend.setter
    def backend(self, name: str):
        if name not in attn.BACKENDS:
            raise ValueError(f"backend must be one of {attn.BACKENDS}, got {name!r}")
        self._backend = name
        self._ops = _TritonOps if name == "flashtile" else _TorchOps

    @property
    def dtype(self) -> torch.dtype:
        return self.wte.weight.dtype

    @property
    def device(self) -> torch.device:
        return self.wte.weight.device

    def head_weight(self) -> torch.Tensor:
        return (self.lm_head or self.wte).weight

    def init_random(self, seed: int = 0, std: float = 0.02, embed_std: float | None = None):
        """GPT-2's initialisation (normal(0, std), residual projections scaled by
        1/sqrt(2 n_layer)); ``embed_std`` overrides the std of wte/wpe (and so of the
        tied LM head) to make random logits decisive."""
        gen = torch.Generator(device="cpu").manual_seed(seed)
        resid_std = std / (2 * self.config.n_layer) ** 0.5
        for name, p in self.named_parameters():
            if name.endswith("bias") or ".ln_" in name or name.startswith("ln_"):
                p.data.copy_(torch.ones_like(p) if name.endswith("weight") else torch.zeros_like(p))
                continue
            s = resid_std if name.endswith("c_proj.weight") else std
            if name.startswith(("wte", "wpe", "lm_head")) and embed_std is not None:
                s = embed_std
            p.data.copy_(torch.randn(p.shape, generator=gen) * s)
        return self

    # -- the block loop, on rows (tokens) of the residual stream --

    def _run_blocks(self, x, attend, hidden: list | None):
        """x: (R, C) embeddings -> (R, C) output of ln_f. ``attend(layer, q, k, v)`` gets
        (R, H, D) views and returns (R, H, D). Appends each block's residual to ``hidden``."""
        cfg, ops, eps = self.config, self._ops, self.config.layer_norm_epsilon
        rows, c = x.shape
        shape = (rows, cfg.n_head, cfg.head_dim)
        if hidden is not None:
            hidden.append(x)
        y = ops.layer_norm(x, self.h[0].ln_1, eps)
        for i, block in enumerate(self.h):
            qkv = block.attn.c_attn.project(y).view(rows, 3, *shape[1:])  # (R, 3, H, D)
            a = attend(i, qkv[:, 0], qkv[:, 1], qkv[:, 2])  # (R, H, D)
            a = block.attn.c_proj.project(a.reshape(rows, c))
            x, y = ops.add_layer_norm(a, x, block.ln_2, eps)
            m = block.mlp.c_proj.project(ops.fc_gelu(y, block.mlp.c_fc))
            nxt = self.h[i + 1].ln_1 if i + 1 < cfg.n_layer else self.ln_f
            x, y = ops.add_layer_norm(m, x, nxt, eps)
            if hidden is not None:
                hidden.append(x)
        return y

    def _check_ids(self, idx: torch.Tensor, positions_needed: int):
        if idx.dtype not in (torch.int32, torch.int64):
            raise TypeError(f"token ids must be int32/int64, got {idx.dtype}")
        if positions_needed > self.config.n_positions:
            raise ValueError(
                f"{positions_needed} positions exceed the model's n_positions "
                f"{self.config.n_positions}"
            )

    @torch.inference_mode()
    def forward(self, idx: torch.Tensor, return_hidden: bool = False):
        """Full-sequence forward, no cache. idx: (B, T) ids -> logits (B, T, vocab); with
        ``return_hidden``, also the ladder [embeddings, block 1 .. block L residual,
        ln_f output], each (B, T, C)."""
        self._check_ids(idx, idx.shape[1])
        batch, seqlen = idx.shape
        cfg = self.config
        pos = torch.arange(seqlen, device=idx.device).expand(batch, seqlen)
        x = self._ops.embedding(idx.reshape(-1), pos.reshape(-1), self.wte.weight,
                                self.wpe.weight)  # (B*T, C)
        shape = (batch, seqlen, cfg.n_head, cfg.head_dim)

        def attend(layer, q, k, v):
            o = attn.dense_causal(q.view(shape), k.view(shape), v.view(shape), self.backend)
            return o.reshape(batch * seqlen, cfg.n_head, cfg.head_dim)

        hidden = [] if return_hidden else None
        y = self._run_blocks(x, attend, hidden)
        logits = (y @ self.head_weight().t()).view(batch, seqlen, -1)
        if not return_hidden:
            return logits
        hidden.append(y)
        return logits, [t.view(batch, seqlen, -1) for t in hidden]

    # -- generation entry points --

    def new_cache(self, batch: int, max_seqlen: int, page_size: int | None = None) -> KVCache:
        return KVCache(self.config, batch, max_seqlen, self.dtype, self.device, page_size)

    @torch.inference_mode()
    def prefill(self, prompts: list[torch.Tensor], cache: KVCache) -> torch.Tensor:
        """Run the prompts (1-D id tensors, any lengths >= 1) packed into one batch,
        write their K/V into ``cache`` (sequence b in slot b) and set ``cache.seqlens``.
        Returns the logits of each prompt's last token, (B, vocab)."""
        lengths = [int(p.numel()) for p in prompts]
        if len(prompts) != cache.batch:
            raise ValueError(f"{len(prompts)} prompts for a cache of batch {cache.batch}")
        if min(lengths) < 1:
            raise ValueError("every prompt needs at least one token")
        if max(lengths) > cache.max_seqlen:
            raise ValueError(f"prompt of {max(lengths)} tokens > cache length {cache.max_seqlen}")
        dev = self.device
        ids = torch.cat([p.reshape(-1) for p in prompts]).to(dev)
        self._check_ids(ids, max(lengths))
        pos = torch.cat([torch.arange(n) for n in lengths]).to(dev)  # (total,)
        seq = torch.cat([torch.full((n,), b) for b, n in enumerate(lengths)]).to(dev)
        cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32,
                          device=dev)
        x = self._ops.embedding(ids, pos, self.wte.weight, self.wpe.weight)  # (total, C)

        def attend(layer, q, k, v):
            cache.write(layer, seq, pos, k, v)  # (total, H, D) into the cache
            return attn.packed_causal(q, k, v, lengths, cu, self.backend)

        y = self._run_blocks(x, attend, None)
        cache.seqlens.copy_(torch.tensor(lengths, dtype=torch.int32))
        last = y[cu[1:].long() - 1]  # (B, C)
        return last @ self.head_weight().t()

    @torch.inference_mode()
    def decode_step(self, tokens: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """One token per sequence: tokens (B,) at positions ``cache.seqlens``; appends
        their K/V, advances ``cache.seqlens`` by one (on the device) and returns the
        next-token logits (B, vocab). No host synchronisation: CUDA-graph capturable."""
        cfg = self.config
        batch = tokens.shape[0]
        fn = attn.decode_attention(self.backend)
        x = self._ops.embedding(tokens, cache.seqlens, self.wte.weight, self.wpe.weight)
        shape = (batch, 1, cfg.n_head, cfg.head_dim)

        def attend(layer, q, k, v):
            o = fn(q.view(shape), cache.k[layer], cache.v[layer], k=k.view(shape),
                   v=v.view(shape), cache_seqlens=cache.seqlens, page_table=cache.page_table,
                   causal=True)
            return o.view(batch, cfg.n_head, cfg.head_dim)

        y = self._run_blocks(x, attend, None)
        cache.seqlens.add_(1)
        return y @ self.head_weight().t()
