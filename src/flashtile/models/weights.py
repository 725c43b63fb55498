"""GPT-2 weights from HuggingFace checkpoints: ``config.json`` + ``model.safetensors``.

safetensors only: nothing is ever unpickled. Before any tensor is materialised the
file's header is checked (size field, JSON, dtypes, shapes against byte ranges, ranges
against the file size), then every expected tensor must be present with its shape,
in a floating dtype, with finite values. All problems are reported together in one
``CheckpointError`` naming the file and each tensor.

    model = load_gpt2("path/to/dir")            # or "gpt2" / "openai-community/gpt2-xl" online
    save_gpt2(model, "path/to/dir")             # the same format, readable by transformers
    model = gpt2_from_hf(hf_model)              # from an in-memory GPT2LMHeadModel

HuggingFace names: ``transformer.`` prefix optional (GPT2LMHeadModel vs GPT2Model
checkpoints); ``lm_head.weight`` is the tied ``wte`` unless the config unties it; the
attention-mask buffers of old checkpoints (``h.N.attn.bias``, ``h.N.attn.masked_bias``)
are ignored. Conv1D weights are (in, out), as the model stores them.
"""

from __future__ import annotations

import json
import os
import re
import struct
from pathlib import Path

import torch

from .gpt2 import GPT2, GPT2Config

__all__ = ["CheckpointError", "load_gpt2", "save_gpt2", "gpt2_from_hf", "resolve_checkpoint",
           "read_config", "read_safetensors", "expected_shapes"]

WEIGHTS_NAME = "model.safetensors"
CONFIG_NAME = "config.json"
MAX_HEADER = 100 * 1024 * 1024  # the safetensors format's own limit
_DTYPES = {
    "F64": (torch.float64, 8), "F32": (torch.float32, 4), "F16": (torch.float16, 2),
    "BF16": (torch.bfloat16, 2), "I64": (torch.int64, 8), "I32": (torch.int32, 4),
    "I16": (torch.int16, 2), "I8": (torch.int8, 1), "U8": (torch.uint8, 1),
    "BOOL": (torch.bool, 1),
}
_FLOAT_DTYPES = ("F32", "F16", "BF16")
_IGNORED = re.compile(r"^h\.\d+\.attn\.(bias|masked_bias)$")


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded; the message lists every problem found."""


# ----------------------------------------------------------------------------------
# public API
# ----------------------------------------------------------------------------------


def load_gpt2(path_or_id: str | os.PathLike, dtype: torch.dtype | None = None, device=None,
              backend: str = "flashtile", check_finite: bool = True) -> GPT2:
    """Load a GPT-2 checkpoint directory (or hub id, when online) into ``GPT2``.

    ``dtype`` defaults to the checkpoint's; ``device`` to CPU. Raises
    ``CheckpointError`` (a ValueError) on missing, unexpected, misshapen, non-float,
    truncated or non-finite tensors, and ``FileNotFoundError`` when nothing is there.
    """
    folder = resolve_checkpoint(path_or_id)
    config = read_config(folder / CONFIG_NAME)
    tensors = read_safetensors(folder / WEIGHTS_NAME)
    return _build(config, tensors, dtype, device, backend, check_finite,
                  where=str(folder / WEIGHTS_NAME))


def gpt2_from_hf(hf_model, dtype: torch.dtype | None = None, device=None,
                 backend: str = "flashtile") -> GPT2:
    """Our model from an in-memory ``transformers`` GPT2LMHeadModel (same checks);
    ``dtype`` and ``device`` default to the HF model's."""
    config = GPT2Config.from_hf(hf_model.config.to_dict())
    tensors = {k: v.detach() for k, v in hf_model.state_dict().items()}
    device = device or tensors["transformer.wte.weight"].device
    return _build(config, tensors, dtype, device, backend, True, where="in-memory model")


def save_gpt2(model: GPT2, folder: str | os.PathLike) -> Path:
    """Write ``config.json`` + ``model.safetensors`` in HuggingFace's GPT-2 layout."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / CONFIG_NAME).write_text(json.dumps(model.config.to_hf(), indent=2))
    state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    save_file(state, str(folder / WEIGHTS_NAME), metadata={"format": "pt"})
    return folder


def expected_shapes(config: GPT2Config) -> dict[str, tuple[int, ...]]:
    """Every tensor the model needs, by HuggingFace name (no ``transformer.`` prefix)."""
    c, f = config.n_embd, 4 * config.n_embd
    shapes = {"wte.weight": (config.vocab_size, c), "wpe.weight": (config.n_positions, c)}
    for i in range(config.n_layer):
        p = f"h.{i}."
        shapes.update({
            p + "ln_1.weight": (c,), p + "ln_1.bias": (c,),
            p + "attn.c_attn.weight": (c, 3 * c), p + "attn.c_attn.bias": (3 * c,),
            p + "attn.c_proj.weight": (c, c), p + "attn.c_proj.bias": (c,),
            p + "ln_2.weight": (c,), p + "ln_2.bias": (c,),
            p + "mlp.c_fc.weight": (c, f), p + "mlp.c_fc.bias": (f,),
            p + "mlp.c_proj.weight": (f, c), p + "mlp.c_proj.bias": (c,),
        })
    shapes.update({"ln_f.weight": (c,), "ln_f.bias": (c,)})
    if not config.tie_word_embeddings:
        shapes["lm_head.weight"] = (config.vocab_size, c)
    return shapes


# ----------------------------------------------------------------------------------
# locating a checkpoint
# ----------------------------------------------------------------------------------


def resolve_checkpoint(path_or_id: str | os.PathLike) -> Path:
    """A local folder holding config.json + model.safetensors, or a hub id fetched (or
    found in the local HuggingFace cache) through ``huggingface_hub``."""
    path = Path(path_or_id).expanduser()
    if path.is_file() and path.suffix == ".safetensors":
        path = path.parent
    if path.is_dir():
        missing = [n for n in (CONFIG_NAME, WEIGHTS_NAME) if not (path / n).is_file()]
        if missing:
            hint = (" (pytorch_model.bin is a pickle and is never loaded; convert it to "
                    "safetensors)") if (path / "pytorch_model.bin").exists() else ""
            raise FileNotFoundError(f"{path}: missing {', '.join(missing)}{hint}")
        return path
    text = str(path_or_id)
    if not re.fullmatch(r"[\w.-]+(/[\w.-]+)?", text) or text.startswith((".", "/")):
        raise FileNotFoundError(f"no checkpoint folder at {text!r}")
    return _from_hub(text)


def _from_hub(repo_id: str) -> Path:
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise FileNotFoundError(
            f"{repo_id!r} is not a local folder, and huggingface_hub is not installed to "
            "fetch it (pip install flashtile[models])"
        ) from None
    if "/" not in repo_id and repo_id.startswith("gpt2"):
        repo_id = f"openai-community/{repo_id}"
    patterns = [CONFIG_NAME, WEIGHTS_NAME]
    try:  # the local cache first: no network needed if it was fetched before
        return Path(snapshot_download(repo_id, allow_patterns=patterns, local_files_only=True))
    except Exception:  # noqa: BLE001 - not cached; try the network below
        pass
    try:
        folder = Path(snapshot_download(repo_id, allow_patterns=patterns))
    except Exception as exc:  # noqa: BLE001 - offline, unknown repo, ...: one clear message
        raise FileNotFoundError(
            f"{repo_id!r} is not a local folder and could not be fetched from the "
            f"HuggingFace hub ({type(exc).__name__}: {str(exc).splitlines()[0][:200]}). "
            "Pass a folder with config.json + model.safetensors."
        ) from None
    return resolve_checkpoint(folder)


# ----------------------------------------------------------------------------------
# reading and checking
# ----------------------------------------------------------------------------------


def read_config(path: Path) -> GPT2Config:
    try:
        d = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path}: cannot read the config: {exc}") from None
    if not isinstance(d, dict):
        raise CheckpointError(f"{path}: expected a JSON object")
    if d.get("model_type", "gpt2") != "gpt2":
        raise CheckpointError(f"{path}: model_type {d.get('model_type')!r} is not 'gpt2'")
    act = d.get("activation_function", "gelu_new")
    if act not in ("gelu_new", "gelu_pytorch_tanh"):
        raise CheckpointError(f"{path}: activation_function {act!r}; only GELU (tanh) is built")
    missing = [k for k in ("vocab_size", "n_embd", "n_layer", "n_head") if k not in d]
    if missing:
        raise CheckpointError(f"{path}: config lacks {', '.join(missing)}")
    try:
        return GPT2Config.from_hf(d)
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{path}: {exc}") from None


def read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    """Tensors of a safetensors file, after checking its header against its size."""
    path = Path(path)
    header = _check_header(path)
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        tensors = load_file(str(path))
    except (SafetensorError, OSError, RuntimeError) as exc:
        raise CheckpointError(f"{path}: unreadable safetensors file: {exc}") from None
    if set(tensors) != set(header):
        raise CheckpointError(f"{path}: header and contents disagree")
    return tensors


def _check_header(path: Path) -> dict:
    """Parse and check the header: 8-byte little-endian length, JSON, byte ranges."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise CheckpointError(f"{path}: truncated file ({size} bytes): no safetensors header")
        (n,) = struct.unpack("<Q", head)
        if n > MAX_HEADER or 8 + n > size:
            raise CheckpointError(
                f"{path}: bad safetensors header: it claims {n} bytes but the file has "
                f"{size} (truncated, or not a safetensors file)"
            )
        raw = f.read(n)
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path}: bad safetensors header: not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: bad safetensors header: not a JSON object")
    header.pop("__metadata__", None)
    data_size, problems = size - 8 - n, []
    for name, info in header.items():
        try:
            dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            problems.append(f"{name}: malformed header entry {info!r}")
            continue
        if dtype not in _DTYPES:
            problems.append(f"{name}: unknown dtype {dtype!r}")
            continue
        numel = 1
        for d in shape:
            numel *= d
        if end - begin != numel * _DTYPES[dtype][1]:
            problems.append(f"{name}: {end - begin} bytes for shape {shape} {dtype}")
        elif end > data_size:
            problems.append(f"{name}: bytes {begin}..{end} beyond the data ({data_size} bytes)")
    if problems:
        truncated = any("beyond the data" in p for p in problems)
        what = "truncated file" if truncated else "corrupt safetensors header"
        raise CheckpointError(f"{path}: {what}:\n  " + "\n  ".join(problems))
    return header


def _build(config, tensors, dtype, device, backend, check_finite, where) -> GPT2:
    """Check names, shapes, dtypes and values against the config, then fill a GPT2."""
    tensors = {k.removeprefix("transformer."): v for k, v in tensors.items()}
    expected = expected_shapes(config)
    if config.tie_word_embeddings:
        tensors.pop("lm_head.weight", None)  # tied: wte is the head
    problems = []
    missing = [k for k in expected if k not in tensors]
    unexpected = [k for k in tensors if k not in expected and not _IGNORED.match(k)]
    if missing:
        problems.append(f"missing {len(missing)} tensors: {_names(missing)}")
    if unexpected:
        problems.append(f"unexpected {len(unexpected)} tensors: {_names(unexpected)}")
    for name, shape in expected.items():
        t = tensors.get(name)
        if t is None:
            continue
        if tuple(t.shape) != shape:
            problems.append(f"{name}: shape {tuple(t.shape)}, expected {shape}")
        if t.dtype not in (torch.float32, torch.float16, torch.bfloat16):
            problems.append(f"{name}: dtype {t.dtype}, expected float32/float16/bfloat16")
        elif check_finite:
            bad = t.numel() - int(torch.isfinite(t).sum())
            if bad:
                problems.append(f"{name}: {bad} NaN/inf values")
    if problems:
        raise CheckpointError(f"{where}: cannot load GPT-2 weights:\n  " + "\n  ".join(problems))
    dtype = dtype or tensors["wte.weight"].dtype
    with torch.device(device or "cpu"):
        model = GPT2(config, backend=backend)
    model = model.to(dtype=dtype)
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name in expected:
            params[name].copy_(tensors[name])
    return model


def _names(names: list[str], limit: int = 8) -> str:
    more = f" ... (+{len(names) - limit} more)" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more
