"""Bad input is rejected before any kernel runs, with a message naming the argument."""

import pytest
import torch

import flashtile
from flashtile.ops import _common


def _qkv(device, b=1, s=16, h=2, hkv=2, d=32, dtype=torch.float16):
    return (torch.randn(b, s, h, d, device=device, dtype=dtype),
            torch.randn(b, s, hkv, d, device=device, dtype=dtype),
            torch.randn(b, s, hkv, d, device=device, dtype=dtype))


BAD = [
    ("rank", lambda q, k, v: (q[0], k, v), {}, ValueError, "q must have 4 dimensions"),
    ("batch", lambda q, k, v: (q, k[:, :, :, :].expand(2, -1, -1, -1), v.expand(2, -1, -1, -1)),
     {}, ValueError, "batch mismatch"),
    ("head_dim_unsupported", lambda q, k, v: (q[..., :12], k[..., :12], v[..., :12]), {},
     ValueError, "head_dim"),
    ("head_dim_too_big",
     lambda q, k, v: tuple(torch.randn(1, 4, 2, 264, dtype=q.dtype, device=q.device)
                           for _ in range(3)), {}, ValueError, "head_dim"),
    ("head_dim_mismatch", lambda q, k, v: (q, k[..., :24], v[..., :24]), {}, ValueError,
     "share head_dim"),
    ("kv_shape", lambda q, k, v: (q, k, v[:, :8]), {}, ValueError, "k and v must have the same"),
    ("gqa_ratio", lambda q, k, v: (torch.cat([q, q[:, :, :1]], 2), k, v), {}, ValueError,
     "multiple of nheads"),
    ("dtype_mismatch", lambda q, k, v: (q, k.float(), v), {}, TypeError, "share a dtype"),
    ("dtype_unsupported", lambda q, k, v: (q.double(), k.double(), v.double()), {}, TypeError,
     "dtype"),
    ("int_tensor", lambda q, k, v: (q.to(torch.int32), k, v), {}, TypeError, "dtype"),
    ("not_a_tensor", lambda q, k, v: (q.tolist(), k, v), {}, TypeError, "q must be a torch.Tensor"),
    ("last_stride", lambda q, k, v: (q.transpose(1, 3).contiguous().transpose(1, 3), k, v), {},
     ValueError, "contiguous in its last dimension"),
    ("window_type", lambda q, k, v: (q, k, v), {"window_size": 3}, TypeError, "window_size"),
    ("window_range", lambda q, k, v: (q, k, v), {"window_size": (-2, 0)}, ValueError,
     "window_size left"),
    ("window_float", lambda q, k, v: (q, k, v), {"window_size": (1.5, 0)}, TypeError,
     "window_size left"),
    ("dropout_high", lambda q, k, v: (q, k, v), {"dropout_p": 1.0}, ValueError, "dropout_p"),
    ("dropout_neg", lambda q, k, v: (q, k, v), {"dropout_p": -0.1}, ValueError, "dropout_p"),
    ("softcap_neg", lambda q, k, v: (q, k, v), {"softcap": -1.0}, ValueError, "softcap"),
    ("scale_zero", lambda q, k, v: (q, k, v), {"softmax_scale": 0.0}, ValueError,
     "softmax_scale"),
]


@pytest.mark.parametrize("name,mutate,kwargs,exc,match", BAD, ids=[b[0] for b in BAD])
def test_bad_input(name, mutate, kwargs, exc, match, device, monkeypatch):
    launched = []
    monkeypatch.setattr("flashtile.ops.flash.attention_forward",
                        lambda *a, **k: launched.append(1))
    q, k, v = mutate(*_qkv(device))
    with pytest.raises(exc, match=match):
        flashtile.flash_attn_func(q, k, v, **kwargs)
    assert not launched, "a kernel launched before the input was rejected"


def test_cpu_without_interpreter(monkeypatch):
    monkeypatch.setattr(_common, "is_interpreting", lambda: False)
    monkeypatch.setattr("flashtile.ops._checks.is_interpreting", lambda: False)
    q, k, v = _qkv("cpu")
    with pytest.raises(ValueError, match="on the CPU"):
        flashtile.flash_attn_func(q, k, v)


@pytest.mark.gpu
def test_mixed_devices():
    q, k, v = _qkv("cuda")
    with pytest.raises(ValueError, match="k is on cpu"):
        flashtile.flash_attn_func(q, k.cpu(), v)


def test_public_surface():
    assert callable(flashtile.flash_attn_func) and callable(flashtile.sdpa)
    assert set(flashtile.__all__) >= {"flash_attn_func", "sdpa", "last_path"}
    with pytest.raises(AttributeError):
        flashtile.does_not_exist  # noqa: B018


def test_no_module_level_redefinitions():
    """No module in the tree defines one top-level function or class twice: the second
    silently replaces the first for every caller (session 44's shared launch spy took
    the name of an older spy in tests/test_hopper.py that way; ruff's F811 misses a
    redefinition once the first is used). ``_`` (torch.library fake registrations) is
    exempt."""
    import ast
    import collections
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1]
    found = {}
    for path in sorted([*root.glob("tests/*.py"), *root.glob("src/**/*.py"),
                        *root.glob("scripts/**/*.py")]):
        tree = ast.parse(path.read_text(), filename=str(path))
        names = collections.Counter(
            node.name for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))
        twice = sorted(name for name, n in names.items() if n > 1 and name != "_")
        if twice:
            found[str(path.relative_to(root))] = twice
    assert not found, found
