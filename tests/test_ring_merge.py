"""flashtile.distributed.ring on one process: the fused log-sum-exp merge against its
plain-PyTorch reference, and the ring loops' per-step bookkeeping (first block taken as
it is, fp32 in between, the last merge written in the input dtype).

The fused merge (``merge_partial``, one Triton kernel) is held to float64 truth within
fp32 rounding, not bitwise to ``merge_partial_torch``: the two use different exp / log
(numpy under the interpreter, the GPU's approximations, torch's vectorised ones) and a
different association (the kernel's weights are exp(lse_i - m) / (exp(lse - m) +
exp(blk_lse - m)), the reference's exp(lse_i - logaddexp(lse, blk_lse))). What is exact
is: rows empty on both sides (0, -inf), rows empty on one side (the other side, bitwise),
elements outside the views (untouched), and a low-precision dst (the fp32 result cast).

A ring of one (no process group) is one kernel call: bitwise the launcher's result,
without a merge. A ring of two run on one process with ``comm=False`` (every step reads
the local K/V, under the plans of both sources) exercises the W > 1 merges: the forward
against the old algorithm (zeros, -inf, ``merge_partial_torch`` in fp32 per block, cast
at the end) within fp32 rounding, the backward bitwise (fp32 sums in the same order).
"""

from __future__ import annotations

import pytest
import torch

from flashtile.distributed import ring as R
from flashtile.validate import make_qkv

EPS = 2.0**-24  # fp32 unit roundoff
NEG = float("-inf")


# ----------------------------------------------------------------------------------
# the fused merge
# ----------------------------------------------------------------------------------


def _truth(out, lse, blk_out, blk_lse):
    """The merge in float64: (out, lse)."""
    o, a, bo, b = (t.double() for t in (out, lse, blk_out, blk_lse))
    new = torch.logaddexp(a, b)
    base = torch.where(torch.isneginf(new), 0.0, new)
    wa = torch.exp(a - base).transpose(1, 2).unsqueeze(-1)
    wb = torch.exp(b - base).transpose(1, 2).unsqueeze(-1)
    return o * wa + bo * wb, new


def _assert_near_truth(got_out, got_lse, out, lse, blk_out, blk_lse, ulps=16):
    """Within fp32 rounding of the float64 merge of the same inputs: out within
    ulps * 2^-24 * (|out| + |blk_out|) elementwise (each weight is a few roundings off,
    and a weight off by a relative d moves its term by d * |term| <= d * |that input|),
    lse within 8 * 2^-24 * (|lse| + 1); -inf exactly where the truth has it; no NaN."""
    t_out, t_lse = _truth(out, lse, blk_out, blk_lse)
    bound = ulps * EPS * (out.double().abs() + blk_out.double().abs())
    err = (got_out.double() - t_out).abs()
    assert not torch.isnan(got_out).any() and not torch.isnan(got_lse).any()
    assert (err <= bound).all(), f"out: max err/bound {float((err / bound).nan_to_num().max())}"
    assert torch.equal(torch.isneginf(got_lse), torch.isneginf(t_lse))
    fin = torch.isfinite(t_lse)
    lerr = (got_lse.double()[fin] - t_lse[fin]).abs()
    assert (lerr <= 8 * EPS * (t_lse[fin].abs() + 1)).all(), f"lse: max err {float(lerr.max())}"


def _inputs(device, dtype, b=2, m=37, h=3, d=40, gen_seed=0):
    """Random out (fp32), lse, blk_out (dtype), blk_lse with -inf rows: lse only on rows
    0-4 of head 0, blk_lse only on rows 8-12, both on rows 3-4 (and all of batch 1 head 2
    on both sides); out is 0 where lse is -inf, as in the ring's state."""
    g = torch.Generator().manual_seed(gen_seed)
    out = torch.randn(b, m, h, d, generator=g)
    lse = torch.randn(b, h, m, generator=g) * 4 + 3
    blk_out = torch.randn(b, m, h, d, generator=g).to(dtype)
    blk_lse = torch.randn(b, h, m, generator=g) * 4 + 3
    lse[0, 0, :5] = NEG
    blk_lse[0, 0, 3:13] = NEG
    blk_lse[0, 0, 5:8] = 1.0  # rows 5-7 back to finite: only 8-12 blk-empty
    lse[1, 2], blk_lse[1, 2] = NEG, NEG
    out.masked_fill_(torch.isneginf(lse).transpose(1, 2).unsqueeze(-1), 0.0)
    return [t.to(device) for t in (out, lse, blk_out, blk_lse)]


def _strided(out, lse, blk_out, blk_lse, step_d):
    """The same values in views with foreign strides: out inside a wider fp32 buffer
    (extra rows and head-dim columns), lse a transposed (B, M, H) buffer's window,
    blk_out from a (B, H, M, D) buffer (or with head-dim stride 2), blk_lse a window of
    a longer row. Returns the views and their parent buffers."""
    b, m, h, d = out.shape
    big_out = torch.full((b, m + 5, h, d + 8), 7.0, device=out.device)
    o = big_out[:, 2:2 + m, :, :d]
    o.copy_(out)
    big_lse = torch.full((b, m + 3, h), 5.0, device=out.device).transpose(1, 2)
    lv = big_lse[:, :, 1:1 + m]
    lv.copy_(lse)
    if step_d == 1:
        bo = blk_out.transpose(1, 2).contiguous().transpose(1, 2)  # (B, M, H, D) view
    else:
        big_bo = torch.zeros((b, m, h, d * step_d), dtype=blk_out.dtype, device=out.device)
        bo = big_bo[..., ::step_d]
        bo.copy_(blk_out)
    big_bl = torch.full((b, h, m + 4), 9.0, device=out.device)
    bl = big_bl[:, :, 4:]
    bl.copy_(blk_lse)
    assert not o.is_contiguous() and not lv.is_contiguous() and not bo.is_contiguous()
    return (o, lv, bo, bl), (big_out, big_lse)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("step_d", [1, 2])
def test_merge_fused_vs_reference(dtype, step_d, device):
    """The fused merge on strided views against float64 truth (fp32 rounding), the
    torch reference held to the same bound, both within twice that bound of each other;
    -inf rows exact; nothing outside the views written."""
    x = _inputs(device, dtype)
    ref_out, ref_lse = x[0].clone(), x[1].clone()
    R.merge_partial_torch(ref_out, ref_lse, x[2], x[3])
    views, parents = _strided(*x, step_d)
    before = [p.clone() for p in parents]
    R.merge_partial(*views)
    got_out, got_lse = views[0].clone(), views[1].clone()

    _assert_near_truth(got_out, got_lse, *x)
    _assert_near_truth(ref_out, ref_lse, *x)
    bound = 32 * EPS * (x[0].abs() + x[2].float().abs())
    assert ((got_out - ref_out).abs() <= bound).all()

    # -inf rows, exactly: both empty -> 0 / -inf; one side empty -> the other side
    o, lse, bo, bl = x
    empty_a, empty_b = torch.isneginf(lse), torch.isneginf(bl)  # (B, H, M)
    for rows, want_out, want_lse in (
        (empty_a & empty_b, torch.zeros_like(o), lse),
        (empty_a & ~empty_b, bo.float(), bl),
        (~empty_a & empty_b, o, lse),
    ):
        assert rows.any()
        sel = rows.transpose(1, 2)  # (B, M, H)
        assert torch.equal(got_out[sel], want_out[sel])
        assert torch.equal(got_lse[rows], want_lse[rows])

    # outside the views: untouched
    for p, p0, v in zip(parents, before, views[:2]):
        mark = torch.zeros(p.untyped_storage().nbytes() // p.element_size(), dtype=torch.bool,
                           device=p.device)
        mark.as_strided(v.shape, v.stride(), v.storage_offset()).fill_(True)
        keep = ~mark.as_strided(p.shape, p.stride(), p.storage_offset())
        assert (~keep).sum() == v.numel() and torch.equal(p[keep], p0[keep])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_merge_dst_dtypes(dtype, device):
    """``dst`` in the input dtype (the last merge): exactly the fp32 merge cast (round to
    nearest even); ``out`` itself in the input dtype (the first block kept) merged into an
    fp32 dst, and in place in its own dtype."""
    o, lse, bo, bl = _inputs(device, dtype, gen_seed=1)
    f32, l32 = o.clone(), lse.clone()
    R.merge_partial(f32, l32, bo, bl)
    low, l_low = torch.empty_like(o, dtype=dtype), lse.clone()
    R.merge_partial(o.clone(), l_low, bo, bl, dst=low)
    assert torch.equal(low, f32.to(dtype)) and torch.equal(l_low, l32)

    o_low = o.to(dtype)  # kept state in the input dtype -> fp32 dst
    up, l_up = torch.full_like(o, 3.0), lse.clone()
    R.merge_partial(o_low, l_up, bo, bl, dst=up)
    _assert_near_truth(up, l_up, o_low.float(), lse, bo, bl)
    l_in = lse.clone()
    R.merge_partial(o_low, l_in, bo, bl)  # in place, its own dtype
    assert torch.equal(o_low, up.to(dtype)) and torch.equal(l_in, l_up)


def test_merge_shape_checks(device):
    o, lse, bo, bl = _inputs(device, torch.float32, m=8)
    with pytest.raises(ValueError, match="blk_out"):
        R.merge_partial(o[:, :4], lse, bo, bl)
    with pytest.raises(ValueError, match="float32"):
        R.merge_partial(o, lse.double(), bo, bl)


# ----------------------------------------------------------------------------------
# the ring loops on one process
# ----------------------------------------------------------------------------------


RING1_CASES = [  # layout, causal, L, seqlen (None: L), heads, kv heads, head dim, dtype
    ("zigzag", True, 16, None, 2, 1, 16, torch.bfloat16),
    ("contiguous", False, 12, 9, 2, 2, 32, torch.float16),  # 3 padded keys
    ("contiguous", True, 10, None, 4, 2, 16, torch.float32),
]


@pytest.mark.parametrize("case", RING1_CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[7]}")
def test_ring_of_one_is_the_kernel(case, device, monkeypatch):
    """A ring of one (no process group): forward (out, lse) and backward (dq, dk, dv)
    bitwise equal to ``attention_forward`` / ``attention_backward`` on the same block
    (keys cut to the real ones when padded, zero dK/dV on the padding), through
    ring_flash_attn_func's autograd too; no merge at all."""
    from flashtile.distributed import ring_flash_attn_func
    from flashtile.ops.flash import attention_backward, attention_forward

    layout, causal, L, seqlen, h, hkv, d, dtype = case
    n = L if seqlen is None else seqlen
    q, k, v = make_qkv(1, L, L, h, hkv, d, dtype, device)
    dout = torch.randn(q.shape, device=device).to(dtype)
    scale = d**-0.5

    def no_merge(*args, **kwargs):
        raise AssertionError("a ring of one merges nothing")

    monkeypatch.setattr(R, "merge_partial", no_merge)
    ring = R.Ring.create(None, layout, causal, n, L)
    assert ring.world == 1
    out, lse = R.ring_attention_forward(q, k, v, ring=ring, softmax_scale=scale)
    ref_out, ref_lse = attention_forward(q, k[:, :n], v[:, :n], softmax_scale=scale,
                                         causal=causal)
    assert out.dtype == dtype and torch.equal(out, ref_out) and torch.equal(lse, ref_lse)

    grads = R.ring_attention_backward(dout, q, k, v, out, lse, ring=ring, softmax_scale=scale)
    rq, rk, rv = attention_backward(dout, q, k[:, :n], v[:, :n], ref_out, ref_lse,
                                    softmax_scale=scale, causal=causal)
    assert [g.dtype for g in grads] == [dtype] * 3
    assert torch.equal(grads[0], rq)
    for g, r in zip(grads[1:], (rk, rv)):
        assert torch.equal(g[:, :n], r) and not g[:, n:].any()

    x = [t.detach().requires_grad_() for t in (q, k, v)]
    o2, l2 = ring_flash_attn_func(*x, causal=causal, layout=layout, seqlen=n,
                                  return_lse=True)
    g2 = torch.autograd.grad(o2, x, dout)
    assert torch.equal(o2, out) and torch.equal(l2, lse)
    assert all(torch.equal(a, b) for a, b in zip(g2, grads))


def _old_forward(q, k, v, ring, scale):
    """The ring forward before the fused merge: fp32 zeros / -inf state, every block
    merged by ``merge_partial_torch``, cast at the end (comm=False: local K/V)."""
    from flashtile.ops.flash import attention_forward

    b, L, h, d = q.shape
    out = torch.zeros((b, L, h, d), dtype=torch.float32, device=q.device)
    lse = torch.full((b, h, L), NEG, dtype=torch.float32, device=q.device)
    blocks = []
    for step in range(ring.world):
        plan = ring.plan(ring.source(step))
        if plan is not None:
            qs, ks, c = plan
            bo, bl = attention_forward(q[:, qs], k[:, ks], v[:, ks], softmax_scale=scale,
                                       causal=c)
            R.merge_partial_torch(out[:, qs], lse[:, :, qs], bo, bl)
            blocks.append((qs, ks, c, bo, bl))
    return out, lse, blocks


RINGW_CASES = [  # layout, causal, rank, world, L, seqlen (None: world * L), dtype
    ("zigzag", True, 0, 2, 16, None, torch.float32),  # all rows, then the late half
    # all rows; all x first half (kept -> fp32); late half x all twice (fp32 in place,
    # then the last merge into bf16, the first half cast beside it)
    ("zigzag", True, 1, 4, 16, None, torch.bfloat16),
    ("zigzag", True, 2, 4, 8, None, torch.float16),
    ("contiguous", True, 2, 3, 12, None, torch.float16),  # three full-row blocks
    ("contiguous", False, 0, 2, 12, 21, torch.float32),  # the other block 3 keys short
    ("zigzag", False, 1, 2, 8, 13, torch.bfloat16),
]


@pytest.mark.parametrize("case", RINGW_CASES,
                         ids=lambda c: f"{c[0]}-{c[1]}-r{c[2]}of{c[3]}-{c[6]}")
def test_ring_without_comm(case, device, monkeypatch):
    """Rank ``rank`` of a ring of ``world``, comm=False (the benchmark's compute-only
    mode, no process group): each step runs the kernel on the local K/V under that
    step's plan. Forward: within fp32 rounding of the old algorithm (out in the input
    dtype: at most one rounding step apart; lse fp32); one merge per block after the
    first, the first reading the kept block in the input dtype, fp32 state in between,
    the last writing the input dtype. Backward: bitwise the fp32 sums of the per-block
    kernel gradients in step order."""
    from flashtile.ops.flash import attention_backward

    layout, causal, rank, world, L, seqlen, dtype = case
    n = world * L if seqlen is None else seqlen
    q, k, v = make_qkv(1, L, L, 2, 2, 16, dtype, device)
    dout = torch.randn(q.shape, device=device).to(dtype)
    scale = 0.25
    ring = R.Ring.create(None, layout, causal, n, L, rank=rank, world=world)
    seen, fused = [], R.merge_partial

    def spy(out, lse, blk_out, blk_lse, dst=None):
        seen.append((out.dtype, (out if dst is None else dst).dtype))
        fused(out, lse, blk_out, blk_lse, dst=dst)

    monkeypatch.setattr(R, "merge_partial", spy)
    out, lse = R.ring_attention_forward(q, k, v, ring=ring, softmax_scale=scale, comm=False)
    monkeypatch.undo()
    old_out, old_lse, blocks = _old_forward(q, k, v, ring, scale)
    assert len(blocks) >= 2 and out.dtype == dtype
    f32 = torch.float32
    assert seen == ([(dtype, dtype)] if len(blocks) == 2 else
                    [(dtype, f32)] + [(f32, f32)] * (len(blocks) - 3) + [(f32, dtype)])
    fin = torch.isfinite(old_lse)
    assert torch.equal(fin, torch.isfinite(lse))
    assert ((lse[fin] - old_lse[fin]).abs() <= 8 * EPS * (old_lse[fin].abs() + 1)).all()
    mag = torch.zeros_like(old_out)  # >= sum_i w_i |o_i| (weights <= 1): the scale of
    for qs, _, _, bo, _ in blocks:  # each merge's rounding, cancellation or not
        mag[:, qs] += bo.float().abs()
    tol = 16 * len(blocks) * EPS * mag
    if dtype == torch.float32:
        assert ((out - old_out).abs() <= tol).all()
    else:  # one rounding to dtype of two fp32 values within tol of each other
        ulp = torch.finfo(dtype).eps * old_out.abs()
        assert ((out.float() - old_out).abs() <= ulp + tol).all()
        assert (out != old_out.to(dtype)).float().mean() < 0.05  # mostly the same bits

    dq, dk, dv = R.ring_attention_backward(dout, q, k, v, out, lse, ring=ring,
                                           softmax_scale=scale, comm=False)
    want = [torch.zeros(t.shape, dtype=torch.float32, device=device) for t in (q, k, v)]
    for qs, ks, c, _, _ in blocks:
        g = attention_backward(dout[:, qs], q[:, qs], k[:, ks], v[:, ks], out[:, qs],
                               lse[:, :, qs].contiguous(), softmax_scale=scale, causal=c)
        want[0][:, qs] += g[0]
        want[1][:, ks] += g[1]
        want[2][:, ks] += g[2]
    for got, w in zip((dq, dk, dv), want):
        assert got.dtype == dtype and torch.equal(got, w.to(dtype))
