"""flashtile.sdpa: the contract of F.scaled_dot_product_attention, and its fallbacks."""

import warnings

import pytest
import torch

import flashtile
from flashtile import reference
from flashtile.ops import _checks
from flashtile.ops import sdpa as sdpa_mod
from flashtile.validate import check_close


def _bhsd(b, h, s, d, device, dtype=torch.float16, gen=None):
    return torch.randn(b, h, s, d, generator=gen).to(device=device, dtype=dtype)


@pytest.mark.parametrize("sq,sk", [(33, 33), (20, 45), (45, 20), (1, 9)])
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("hq,hkv", [(2, 2), (4, 2)])
def test_matches_torch_semantics(sq, sk, is_causal, hq, hkv, device):
    """Top-left causal, GQA via enable_gqa, scale: against PyTorch's math SDPA in fp64
    (the truth) and in fp16 (the noise floor), forward and backward."""
    gen = torch.Generator().manual_seed(sq * 100 + sk)
    q = _bhsd(1, hq, sq, 32, device, gen=gen)
    k, v = _bhsd(1, hkv, sk, 32, device, gen=gen), _bhsd(1, hkv, sk, 32, device, gen=gen)
    kw = dict(is_causal=is_causal, scale=0.3, enable_gqa=hq != hkv)
    ins = [t.clone().requires_grad_() for t in (q, k, v)]
    out = flashtile.sdpa(*ins, **kw)
    assert flashtile.last_path() == "flashtile"
    dout = torch.randn(out.shape, generator=gen).to(device=device, dtype=out.dtype)
    grads = torch.autograd.grad(out, ins, dout)
    results = []
    for upcast in (True, False):
        # the truth's leaves are fp64, so its gradients are not rounded to fp16 (a
        # rounded truth has no floor left for flashtile's own rounding: one ulp apart
        # at a tie, dv of a one-key softmax where dv is a sum of two fp16 douts)
        r_in = [(t.double() if upcast else t).clone().requires_grad_() for t in (q, k, v)]
        r_out = reference.sdpa(*r_in, upcast=upcast, **kw)
        results.append((r_out, torch.autograd.grad(r_out, r_in,
                                                   dout.to(r_out.dtype))))
    (o64, g64), (olp, glp) = results
    checks = [check_close("out", out, o64, olp)]
    checks += [check_close(n, g, a, b, atol=1e-6)
               for n, g, a, b in zip(("dq", "dk", "dv"), grads, g64, glp)]
    assert all(c.ok for c in checks), "; ".join(map(str, checks))


def test_falls_back_on_attn_mask(device):
    q, k, v = (_bhsd(1, 2, 8, 32, device) for _ in range(3))
    mask = torch.ones(8, 8, dtype=torch.bool, device=device).tril()
    sdpa_mod._warned.clear()
    with pytest.warns(UserWarning, match="attn_mask"):
        out = flashtile.sdpa(q, k, v, attn_mask=mask)
    assert flashtile.last_path().startswith("torch")
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert torch.equal(out, expected)
    with warnings.catch_warnings():  # said once per reason
        warnings.simplefilter("error")
        flashtile.sdpa(q, k, v, attn_mask=mask)


def test_falls_back_on_cpu_without_interpreter(monkeypatch):
    monkeypatch.setattr(sdpa_mod, "is_interpreting", lambda: False)
    monkeypatch.setattr(_checks, "is_interpreting", lambda: False)
    q, k, v = (_bhsd(1, 2, 8, 32, "cpu", torch.float32) for _ in range(3))
    sdpa_mod._warned.clear()
    with pytest.warns(UserWarning, match="cpu tensors"):
        out = flashtile.sdpa(q, k, v, is_causal=True)
    assert flashtile.last_path().startswith("torch")
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert torch.equal(out, ref)


def test_falls_back_on_large_head_dim(device):
    q, k, v = (_bhsd(1, 1, 4, 320, device, torch.float32) for _ in range(3))
    sdpa_mod._warned.clear()
    with pytest.warns(UserWarning, match="head dims"):
        flashtile.sdpa(q, k, v)
    assert flashtile.last_path().startswith("torch")


def test_heads_mismatch_raises_like_torch(device):
    q, k, v = _bhsd(1, 4, 8, 32, device), _bhsd(1, 2, 8, 32, device), _bhsd(1, 2, 8, 32, device)
    with pytest.raises(RuntimeError):
        flashtile.sdpa(q, k, v)
