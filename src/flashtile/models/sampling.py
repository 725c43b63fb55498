"""Next-token selection: greedy, temperature, top-k, top-p (nucleus).

``sample(logits, temperature, top_k, top_p, generator)`` takes (B, vocab) logits and
returns (B,) int64 token ids. Temperature 0 is greedy (argmax, lowest id on ties).
Draws come from ``generator`` only (a ``torch.Generator`` on the logits' device), so
a seed reproduces a sampled sequence exactly on the same device and dtype.
"""

from __future__ import annotations

import torch

__all__ = ["sample", "check_sampling_args"]


def check_sampling_args(temperature: float, top_k: int | None, top_p: float | None) -> None:
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
    if top_k is not None and top_k < 0:
        raise ValueError(f"top_k must be >= 0 (0 = off), got {top_k}")
    if top_p is not None and not (0.0 < top_p <= 1.0):
        raise ValueError(f"top_p must be in (0, 1] (1 = off), got {top_p}")


def sample(logits: torch.Tensor, temperature: float = 0.0, top_k: int | None = None,
           top_p: float | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
    """(B, vocab) logits -> (B,) next token ids (int64)."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    scores = logits.float() / temperature
    if top_k:
        k = min(int(top_k), scores.shape[-1])
        kth = torch.topk(scores, k, dim=-1).values[:, -1:]  # (B, 1)
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_scores, order = torch.sort(scores, dim=-1, descending=True)
        probs = torch.softmax(sorted_scores, dim=-1)
        # drop a token when the tokens ranked above it already hold top_p of the mass
        # (the first token is always kept)
        drop = (probs.cumsum(dim=-1) - probs) >= top_p
        sorted_scores = sorted_scores.masked_fill(drop, float("-inf"))
        scores = torch.full_like(scores, float("-inf")).scatter(-1, order, sorted_scores)
    probs = torch.softmax(scores, dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
