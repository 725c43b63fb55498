"""Tiny Shakespeare, character level: the text, a tokenizer, a 90/10 split and batches.

The text is read from a path (DESIGN.md section 8): by default
``../shared/data/tinyshakespeare.txt`` beside the checkout, or ``data/`` inside it (the
copy that travels to the GPU machine). ``download=True`` fetches the public copy once,
checks its sha256 and stores it; nothing is downloaded unless asked.
"""

from __future__ import annotations

import hashlib
import os
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import torch

__all__ = [
    "DATA_SHA256", "DATA_URL", "CharTokenizer", "Splits", "default_data_path", "eval_batches",
    "load_text", "make_splits", "random_batch",
]

DATA_URL = ("https://raw.githubusercontent.com/karpathy/char-rnn/master/data/"
            "tinyshakespeare/input.txt")
# sha256 of the 1,115,394-byte file (DESIGN.md section 8)
DATA_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
_REPO_ROOT = Path(__file__).resolve().parents[3]


def default_data_path() -> Path:
    """The checkout's ``data/`` copy if present, else ``../shared/data`` beside it. The
    checkout is the one this file lives in (editable install, PYTHONPATH=src) or, for an
    installed wheel, the current directory."""
    name = Path("data") / "tinyshakespeare.txt"
    candidates = [root / name for root in (_REPO_ROOT, Path.cwd())]
    candidates += [root.parent / "shared" / name for root in (_REPO_ROOT, Path.cwd())]
    for p in candidates:
        if p.exists():
            return p
    return candidates[2]


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def load_text(path: str | os.PathLike | None = None, download: bool = False) -> str:
    """The corpus as a string. With ``download`` and no file at ``path``, fetch
    ``DATA_URL`` and keep it only if its sha256 is ``DATA_SHA256``."""
    if path is None:
        path = default_data_path()
        if download and not path.exists():  # a user's machine: keep it under ./data
            path = Path("data") / "tinyshakespeare.txt"
    path = Path(path)
    if not path.exists():
        if not download:
            raise FileNotFoundError(
                f"no Tiny Shakespeare at {path}; pass --data PATH, or --download to fetch "
                f"{DATA_URL} (sha256-checked)")
        with urllib.request.urlopen(DATA_URL, timeout=60) as r:  # opt-in only
            data = r.read()
        if _sha256(data) != DATA_SHA256:
            raise ValueError(f"downloaded file has sha256 {_sha256(data)}, expected "
                             f"{DATA_SHA256}; not saved")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return path.read_text(encoding="utf-8")


class CharTokenizer:
    """Characters <-> ids, ids in sorted order of the characters seen in the text."""

    def __init__(self, chars: str):
        self.chars = "".join(sorted(set(chars)))
        self.stoi = {c: i for i, c in enumerate(self.chars)}

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, s: str) -> list[int]:
        try:
            return [self.stoi[c] for c in s]
        except KeyError as e:
            raise ValueError(f"character {e.args[0]!r} is not in the vocabulary") from None

    def decode(self, ids) -> str:
        return "".join(self.chars[int(i)] for i in ids)


@dataclass
class Splits:
    """Token ids (int64, 1-D) of the first 90% (train) and last 10% (val) of the text."""

    tokenizer: CharTokenizer
    train: torch.Tensor
    val: torch.Tensor

    def to(self, device) -> Splits:
        return Splits(self.tokenizer, self.train.to(device), self.val.to(device))


def make_splits(text: str, train_frac: float = 0.9) -> Splits:
    tok = CharTokenizer(text)
    ids = torch.tensor(tok.encode(text), dtype=torch.int64)
    n = int(train_frac * len(ids))
    return Splits(tok, ids[:n], ids[n:])


def random_batch(data: torch.Tensor, batch_size: int, block_size: int,
                 generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(x, y), each (batch_size, block_size): windows at random offsets, y shifted by one.
    Drawn and gathered on ``data``'s device (no host round trip on the GPU)."""
    ix = torch.randint(len(data) - block_size, (batch_size,), generator=generator,
                       device=data.device)
    offs = ix[:, None] + torch.arange(block_size + 1, device=data.device)  # (B, T+1)
    chunk = data[offs]
    return chunk[:, :-1], chunk[:, 1:]


def eval_batches(data: torch.Tensor, batch_size: int, block_size: int, max_batches: int):
    """Deterministic evaluation windows: up to ``max_batches`` full batches of windows
    spread evenly over ``data`` (non-overlapping when the split is small enough, as the
    validation split is). Full batches only, so every call has the training shape."""
    n_windows = (len(data) - 1) // block_size
    n_batches = min(max_batches, n_windows // batch_size)
    if n_batches == 0:
        raise ValueError(f"split of {len(data)} tokens has no full batch of "
                         f"{batch_size} x {block_size} windows")
    n = n_batches * batch_size
    starts = torch.linspace(0, len(data) - block_size - 1, n, device=data.device).long()
    offs = starts[:, None] + torch.arange(block_size + 1, device=data.device)
    chunk = data[offs].view(n_batches, batch_size, block_size + 1)
    return [(c[:, :-1], c[:, 1:]) for c in chunk]
