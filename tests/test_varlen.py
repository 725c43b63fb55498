"""flashtile.flash_attn_varlen_func: packed sequences of random lengths (zero and the
maximum included) against the per-sequence reference, forward and backward, with the
DESIGN.md tolerance rule. CPU runs small shapes under the interpreter; ``gpu`` tests
run realistic sizes on the H200."""

import itertools

import pytest
import torch

import flashtile
from flashtile import configs, reference
from flashtile.ops import flash, varlen
from flashtile.validate import check_close
from sm90 import IS_SM90


def draw_lengths(batch, max_len, zero=True):
    """Random lengths in [0, max_len] with one 0 (if ``zero``) and one max_len."""
    lens = torch.randint(1, max_len + 1, (batch,)).tolist()
    lens[0] = max_len
    if zero and batch > 2:
        lens[-1] = 0
    return lens


def cu_of(lens, device):
    return torch.tensor([0, *itertools.accumulate(lens)], dtype=torch.int32, device=device)


def count_varlen_forward(monkeypatch):
    """Record, per call of hopper_fwd.hopper_varlen_forward, whether it ran (True) or
    left the call to the portable kernel (False)."""
    from flashtile.ops import hopper_fwd

    ran = []
    real = hopper_fwd.hopper_varlen_forward

    def counting(*args, **kwargs):
        res = real(*args, **kwargs)
        ran.append(res is not None)
        return res

    monkeypatch.setattr(hopper_fwd, "hopper_varlen_forward", counting)
    return ran


def count_varlen_backward(monkeypatch):
    """Record the q shape of each call of hopper_bwd.hopper_varlen_backward (the Gluon
    varlen backward ran)."""
    from flashtile.ops import hopper_bwd

    calls = []
    real = hopper_bwd.hopper_varlen_backward

    def counting(*args, **kwargs):
        calls.append(args[1].shape)
        return real(*args, **kwargs)

    monkeypatch.setattr(hopper_bwd, "hopper_varlen_backward", counting)
    return calls


def run_varlen(lens_q, lens_k, nheads, nheads_kv, head_dim, dtype, device, backward=True,
               **kwargs):
    """Kernel vs float64 and input-precision references: list of Check."""
    cu_q, cu_k = cu_of(lens_q, device), cu_of(lens_k, device)
    tq, tk = sum(lens_q), sum(lens_k)
    q = torch.randn(tq, nheads, head_dim).to(device, dtype)
    k = torch.randn(tk, nheads_kv, head_dim).to(device, dtype)
    v = torch.randn(tk, nheads_kv, head_dim).to(device, dtype)
    args = (cu_q, cu_k, max(lens_q), max(lens_k))
    inputs = [t.detach().requires_grad_(backward) for t in (q, k, v)]
    out, lse = flashtile.flash_attn_varlen_func(*inputs, *args, return_lse=True, **kwargs)
    assert out.shape == q.shape and lse.shape == (nheads, tq)
    refs = []
    for upcast in (True, False):
        # fp64 leaves for the truth: its gradients are not rounded to the input dtype
        rin = [(t.double() if upcast else t).detach().requires_grad_(backward)
               for t in (q, k, v)]
        ro, rl = reference.flash_attn_varlen_func(*rin, *args, return_lse=True, upcast=upcast,
                                                  **kwargs)
        refs.append((rin, ro, rl))
    (r64_in, o64, l64), (rlp_in, olp, llp) = refs
    checks = [check_close("out", out, o64, olp), check_close("lse", lse, l64, llp)]
    if backward:
        dout = torch.randn(out.shape).to(device, dtype)
        grads = torch.autograd.grad(out, inputs, dout)
        g64 = torch.autograd.grad(o64, r64_in, dout.double())
        glp = torch.autograd.grad(olp, rlp_in, dout)
        scale = max(float(t.detach().abs().max()) if t.numel() else 0.0 for t in (o64, *g64))
        atol = 2.0**-22 * head_dim * scale  # fp32 rounding over a head_dim-long dot
        for name, g, r, lp in zip(("dq", "dk", "dv"), grads, g64, glp):
            checks.append(check_close(name, g, r, lp, atol=atol))
    return checks


def _assert_ok(checks, lens_q, lens_k):
    bad = [str(c) for c in checks if not c.ok]
    assert not bad, f"lens_q={lens_q} lens_k={lens_k}: " + "; ".join(bad)


# (batch, max_q, max_k, nheads, nheads_kv, head_dim, dtype, kwargs): a covering set of
# mask x head ratio x dtype x (q longer / k longer) with zero-length and max sequences
CPU_CASES = [
    (4, 37, 37, 2, 2, 32, torch.float16, dict(causal=True)),
    (4, 20, 45, 4, 2, 40, torch.bfloat16, dict()),
    (3, 45, 17, 4, 1, 64, torch.float16, dict(causal=True, window_size=(8, -1))),
    (4, 33, 33, 2, 1, 32, torch.bfloat16, dict(window_size=(5, 3), softcap=10.0)),
    (3, 30, 41, 2, 2, 32, torch.float32, dict(causal=True, softcap=5.0)),
]


@pytest.mark.parametrize(
    "batch,max_q,max_k,nheads,nheads_kv,head_dim,dtype,kwargs", CPU_CASES,
    ids=[f"b{c[0]}-q{c[1]}-k{c[2]}-h{c[3]}x{c[4]}-d{c[5]}-{str(c[6])[6:]}-"
         + ("_".join(f"{k}{v}" for k, v in c[7].items()) or "full") for c in CPU_CASES],
)
def test_varlen(batch, max_q, max_k, nheads, nheads_kv, head_dim, dtype, kwargs, device):
    lens_q = draw_lengths(batch, max_q)
    lens_k = lens_q if max_q == max_k else draw_lengths(batch, max_k)
    if max_q != max_k:
        lens_k[-1] = 0 if lens_q[-1] else 3  # a query sequence with no key, or the reverse
    checks = run_varlen(lens_q, lens_k, nheads, nheads_kv, head_dim, dtype, device, **kwargs)
    _assert_ok(checks, lens_q, lens_k)


def test_matches_dense_per_sequence(device):
    """A packed sequence equals the portable dense kernel on it alone, bit for bit (same
    tile loops, same tile shape)."""
    lens = [19, 0, 26]
    q = torch.randn(sum(lens), 2, 32).to(device, torch.float16)
    k, v = torch.randn_like(q), torch.randn_like(q)
    cu = cu_of(lens, device)
    out = flashtile.flash_attn_varlen_func(q, k, v, cu, cu, max(lens), max(lens), causal=True)
    cfg = configs.fwd_config(32, True, q.dtype, q.device, max(lens))
    dense, _ = flash.attention_forward(q[None, 19:], k[None, 19:], v[None, 19:], causal=True,
                                       config=cfg)
    assert torch.equal(out[19:], dense[0])


def test_tail_rows_and_empty_batch(device):
    """Rows past cu_seqlens[-1] get zero gradients; a batch of empty sequences runs."""
    q = torch.randn(12, 2, 32).to(device, torch.float16).requires_grad_()
    cu = torch.tensor([0, 5, 9], dtype=torch.int32, device=device)
    out = flashtile.flash_attn_varlen_func(q, q, q, cu, cu, 5, 5)
    (dq,) = torch.autograd.grad(out[:9].float().sum(), q)
    assert (dq[9:] == 0).all() and torch.isfinite(dq).all()
    zero = torch.zeros(4, dtype=torch.int32, device=device)
    out, lse = flashtile.flash_attn_varlen_func(q, q, q, zero, zero, 0, 0, return_lse=True)
    assert out.shape == q.shape and lse.shape == (2, 12)


def test_bad_arguments(device):
    q = torch.randn(10, 2, 32).to(device, torch.float16)
    cu = torch.tensor([0, 4, 10], dtype=torch.int32, device=device)
    f = flashtile.flash_attn_varlen_func
    with pytest.raises(TypeError, match="cu_seqlens_q must be int32"):
        f(q, q, q, cu.long(), cu, 6, 6)
    with pytest.raises(ValueError, match="cu_seqlens_q must be 1-D"):
        f(q, q, q, cu[None], cu, 6, 6)
    with pytest.raises(ValueError, match="both be"):
        f(q, q, q, cu, cu[:2], 6, 6)
    with pytest.raises(TypeError, match="max_seqlen_q must be a Python int"):
        f(q, q, q, cu, cu, torch.tensor(6), 6)
    with pytest.raises(ValueError, match="3 dimensions"):
        f(q[None], q[None], q[None], cu, cu, 6, 6)
    kv3 = torch.randn(10, 3, 32).to(device, torch.float16)
    with pytest.raises(ValueError, match="multiple of nheads"):
        f(q, kv3, kv3, cu, cu, 6, 6)


def test_debug_checks(device, monkeypatch):
    """FLASHTILE_DEBUG_CHECKS=1 reads the lengths on the host and rejects bad values."""
    q = torch.randn(10, 2, 32).to(device, torch.float16)
    monkeypatch.setenv("FLASHTILE_DEBUG_CHECKS", "1")
    bad = torch.tensor([0, 7, 4], dtype=torch.int32, device=device)
    with pytest.raises(ValueError, match="non-decreasing"):
        flashtile.flash_attn_varlen_func(q, q, q, bad, bad, 7, 7)
    cu = torch.tensor([0, 4, 10], dtype=torch.int32, device=device)
    with pytest.raises(ValueError, match="exceeds max_seqlen"):
        flashtile.flash_attn_varlen_func(q, q, q, cu, cu, 4, 6)
    with pytest.raises(ValueError, match="exceeds the packed length"):
        varlen.check_cu_seqlens_values(cu, 8, 6, "cu_seqlens_k")


# ----------------------------------------------------------------------------------
# GPU: realistic sizes
# ----------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("heads", [(16, 16), (32, 8), (8, 1)])
@pytest.mark.parametrize("mask", [dict(), dict(causal=True), dict(window_size=(256, 0)),
                                  dict(causal=True, softcap=30.0)], ids=str)
def test_varlen_gpu(head_dim, heads, mask, device):
    dtype = torch.float16 if head_dim == 64 else torch.bfloat16
    lens_q = draw_lengths(12, 1500)
    lens_k = [n + int(torch.randint(0, 300, ())) if n else 0 for n in lens_q]
    checks = run_varlen(lens_q, lens_k, *heads, head_dim, dtype, device, **mask)
    _assert_ok(checks, lens_q, lens_k)


@pytest.mark.parametrize("value,mode", [(None, "auto"), ("1", "on"), ("0", "off"),
                                        ("", "off")])
def test_hopper_varlen_modes(monkeypatch, value, mode):
    """FLASHTILE_HOPPER_VARLEN: unset is "auto" (the Gluon varlen forward from
    configs.HOPPER_VARLEN_MIN_SEQLEN on: slower than the portable kernel at 2k-long
    sequences, faster at 8k), =1 forces it, =0 switches it off; never on CPU tensors."""
    from flashtile.ops import hopper_fwd

    q = torch.randn(10, 4, 64, dtype=torch.bfloat16)
    if value is None:
        monkeypatch.delenv("FLASHTILE_HOPPER_VARLEN", raising=False)
    else:
        monkeypatch.setenv("FLASHTILE_HOPPER_VARLEN", value)
    assert hopper_fwd.varlen_mode() == mode
    assert hopper_fwd.varlen_disabled() == (mode == "off")
    assert not hopper_fwd.hopper_varlen_supported(q, q, q, q, False, (None, None), 0.0)


@pytest.mark.parametrize("value,mode", [(None, "auto"), ("1", "on"), ("0", "off"),
                                        ("", "off")])
def test_hopper_varlen_bwd_mode(monkeypatch, value, mode):
    """FLASHTILE_HOPPER_VARLEN_BWD: unset is "auto" (the Gluon varlen backward from
    configs.HOPPER_VARLEN_MIN_SEQLEN on), 1 "on", 0 or empty "off"; never on CPU
    tensors whatever the mode and the length."""
    from flashtile.ops import hopper_bwd

    if value is None:
        monkeypatch.delenv(hopper_bwd.VARLEN_ENV_VAR, raising=False)
    else:
        monkeypatch.setenv(hopper_bwd.VARLEN_ENV_VAR, value)
    monkeypatch.setenv(hopper_bwd.ENV_VAR, "1")
    assert hopper_bwd.varlen_bwd_mode() == mode
    q = torch.randn(10, 4, 64, dtype=torch.bfloat16)
    long_ = configs.HOPPER_VARLEN_MIN_SEQLEN
    assert not hopper_bwd.hopper_varlen_bwd_supported(q, q, q, q, False, (None, None), 0.0,
                                                      None, long_, long_)


def test_hopper_varlen_bwd_window_launch(monkeypatch):
    """A sliding window's left bound reaches both varlen Gluon backward kernels (VARLEN
    and HAS_LEFT together, the bound as the ``left`` argument); launches recorded on
    CPU tensors, nothing runs."""
    from flashtile.ops import hopper_bwd

    launched = []
    monkeypatch.setattr(hopper_bwd, "launch",
                        lambda kernel, grid, device, *args, **kw: launched.append(
                            (kernel.fn.__name__ if hasattr(kernel, "fn") else str(kernel),
                             kw)))
    q = torch.randn(300, 4, 64, dtype=torch.bfloat16)
    kv = torch.randn(300, 2, 64, dtype=torch.bfloat16)
    lse = torch.zeros(4, 300)
    cu = torch.tensor([0, 100, 300], dtype=torch.int32)
    grads = [torch.zeros_like(t) for t in (q, kv, kv)]
    hopper_bwd.hopper_varlen_backward(q, q, kv, kv, q, lse, cu, cu, 200, 200, None, True,
                                      *grads, left=37)
    kernels = {name: kw for name, kw in launched}
    for name in ("_bwd_dkdv_kernel", "_bwd_dq_kernel"):
        kw = next(kw for n, kw in kernels.items() if name in n)
        assert kw["VARLEN"] and kw["HAS_LEFT"] and kw["left"] == 37, (name, kw)


def test_hopper_varlen_bwd_threshold():
    """configs.hopper_varlen_bwd_preferred as measured: from 8k everywhere, causal and
    at hd 128 non-causal from 2k."""
    long_ = configs.HOPPER_VARLEN_MIN_SEQLEN
    for d in (64, 128):
        for causal in (False, True):
            assert configs.hopper_varlen_bwd_preferred(d, causal, long_)
            assert not configs.hopper_varlen_bwd_preferred(d, causal, 2047)
            assert configs.hopper_varlen_bwd_preferred(d, causal, 2048) == (
                causal or d == 128)
            assert configs.hopper_varlen_bwd_preferred(d, causal, 4096) == (
                causal or d == 128)
            assert configs.hopper_varlen_bwd_preferred(d, causal, 4095) == (
                causal or d == 128)


def test_hopper_varlen_threshold():
    """The Gluon varlen forward from 8k, at hd 128 from 4k."""
    assert configs.hopper_varlen_preferred(configs.HOPPER_VARLEN_MIN_SEQLEN)
    assert configs.hopper_varlen_preferred(16384)
    assert not configs.hopper_varlen_preferred(configs.HOPPER_VARLEN_MIN_SEQLEN - 1)
    assert not configs.hopper_varlen_preferred(2048)
    for d in (64, 256):
        assert not configs.hopper_varlen_preferred(4096, d)
        assert configs.hopper_varlen_preferred(8192, d)
    assert configs.hopper_varlen_preferred(4096, 128)
    assert not configs.hopper_varlen_preferred(4095, 128)


# The Gluon varlen GPU tests' batch (query, key lengths): an empty pair, queries with no
# keys (64, 0) and keys with no queries (0, 77), q longer than k (700, 650: key-less
# causal rows), one query over 900 keys, ragged tails
GPU_LENS_Q = (1500, 0, 700, 1, 129, 64, 1000, 333, 0)
GPU_LENS_K = (1500, 0, 650, 900, 128, 0, 1200, 333, 77)


@pytest.mark.gpu
@pytest.mark.skipif(not IS_SM90, reason="the Gluon forward needs an sm_90 GPU")
@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("schedule", ["", "A", "B", "C"], ids=["shipped", "A", "B", "C"])
def test_varlen_hopper_gpu(head_dim, causal, schedule, device, monkeypatch):
    """sm_90, FLASHTILE_HOPPER_VARLEN=1: the forward runs the Gluon kernels over
    per-sequence device-side TMA descriptors (hopper_fwd.hopper_varlen_forward; each
    stage, and the shipped schedule), with empty sequences on either side, key-less
    causal rows (q longer than k), ragged tails and GQA; the backward (portable) from its
    out and lse."""
    monkeypatch.setenv("FLASHTILE_HOPPER_VARLEN", "1")  # also below the 8k threshold
    monkeypatch.setenv("FLASHTILE_HOPPER_SCHEDULE", schedule)
    ran = count_varlen_forward(monkeypatch)
    lens_q, lens_k = list(GPU_LENS_Q), list(GPU_LENS_K)
    checks = run_varlen(lens_q, lens_k, 16, 4, head_dim, torch.bfloat16, device,
                        backward=head_dim != 256 or not causal, causal=causal)
    _assert_ok(checks, lens_q, lens_k)
    assert ran and all(ran), "the Gluon varlen forward did not run"


@pytest.mark.gpu
@pytest.mark.skipif(not IS_SM90, reason="the Gluon forward needs an sm_90 GPU")
@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("left", [0, 100, 1000])
def test_varlen_hopper_window_gpu(head_dim, causal, left, device, monkeypatch):
    """sm_90, FLASHTILE_HOPPER_VARLEN=1, FLASHTILE_HOPPER_WINDOW=1 (the default): a sliding
    window through the Gluon varlen forward (stage A's left-edge tiles over per-sequence
    descriptors), with the same empty, key-less and ragged sequences as above; the
    backward (portable) from its out and lse."""
    monkeypatch.setenv("FLASHTILE_HOPPER_VARLEN", "1")
    monkeypatch.setenv("FLASHTILE_HOPPER_WINDOW", "1")
    monkeypatch.delenv("FLASHTILE_HOPPER_SCHEDULE", raising=False)
    ran = count_varlen_forward(monkeypatch)
    lens_q, lens_k = list(GPU_LENS_Q), list(GPU_LENS_K)
    checks = run_varlen(lens_q, lens_k, 16, 4, head_dim, torch.bfloat16, device,
                        backward=head_dim != 256, causal=causal,
                        window_size=(left, 0 if causal else -1))
    _assert_ok(checks, lens_q, lens_k)
    assert ran and all(ran), "the Gluon varlen forward did not run"


@pytest.mark.gpu
@pytest.mark.skipif(not IS_SM90, reason="the Gluon backward needs an sm_90 GPU")
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("overrides", ["", "gqa_expand=1"], ids=["loop", "expand"])
def test_varlen_hopper_bwd_gpu(head_dim, causal, overrides, device, monkeypatch):
    """sm_90, FLASHTILE_HOPPER_VARLEN_BWD=1 (and FLASHTILE_HOPPER_BWD=1, so short
    sequences qualify too): the backward runs the Gluon two-kernel backward over
    per-sequence device-side TMA descriptors (hopper_bwd.hopper_varlen_backward), with
    empty sequences on either side, key-less causal rows, ragged tails and GQA; dq / dk /
    dv against the reference. "expand": the GQA programs per query head (opt-in for
    varlen through FLASHTILE_HOPPER_BWD_OVERRIDES), whose zeroed partials must leave the
    rows of empty sequences at the caller's zeros."""
    from flashtile.ops import hopper_bwd

    monkeypatch.setenv(hopper_bwd.VARLEN_ENV_VAR, "1")
    monkeypatch.setenv(hopper_bwd.ENV_VAR, "1")
    monkeypatch.setenv(hopper_bwd.OVERRIDES_ENV_VAR, overrides)
    calls = count_varlen_backward(monkeypatch)
    lens_q, lens_k = list(GPU_LENS_Q), list(GPU_LENS_K)
    checks = run_varlen(lens_q, lens_k, 16, 4, head_dim, torch.bfloat16, device,
                        causal=causal)
    _assert_ok(checks, lens_q, lens_k)
    assert calls, "the Gluon varlen backward did not run"


@pytest.mark.gpu
@pytest.mark.skipif(not IS_SM90, reason="the Gluon backward needs an sm_90 GPU")
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("left", [0, 100, 1000])
def test_varlen_hopper_bwd_window_gpu(head_dim, causal, left, device, monkeypatch):
    """sm_90, FLASHTILE_HOPPER_VARLEN_BWD=1 (and FLASHTILE_HOPPER_BWD=1): a sliding
    window through the Gluon varlen backward (HAS_LEFT over per-sequence descriptors:
    the dK/dV kernel's far-edge query tiles, the dQ kernel's left-edge key tiles), with
    empty, key-less and ragged sequences and GQA; dq / dk / dv against the reference."""
    from flashtile.ops import hopper_bwd

    monkeypatch.setenv(hopper_bwd.VARLEN_ENV_VAR, "1")
    monkeypatch.setenv(hopper_bwd.ENV_VAR, "1")
    monkeypatch.delenv("FLASHTILE_HOPPER_WINDOW", raising=False)
    monkeypatch.delenv(hopper_bwd.FUSED_ENV_VAR, raising=False)
    calls = count_varlen_backward(monkeypatch)
    lens_q, lens_k = list(GPU_LENS_Q), list(GPU_LENS_K)
    checks = run_varlen(lens_q, lens_k, 16, 4, head_dim, torch.bfloat16, device,
                        causal=causal, window_size=(left, 0 if causal else -1))
    _assert_ok(checks, lens_q, lens_k)
    assert calls, "the Gluon varlen backward did not run"


@pytest.mark.gpu
@pytest.mark.skipif(not IS_SM90, reason="the Gluon forward needs an sm_90 GPU")
def test_varlen_hopper_auto(device, monkeypatch):
    """FLASHTILE_HOPPER_VARLEN and FLASHTILE_HOPPER_VARLEN_BWD unset: a batch whose
    longest query sequence reaches configs.HOPPER_VARLEN_MIN_SEQLEN runs the Gluon varlen
    forward and backward (and matches the reference), a shorter one the portable
    kernels."""
    from flashtile.ops import hopper_bwd

    monkeypatch.delenv("FLASHTILE_HOPPER_VARLEN", raising=False)
    monkeypatch.delenv(hopper_bwd.VARLEN_ENV_VAR, raising=False)
    monkeypatch.delenv(hopper_bwd.ENV_VAR, raising=False)
    ran = count_varlen_forward(monkeypatch)
    bwd = count_varlen_backward(monkeypatch)
    long_ = configs.HOPPER_VARLEN_MIN_SEQLEN
    lens = [long_, 0, 300, long_ // 2 + 7]
    checks = run_varlen(lens, lens, 4, 2, 128, torch.bfloat16, device, causal=True)
    _assert_ok(checks, lens, lens)
    assert ran == [True], ran
    assert len(bwd) == 1, bwd
    ran.clear()
    bwd.clear()
    # hd 128 from HOPPER_VARLEN_HD128_MIN_SEQLEN: both Gluon (causal), at hd 64 the
    # portable forward and the Gluon backward (causal from 2k)
    mid = configs.HOPPER_VARLEN_HD128_MIN_SEQLEN
    lens = [mid, 3, mid // 2 + 1]
    for d, fwd_gluon in ((128, True), (64, False)):
        checks = run_varlen(lens, lens, 4, 2, d, torch.bfloat16, device, causal=True)
        _assert_ok(checks, lens, lens)
        assert ran in (([True],) if fwd_gluon else ([], [False])), (d, ran)
        assert len(bwd) == 1, (d, bwd)
        ran.clear()
        bwd.clear()
    # the causal backward's threshold (HOPPER_VARLEN_BWD_CAUSAL_MIN_SEQLEN), both head
    # dims: Gluon at it, portable one below
    low = configs.HOPPER_VARLEN_BWD_CAUSAL_MIN_SEQLEN
    for d in (64, 128):
        for top, gluon in ((low, True), (low - 1, False)):
            lens = [top, 3, top // 2 + 1]
            checks = run_varlen(lens, lens, 4, 2, d, torch.bfloat16, device, causal=True)
            _assert_ok(checks, lens, lens)
            assert len(bwd) == (1 if gluon else 0), (d, top, bwd)
            ran.clear()
            bwd.clear()
    lens = [long_ - 1, 5]
    checks = run_varlen(lens, lens, 4, 2, 64, torch.bfloat16, device)
    _assert_ok(checks, lens, lens)
    assert ran in ([], [False]), ran  # the portable kernel ran
    assert bwd == [], bwd


@pytest.mark.gpu
def test_no_recompile_on_lengths(device):
    kernels = (varlen._varlen_fwd_kernel, varlen._varlen_bwd_dkdv_kernel,
               varlen._varlen_bwd_dq_kernel)

    def n_compiled():
        return [sum(len(c) for c in k.device_caches.values()) if hasattr(k, "device_caches")
                else len(k.cache.get(device.index or 0, {})) for k in kernels]

    def run(lens):
        cu = cu_of(lens, device)
        q = torch.randn(sum(lens), 8, 128, device=device, dtype=torch.bfloat16,
                        requires_grad=True)
        kv = torch.randn(sum(lens), 2, 128, device=device, dtype=torch.bfloat16,
                         requires_grad=True)
        out = flashtile.flash_attn_varlen_func(q, kv, kv, cu, cu, max(lens), max(lens),
                                               causal=True)
        out.sum().backward()

    run([128, 64])
    before = n_compiled()
    for lens in ([1, 17, 0], [1000, 3, 333], [4096], [5, 5, 5, 5, 7]):
        run(lens)
    assert n_compiled() == before


@pytest.mark.gpu
def test_compile_fullgraph(device):
    lens = [300, 0, 129]
    cu = cu_of(lens, device)
    q, k, v = (torch.randn(sum(lens), 4, 64, device=device, dtype=torch.bfloat16,
                           requires_grad=True) for _ in range(3))

    def attn(q, k, v):
        return flashtile.flash_attn_varlen_func(q, k, v, cu, cu, 300, 300, causal=True)

    def f(q, k, v):
        return attn(q, k, v).float().sum()

    # the op itself runs the same kernels compiled or not: bitwise equal; inductor's
    # reduction of .sum() differs from eager's, so the loss agrees to fp32 rounding
    assert torch.equal(torch.compile(attn, fullgraph=True)(q, k, v), attn(q, k, v))
    loss = torch.compile(f, fullgraph=True)(q, k, v)
    torch.testing.assert_close(loss, f(q, k, v), rtol=1e-6, atol=0)
    loss.backward()
    assert all(t.grad is not None and torch.isfinite(t.grad).all() for t in (q, k, v))


def test_bench_lengths():
    from flashtile.bench import varlen as bench_varlen

    lens = bench_varlen.draw_lengths(16384, 4096)
    assert sum(lens) == 16384 and max(lens) == 4096 and min(lens) > 0


def test_hopper_varlen_bwd_takes_windows(monkeypatch):
    """In the default ("auto") mode a windowed varlen call may take the Gluon varlen
    backward (since session 13): hopper_varlen_bwd_supported asks the dense check with
    windows accepted; the device half is stubbed, nothing runs."""
    from flashtile.ops import hopper_bwd

    monkeypatch.delenv(hopper_bwd.VARLEN_ENV_VAR, raising=False)
    asked = []
    monkeypatch.setattr(hopper_bwd, "hopper_bwd_supported",
                        lambda *a, **kw: asked.append((a, kw)) or True)
    q = torch.randn(10, 4, 64, dtype=torch.bfloat16)
    long_ = configs.HOPPER_VARLEN_MIN_SEQLEN
    assert hopper_bwd.hopper_varlen_bwd_supported(q, q, q, q, True, (100, 0), 0.0, None,
                                                  long_, long_)
    (args, kw), = asked
    assert args[4] == (100, 0) and kw["windows"] is True and kw["seqlen_k"] == long_
