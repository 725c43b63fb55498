"""flashtile.flash_attn_func: numerics over the DESIGN.md grid, dropout, determinism,
autograd plumbing. CPU runs the kernels under the interpreter on small shapes; the
``gpu`` tests run the full product at realistic shapes on the H200."""

import math

import numpy as np
import pytest
import torch

import flashtile
from conftest import HAS_CUDA
from flashtile import configs, reference
from flashtile.ops import _common, flash
from flashtile.validate import Case, case_grid, make_qkv, run_case, with_

CPU_GRID = case_grid(small=True)
FP32_CASES = [
    Case(seqlen_q=47, seqlen_k=81, head_dim=64, causal=True, dtype=torch.float32),
    Case(seqlen_q=65, seqlen_k=40, head_dim=40, nheads=4, nheads_kv=1, softcap=8.0,
         window_size=(20, 3), dtype=torch.float32, kind="wide_logits"),
]


def _assert_ok(result):
    assert result.ok, result.summary()


@pytest.mark.parametrize("case", CPU_GRID + FP32_CASES, ids=lambda c: c.name)
def test_grid(case, device):
    """Pairwise covering set of head dim x seqlen class x head ratio x mask x dtype x
    input kind x layout: out, lse, dq, dk, dv within the DESIGN.md bound."""
    _assert_ok(run_case(case, device))


@pytest.mark.gpu
@pytest.mark.parametrize("case", case_grid(full=True), ids=lambda c: c.name)
def test_grid_full_gpu(case, device):
    _assert_ok(run_case(with_(case, batch=2), device))


@pytest.mark.parametrize("seqlen_q,seqlen_k", [(5, 40), (40, 5), (33, 70)])
@pytest.mark.parametrize("window", [(-1, -1), (0, 0), (2, -1)])
def test_fully_masked_rows(seqlen_q, seqlen_k, window, device):
    """Causal with seqlen_q > seqlen_k, or a narrow window, leaves rows with no key:
    out must be 0 and lse -inf there, with finite gradients everywhere."""
    case = Case(seqlen_q=seqlen_q, seqlen_k=seqlen_k, head_dim=32, causal=True,
                window_size=window)
    _assert_ok(run_case(case, device))
    q, k, v = make_qkv(1, seqlen_q, seqlen_k, 2, 2, 32, torch.float16, device)
    out, lse = flashtile.flash_attn_func(q, k, v, causal=True, window_size=window,
                                         return_lse=True)
    empty = ~reference.attention_mask(seqlen_q, seqlen_k, True,
                                      tuple(None if w == -1 else w for w in window)).any(-1)
    assert torch.isneginf(lse[..., empty.to(lse.device)]).all()
    assert (out[:, empty.to(out.device)] == 0).all()


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_dropout_replay(dtype, device):
    """Dropout: the kernel's own mask (test-only dropout_mask) applied to the reference
    reproduces forward and backward."""
    case = Case(seqlen_q=70, seqlen_k=45, nheads=4, nheads_kv=2, head_dim=32, causal=True,
                dtype=dtype, dropout_p=0.3)
    _assert_ok(run_case(case, device))


def test_dropout_same_seed_bitwise(device):
    q, k, v = make_qkv(2, 40, 40, 2, 2, 32, torch.float16, device)
    outs = []
    for _ in range(2):
        torch.manual_seed(1234)
        outs.append(flashtile.flash_attn_func(q, k, v, dropout_p=0.25))
    assert torch.equal(outs[0], outs[1])
    torch.manual_seed(4321)
    assert not torch.equal(outs[0], flashtile.flash_attn_func(q, k, v, dropout_p=0.25))


def test_dropout_refuses_compiled_graph_capture(device, monkeypatch):
    """Inside CUDA graph capture with no device to draw on (the torch.compile custom op's
    path) dropout raises a clear error: every replay would reuse the captured mask. A CPU
    call is never captured: it draws on the host. The capture state is faked."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    with pytest.raises(RuntimeError, match="CUDA graph"):
        flash.draw_rng_state()
    # the eager call's device: a CUDA one draws on the device, no error
    state = flash.draw_rng_state(torch.device("cpu"))
    assert isinstance(state, tuple)


@pytest.mark.parametrize("causal", [False, True])
def test_dropout_rng_state_on_device(causal, device):
    """The RNG state as an int64 tensor in the seed's place (what draw_rng_state gives
    inside CUDA graph capture; the kernels load it) drops exactly what the (seed, offset)
    pair does:
    forward and backward bitwise equal."""
    _assert_same_dropout(causal, device, (torch.tensor([1234, 567], dtype=torch.int64,
                                                       device=device), 0))


def _assert_same_dropout(causal, device, rng, bwd_config=None, bwd_rng=None, exact=True):
    """Forward and backward through the launchers with RNG state ``rng`` (the backward's
    ``bwd_rng`` if given) bitwise equal to those with the pair (1234, 567) it stands for;
    with ``exact`` False the gradients within 2^-8 of their largest magnitude instead
    (one wrong keep decision moves an element by ~1e-2 of it here).
    Returns (q, k, v, dout)."""
    q, k, v = make_qkv(2, 70, 45, 4, 2, 32, torch.float16, device)
    dout = torch.randn_like(q)
    results = []
    for state, bwd_state in (((1234, 567), (1234, 567)), (rng, bwd_rng or rng)):
        out, lse = flash.attention_forward(q, k, v, causal=causal, dropout_p=0.3,
                                           rng_state=state)
        grads = flash.attention_backward(dout, q, k, v, out, lse, causal=causal,
                                         dropout_p=0.3, rng_state=bwd_state,
                                         config=bwd_config)
        results.append((out, lse, *grads))
    for name, a, b in zip(("out", "lse", "dq", "dk", "dv"), *results):
        if exact or name in ("out", "lse"):
            assert torch.equal(a, b), name
        else:
            err = float((a.float() - b.float()).abs().max())
            assert err <= 2.0**-8 * float(b.abs().max()), (name, err)
    return q, k, v, dout


@pytest.mark.parametrize("causal", [False, True])
def test_dropout_bits_are_the_kernels_decisions(causal, device):
    """The forward given a dropout_bits_buffer draws with the (seed, offset) in its header
    (the output bitwise the pair's) and writes exactly the decisions it draws
    (dropout_mask) as bit blocks (_common.BITS_PAD), over ragged lengths: every element
    without a causal mask, every one the mask keeps with it (the triangle above is never
    visited). The header takes host ints and an on-device pair alike."""
    batch, nheads, p = 1, 2, 0.3
    for seqlen_q, seqlen_k in ((70, 45), (100, 130)):
        q, k, v = make_qkv(batch, seqlen_q, seqlen_k, nheads, 1, 32, torch.float16, device)
        keep = flash.dropout_mask((1234, 567), batch, nheads, seqlen_q, seqlen_k, p, device)
        keep = keep.view(batch * nheads, seqlen_q, seqlen_k).cpu()
        cols, rows = torch.arange(seqlen_k), torch.arange(seqlen_q)
        inside = (cols[None, :] <= rows[:, None] + seqlen_k - seqlen_q if causal
                  else torch.ones(seqlen_q, seqlen_k, dtype=torch.bool))
        if seqlen_q == 70:  # the header from host ints and from an on-device pair
            cases = [((1234, 567), None),
                     ((torch.tensor([1234, 567], dtype=torch.int64, device=device), 0), None)]
        else:  # 64 x 64 tiles (the H200's)
            cases = [((1234, 567), configs.FwdConfig(64, 64, 4, 1))]
        for pair, cfg in cases:
            buf = flash.dropout_bits_buffer(pair, batch, nheads, seqlen_q, seqlen_k, device)
            assert buf[:2].tolist() == [1234, 567]
            got, _ = flash.attention_forward(q, k, v, causal=causal, dropout_p=p,
                                             rng_state=(buf, 0), config=cfg)
            want, _ = flash.attention_forward(q, k, v, causal=causal, dropout_p=p,
                                              rng_state=(1234, 567), config=cfg)
            assert torch.equal(got, want)
            got = flash.dropout_bits_mask(buf[flash.DROPOUT_BITS_HEADER:], batch, nheads,
                                          seqlen_q, seqlen_k).cpu()
            assert torch.equal(got.view_as(keep) & inside, keep & inside)


@pytest.mark.parametrize("causal", [False, True])
def test_dropout_bits_drop_the_same(causal, device, monkeypatch):
    """The backward kernels reading the bits the forward wrote (FLASHTILE_DROPOUT_BITS=1)
    drop exactly what they draw themselves: forward and backward bitwise equal, through
    the launchers and through flash_attn_func's autograd with the same torch seed."""
    buf = flash.dropout_bits_buffer((1234, 567), 2, 4, 70, 45, device)
    words = (buf[flash.DROPOUT_BITS_HEADER:], 0)
    q, k, v, dout = _assert_same_dropout(causal, device, (buf, 0), bwd_rng=words)
    # the dK/dV kernel's transposed reads over query tiles of 16 and 64. On the H200
    # these small tiles compile differently enough with and without
    # the bits that 2-7 elements of a gradient move by an ulp or two (s17b,
    # scripts/diag_bits.py; the default tiles stay bitwise): bitwise only under the
    # interpreter
    for block_m in (16, 64) if causal else ():
        _assert_same_dropout(causal, device, (buf, 0), configs.BwdConfig(
            block_m=block_m, block_n=32, num_warps=1 if block_m < 64 else 4, num_stages=1),
            bwd_rng=words, exact=device.type != "cuda")
    runs = []
    for on in (False, True):
        monkeypatch.setenv(flash.DROPOUT_BITS_ENV_VAR, str(int(on)))
        qkv = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        torch.manual_seed(7)
        out = flashtile.flash_attn_func(*qkv, causal=causal, dropout_p=0.3)
        runs.append((out, *torch.autograd.grad(out, qkv, dout)))
    for name, a, b in zip(("out", "dq", "dk", "dv"), *runs):
        assert torch.equal(a, b), name


@pytest.mark.gpu
@pytest.mark.parametrize("bits", [False, True], ids=["draw", "bits"])
def test_dropout_graph_capture_gpu(bits, device, monkeypatch):
    """A torch.cuda.graph capture of a training call with dropout: each replay draws a new
    mask (the state is drawn on the device), and each replay's output and gradients equal
    the eager call's with that replay's (seed, offset). With FLASHTILE_DROPOUT_BITS=1 the
    captured forward draws from the on-device pair (copied into the bits buffer's header)
    and writes the bits, which the backward kernels read; the eager call then writes and
    reads bits too (the Gluon backward reading bits and the portable one drawing agree to
    rounding, not bit for bit)."""
    if device.type != "cuda":
        pytest.skip("needs a CUDA device (run scripts/gpu_check.sh there)")
    monkeypatch.setenv(flash.DROPOUT_BITS_ENV_VAR, str(int(bits)))
    drawn = []
    real_draw = flash.draw_rng_state

    def spy(dev=None):
        state = real_draw(dev)
        drawn.append(state)
        return state

    monkeypatch.setattr(flash, "draw_rng_state", spy)
    q, k, v = (t.requires_grad_() for t in make_qkv(1, 256, 256, 2, 2, 64, torch.bfloat16,
                                                    device))
    dout = torch.randn_like(q)
    rng = torch.tensor([1, 2], dtype=torch.int64, device=device)
    states = [(rng, rng), ((1, 2), (1, 2))]
    if bits:  # the forward writing bits from the on-device pair, the backward reading them
        buf = flash.dropout_bits_buffer((rng, 0), 1, 2, 256, 256, device)
        states.append(((buf, 0), (buf[flash.DROPOUT_BITS_HEADER:], 0)))
    for _ in range(2):  # warm-up outside the capture: every kernel variant compiled
        for state, bwd_state in states:
            out, lse = flash.attention_forward(q.detach(), k.detach(), v.detach(),
                                               dropout_p=0.2, rng_state=state)
            flash.attention_backward(dout, q.detach(), k.detach(), v.detach(), out, lse,
                                     dropout_p=0.2, rng_state=bwd_state)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = flashtile.flash_attn_func(q, k, v, dropout_p=0.2)
        grads = torch.autograd.grad(out, (q, k, v), dout)
    state = drawn[-1][0]  # (the pair on the device, 0)
    assert isinstance(state, torch.Tensor) and state.is_cuda
    seen = []
    for _ in range(2):
        g.replay()
        torch.cuda.synchronize()
        pair = tuple(state.tolist())
        seen.append(pair)
        fwd_state = bwd_state = pair
        if bits:  # the eager call the same way: bits written from the pair, then read
            buf = flash.dropout_bits_buffer(pair, 1, 2, 256, 256, device)
            fwd_state, bwd_state = (buf, 0), (buf[flash.DROPOUT_BITS_HEADER:], 0)
        want_out, want_lse = flash.attention_forward(q.detach(), k.detach(), v.detach(),
                                                     dropout_p=0.2, rng_state=fwd_state)
        want = flash.attention_backward(dout, q.detach(), k.detach(), v.detach(), want_out,
                                        want_lse, dropout_p=0.2, rng_state=bwd_state)
        assert torch.equal(out, want_out)
        for name, a, b in zip(("dq", "dk", "dv"), grads, want):
            assert torch.equal(a, b), name
    assert seen[0] != seen[1]


def test_dropout_statistics(device):
    """The mean over many seeds approaches the no-dropout output: every element within
    6 standard errors (std from the reference probabilities)."""
    n, p_drop = 48 if not HAS_CUDA else 400, 0.2
    q, k, v = make_qkv(1, 32, 48, 2, 2, 32, torch.float32, device)
    base = flashtile.flash_attn_func(q, k, v).double()
    acc = torch.zeros_like(base)
    for i in range(n):
        torch.manual_seed(10_000 + i)
        acc += flashtile.flash_attn_func(q, k, v, dropout_p=p_drop).double()
    mean = acc / n
    s = torch.einsum("bihd,bjhd->bhij", q.double(), k.double()) / math.sqrt(32)
    p = torch.softmax(s, -1)  # (B, H, Sq, Sk)
    var = p_drop / (1 - p_drop) * torch.einsum("bhij,bjhd->bihd", p**2, v.double() ** 2)
    z = (mean - base).abs() / (var.sqrt() / math.sqrt(n))
    assert z.max() < 6, f"max z-score {z.max():.2f} over {n} seeds"
    keep = flash.dropout_mask((7, 11), 2, 3, 64, 64, p_drop, device)
    assert abs(keep.float().mean().item() - (1 - p_drop)) < 0.02
    # neighbours, and the four entries one Philox call draws ((i, j), (i, j + 8),
    # (i + 8, j), (i + 8, j + 8)), keep uncorrelated decisions
    x = keep.float() - keep.float().mean()
    for di, dj in ((0, 1), (0, 2), (0, 8), (1, 0), (8, 0), (8, 8), (8, -8)):
        a = x[..., max(0, -di):64 - max(0, di), max(0, -dj):64 - max(0, dj)]
        b = x[..., max(0, di):64 + min(0, di), max(0, dj):64 + min(0, dj)]
        corr = (a * b).mean() / (a.std() * b.std())
        assert abs(corr.item()) < 0.05, (di, dj, corr.item())


def _philox_np(seed, c0, c1, c2, c3):
    """Philox-4x32-10 in numpy (uint32 arrays), keyed by int64 ``seed``: the rounds of
    Salmon et al. (2011) that tl.philox runs."""
    m = 0xFFFFFFFF
    k0, k1 = np.uint64(seed & m), np.uint64((seed >> 32) & m)
    c = [np.asarray(x, dtype=np.uint64) & m for x in (c0, c1, c2, c3)]
    for _ in range(10):
        pb, pa = c[2] * np.uint64(0xCD9E8D57), c[0] * np.uint64(0xD2511F53)
        c = [(pb >> np.uint64(32)) ^ c[1] ^ k0, pb & np.uint64(m),
             (pa >> np.uint64(32)) ^ c[3] ^ k1, pa & np.uint64(m)]
        k0 = (k0 + np.uint64(0x9E3779B9)) & np.uint64(m)
        k1 = (k1 + np.uint64(0xBB67AE85)) & np.uint64(m)
    return c


@pytest.mark.parametrize("p_drop", [0.2, 0.1, 1 / 3])
def test_dropout_mask_is_the_documented_draw(device, p_drop):
    """flash.dropout_mask (the kernels' own dropout_keep) is the convention in
    _common.DROPOUT_HALF_BITS, written out independently in numpy: for (b, h, i, j),
    Philox-4x32-10 keyed by the seed at counter (8 * (i // 16) + i % 8, 4 * (j // 16) +
    (j % 8) // 2, b * H + h, offset), number 2 * ((i % 16) // 8) + (j % 16) // 8, half j %
    2; kept when that 16-bit number is >= floor(p * 2^16 + 1/2). Ragged sizes, a seed
    above 2^32."""
    seed, offset, B, H, Sq, Sk = (5 << 32) + 12345, 77, 2, 2, 40, 52
    keep = flash.dropout_mask((seed, offset), B, H, Sq, Sk, p_drop, device).cpu().numpy()
    i = np.arange(Sq)[None, :, None]
    j = np.arange(Sk)[None, None, :]
    bh = np.arange(B * H)[:, None, None]
    nums = _philox_np(seed, 8 * (i // 16) + i % 8 + 0 * j, 4 * (j // 16) + (j % 8) // 2 + 0 * i,
                      bh + 0 * i + 0 * j, np.full((1, 1, 1), offset))
    nums = np.stack(np.broadcast_arrays(*nums))  # (4, BH, Sq, Sk)
    which = 2 * ((i % 16) // 8) + (j % 16) // 8 + 0 * bh  # a, b, c or d
    pick = np.take_along_axis(nums, which[None], 0)[0]
    half = (pick >> (16 * (j % 2)).astype(np.uint64)) & np.uint64(0xFFFF)
    thr = int(np.floor(float(np.float32(p_drop)) * 65536 + 0.5))
    assert thr == _common.dropout_threshold(p_drop)
    want = (half >= np.uint64(thr)).reshape(B, H, Sq, Sk)
    np.testing.assert_array_equal(keep, want)


def test_backward_deterministic(device):
    """Backward twice (GQA, causal): bitwise-equal gradients."""
    q, k, v = make_qkv(2, 100, 100, 4, 1, 64, torch.float16, device)
    dout = torch.randn(q.shape, device=device, dtype=q.dtype)
    grads = []
    for _ in range(2):
        inp = [t.detach().requires_grad_() for t in (q, k, v)]
        out = flashtile.flash_attn_func(*inp, causal=True)
        grads.append(torch.autograd.grad(out, inp, dout))
    for a, b in zip(*grads):
        assert torch.equal(a, b)


def test_forward_race(device):
    """The forward 50 times (3 under the interpreter): bitwise equal every time."""
    reps = 50 if HAS_CUDA else 3
    shape = (4, 1024, 8, 128) if HAS_CUDA else (1, 70, 2, 32)
    q, k, v = make_qkv(shape[0], shape[1], shape[1], shape[2], shape[2], shape[3],
                       torch.bfloat16, device)
    first = flashtile.flash_attn_func(q, k, v, causal=True)
    for _ in range(reps - 1):
        assert torch.equal(first, flashtile.flash_attn_func(q, k, v, causal=True))


def test_noncontiguous_dout(device):
    q, k, v = make_qkv(1, 40, 40, 2, 2, 32, torch.float16, device)
    inp = [t.detach().requires_grad_() for t in (q, k, v)]
    out = flashtile.flash_attn_func(*inp)
    dout_t = torch.randn(1, 2, 40, 32, device=device, dtype=q.dtype).transpose(1, 2)
    g_strided = torch.autograd.grad(out, inp, dout_t, retain_graph=True)
    g_packed = torch.autograd.grad(out, inp, dout_t.contiguous())
    for a, b in zip(g_strided, g_packed):
        assert torch.equal(a, b)


def test_dq_kernel_own_tile(device):
    """A BwdConfig with its own dQ tile (dq_block_m/n) gives the same gradients as the
    shared tile, up to fp32 summation order (the dQ kernel's key-tile loop changes)."""
    from flashtile.configs import BwdConfig

    torch.manual_seed(0)
    q, k, v = make_qkv(1, 70, 45, 2, 2, 32, torch.float16, device)
    dout = torch.randn_like(q)
    out, lse = flash.attention_forward(q, k, v, causal=True)
    small = 16 if device.type == "cpu" else 32
    shared = BwdConfig(small, small, 4, 1)
    split = BwdConfig(small, small, 4, 1, dq_block_m=2 * small, dq_block_n=max(16, small // 2))
    g1 = flash.attention_backward(dout, q, k, v, out, lse, causal=True, config=shared)
    g2 = flash.attention_backward(dout, q, k, v, out, lse, causal=True, config=split)
    assert torch.equal(g1[1], g2[1]) and torch.equal(g1[2], g2[2])  # dK/dV: same kernel
    torch.testing.assert_close(g1[0], g2[0], rtol=2e-3, atol=2e-3)


def test_return_lse_not_differentiable(device):
    q, k, v = (t.requires_grad_() for t in make_qkv(1, 20, 20, 2, 2, 32, torch.float16, device))
    out, lse = flashtile.flash_attn_func(q, k, v, return_lse=True)
    assert out.requires_grad and not lse.requires_grad
    assert lse.dtype == torch.float32 and lse.shape == (1, 2, 20)


def _count_saved(fn):
    packed = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
        fn()
    return len(packed)


def test_saves_nothing_without_grad(device):
    q, k, v = (t.requires_grad_() for t in make_qkv(1, 20, 20, 2, 2, 32, torch.float16, device))
    with torch.no_grad():
        assert _count_saved(lambda: flashtile.flash_attn_func(q, k, v)) == 0
        assert flashtile.flash_attn_func(q, k, v).grad_fn is None
    assert _count_saved(lambda: flashtile.flash_attn_func(q, k, v)) > 0
    frozen = [t.detach() for t in (q, k, v)]
    assert _count_saved(lambda: flashtile.flash_attn_func(*frozen)) == 0


def test_double_backward_raises(device):
    q, k, v = (t.requires_grad_() for t in make_qkv(1, 20, 20, 2, 2, 32, torch.float32, device))
    out = flashtile.flash_attn_func(q, k, v)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(out.sum(), q, create_graph=True)


def test_backward_gets_no_lse_zeros(device, monkeypatch):
    """The backward is handed None, not a materialised tensor of zeros, for the lse's
    gradient (set_materialize_grads(False): one fill kernel and one allocation fewer per
    call), with or without return_lse, and still returns the right gradients."""
    from flashtile import reference
    from flashtile.ops import flash

    seen = []
    real = flash.FlashAttnFunction.backward

    def spy(ctx, dout, dlse):
        seen.append((dout is not None, dlse))
        return real(ctx, dout, dlse)

    monkeypatch.setattr(flash.FlashAttnFunction, "backward", staticmethod(spy))
    q, k, v = (t.requires_grad_() for t in make_qkv(1, 20, 24, 2, 1, 32, torch.float32, device))
    dout = torch.randn_like(q)
    for return_lse in (False, True):
        res = flashtile.flash_attn_func(q, k, v, causal=True, return_lse=return_lse)
        out = res[0] if return_lse else res
        got = torch.autograd.grad(out, (q, k, v), dout)
        ref = torch.autograd.grad(reference.flash_attn_func(q, k, v, causal=True), (q, k, v),
                                  dout)
        for g, r in zip(got, ref):
            torch.testing.assert_close(g, r, atol=1e-4, rtol=1e-4)
    assert seen == [(True, None), (True, None)], seen


# what reaches the portable kernels on an H200 (the Gluon paths take the rest): dropout,
# windows, softcap, the hd 256 backward, short and ragged sequences, and hd 128 with the
# Gluon kernels switched off. (batch, seqlen_q, seqlen_k, heads, kv heads, head dim,
# kwargs, the plans made: the hd 256 forward runs Gluon stage A, which has none)
PLAN_CASES = {
    "gqa-causal": (2, 256, 256, 4, 2, 64, dict(causal=True), {"fwd", "bwd"}),
    # drawing on the portable forward (bits off: on the H200 bits would take the backward
    # to the Gluon kernels, and FLASHTILE_HOPPER_DROPOUT=0 keeps the forward off Gluon
    # stage A; neither has plans), and the portable kernels writing / reading bits
    "dropout": (2, 256, 256, 4, 2, 64, dict(causal=True, dropout_p=0.2, bits="0",
                                            hopper_dropout="0"), {"fwd", "bwd"}),
    "dropout-bits": (2, 256, 256, 4, 2, 64, dict(causal=True, dropout_p=0.2, bits="1",
                                                 hopper=False), {"fwd", "bwd"}),
    "window-softcap": (1, 333, 517, 4, 4, 128, dict(window_size=(96, 17), softcap=30.0),
                       {"fwd", "bwd"}),
    "hd256-ragged": (2, 257, 300, 2, 1, 256, dict(causal=True), {"bwd"}),
    "no-gluon-hd128": (1, 1100, 1029, 4, 4, 128, dict(causal=False, hopper=False),
                       {"fwd", "bwd"}),
}


@pytest.mark.gpu
@pytest.mark.parametrize("case", list(PLAN_CASES))
def test_launch_plans_bitwise_gpu(case, device, monkeypatch):
    """A repeated call runs its launch plan (flash._PLANS: the forward's and the
    backward's kernels with every argument but tensors and RNG state kept): out and the
    gradients are bitwise those of the planless path (dropout masks included), over the
    features that reach the portable kernels on the GPU."""
    from flashtile.ops import flash

    batch, sq, sk, h, hkv, d, kwargs, planned = PLAN_CASES[case]
    kwargs = dict(kwargs)
    if not kwargs.pop("hopper", True):
        monkeypatch.setenv("FLASHTILE_DISABLE_HOPPER", "1")
    if "bits" in kwargs:
        monkeypatch.setenv(flash.DROPOUT_BITS_ENV_VAR, kwargs.pop("bits"))
    if "hopper_dropout" in kwargs:
        monkeypatch.setenv("FLASHTILE_HOPPER_DROPOUT", kwargs.pop("hopper_dropout"))
    q, k, v = (t.requires_grad_() for t in make_qkv(batch, sq, sk, h, hkv, d, torch.bfloat16,
                                                      device))
    dout = torch.randn_like(q)

    def run(use):
        monkeypatch.setattr(flash, "USE_PLANS", use)
        torch.manual_seed(7)
        out = flashtile.flash_attn_func(q, k, v, **kwargs)
        return (out, *torch.autograd.grad(out, (q, k, v), dout))

    flash._PLANS.clear()
    want = run(False)
    assert not flash._PLANS
    run(True)  # makes the plans
    assert {key[0] for key in flash._PLANS} == planned, list(flash._PLANS)
    got = run(True)  # runs them
    for name, a, b in zip(("out", "dq", "dk", "dv"), got, want):
        assert torch.equal(a, b), name


def test_empty_inputs(device):
    q, k, v = make_qkv(1, 8, 8, 2, 2, 32, torch.float16, device)
    out = flashtile.flash_attn_func(q[:, :0], k, v)
    assert out.shape == (1, 0, 2, 32)
    out, lse = flashtile.flash_attn_func(q, k[:, :0], v[:, :0], return_lse=True)
    assert (out == 0).all() and torch.isneginf(lse).all()


@pytest.mark.gpu
def test_no_recompile_on_seqlen_or_batch(device, monkeypatch):
    """Sequence length and batch are runtime arguments: one compiled variant each for
    the forward and the backward kernels, whatever the lengths. (The portable path;
    tests/test_hopper.py counts the Gluon kernel's variants.)"""
    monkeypatch.setenv("FLASHTILE_DISABLE_HOPPER", "1")
    kernels = (flash._attn_fwd_kernel, flash._attn_bwd_dkdv_kernel, flash._attn_bwd_dq_kernel,
               flash._attn_bwd_preprocess_kernel)

    def n_compiled():
        # device_caches: device -> (kernel cache, key cache, target, backend, binder)
        return [sum(len(c[0]) for c in kern.device_caches.values())
                if hasattr(kern, "device_caches")
                else len(kern.cache.get(device.index or 0, {})) for kern in kernels]

    def run(b, s):
        q, k, v = (t.requires_grad_() for t in make_qkv(b, s, s + 3, 4, 2, 64, torch.bfloat16,
                                                          device))
        flashtile.flash_attn_func(q, k, v, causal=True).sum().backward()

    run(2, 128)
    before = n_compiled()
    assert all(n >= 1 for n in before), before  # the count sees the compiled variants
    for b, s in [(1, 1), (3, 17), (2, 1000), (1, 4096), (5, 333)]:
        run(b, s)
    assert n_compiled() == before


@pytest.mark.gpu
def test_torch_compile_fullgraph(device):
    q, k, v = (t.requires_grad_() for t in make_qkv(2, 256, 256, 4, 2, 64, torch.bfloat16,
                                                      device))

    def f(q, k, v):
        return flashtile.flash_attn_func(q, k, v, causal=True).float().square().sum()

    compiled = torch.compile(f, fullgraph=True)
    loss = compiled(q, k, v)
    grads = torch.autograd.grad(loss, (q, k, v))
    loss_e = f(q, k, v)
    grads_e = torch.autograd.grad(loss_e, (q, k, v))
    # the attention op runs the same kernels compiled or not: its output is bitwise equal;
    # inductor fuses square().sum() differently from eager, so the loss and the gradient
    # of the square (fed to our backward) agree to fp32 rounding, not bitwise
    out_c = torch.compile(lambda q, k, v: flashtile.flash_attn_func(q, k, v, causal=True),
                          fullgraph=True)(q, k, v)
    assert torch.equal(out_c, flashtile.flash_attn_func(q, k, v, causal=True))
    torch.testing.assert_close(loss, loss_e, rtol=1e-6, atol=0)
    for a, b in zip(grads, grads_e):
        torch.testing.assert_close(a, b, rtol=1e-2, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_second_device():
    dev = torch.device("cuda", 1)
    _assert_ok(run_case(Case(seqlen_q=300, seqlen_k=300, head_dim=64, causal=True), dev))


@pytest.mark.parametrize("softcap,dtype,interp,flag", [
    (0.0, torch.bfloat16, False, 0), (0.0, torch.float32, True, 0),
    (30.0, torch.bfloat16, False, 2), (30.0, torch.float16, False, 2),
    (30.0, torch.float32, False, 1), (30.0, torch.bfloat16, True, 1),
])
def test_softcap_flag(softcap, dtype, interp, flag, monkeypatch):
    """The SOFTCAP constexpr: tanh.approx (2) for 16-bit inputs on a GPU, the accurate
    tanh (1) for fp32 inputs and under the interpreter (no inline PTX there); the
    portable launchers pass it (flash's flags, varlen's constexprs)."""
    from flashtile.ops import _common, varlen

    monkeypatch.setattr(_common, "is_interpreting", lambda: interp)
    assert _common.softcap_flag(softcap, dtype) == flag
    q = torch.zeros(1, 8, 2, 64, dtype=dtype)
    _, _, flags = flash._common_params(q, q, None, (None, None), softcap, 0.0, None)
    assert flags[2] == flag
    meta, _ = varlen._params(q[0], q[0], None, (None, None), softcap)
    assert meta["SOFTCAP"] == flag


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a GPU (inline PTX)")
def test_fast_tanh_accuracy():
    """tanh_f32(FAST=True) (tanh.approx.f32) against torch.tanh in float64: relative
    error below 2^-10 wherever |tanh| > 2^-20, the accurate variant below 1e-6."""
    import triton
    import triton.language as tl

    from flashtile.ops._common import tanh_f32

    @triton.jit
    def _tanh_kernel(X, Y, Z, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(X + offs, mask=offs < n)
        tl.store(Y + offs, tanh_f32(x, True), mask=offs < n)
        tl.store(Z + offs, tanh_f32(x), mask=offs < n)

    x = torch.cat([torch.linspace(-20, 20, 100_001), torch.logspace(-8, 1, 10_001),
                   -torch.logspace(-8, 1, 10_001)]).cuda()
    y, z = torch.empty_like(x), torch.empty_like(x)
    _tanh_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, z, x.numel(), BLOCK=1024)
    ref = torch.tanh(x.double())
    big = ref.abs() > 2**-20
    assert ((y.double() - ref).abs()[big] / ref.abs()[big]).max() < 2**-10
    assert ((z.double() - ref).abs()[big] / ref.abs()[big]).max() < 1e-6


def test_dropout_bits_auto(monkeypatch):
    """FLASHTILE_DROPOUT_BITS: unset ("auto"), bits exactly where the Gluon backward
    will read them (asked with bits=True and the call's window / softcap); "1" always,
    "0" never. The device checks are stubbed."""
    from flashtile.ops import hopper_bwd

    q = torch.randn(1, 8, 2, 64)
    monkeypatch.delenv(flash.DROPOUT_BITS_ENV_VAR, raising=False)
    assert not flash.dropout_bits_on(q, q, q, None, 0, 0.0, 0.2)  # a CPU tensor
    asked = []
    monkeypatch.setattr(flash, "_maybe_sm90", lambda device: True)
    for answer in (True, False):
        monkeypatch.setattr(hopper_bwd, "hopper_bwd_supported",
                            lambda *a, answer=answer, **kw: asked.append(kw) or answer)
        assert flash.dropout_bits_on(q, q, q, 100, 0, 30.0, 0.2) is answer
    assert asked[-1]["bits"] is True and asked[-1]["window"] == (100, 0)
    assert asked[-1]["softcap"] == 30.0 and asked[-1]["dropout_p"] == 0.2
    for value, want in (("1", True), ("0", False)):
        monkeypatch.setenv(flash.DROPOUT_BITS_ENV_VAR, value)
        assert flash.dropout_bits_on(q, q, q, None, 0, 0.0, 0.2) is want


def test_dropout_bits_backward_under_dispatch_mode(device, monkeypatch):
    """A forward that ran eagerly with dropout bits (a tensor in its RNG state), then its
    backward under a TorchDispatchMode (which takes the custom ops' path elsewhere): the
    launchers run with the bits, the gradients equal those of a plain backward (the custom
    op could not take the words: torch.tensor((words, 0)) raised before session 17)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class PassThrough(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    monkeypatch.setenv(flash.DROPOUT_BITS_ENV_VAR, "1")
    q, k, v = make_qkv(1, 40, 40, 2, 2, 32, torch.float16, device)
    dout = torch.randn_like(q)
    grads = []
    for mode in (None, PassThrough):
        qkv = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        torch.manual_seed(3)
        out = flashtile.flash_attn_func(*qkv, causal=True, dropout_p=0.3)
        if mode is None:
            grads.append(torch.autograd.grad(out, qkv, dout))
        else:
            with mode():
                grads.append(torch.autograd.grad(out, qkv, dout))
    for name, a, b in zip(("dq", "dk", "dv"), *grads):
        assert torch.equal(a, b), name
