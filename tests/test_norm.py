"""flashtile.ops.norm: LayerNorm, residual-add + LayerNorm, GELU (tanh), bias + GELU and
the embedding gather against PyTorch, with the DESIGN.md tolerance rule (error vs an
fp64 reference within twice PyTorch's own error in the input dtype, plus the output
dtype's rounding)."""

import pytest
import torch
import torch.nn.functional as F

from flashtile.ops import norm
from flashtile.validate import check_close

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
WIDTHS = [64, 100, 1600]  # a power of two, a masked row, GPT-2 XL


def _assert(check):
    assert check.ok, str(check)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", WIDTHS)
def test_layer_norm(dtype, n, device):
    x = torch.randn(37, n, device=device).to(dtype) * 3 + 1
    w, b = torch.randn(n, device=device), torch.randn(n, device=device)
    ref64 = F.layer_norm(x.double(), (n,), w.double(), b.double(), 1e-5)
    ref_lp = F.layer_norm(x, (n,), w.to(dtype), b.to(dtype), 1e-5)
    _assert(check_close("ln", norm.layer_norm(x, w, b, 1e-5), ref64, ref_lp))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", WIDTHS)
def test_add_layer_norm(dtype, n, device):
    """h is exactly the rounded sum; y the LN of that rounded h."""
    x = torch.randn(2, 19, n, device=device).to(dtype)
    r = torch.randn(2, 19, n, device=device).to(dtype) * 4
    w, b = torch.randn(n, device=device), torch.randn(n, device=device)
    h, y = norm.add_layer_norm(x, r, w, b)
    assert torch.equal(h, x + r), (h.float() - (x + r).float()).abs().max()
    ref64 = F.layer_norm(h.double(), (n,), w.double(), b.double(), 1e-5)
    ref_lp = F.layer_norm(h, (n,), w.to(dtype), b.to(dtype), 1e-5)
    _assert(check_close("add_ln", y, ref64, ref_lp))


@pytest.mark.parametrize("dtype", DTYPES)
def test_bias_gelu(dtype, device):
    n = 300
    x = torch.randn(23, n, device=device).to(dtype) * 4
    b = torch.randn(n, device=device).to(dtype)
    ref64 = F.gelu(x.double() + b.double(), approximate="tanh")
    ref_lp = F.gelu(x + b, approximate="tanh")
    _assert(check_close("bias_gelu", norm.bias_gelu(x, b), ref64, ref_lp))
    _assert(check_close("gelu", norm.gelu_tanh(x), F.gelu(x.double(), approximate="tanh"),
                        F.gelu(x, approximate="tanh")))


@pytest.mark.parametrize("dtype", DTYPES)
def test_embedding(dtype, device):
    wte = torch.randn(97, 72, device=device).to(dtype)
    wpe = torch.randn(31, 72, device=device).to(dtype)
    ids = torch.randint(0, 97, (3, 31), device=device)
    pos = torch.arange(31, device=device).expand(3, 31).contiguous()
    out = norm.embedding(ids, pos, wte, wpe)
    assert out.shape == (3, 31, 72)
    assert torch.equal(out, wte[ids] + wpe[pos])  # one rounding of an exact sum: bitwise


def test_bad_input(device):
    x = torch.randn(4, 8, device=device)
    with pytest.raises(ValueError, match="weight/bias"):
        norm.layer_norm(x, torch.ones(7, device=device), None)
    with pytest.raises(ValueError, match="residual must match"):
        norm.add_layer_norm(x, x[:, :4], torch.ones(8, device=device), None)
    with pytest.raises(ValueError, match="bias must be"):
        norm.bias_gelu(x, torch.ones(3, device=device))
    with pytest.raises(TypeError, match="dtype"):
        norm.gelu_tanh(x.double())


def test_empty_and_strided(device):
    w = torch.ones(16, device=device)
    assert norm.layer_norm(torch.empty(0, 16, device=device), w, None).shape == (0, 16)
    x = torch.randn(8, 32, device=device)[:, :16]  # rows with stride 32
    torch.testing.assert_close(norm.layer_norm(x, w, None), F.layer_norm(x, (16,), w))
