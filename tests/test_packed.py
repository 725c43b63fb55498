"""flash-attn's packed entry points (``flash_attn_qkvpacked_func`` and friends): the same
kernels on views of one tensor. On the CPU (the interpreter) each call must be bitwise
the unpacked call on contiguous copies, forward and gradients; on a GPU each is checked
against the fp64 reference with the DESIGN.md rule. Bad packing raises before launch."""

import itertools

import pytest
import torch

import flashtile
from flashtile import reference
from flashtile.validate import check_close

ON_GPU = torch.cuda.is_available()


def _leaf(x):
    return x.detach().clone().requires_grad_(True)


def _agree(name, got, unpacked, ref64, ref_lp):
    """CPU: bitwise the unpacked call's result; GPU: within the reference's bound."""
    if not ON_GPU:
        assert torch.equal(got, unpacked), f"{name} differs from the unpacked call"
        return
    check = check_close(name, got, ref64, ref_lp)
    assert check.ok, check


@pytest.mark.parametrize("causal,window,softcap", [(False, (-1, -1), 0.0), (True, (-1, -1), 0.0),
                                                    (False, (5, 3), 0.0), (True, (-1, -1), 4.0)])
def test_qkvpacked(causal, window, softcap, device):
    b, s, h, d = 2, 37, 2, 32
    qkv = _leaf(torch.randn(b, s, 3, h, d, device=device, dtype=torch.float16))
    kwargs = dict(causal=causal, window_size=window, softcap=softcap)
    out = flashtile.flash_attn_qkvpacked_func(qkv, **kwargs)
    dout = torch.randn_like(out)
    (dqkv,) = torch.autograd.grad(out, (qkv,), dout)
    assert dqkv.shape == qkv.shape

    q, k, v = (_leaf(x.contiguous()) for x in qkv.detach().unbind(2))
    plain = flashtile.flash_attn_func(q, k, v, **kwargs)
    plain_grads = torch.stack(torch.autograd.grad(plain, (q, k, v), dout), dim=2)

    qkv64 = _leaf(qkv.detach().double())
    ref64 = reference.flash_attn_qkvpacked_func(qkv64, **kwargs)
    (dref64,) = torch.autograd.grad(ref64, (qkv64,), dout.double())
    qkv_lp = _leaf(qkv.detach())
    ref_lp = reference.flash_attn_qkvpacked_func(qkv_lp, upcast=False, **kwargs)
    (dref_lp,) = torch.autograd.grad(ref_lp, (qkv_lp,), dout)
    _agree("out", out, plain, ref64, ref_lp)
    _agree("dqkv", dqkv, plain_grads, dref64, dref_lp)


@pytest.mark.parametrize("heads,heads_kv", [(4, 4), (4, 2), (4, 1)])
def test_kvpacked(heads, heads_kv, device):
    b, sq, sk, d = 2, 19, 45, 64
    q = _leaf(torch.randn(b, sq, heads, d, device=device, dtype=torch.bfloat16))
    kv = _leaf(torch.randn(b, sk, 2, heads_kv, d, device=device, dtype=torch.bfloat16))
    out, lse = flashtile.flash_attn_kvpacked_func(q, kv, causal=True, return_lse=True)
    dout = torch.randn_like(out)
    dq, dkv = torch.autograd.grad(out, (q, kv), dout)
    assert dkv.shape == kv.shape and lse.shape == (b, heads, sq)

    q2 = _leaf(q.detach())
    k2, v2 = (_leaf(x.contiguous()) for x in kv.detach().unbind(2))
    plain, plain_lse = flashtile.flash_attn_func(q2, k2, v2, causal=True, return_lse=True)
    pdq, pdk, pdv = torch.autograd.grad(plain, (q2, k2, v2), dout)

    q64, kv64 = _leaf(q.detach().double()), _leaf(kv.detach().double())
    ref64, lse64 = reference.flash_attn_kvpacked_func(q64, kv64, causal=True, return_lse=True)
    rdq64, rdkv64 = torch.autograd.grad(ref64, (q64, kv64), dout.double())
    qlp, kvlp = _leaf(q.detach()), _leaf(kv.detach())
    ref_lp, lse_lp = reference.flash_attn_kvpacked_func(qlp, kvlp, causal=True,
                                                         return_lse=True, upcast=False)
    rdq_lp, rdkv_lp = torch.autograd.grad(ref_lp, (qlp, kvlp), dout)
    _agree("out", out, plain, ref64, ref_lp)
    _agree("lse", lse, plain_lse, lse64, lse_lp)
    _agree("dq", dq, pdq, rdq64, rdq_lp)
    _agree("dkv", dkv, torch.stack((pdk, pdv), dim=2), rdkv64, rdkv_lp)


def _cu(lens, device):
    return torch.tensor([0, *itertools.accumulate(lens)], dtype=torch.int32, device=device)


def test_varlen_qkvpacked(device):
    lens, h, d = [7, 0, 33, 16], 2, 32
    cu = _cu(lens, device)
    qkv = _leaf(torch.randn(sum(lens), 3, h, d, device=device, dtype=torch.float16))
    out = flashtile.flash_attn_varlen_qkvpacked_func(qkv, cu, max(lens), causal=True)
    dout = torch.randn_like(out)
    (dqkv,) = torch.autograd.grad(out, (qkv,), dout)
    assert dqkv.shape == qkv.shape

    q, k, v = (_leaf(x.contiguous()) for x in qkv.detach().unbind(1))
    plain = flashtile.flash_attn_varlen_func(q, k, v, cu, cu, max(lens), max(lens), causal=True)
    plain_grads = torch.stack(torch.autograd.grad(plain, (q, k, v), dout), dim=1)

    qkv64 = _leaf(qkv.detach().double())
    ref64 = reference.flash_attn_varlen_qkvpacked_func(qkv64, cu, max(lens), causal=True)
    (dref64,) = torch.autograd.grad(ref64, (qkv64,), dout.double())
    qkv_lp = _leaf(qkv.detach())
    ref_lp = reference.flash_attn_varlen_qkvpacked_func(qkv_lp, cu, max(lens), causal=True,
                                                        upcast=False)
    (dref_lp,) = torch.autograd.grad(ref_lp, (qkv_lp,), dout)
    _agree("out", out, plain, ref64, ref_lp)
    _agree("dqkv", dqkv, plain_grads, dref64, dref_lp)


def test_varlen_kvpacked(device):
    lens_q, lens_k, h, hkv, d = [5, 12, 0], [20, 12, 9], 4, 2, 32
    cq, ck = _cu(lens_q, device), _cu(lens_k, device)
    q = _leaf(torch.randn(sum(lens_q), h, d, device=device, dtype=torch.float16))
    kv = _leaf(torch.randn(sum(lens_k), 2, hkv, d, device=device, dtype=torch.float16))
    args = (cq, ck, max(lens_q), max(lens_k))
    out = flashtile.flash_attn_varlen_kvpacked_func(q, kv, *args, window_size=(6, 0))
    dout = torch.randn_like(out)
    dq, dkv = torch.autograd.grad(out, (q, kv), dout)
    assert dkv.shape == kv.shape

    q2 = _leaf(q.detach())
    k2, v2 = (_leaf(x.contiguous()) for x in kv.detach().unbind(1))
    plain = flashtile.flash_attn_varlen_func(q2, k2, v2, *args, window_size=(6, 0))
    pdq, pdk, pdv = torch.autograd.grad(plain, (q2, k2, v2), dout)

    q64, kv64 = _leaf(q.detach().double()), _leaf(kv.detach().double())
    ref64 = reference.flash_attn_varlen_kvpacked_func(q64, kv64, *args, window_size=(6, 0))
    rdq64, rdkv64 = torch.autograd.grad(ref64, (q64, kv64), dout.double())
    qlp, kvlp = _leaf(q.detach()), _leaf(kv.detach())
    ref_lp = reference.flash_attn_varlen_kvpacked_func(qlp, kvlp, *args, window_size=(6, 0),
                                                       upcast=False)
    rdq_lp, rdkv_lp = torch.autograd.grad(ref_lp, (qlp, kvlp), dout)
    _agree("out", out, plain, ref64, ref_lp)
    _agree("dq", dq, pdq, rdq64, rdq_lp)
    _agree("dkv", dkv, torch.stack((pdk, pdv), dim=1), rdkv64, rdkv_lp)


BAD = [
    ("qkvpacked rank", lambda d: (flashtile.flash_attn_qkvpacked_func,
                                  (torch.randn(2, 8, 3, 64, device=d, dtype=torch.float16),)),
     ValueError, "qkv must have 5 dimensions"),
    ("qkvpacked size", lambda d: (flashtile.flash_attn_qkvpacked_func,
                                  (torch.randn(2, 8, 2, 2, 64, device=d, dtype=torch.float16),)),
     ValueError, "size 3 in dimension 2"),
    ("kvpacked size", lambda d: (flashtile.flash_attn_kvpacked_func,
                                 (torch.randn(2, 8, 2, 64, device=d, dtype=torch.float16),
                                  torch.randn(2, 8, 3, 2, 64, device=d, dtype=torch.float16))),
     ValueError, "size 2 in dimension 2"),
    ("kvpacked type", lambda d: (flashtile.flash_attn_kvpacked_func,
                                 (torch.randn(2, 8, 2, 64, device=d, dtype=torch.float16), [1])),
     TypeError, "kv must be a torch.Tensor"),
    ("varlen qkvpacked rank", lambda d: (
        flashtile.flash_attn_varlen_qkvpacked_func,
        (torch.randn(8, 3, 2, 2, 64, device=d, dtype=torch.float16),
         torch.tensor([0, 8], dtype=torch.int32, device=d), 8)),
     ValueError, "qkv must have 4 dimensions"),
    ("varlen kvpacked size", lambda d: (
        flashtile.flash_attn_varlen_kvpacked_func,
        (torch.randn(8, 2, 64, device=d, dtype=torch.float16),
         torch.randn(8, 1, 2, 64, device=d, dtype=torch.float16),
         torch.tensor([0, 8], dtype=torch.int32, device=d),
         torch.tensor([0, 8], dtype=torch.int32, device=d), 8, 8)),
     ValueError, "size 2 in dimension 1"),
]


@pytest.mark.parametrize("name,make,exc,match", BAD, ids=[b[0] for b in BAD])
def test_bad_packing(name, make, exc, match, device, monkeypatch):
    launched = []
    monkeypatch.setattr("flashtile.ops.flash.attention_forward",
                        lambda *a, **k: launched.append(1))
    fn, args = make(device)
    with pytest.raises(exc, match=match):
        fn(*args)
    assert not launched


def test_no_copy_in_forward(device, monkeypatch):
    """The packed call hands the kernels views of qkv, not copies."""
    from flashtile.ops import flash

    seen = []
    real = flash.flash_attn_func

    def spy(q, k, v, *args, **kwargs):
        seen.append((q.data_ptr(), k.data_ptr(), v.data_ptr()))
        return real(q, k, v, *args, **kwargs)

    monkeypatch.setattr("flashtile.ops.packed.flash_attn_func", spy)
    qkv = torch.randn(1, 8, 3, 2, 32, device=device, dtype=torch.float16)
    flashtile.flash_attn_qkvpacked_func(qkv)
    es, step = qkv.element_size(), qkv.stride(2)
    base = qkv.data_ptr()
    assert seen == [(base, base + step * es, base + 2 * step * es)]


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim,causal,seqlen", [(64, False, 2048), (128, False, 4096),
                                                    (128, True, 4096), (256, True, 1024)])
def test_qkvpacked_gpu(head_dim, causal, seqlen, device):
    """Realistic sizes, where sm_90 takes the Gluon kernels (TMA descriptors over the
    packed views' strides; the fixed-point one-kernel backward at hd 128 from 4k keys)."""
    heads = 2048 // head_dim // 4
    qkv = _leaf(torch.randn(1, seqlen, 3, heads, head_dim, device=device, dtype=torch.bfloat16))
    out = flashtile.flash_attn_qkvpacked_func(qkv, causal=causal)
    dout = torch.randn_like(out)
    (dqkv,) = torch.autograd.grad(out, (qkv,), dout)
    qkv64 = _leaf(qkv.detach().double())
    ref64 = reference.flash_attn_qkvpacked_func(qkv64, causal=causal)
    (dref64,) = torch.autograd.grad(ref64, (qkv64,), dout.double())
    qkv_lp = _leaf(qkv.detach())
    ref_lp = reference.flash_attn_qkvpacked_func(qkv_lp, causal=causal, upcast=False)
    (dref_lp,) = torch.autograd.grad(ref_lp, (qkv_lp,), dout)
    for name, x, r64, rlp in (("out", out, ref64, ref_lp), ("dqkv", dqkv, dref64, dref_lp)):
        check = check_close(name, x, r64, rlp)
        assert check.ok, check


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", [64, 128])
def test_varlen_kvpacked_gpu(head_dim, device):
    """Sequences long enough for the Gluon varlen kernels, K and V packed."""
    lens = [8192, 1500, 0, 4100]
    cu = _cu(lens, device)
    q = _leaf(torch.randn(sum(lens), 4, head_dim, device=device, dtype=torch.bfloat16))
    kv = _leaf(torch.randn(sum(lens), 2, 2, head_dim, device=device, dtype=torch.bfloat16))
    args = (cu, cu, max(lens), max(lens))
    out = flashtile.flash_attn_varlen_kvpacked_func(q, kv, *args, causal=True)
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, kv), dout)
    q64, kv64 = _leaf(q.detach().double()), _leaf(kv.detach().double())
    ref64 = reference.flash_attn_varlen_kvpacked_func(q64, kv64, *args, causal=True)
    g64 = torch.autograd.grad(ref64, (q64, kv64), dout.double())
    qlp, kvlp = _leaf(q.detach()), _leaf(kv.detach())
    ref_lp = reference.flash_attn_varlen_kvpacked_func(qlp, kvlp, *args, causal=True,
                                                       upcast=False)
    glp = torch.autograd.grad(ref_lp, (qlp, kvlp), dout)
    for name, x, r64, rlp in (("out", out, ref64, ref_lp), ("dq", grads[0], g64[0], glp[0]),
                              ("dkv", grads[1], g64[1], glp[1])):
        check = check_close(name, x, r64, rlp)
        assert check.ok, check


def test_compile_fullgraph(device):
    """torch.compile traces the packed call in one graph (unbind, then the custom ops),
    bitwise the eager results, forward and the packed gradient."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def boxed(gm, example_inputs):
        return make_boxed_func(gm.forward)

    def attn(qkv):
        return flashtile.flash_attn_qkvpacked_func(qkv, causal=True)

    torch._dynamo.reset()
    compiled = torch.compile(attn, backend=aot_autograd(fw_compiler=boxed, bw_compiler=boxed),
                             fullgraph=True)
    qkv = torch.randn(1, 24, 3, 2, 32, device=device, dtype=torch.bfloat16)
    dout = torch.randn(1, 24, 2, 32, device=device, dtype=torch.bfloat16)
    results = []
    for fn in (compiled, attn):
        x = _leaf(qkv)
        out = fn(x)
        out.backward(dout)
        results.append((out, x.grad))
    for a, b, name in zip(*results, ("out", "dqkv")):
        assert torch.equal(a, b), f"{name}: compiled and eager differ"
