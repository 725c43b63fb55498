"""MiniGPT training checkpoints in safetensors (never pickle; DESIGN.md section 8).

One file holds everything a bitwise-identical resume needs:

    model.<name>             the model's state dict (the tied LM head is stored once,
                             as ``wte.weight``)
    optim.<i>.<key>          AdamW state of parameter i (step, exp_avg, exp_avg_sq)
    rng.cpu, rng.cuda,       torch's default generators (flashtile's dropout seeds come
    rng.data                 from the CPU one) and the batch sampler's generator
    metadata (strings)       model and train config, vocabulary, step, best val loss,
                             the optimizer's param_groups, all as JSON

``snapshot`` copies the state on its device (cheap on the GPU, so the best checkpoint
can be kept in memory during training) and ``write`` puts a snapshot on disk.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

__all__ = ["FORMAT", "Checkpoint", "load", "resolve", "restore", "snapshot", "write"]

FORMAT = "flashtile-minigpt-1"
_TIED = "lm_head.weight"


@dataclass
class Checkpoint:
    tensors: dict[str, torch.Tensor]
    meta: dict  # decoded JSON values

    @property
    def step(self) -> int:
        return int(self.meta["step"])

    def model_state(self) -> dict[str, torch.Tensor]:
        sd = {k[len("model."):]: v for k, v in self.tensors.items() if k.startswith("model.")}
        sd[_TIED] = sd["wte.weight"]
        return sd


def snapshot(model, optimizer=None, *, step: int, model_config: dict, train_config: dict,
             vocab: str, data_generator: torch.Generator | None = None,
             extra: dict | None = None) -> Checkpoint:
    """A detached copy of model (+ optimizer, RNG) state and metadata at ``step``."""
    t = {f"model.{k}": v.detach().clone() for k, v in model.state_dict().items() if k != _TIED}
    meta = dict(format=FORMAT, step=step, model_config=model_config,
                train_config=train_config, vocab=vocab, extra=extra or {})
    if optimizer is not None:
        sd = optimizer.state_dict()
        for i, state in sd["state"].items():
            for key, val in state.items():
                t[f"optim.{i}.{key}"] = val.detach().clone()
        # a learning rate held in a tensor (a CUDA-graphed step's) is stored as its value
        meta["optim_param_groups"] = [
            {k: (v.item() if torch.is_tensor(v) else v) for k, v in g.items()}
            for g in sd["param_groups"]]
    t["rng.cpu"] = torch.get_rng_state()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        t["rng.cuda"] = torch.cuda.get_rng_state()
    if data_generator is not None:
        t["rng.data"] = data_generator.get_state()
    return Checkpoint(t, meta)


def write(ckpt: Checkpoint, path: str | Path) -> Path:
    """Write ``ckpt`` to ``path`` (a .safetensors file), atomically."""
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tensors = {k: v.contiguous() for k, v in ckpt.tensors.items()}
    save_file(tensors, str(tmp), metadata={k: json.dumps(v) for k, v in ckpt.meta.items()})
    tmp.replace(path)
    return path


def resolve(path: str | Path, which: str = "best") -> Path:
    """A checkpoint file from a file path or a training directory (``which``.safetensors,
    falling back to the other of best/last)."""
    path = Path(path)
    if path.is_file():
        return path
    for name in (which, "last" if which == "best" else "best"):
        if (path / f"{name}.safetensors").is_file():
            return path / f"{name}.safetensors"
    raise FileNotFoundError(f"no best.safetensors or last.safetensors in {path}")


def load(path: str | Path, device="cpu", which: str = "best") -> Checkpoint:
    from safetensors import safe_open

    file = resolve(path, which)
    with safe_open(str(file), framework="pt", device=str(device)) as f:
        meta = {k: json.loads(v) for k, v in (f.metadata() or {}).items()}
        if meta.get("format") != FORMAT:
            raise ValueError(f"{file} is not a {FORMAT} checkpoint (format "
                             f"{meta.get('format')!r})")
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    return Checkpoint(tensors, meta)


def restore(ckpt: Checkpoint, model, optimizer=None,
            data_generator: torch.Generator | None = None, rng: bool = True) -> None:
    """Load model weights, and optionally optimizer state and every RNG, from ``ckpt``."""
    model.load_state_dict(ckpt.model_state())
    if optimizer is not None:
        state: dict[int, dict] = {}
        for k, v in ckpt.tensors.items():
            if k.startswith("optim."):
                _, i, key = k.split(".", 2)
                state.setdefault(int(i), {})[key] = v
        optimizer.load_state_dict({"state": state,
                                   "param_groups": ckpt.meta["optim_param_groups"]})
    if rng:
        torch.set_rng_state(ckpt.tensors["rng.cpu"].cpu())
        if "rng.cuda" in ckpt.tensors and torch.cuda.is_available():
            torch.cuda.set_rng_state(ckpt.tensors["rng.cuda"].cpu())
        if data_generator is not None and "rng.data" in ckpt.tensors:
            data_generator.set_state(ckpt.tensors["rng.data"].cpu())
