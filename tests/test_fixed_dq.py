"""Fixed-point dQ (ops/fixed_dq.py, ``HopperBwdConfig.reduce_fixed``): the bound kernel
against its reference, the bound's rigour on adversarial inputs, the dequantisation,
and the whole scheme simulated on the CPU (each 128-key tile's dQ share scaled, rounded
to an integer and summed, then ``dequantize``) within the DESIGN.md bound of the float64
reference. The Gluon kernel that does the adds on sm_90 is compiled in
tests/test_hopper_bwd.py (variants "reduce fixed") and run against the reference and
for bitwise repeatability in tests/test_hopper_bwd_reduce.py (GPU)."""

import math

import pytest
import torch

from flashtile import reference
from flashtile.ops import fixed_dq
from flashtile.validate import check_close, make_qkv


def _grads64(q, k, v, dout, causal=False, **kw):
    """dq, dk, dv of the float64 reference and of the input-precision one."""
    out = []
    for upcast in (True, False):
        inp = [(t.double() if upcast else t).clone().requires_grad_() for t in (q, k, v)]
        o = reference.flash_attn_func(*inp, causal=causal, upcast=upcast, **kw)
        out.append(torch.autograd.grad(o, inp, dout.to(o.dtype)))
    return out


def _program_heads(t, group, expand):
    """(B, M, H, D) -> (B * program heads, M * rows per head, D): the rows each program
    head's bound covers (its query heads' rows)."""
    b, m, h, d = t.shape
    if expand:
        return t.permute(0, 2, 1, 3).reshape(b * h, m, d)
    return t.view(b, m, h // group, group, d).permute(0, 2, 1, 3, 4).reshape(
        b * h // group, m * group, d)


@pytest.mark.parametrize("shape", [(2, 70, 133, 4, 2, 64), (1, 1, 300, 8, 1, 128),
                                   (3, 200, 9, 2, 2, 40)], ids=str)
@pytest.mark.parametrize("expand", [False, True])
def test_bounds_match_reference(shape, expand, device):
    """The three maxima per program head, strided inputs (views of a wider head dim)."""
    b, sq, sk, h, hkv, d = shape
    wide = lambda s, n: torch.randn(b, s, n, d + 8, device=device)[..., :d]  # noqa: E731
    dout, k, v = wide(sq, h), 3.0 * wide(sk, hkv), 0.5 * wide(sk, hkv)
    got = fixed_dq.bounds(dout, k, v, h // hkv, expand)
    want = reference.fixed_dq_bounds(dout, k, v, h // hkv, expand)
    assert got.shape == (want.shape[0], 4) and not got[:, 3].any()
    torch.testing.assert_close(got[:, :3].double().cpu(), want.cpu(), rtol=1e-5, atol=0)


def test_bounds_nonfinite(device):
    """A NaN or an infinity in dO, K or V makes its program head's maxima infinite, and
    its multiplier NaN (the kernel then stores NaN dQ), leaving the other heads alone."""
    dout, k, v = (torch.randn(1, 40, 2, 16, device=device) for _ in range(3))
    for which, idx in ((0, (0, 7, 1, 3)), (1, (0, 30, 1, 0)), (2, (0, 2, 1, 5))):
        bad = [x.clone() for x in (dout, k, v)]
        bad[which][idx] = math.nan
        stats = fixed_dq.bounds(*bad, 1, False).cpu()
        assert torch.isinf(stats[1, :3]).any() and torch.isfinite(stats[0, :3]).all()
        assert math.isnan(fixed_dq.fixed_mult(stats[1], 0.25))
        assert math.isfinite(fixed_dq.fixed_mult(stats[0], 0.25))


CASES = [  # (batch, seqlen_q, seqlen_k, nheads, nheads_kv, head_dim, kind, mask)
    (1, 64, 1024, 2, 1, 128, "randn", {}),
    (1, 48, 2048, 2, 2, 64, "wide_logits", {}),
    (1, 64, 1024, 2, 1, 128, "late_spike", dict(causal=True)),
    (2, 33, 500, 4, 2, 64, "randn", dict(window_size=(100, 0))),
    (1, 40, 700, 2, 2, 128, "wide_logits", dict(softcap=20.0)),
    (1, 96, 4096, 1, 1, 128, "randn", {}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[6]}-{c[2]}-{len(c[7])}")
def test_bound_holds(case):
    """|dQ| of the float64 reference never exceeds the bound the multiplier is built on
    (2 * scale * |dO| max|V| max|K| per program head), with GQA, masks, softcaps and
    adversarial scores; and the bound times the multiplier stays within 2^30."""
    b, sq, sk, h, hkv, d, kind, kw = case
    q, k, v = make_qkv(b, sq, sk, h, hkv, d, torch.bfloat16, "cpu", kind=kind, seed=sk + d)
    dout = torch.randn_like(q)
    (dq64, _, _), _ = _grads64(q, k, v, dout, **kw)
    scale = d**-0.5
    stats = fixed_dq.bounds(dout, k, v, h // hkv, False)
    rows = _program_heads(dq64, h // hkv, False).abs().amax(dim=(1, 2))
    for p, peak in enumerate(rows.tolist()):
        do2, v2, k2 = stats[p, :3].double().tolist()
        bound = 2.0 * scale * math.sqrt(do2 * v2 * k2)
        assert peak <= bound, (p, peak, bound)
        assert bound * fixed_dq.fixed_mult(stats[p], scale) <= 2.0**fixed_dq.FIXED_LOG2_LIMIT


@pytest.mark.parametrize("expand", [False, True])
def test_dequantize(expand, device):
    """acc / 2^e per program head (the sum rounded to fp32, then to dq's dtype), into a
    strided dq."""
    b, m, h, group, d = 2, 37, 4, 2, 72
    heads = h if expand else h // group
    acc = torch.randint(-2**30, 2**30, (b, m, h, d), dtype=torch.int32, device=device)
    stats = torch.zeros(b * heads, 4, device=device)
    stats[:, 3] = 2.0 ** torch.randint(-20, 40, (b * heads,), device=device).float()
    dq = torch.full((b, h, m, d + 3), math.nan, dtype=torch.bfloat16,
                    device=device).transpose(1, 2)[..., :d]
    fixed_dq.dequantize(acc, stats, dq, group, expand)
    mult = stats[:, 3].view(b, heads, 1)
    mult = mult if expand else mult.repeat_interleave(group, 1)
    # the int32 sum to fp32 (round to nearest), divided by a power of two (exact), cast
    want = (acc.float() / mult.view(b, 1, h, 1)).to(torch.bfloat16)
    assert torch.equal(dq, want)


def _simulated_dq(q, k, v, dout, scale, group, expand, block_n=128, **kw):
    """The kernel's scheme with ideal shares: per 128-key tile, the tile's dQ share
    (dS from the float64 reference, rounded to fp32) times 2^e rounded to an integer,
    summed; the int32 sum through ``dequantize``. Returns (dq, the largest |sum|)."""
    b, sq, h, d = q.shape
    sk = k.shape[1]
    qd, kd, vd = (t.double() for t in (q, k, v))
    kk, vv = kd.repeat_interleave(group, 2), vd.repeat_interleave(group, 2)
    s = torch.einsum("bmhd,bnhd->bhmn", qd, kk) * scale
    softcap = kw.get("softcap", 0.0)
    if softcap:
        t = torch.tanh(s / softcap)
        s = softcap * t
    keep = reference.attention_mask(sq, sk, kw.get("causal", False),
                                    tuple(None if w == -1 else w
                                          for w in kw.get("window_size", (-1, -1))))
    s = s.masked_fill(~keep, -math.inf)
    p = torch.softmax(s, -1).nan_to_num(0.0)
    dp = torch.einsum("bmhd,bnhd->bhmn", dout.double(), vv)
    delta = (p * dp).sum(-1, keepdim=True)
    ds = p * (dp - delta)
    if softcap:
        ds = ds * (1 - t * t)
    stats = fixed_dq.bounds(dout, k, v, group, expand)
    heads = h if expand else h // group
    for i in range(b * heads):
        stats[i, 3] = fixed_dq.fixed_mult(stats[i], scale)
    mult = stats[:, 3].double().view(b, heads, 1)
    mult = (mult if expand else mult.repeat_interleave(group, 1)).view(b, h, 1, 1)
    total = torch.zeros(b, h, sq, d, dtype=torch.int64)
    for n0 in range(0, sk, block_n):
        share = torch.einsum("bhmn,bnhd->bhmd", ds[..., n0:n0 + block_n],
                             kk[:, n0:n0 + block_n]) * scale
        total += torch.round(share.float().double() * mult).long()
    peak = int(total.abs().max())
    acc = total.to(torch.int32).permute(0, 2, 1, 3).contiguous()
    dq = torch.empty_like(q)
    fixed_dq.dequantize(acc, stats, dq, group, expand)
    return dq, peak


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[6]}-{c[2]}-{len(c[7])}")
@pytest.mark.parametrize("expand", [False, True])
def test_simulated_fixed_point_within_bound(case, expand):
    """The int32 sum never passes 2^30, and dq through the fixed-point scheme meets the
    DESIGN.md bound against the float64 reference (what the fp32 adds meet), also at 4k
    keys (32 shares per element) and on adversarial scores."""
    b, sq, sk, h, hkv, d, kind, kw = case
    if expand and h == hkv:
        pytest.skip("expand needs GQA")
    q, k, v = make_qkv(b, sq, sk, h, hkv, d, torch.bfloat16, "cpu", kind=kind, seed=sq + d)
    dout = torch.randn_like(q)
    scale = d**-0.5
    dq, peak = _simulated_dq(q, k, v, dout, scale, h // hkv, expand, **kw)
    assert peak <= 2**fixed_dq.FIXED_LOG2_LIMIT, peak
    (dq64, *_), (dqlp, *_) = _grads64(q, k, v, dout, **kw)
    atol = 2.0**-22 * d * float(dq64.abs().max())  # as tests/sm90.grad_ref_checks
    check = check_close("dq", dq, dq64, dqlp, atol=atol)
    assert check.ok, str(check)
