"""Dropout on the Gluon forward (ops/hopper_fwd.py stage A; the draw and the bit words in
the wgmma layout, ops/_gluon_common.py).

CPU (every CI run): the 16-bit keep test of both halves against its definition, the
dispatch predicate and the launcher's routing (kernels stubbed); the builds themselves
compile in test_hopper.py (``hopper-dropout`` variants). GPU (``gpu`` marker, an H200
through scripts/gpu_check.sh): the Gluon forward's decisions bit for bit the portable
kernels' (flash.dropout_mask), its words those that both backwards read, its output within
the DESIGN.md bound of the float64 reference replaying that mask, and through autograd
with the Gluon backward reading its words.
"""

import numpy as np
import pytest
import torch

from flashtile import configs
from flashtile.ops import _common, flash, hopper_fwd
from flashtile.ops._gluon_common import dropout_thr16
from flashtile.validate import check_close, make_qkv
from sm90 import assert_within_2m6, require_sm90, training_runs

# ----------------------------------------------------------------------------------
# CPU
# ----------------------------------------------------------------------------------


def _keeps16(x: np.ndarray, thr16: int):
    """_gluon_common._keeps16's two tests on uint32 Philox numbers ``x``: (x << 16) >=
    thr16 and x >= thr16, all as uint32."""
    u = x.astype(np.uint64) & 0xFFFFFFFF
    t = np.uint64(thr16 & 0xFFFFFFFF)
    return ((u << np.uint64(16)) & np.uint64(0xFFFFFFFF)) >= t, u >= t


@pytest.mark.parametrize("p", [0.0, 1e-9, 0.1, 0.2, 0.25, 1 / 3, 0.5, 0.9, 1 - 2**-16])
def test_dropout_thr16_is_the_halves_test(p):
    """The Gluon forward's compares keep exactly the 16-bit numbers >= T
    (_common.dropout_threshold) in both halves of a Philox number: random numbers, and
    every half within 64 of T and of 0 / 65535."""
    thr16 = dropout_thr16(p)
    t = _common.dropout_threshold(p)
    assert (thr16 & 0xFFFFFFFF) == t << 16
    rng = np.random.default_rng(int(p * 1e6))
    halves = np.concatenate([rng.integers(0, 65536, size=200_000)]
                            + [np.arange(e - 64, e + 65) for e in (t, 0, 65535)])
    halves = halves[(halves >= 0) & (halves < 65536)]
    other = rng.integers(0, 65536, size=halves.size)
    lo, hi = _keeps16(halves + (other << 16), thr16)
    np.testing.assert_array_equal(lo, halves >= t)
    lo, hi = _keeps16(other + (halves << 16), thr16)
    np.testing.assert_array_equal(hi, halves >= t)


def test_dropout_thr16_edges():
    """T rounds fp32 p * 2^16 to nearest; p = 0 keeps everything; a p within 2^-17 of 1
    keeps nothing: None (the portable kernel runs it)."""
    assert dropout_thr16(0.0) == 0
    assert _common.dropout_threshold(0.2) == 13107  # 0.2 * 65536 = 13107.2
    assert _common.dropout_threshold(0.5 / 65536) == 1  # a half rounds up
    assert dropout_thr16(1 - 2**-16) is not None and dropout_thr16(1 - 2**-18) is None
    assert dropout_thr16(1 - 1e-9) is None


def _qkv(head_dim=64, seqlen=64):
    q = torch.randn(2, seqlen, 4, head_dim, dtype=torch.bfloat16)
    k = torch.randn(2, seqlen + 5, 2, head_dim, dtype=torch.bfloat16)
    return q, k, torch.randn_like(k)


def test_dropout_problem_ok(monkeypatch):
    """Dropout reaches the Gluon forward only when the caller asks (``dropouts``), at
    configs.HOPPER_DROPOUT_HEAD_DIMS, without a window or softcap, by default and under
    FLASHTILE_HOPPER_DROPOUT=1, not under =0."""
    monkeypatch.delenv("FLASHTILE_HOPPER_DROPOUT", raising=False)
    assert hopper_fwd.dropout_mode() == "auto"
    assert hopper_fwd.hopper_problem_ok(*_qkv(), True, dropout_p=0.2, dropouts=True)
    monkeypatch.setenv("FLASHTILE_HOPPER_DROPOUT", "1")
    for hd in hopper_fwd.HOPPER_HEAD_DIMS:
        ok = hd in configs.HOPPER_DROPOUT_HEAD_DIMS
        for causal in (False, True):
            assert hopper_fwd.hopper_problem_ok(*_qkv(hd), causal, dropout_p=0.2,
                                                dropouts=True) is ok
            assert not hopper_fwd.hopper_problem_ok(*_qkv(hd), causal, dropout_p=0.2)
    q, k, v = _qkv()
    assert not hopper_fwd.hopper_problem_ok(q, k, v, True, dropout_p=0.2, dropouts=True,
                                            softcap=30.0, softcaps=True)
    assert not hopper_fwd.hopper_problem_ok(q, k, v, True, window=(16, 0), windows=True,
                                            dropout_p=0.2, dropouts=True)
    assert not hopper_fwd.hopper_problem_ok(q, k, v, dropout_p=1 - 1e-9, dropouts=True)
    monkeypatch.setenv("FLASHTILE_HOPPER_DROPOUT", "0")
    assert hopper_fwd.dropout_mode() == "off"
    assert not hopper_fwd.hopper_problem_ok(*_qkv(), True, dropout_p=0.2, dropouts=True)


def test_dropout_config():
    """Dropout runs stage A's tiles uncapped (the draw needs the registers) at every
    query length, short ones included."""
    for causal in (False, True):
        for seqlen in (128, 256, 1024, 16384):
            cfg = hopper_fwd.dropout_config(64, causal, seqlen)
            assert cfg.schedule == "A" and cfg.max_regs is None
            assert (cfg.block_m, cfg.block_n) == (128, 128)


@pytest.mark.parametrize("rng", ["ints", "bits"])
def test_dropout_reaches_the_gluon_forward(monkeypatch, rng):
    """attention_forward hands a dropout call (its RNG state as given: host ints or a
    dropout_bits_buffer) to the Gluon launcher with the dropout config, and the launcher
    gives stage A's kernel DROPOUT, the seed argument, the 16-bit threshold and 1 - p. The
    device checks and the kernel are stubbed; nothing runs on a GPU."""
    q, k, v = _qkv()
    monkeypatch.delenv("FLASHTILE_HOPPER_DROPOUT", raising=False)  # the default
    monkeypatch.setattr(flash, "_maybe_sm90", lambda device: True)
    monkeypatch.setattr(hopper_fwd, "hopper_supported",
                        lambda *a, **kw: kw["dropouts"] and kw["dropout_p"] == 0.25)
    launched = []
    monkeypatch.setattr(hopper_fwd, "_gluon_launch",
                        lambda kernel, grid, dev, *a, **kw: launched.append((kernel, kw)))
    monkeypatch.setattr(hopper_fwd, "_desc", lambda x, rows: None)
    buf = flash.dropout_bits_buffer((1234, 5), 2, 4, 64, 69, q.device)
    state = (1234, 5) if rng == "ints" else (buf, 0)
    out, lse = flash.attention_forward(q, k, v, causal=True, dropout_p=0.25, rng_state=state)
    (kernel, kw), = launched
    assert kernel is hopper_fwd._fwd_kernel
    assert kw["DROPOUT"] is True and kw["seed"] is state[0] and kw["rng_offset"] == state[1]
    if rng == "bits":  # the words as their own (aligned) argument
        assert kw["BITS"].data_ptr() == buf.data_ptr() + 4 * flash.DROPOUT_BITS_HEADER
    else:
        assert kw["BITS"] is None
    assert "DROP_WS" not in kw  # the dropout partition: opt-in, and only with bits
    launched.clear()
    monkeypatch.setenv("FLASHTILE_HOPPER_DROPOUT_WS", "1")
    flash.attention_forward(q, k, v, causal=True, dropout_p=0.25, rng_state=state)
    (_, kw), = launched
    if rng == "bits":
        assert kw["DROP_WS"] is True and kw["DROP_REGS"] == hopper_fwd.DROP_WS_REGS
    else:
        assert "DROP_WS" not in kw
    monkeypatch.delenv("FLASHTILE_HOPPER_DROPOUT_WS")
    assert kw["drop_thr"] == dropout_thr16(0.25) == 16384 << 16
    assert kw["keep_p"] == pytest.approx(0.75)
    assert kw["MASKED_FIRST"] is False  # uncapped: tiles in order
    launched.clear()
    flash.attention_forward(q, k, v, causal=True, dropout_p=0.5, rng_state=state)
    assert not launched  # hopper_supported said no: the portable kernel ran


# ----------------------------------------------------------------------------------
# GPU
# ----------------------------------------------------------------------------------


def _visible(seqlen_q, seqlen_k, causal, device):
    if not causal:
        return torch.ones(seqlen_q, seqlen_k, dtype=torch.bool, device=device)
    i = torch.arange(seqlen_q, device=device)[:, None]
    j = torch.arange(seqlen_k, device=device)[None, :]
    return j <= i + seqlen_k - seqlen_q


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", configs.HOPPER_DROPOUT_HEAD_DIMS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seqlen_q,seqlen_k", [(1029, 1100), (256, 256), (300, 40), (1, 77)])
@pytest.mark.parametrize("rng", ["ints", "pair", "bits", "bits-ws"])
def test_gluon_dropout_forward(head_dim, causal, seqlen_q, seqlen_k, rng, device, monkeypatch):
    """The Gluon forward with dropout (it ran: the launcher is spied on) applies the
    portable kernels' mask bit for bit: out within the DESIGN.md bound of the float64
    reference replaying flash.dropout_mask, lse the softmax's; with a bits buffer its
    bit blocks hold that mask at every element a causal mask leaves visible.
    GQA 4:2, ragged lengths, rows with no key (300 x 40 causal). "bits-ws": drawn by the
    dropout partition (FLASHTILE_HOPPER_DROPOUT_WS=1), the consumers reading its blocks."""
    from flashtile import reference

    require_sm90()
    monkeypatch.setenv("FLASHTILE_HOPPER_DROPOUT", "1")
    monkeypatch.setenv("FLASHTILE_HOPPER_DROPOUT_WS", "1" if rng == "bits-ws" else "0")
    p, seed, offset = 0.2, 1234, 567
    q, k, v = make_qkv(2, seqlen_q, seqlen_k, 4, 2, head_dim, torch.bfloat16, device,
                       seed=seqlen_q + seqlen_k)
    ran = []
    real = hopper_fwd._launch
    monkeypatch.setattr(hopper_fwd, "_launch",
                        lambda *a, **kw: ran.append((kw.get("DROPOUT"), kw.get("DROP_WS")))
                        or real(*a, **kw))
    buf = None
    if rng == "ints":
        state = (seed, offset)
    elif rng == "pair":
        state = (torch.tensor([seed, offset], dtype=torch.int64, device=device), 0)
    else:
        buf = flash.dropout_bits_buffer((seed, offset), 2, 4, seqlen_q, seqlen_k, device)
        state = (buf, 0)
    out, lse = flash.attention_forward(q, k, v, causal=causal, dropout_p=p, rng_state=state)
    torch.cuda.synchronize()
    assert ran == [(True, True if rng == "bits-ws" else None)]
    keep = flash.dropout_mask((seed, offset), 2, 4, seqlen_q, seqlen_k, p, device)
    refs = [reference.attention_forward(q, k, v, causal=causal, dropout_p=p,
                                        dropout_mask=keep, upcast=up) for up in (True, False)]
    c = check_close("out", out, refs[0][0], refs[1][0])
    assert c.ok, str(c)
    ref_lse = refs[0][1].to(lse.device).float()
    fin = torch.isfinite(ref_lse)
    assert torch.equal(fin, torch.isfinite(lse))
    assert torch.allclose(lse[fin], ref_lse[fin], atol=1e-3, rtol=1e-4)
    if buf is not None:
        got = flash.dropout_bits_mask(buf[flash.DROPOUT_BITS_HEADER:], 2, 4, seqlen_q,
                                      seqlen_k)
        vis = _visible(seqlen_q, seqlen_k, causal, device).expand_as(keep)
        assert torch.equal(got[vis], keep[vis])


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", configs.HOPPER_DROPOUT_HEAD_DIMS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("ws", ["0", "1"])
def test_gluon_dropout_training(head_dim, causal, ws, device, monkeypatch):
    """flash_attn_func's training call with dropout at MiniGPT's shape (6 heads of 64; 3
    of 128 at hd 128) runs the Gluon forward (writing the words) and the Gluon backward
    (reading them): the
    same torch seed gives the portable forward's output within rounding
    (FLASHTILE_HOPPER_DROPOUT=0: the same mask) and gradients within 2^-6 of its largest
    magnitude. ws: the dropout partition drawing (FLASHTILE_HOPPER_DROPOUT_WS=1)."""
    require_sm90()
    monkeypatch.setenv("FLASHTILE_HOPPER_DROPOUT_WS", ws)
    heads = 384 // head_dim
    q, k, v = make_qkv(4, 1024, 1024, heads, heads, head_dim, torch.bfloat16, device, seed=3)
    dout = torch.randn_like(q)
    ran = []
    real = hopper_fwd._launch
    monkeypatch.setattr(hopper_fwd, "_launch",
                        lambda *a, **kw: ran.append(kw.get("DROPOUT")) or real(*a, **kw))
    runs = training_runs(monkeypatch, "FLASHTILE_HOPPER_DROPOUT", ("1", "0"), q, k, v, dout,
                         causal)
    assert ran == [True]
    assert_within_2m6(("out", "dq", "dk", "dv"), runs[0], runs[1])
