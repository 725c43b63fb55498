"""Token generation for ``flashtile.models.gpt2``: KV cache, streaming, CUDA graphs.

    gen = Generator(model, batch=2, max_seqlen=128)
    for step in gen.stream([prompt_a, prompt_b], max_new_tokens=32, temperature=0.8,
                           top_k=200, seed=0):
        ...                                   # step: (B,) int64 ids on the host, one per prompt

The prompts (1-D id tensors, any lengths) are prefilled once, packed into one batch
(``flash_attn_varlen_func`` when flashtile has it); every further token is one
``decode_step`` over the KV cache (attention through ``flash_attn_with_kvcache``):
nothing is ever re-prefilled. On a GPU the decode step is captured in a CUDA graph
once per ``Generator`` and replayed per token (no Python or launch overhead per
kernel); sampling runs outside the graph so every draw comes from the seeded generator.

``generate_recompute`` is the no-cache baseline (full forward per token), used by the
cache-vs-recompute test. ``load_tokenizer`` finds GPT-2's BPE (tiktoken or
transformers) when its vocabulary is on disk; without one, ids are the interface.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import torch

from .gpt2 import GPT2
from .sampling import check_sampling_args, sample

__all__ = ["Generator", "generate", "generate_recompute", "load_tokenizer"]


class Generator:
    """Prefill + cached decode for up to ``batch`` prompts of up to ``max_seqlen`` tokens
    (prompt + generated). ``cuda_graph=None`` captures the decode step on CUDA;
    ``page_size`` switches to a paged KV cache (pages of that many tokens)."""

    def __init__(self, model: GPT2, batch: int, max_seqlen: int, cuda_graph: bool | None = None,
                 page_size: int | None = None):
        self.model = model
        self.cache = model.new_cache(batch, max_seqlen, page_size)
        self.batch, self.max_seqlen = batch, max_seqlen
        on_cuda = model.device.type == "cuda"
        self.use_graph = on_cuda if cuda_graph is None else (cuda_graph and on_cuda)
        self._graph = None
        self._tokens = torch.zeros(batch, dtype=torch.long, device=model.device)
        self._logits = None

    # -- one decode step, eager or graph --

    def decode(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B,) ids at positions ``cache.seqlens`` -> (B, vocab) logits; advances the cache."""
        if not self.use_graph:
            return self.model.decode_step(tokens, self.cache)
        if self._graph is None:
            self._capture()
        self._tokens.copy_(tokens)
        self._graph.replay()
        return self._logits

    def _capture(self):
        """Warm up on a side stream, then capture one decode step. Neither changes the
        cache's state: seqlens are restored, and the K/V written at position seqlens
        is overwritten by the next real step."""
        seqlens = self.cache.seqlens.clone()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):  # compile every kernel; let the allocator settle
                self.model.decode_step(self._tokens, self.cache)
                self.cache.seqlens.copy_(seqlens)
        torch.cuda.current_stream().wait_stream(stream)
        self._graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self._graph):
            self._logits = self.model.decode_step(self._tokens, self.cache)
        self.cache.seqlens.copy_(seqlens)

    # -- generation --

    def _prepare(self, prompts, max_new_tokens, temperature, top_k, top_p):
        check_sampling_args(temperature, top_k, top_p)
        prompts = [torch.as_tensor(p, dtype=torch.long).reshape(-1) for p in prompts]
        if len(prompts) != self.batch:
            raise ValueError(
                f"a Generator of batch {self.batch} needs exactly {self.batch} prompts "
                f"(its cache and CUDA graph have that shape); got {len(prompts)}"
            )
        longest = max(p.numel() for p in prompts)
        if longest + max_new_tokens > self.max_seqlen:
            raise ValueError(
                f"prompt ({longest} tokens) + {max_new_tokens} new tokens exceed max_seqlen "
                f"{self.max_seqlen}"
            )
        return prompts

    def stream(self, prompts, max_new_tokens: int, temperature: float = 0.0,
               top_k: int | None = None, top_p: float | None = None, seed: int = 0,
               eos_token_id: int | None = None) -> Iterator[list[int]]:
        """Yield one list of B token ids per step, as soon as each step is sampled.
        Stops after ``max_new_tokens`` steps, or when every sequence has produced
        ``eos_token_id`` (later tokens of a finished sequence are ``eos_token_id``)."""
        prompts = self._prepare(prompts, max_new_tokens, temperature, top_k, top_p)
        gen = torch.Generator(device=self.model.device).manual_seed(seed)
        done = [False] * self.batch
        logits = self.model.prefill(prompts, self.cache)
        for step in range(max_new_tokens):
            tok = sample(logits, temperature, top_k, top_p, gen)
            ids = tok.tolist()
            if eos_token_id is not None:
                ids = [eos_token_id if d else t for d, t in zip(done, ids)]
                done = [d or t == eos_token_id for d, t in zip(done, ids)]
            yield ids
            if all(done) or step + 1 == max_new_tokens:
                return
            logits = self.decode(tok)

    def generate(self, prompts, max_new_tokens: int, temperature: float = 0.0,
                 top_k: int | None = None, top_p: float | None = None,
                 seed: int = 0) -> torch.Tensor:
        """All new tokens at once, (B, max_new_tokens) int64 on the model's device; no
        host synchronisation between steps (the timing path of the benchmark)."""
        prompts = self._prepare(prompts, max_new_tokens, temperature, top_k, top_p)
        gen = torch.Generator(device=self.model.device).manual_seed(seed)
        out = torch.empty(self.batch, max_new_tokens, dtype=torch.long, device=self.model.device)
        logits = self.model.prefill(prompts, self.cache)
        for step in range(max_new_tokens):
            out[:, step] = tok = sample(logits, temperature, top_k, top_p, gen)
            if step + 1 < max_new_tokens:
                logits = self.decode(tok)
        return out


def generate(model: GPT2, prompts, max_new_tokens: int, **kwargs) -> torch.Tensor:
    """One-shot convenience: a Generator sized for these prompts; (B, new) ids."""
    longest = max(len(p) for p in prompts)
    g = Generator(model, len(prompts), longest + max_new_tokens,
                  cuda_graph=kwargs.pop("cuda_graph", None))
    return g.generate(prompts, max_new_tokens, **kwargs)


@torch.inference_mode()
def generate_recompute(model: GPT2, prompt, max_new_tokens: int) -> list[int]:
    """Greedy decoding by a full forward over the whole sequence per token (no cache)."""
    ids = torch.as_tensor(prompt, dtype=torch.long, device=model.device).reshape(1, -1)
    new = []
    for _ in range(max_new_tokens):
        nxt = model(ids)[:, -1].argmax(dim=-1)  # (1,)
        new.append(int(nxt))
        ids = torch.cat([ids, nxt[:, None]], dim=1)
    return new


# ----------------------------------------------------------------------------------
# tokenizer
# ----------------------------------------------------------------------------------


class _Tokenizer:
    def __init__(self, name, encode, decode, eos):
        self.name, self.encode, self.decode, self.eos_token_id = name, encode, decode, eos


def load_tokenizer(model_dir: str | os.PathLike | None = None):
    """GPT-2's BPE, or None when no vocabulary is available offline. Tried in order:
    transformers' tokenizer from ``model_dir`` (vocab.json + merges.txt, or
    tokenizer.json), then tiktoken's "gpt2" encoding if its files are cached."""
    if model_dir is not None:
        folder = Path(model_dir)
        if (folder / "tokenizer.json").is_file() or (
                (folder / "vocab.json").is_file() and (folder / "merges.txt").is_file()):
            try:
                from transformers import AutoTokenizer

                tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
                return _Tokenizer(f"transformers ({folder})", tok.encode, tok.decode,
                                  tok.eos_token_id)
            except Exception:  # noqa: BLE001 - a broken tokenizer folder: try tiktoken
                pass
    try:
        import tiktoken
    except ImportError:
        return None
    if not _tiktoken_cached():
        return None
    try:
        enc = tiktoken.get_encoding("gpt2")
    except Exception:  # noqa: BLE001 - offline, or a broken cache
        return None
    return _Tokenizer("tiktoken gpt2", lambda s: enc.encode(s, allowed_special="all"),
                      enc.decode, enc.eot_token)


def _tiktoken_cached() -> bool:
    """True if tiktoken's gpt2 files are in its cache (so no download is attempted)."""
    import hashlib
    import tempfile

    cache = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR") or (
        os.path.join(tempfile.gettempdir(), "data-gym-cache"))
    base = "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/"
    files = [base + "vocab.bpe", base + "encoder.json"]
    return all(os.path.isfile(os.path.join(cache, hashlib.sha1(u.encode()).hexdigest()))
               for u in files)
