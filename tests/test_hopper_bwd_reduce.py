"""The one-kernel Gluon backward (ops/hopper_bwd.py, ``HopperBwdConfig.dq_reduce``): the
dK/dV kernel also computes each tile pair's dQ = dS K and adds it to an fp32 buffer with
TMA reduce-adds, so no dQ kernel runs. The adds race for ``deterministic=False`` calls;
with ``reduce_ordered`` (opt-in: FLASHTILE_HOPPER_BWD_REDUCE_ORDERED=1) each query tile's
adds come in a fixed order (rotated visiting order, per-tile counters): deterministic.
With ``reduce_fixed`` (opt-in: FLASHTILE_HOPPER_BWD_REDUCE_FIXED=1) the adds race but are
integer adds of shares scaled into int32 (ops/fixed_dq.py): deterministic too.

CPU (every CI run): which calls take it (``deterministic=False`` only, never with dropout,
FLASHTILE_HOPPER_BWD_REDUCE on / off / measured table), its tiles, and that the
``deterministic`` flag reaches the launcher through flash_attn_func and the custom op.
Its sm_90 builds are compiled in tests/test_hopper_bwd.py (variants named "reduce").
The ordered mode's add order is checked on the CPU through a transcription of its
integer formulas. GPU (``gpu`` marker): dq / dk / dv within the DESIGN.md bound of the
float64 reference through the public API and through the launcher, into NaN-filled
buffers, with GQA (group loop and expanded programs), ragged and tiny lengths, windows and
softcaps; the ordered mode bitwise repeatable, and its fallback past one key tile per SM.
"""

import dataclasses

import pytest
import torch

import flashtile
from flashtile import configs, reference
from flashtile.ops import flash, hopper_bwd
from flashtile.validate import make_qkv
from sm90 import grad_ref_checks, launcher_grads, require_sm90

# ----------------------------------------------------------------------------------
# CPU: tiles and dispatch
# ----------------------------------------------------------------------------------


@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_reduce_config(head_dim, causal):
    """128 keys over two warpgroups (16 rows per warp), no dQ kernel fields used, within
    227 KB; the two-kernel tiles' statistics options kept; none at hd 256."""
    cfg = configs.hopper_bwd_reduce_config(head_dim, causal, 4096)
    base = configs.hopper_bwd_config(head_dim, causal, 4096)
    assert cfg.dq_reduce and not cfg.fused and cfg.block_n == 16 * cfg.num_warps == 128, cfg
    assert cfg.max_regs is None and not cfg.prefetch_stats, cfg
    assert (cfg.stats_tma, cfg.lse2_pre, cfg.block_m) == (base.stats_tma, base.lse2_pre,
                                                          base.block_m)
    assert cfg.smem_bytes(head_dim)[0] <= 227 * 1024, cfg.smem_bytes(head_dim)
    assert configs.hopper_bwd_reduce_config(256, causal, 4096) is None


def test_reduce_tile_major_table():
    """Tile-major blocks of REDUCE_TILE_HEADS heads on the causal hd 128 one-kernel tiles
    inside REDUCE_TILE_MAJOR_CAUSAL only (measured at 4k and 8k, `s47a` / `s48b`): not
    below, not from its end, not non-causal, not at hd 64, not with the ordered adds."""
    lo, hi = configs.REDUCE_TILE_MAJOR_CAUSAL
    for sk in (lo, hi - 1):
        cfg = configs.hopper_bwd_reduce_config(128, True, sk, fixed=True)
        assert cfg.tile_major and cfg.tile_heads == configs.REDUCE_TILE_HEADS, (sk, cfg)
    for args in ((128, True, lo - 1), (128, True, hi), (128, False, lo), (64, True, lo)):
        assert not configs.hopper_bwd_reduce_config(*args, fixed=True).tile_major, args
    assert not configs.hopper_bwd_reduce_config(128, True, lo, ordered=True).tile_major


def test_dq_finish_table():
    """dq_finish on the fixed-point one-kernel tiles causal at hd 128 only (`s48a` /
    `s48b`): not non-causal, not racing or ordered, not at hd 64."""
    for sk in (4096, 8192, 16384):
        assert configs.hopper_bwd_reduce_config(128, True, sk, fixed=True).dq_finish
        assert not configs.hopper_bwd_reduce_config(128, False, sk, fixed=True).dq_finish
        assert not configs.hopper_bwd_reduce_config(128, True, sk).dq_finish
        assert not configs.hopper_bwd_reduce_config(64, True, sk, fixed=True).dq_finish
    assert not configs.hopper_bwd_reduce_config(128, False, 4096, ordered=True).dq_finish


@pytest.mark.parametrize("value,mode", [(None, "auto"), ("0", "off"), ("1", "on")])
def test_reduce_mode_env(monkeypatch, value, mode):
    if value is None:
        monkeypatch.delenv(hopper_bwd.REDUCE_ENV_VAR, raising=False)
    else:
        monkeypatch.setenv(hopper_bwd.REDUCE_ENV_VAR, value)
    assert hopper_bwd.reduce_mode() == mode


@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_default_config_reduce(monkeypatch, head_dim):
    """deterministic=True never takes the reduce tiles, deterministic=False does when the
    mode is on (or the measured table says so), not with dropout, not at hd 256, not
    when switched off."""
    monkeypatch.delenv(hopper_bwd.OVERRIDES_ENV_VAR, raising=False)
    monkeypatch.delenv(hopper_bwd.FUSED_ENV_VAR, raising=False)
    monkeypatch.setenv(hopper_bwd.FIXED_ENV_VAR, "0")  # deterministic: the two-kernel tiles
    two_kernel = configs.hopper_bwd_config(head_dim, False, 4096)
    monkeypatch.setenv(hopper_bwd.REDUCE_ENV_VAR, "1")
    assert hopper_bwd.default_config(head_dim, False, 4096) == two_kernel
    got = hopper_bwd.default_config(head_dim, False, 4096, deterministic=False)
    assert got.dq_reduce == (head_dim <= 128), got
    dropout = hopper_bwd.default_config(head_dim, False, 4096, dropout=True,
                                        deterministic=False)
    assert not dropout.dq_reduce, dropout
    monkeypatch.setenv(hopper_bwd.REDUCE_ENV_VAR, "0")
    assert not hopper_bwd.default_config(head_dim, False, 4096,
                                         deterministic=False).dq_reduce
    monkeypatch.delenv(hopper_bwd.REDUCE_ENV_VAR)
    auto = hopper_bwd.default_config(head_dim, True, 16384, deterministic=False)
    assert auto.dq_reduce == (head_dim <= 128
                              and configs.hopper_bwd_reduce_preferred(head_dim, True, 16384))


def _rotation(t, n_m, n_kt):  # ops/hopper_bwd._reduce_rotation, transcribed
    return t * n_m // n_kt


def _rank(t, sj, n_m, n_kt):  # _reduce_rank with _rank_base / _rotations_upto, transcribed
    def upto(x):
        wrap = int(x >= n_m)
        return wrap * n_kt + ((x - wrap * n_m + 1) * n_kt + n_m - 1) // n_m

    rot = _rotation(t, n_m, n_kt)
    return upto(rot + sj) + t - (rot * n_kt + n_m - 1) // n_m - upto(rot)


@pytest.mark.parametrize("n_m,n_kt", [(1, 1), (2, 1), (64, 32), (256, 128), (17, 9),
                                      (9, 9), (2, 8), (3, 7), (1, 5), (100, 3)])
def test_ordered_ranks(n_m, n_kt):
    """The ordered reduce's add order (a Python transcription of the kernel's integer
    formulas): for every query tile the n_kt programs' ranks are 0 .. n_kt - 1 (each
    waits for exactly its predecessors; no two wait for the same count), and they follow
    the programs' arrival in lock step (the step each reaches the tile, then key tile
    order), so no program waits on one that reaches the tile later."""
    for j in range(n_m):
        arrivals = []
        for t in range(n_kt):
            sj = (j - _rotation(t, n_m, n_kt)) % n_m  # the step at which t visits tile j
            arrivals.append((sj, t, _rank(t, sj, n_m, n_kt)))
        ranks = [r for *_, r in sorted(arrivals)]
        assert ranks == list(range(n_kt)), (j, sorted(arrivals))


def test_default_config_ordered(monkeypatch):
    """FLASHTILE_HOPPER_BWD_REDUCE_ORDERED=1: deterministic non-causal calls take the
    reduce tiles with ordered adds, causal ones and dropout keep the two-kernel tiles,
    deterministic=False the racing reduce; unset, the measured table."""
    monkeypatch.delenv(hopper_bwd.OVERRIDES_ENV_VAR, raising=False)
    monkeypatch.delenv(hopper_bwd.FUSED_ENV_VAR, raising=False)
    monkeypatch.setenv(hopper_bwd.FIXED_ENV_VAR, "0")  # else ahead of the ordered adds
    monkeypatch.setenv(hopper_bwd.ORDERED_ENV_VAR, "1")
    monkeypatch.setenv(hopper_bwd.REDUCE_ENV_VAR, "1")
    got = hopper_bwd.default_config(128, False, 4096)
    assert got.dq_reduce and got.reduce_ordered and got.reduce_late, got
    assert hopper_bwd.default_config(128, True, 4096) == configs.hopper_bwd_config(128, True,
                                                                                   4096)
    assert not hopper_bwd.default_config(128, False, 4096, dropout=True).dq_reduce
    racing = hopper_bwd.default_config(128, False, 4096, deterministic=False)
    assert racing.dq_reduce and not racing.reduce_ordered, racing
    assert not hopper_bwd.default_config(128, False, 4096, ordered=False).dq_reduce
    monkeypatch.delenv(hopper_bwd.ORDERED_ENV_VAR)
    auto = hopper_bwd.default_config(128, False, 16384)
    assert auto.dq_reduce == configs.hopper_bwd_ordered_preferred(128, False, 16384)


def test_default_config_fixed(monkeypatch):
    """FLASHTILE_HOPPER_BWD_REDUCE_FIXED=1: deterministic calls take the reduce tiles with
    fixed-point adds, causal too and ahead of the ordered adds; dropout and hd 256 keep
    the two-kernel tiles, deterministic=False the racing reduce; unset, the measured
    table."""
    monkeypatch.delenv(hopper_bwd.OVERRIDES_ENV_VAR, raising=False)
    monkeypatch.delenv(hopper_bwd.FUSED_ENV_VAR, raising=False)
    monkeypatch.setenv(hopper_bwd.FIXED_ENV_VAR, "1")
    monkeypatch.setenv(hopper_bwd.ORDERED_ENV_VAR, "1")
    for head_dim in (64, 128):
        for causal in (False, True):
            got = hopper_bwd.default_config(head_dim, causal, 4096)
            assert got.dq_reduce and got.reduce_fixed and not got.reduce_ordered, got
    assert not hopper_bwd.default_config(128, False, 4096, dropout=True).dq_reduce
    assert hopper_bwd.default_config(256, False, 4096) == configs.hopper_bwd_config(256, False,
                                                                                   4096)
    racing = hopper_bwd.default_config(128, False, 4096, deterministic=False)
    assert not racing.reduce_fixed and not racing.reduce_ordered, racing
    monkeypatch.delenv(hopper_bwd.FIXED_ENV_VAR)
    monkeypatch.delenv(hopper_bwd.ORDERED_ENV_VAR)
    auto = hopper_bwd.default_config(128, False, 16384)
    assert auto.reduce_fixed == configs.hopper_bwd_fixed_preferred(128, False, 16384)
    for head_dim, causal, seqlen in ((128, False, 4096), (128, False, 2048), (128, True, 16384),
                                     (64, False, 16384)):
        got = hopper_bwd.default_config(head_dim, causal, seqlen)
        assert got.reduce_fixed == (head_dim == 128 and seqlen >= 4096), got
        # causal: the band in one loop (one_loop = 2, s28c), not with a window / softcap
        assert got.one_loop == (2 if got.reduce_fixed and causal else 0), got
    # deterministic=False: the racing adds where preferred (non-causal), else the
    # fixed-point kernel where that is (causal hd 128 from 4k keys, session 28)
    nd = hopper_bwd.default_config(128, False, 16384, deterministic=False)
    assert nd.dq_reduce and not nd.reduce_fixed, nd
    nd = hopper_bwd.default_config(128, True, 16384, deterministic=False)
    assert nd.reduce_fixed and nd.one_loop == 2, nd
    assert not hopper_bwd.default_config(128, True, 16384, deterministic=False,
                                         window=True).dq_reduce
    assert not hopper_bwd.default_config(128, True, 2048, deterministic=False).dq_reduce
    # windows (session 30, s30a / s30c): the fixed-point kernel non-causal from
    # FIXED_WINDOW_MIN_SEQLEN keys, three loops (one_loop off); causal keeps two kernels
    wlow = configs.FIXED_WINDOW_MIN_SEQLEN
    for causal, seqlen, one in ((False, wlow, True), (False, wlow - 1, False),
                                (False, 16384, True), (True, 16384, False)):
        got = hopper_bwd.default_config(128, causal, seqlen, window=True)
        assert got.dq_reduce == one == got.reduce_fixed, (causal, seqlen, got)
    assert not hopper_bwd.default_config(64, False, 16384, window=True).dq_reduce
    # softcaps (session 29, s29b): 1 - t^2 folded into P^T at hd 128 on either kernel; the
    # fixed-point kernel non-causal from 4k keys, causal from FIXED_SOFTCAP_CAUSAL_MIN_SEQLEN
    low = configs.FIXED_SOFTCAP_CAUSAL_MIN_SEQLEN
    for causal, seqlen, one in ((False, 4096, True), (False, 2048, False), (True, low, True),
                                (True, low - 1, False), (True, 16384, True)):
        got = hopper_bwd.default_config(128, causal, seqlen, softcap=True)
        assert got.softcap_fold and got.dq_reduce == one == got.reduce_fixed, (causal, seqlen,
                                                                               got)
    assert not hopper_bwd.default_config(64, False, 16384, softcap=True).softcap_fold
    assert not hopper_bwd.default_config(128, False, 16384).softcap_fold
    monkeypatch.setenv(hopper_bwd.FIXED_ENV_VAR, "0")
    assert hopper_bwd.default_config(128, False, 16384) == configs.hopper_bwd_config(
        128, False, 16384)


@pytest.mark.parametrize("fixed", [False, True])
@pytest.mark.parametrize("expand", [False, True])
@pytest.mark.parametrize("prologue", [False, True])
def test_reduce_launcher_plumbing(monkeypatch, fixed, expand, prologue):
    """The launcher's host side with the reduce tiles (CPU tensors, launches captured;
    fixed_dq's kernels run under the interpreter): one dK/dV launch over batch x program
    heads and no dQ kernel; its accumulator zeroed, int32 for fixed point (fp32 racing);
    for fixed point each row's 2^e_i (from the bound of dO, K, V), and dq = the
    dequantised sum of what the kernel would have added (emulated: random integers)."""
    from flashtile.ops import fixed_dq

    launched = []

    def fake_launch(kernel, grid, device, *_, **kw):
        launched.append((kernel, grid, kw))
        if kw.get("DQ_REDUCE"):
            acc = kw["dq_desc"].base
            kw["acc_at_launch"] = acc.clone()
            if kw.get("DQ_FIXED"):  # as the int32 adds would
                acc.copy_(torch.randint(-2**30, 2**30, acc.shape, dtype=torch.int32))
            else:
                acc.copy_(torch.randn(acc.shape))

    monkeypatch.setattr(hopper_bwd, "launch", fake_launch)
    b, m, n, h, hkv, d = 2, 70, 200, 4, 2, 64
    q = torch.randn(b, m, h, d, dtype=torch.bfloat16)
    k, v = (torch.randn(b, n, hkv, d, dtype=torch.bfloat16) for _ in range(2))
    out, dout, lse = torch.randn_like(q), torch.randn_like(q), torch.randn(b, h, m)
    if prologue and not fixed:
        pytest.skip("fixed_prologue: with reduce_fixed")
    cfg = dataclasses.replace(configs.hopper_bwd_reduce_config(d, False, n, h // hkv,
                                                               fixed=fixed),
                              gqa_expand=expand, fixed_prologue=prologue)
    dq, dk, dv = (torch.full_like(t, float("nan")) for t in (q, k, v))
    hopper_bwd.hopper_attention_backward(dout, q, k, v, out, lse, None, False, dq, dk, dv,
                                         config=cfg)
    names = [kern.fn.__name__ for kern, *_ in launched]
    assert "_bwd_dq_kernel" not in names and names.count("_bwd_dkdv_kernel") == 1, names
    # the prologue (ops/fixed_dq's own launch, run here) replaces the preprocess
    assert any(n.startswith("_attn_bwd_preprocess") for n in names) != prologue, names
    _, grid, kw = launched[names.index("_bwd_dkdv_kernel")]
    assert grid[1] == b * (h if expand else hkv), grid
    acc = kw["dq_desc"].base
    assert acc.shape == q.shape and not kw["acc_at_launch"].any()
    assert acc.dtype == (torch.int32 if fixed else torch.float32)
    assert bool(kw.get("DQ_FIXED")) == fixed
    if not fixed:
        assert torch.equal(dq, acc.to(dq.dtype))
        return
    rows, heads = fixed_dq.bounds(dout, k, v, h // hkv, expand)  # (tests/test_fixed_dq.py)
    mult = reference.fixed_dq_mults(rows, heads, fixed_dq.scale_exponent(d**-0.5), h // hkv,
                                    expand)
    assert torch.equal(kw["FIXED"], mult)
    assert torch.equal(dq, (acc.float() / mult.transpose(1, 2)[..., None]).to(dq.dtype))


@pytest.mark.parametrize("custom_op", [False, True])
@pytest.mark.parametrize("deterministic", [False, True])
def test_deterministic_reaches_backward(monkeypatch, custom_op, deterministic):
    """flash_attn_func's ``deterministic`` arrives at flash.attention_backward, through
    the eager launchers and through the torch.library op (EAGER_FAST_PATH off)."""
    seen = []
    real = flash.attention_backward

    def spy(*args, **kwargs):
        seen.append(kwargs.get("deterministic"))
        return real(*args, **kwargs)

    monkeypatch.setattr(flash, "attention_backward", spy)
    monkeypatch.setattr(flash, "EAGER_FAST_PATH", not custom_op)
    q = torch.randn(1, 9, 2, 16, requires_grad=True)
    k = torch.randn(1, 11, 2, 16, requires_grad=True)
    v = torch.randn(1, 11, 2, 16, requires_grad=True)
    flashtile.flash_attn_func(q, k, v, deterministic=deterministic).sum().backward()
    assert seen == [deterministic]


# ----------------------------------------------------------------------------------
# GPU: numerics
# ----------------------------------------------------------------------------------


def _spy_config(monkeypatch, field):
    """The ``field`` of the config each Gluon backward launch runs with, in call order."""
    used = []
    real = hopper_bwd._launch_split

    def spy(*args, **kwargs):
        used.append(getattr(args[7], field))  # (q, k, v, dout, lse, delta, outs, cfg, ...)
        return real(*args, **kwargs)

    monkeypatch.setattr(hopper_bwd, "_launch_split", spy)
    monkeypatch.setattr(flash, "USE_PLANS", False)  # a plan's replay would skip the spy
    return used


SHAPES = [  # (batch, seqlen_q, seqlen_k, nheads, nheads_kv)
    (2, 1029, 1100, 8, 2),  # GQA 4:1, ragged ends, several query tiles per key tile
    (2, 70, 200, 4, 4),  # two query tiles, two key tiles
    (3, 1, 130, 4, 1),  # one query row, MQA
    (1, 4097, 4097, 4, 4),  # long loops, one row past the last full tile
    (2, 300, 40, 4, 2),  # causal: rows that see no key (dq 0)
]


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("expand", [False, True])
@pytest.mark.parametrize("late", [False, True])
def test_reduce_vs_reference(head_dim, causal, shape, expand, late, device):
    """The launcher with the reduce tiles (GQA through the group loop or the expanded
    programs; each dQ added at its step's end or, reduce_late, under the next step's S^T),
    NaN-filled gradient buffers: every element written, all three gradients within the
    DESIGN.md bound of the float64 reference."""
    require_sm90()
    batch, sq, sk, h, hkv = shape
    if expand and h == hkv:
        pytest.skip("gqa_expand needs GQA")
    cfg = dataclasses.replace(configs.hopper_bwd_reduce_config(head_dim, causal, sk, h // hkv),
                              gqa_expand=expand, reduce_late=late)
    q, k, v = make_qkv(batch, sq, sk, h, hkv, head_dim, torch.bfloat16, device,
                       seed=head_dim + sq + 3 * sk)
    dout = torch.randn_like(q)
    (grads,) = launcher_grads(q, k, v, dout, causal, [cfg], deterministic=False)
    checks = grad_ref_checks(grads, q, k, v, dout, causal)
    msg = "; ".join(map(str, checks))
    assert not any(g.isnan().any() for g in grads), "unwritten or NaN gradient: " + msg
    assert all(c.ok for c in checks), msg


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("left,softcap", [(None, 0.0), (100, 0.0), (None, 20.0), (300, 30.0)])
def test_reduce_public_api(head_dim, causal, left, softcap, device, monkeypatch):
    """flash_attn_func(deterministic=False) with FLASHTILE_HOPPER_BWD_REDUCE=1 runs the
    reduce tiles (spied) and its gradients are within the bound of the reference, with
    sliding windows and softcaps too; deterministic=True keeps the two-kernel tiles."""
    require_sm90()
    monkeypatch.setenv(hopper_bwd.REDUCE_ENV_VAR, "1")
    monkeypatch.setenv(hopper_bwd.ENV_VAR, "1")
    used = _spy_config(monkeypatch, "dq_reduce")
    window = (-1, -1) if left is None else (left, 0 if causal else -1)
    q, k, v = make_qkv(2, 1029, 1100, 8, 2, head_dim, torch.bfloat16, device,
                       seed=head_dim + (left or 0))
    dout = torch.randn_like(q)
    for deterministic in (False, True):
        inp = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        o = flashtile.flash_attn_func(*inp, causal=causal, window_size=window,
                                      softcap=softcap, deterministic=deterministic)
        grads = torch.autograd.grad(o, inp, dout)
        torch.cuda.synchronize()
        checks = grad_ref_checks(grads, q, k, v, dout, causal, window_size=window,
                             softcap=softcap)
        assert all(c.ok for c in checks), f"deterministic={deterministic}: " + "; ".join(
            map(str, checks))
    assert used == [True, False], used


def _reduce_case(head_dim, causal, shape, expand, salt, device, **kw):
    """(q, k, v, cfg) of a deterministic reduce test (sm_90 only): the reduce tiles with
    ``kw`` (ordered= / fixed=) and gqa_expand=``expand``; skips MHA shapes when expanding."""
    require_sm90()
    batch, sq, sk, h, hkv = shape
    if expand and h == hkv:
        pytest.skip("gqa_expand needs GQA")
    cfg = dataclasses.replace(configs.hopper_bwd_reduce_config(head_dim, causal, sk, h // hkv,
                                                               **kw),
                              gqa_expand=expand)
    q, k, v = make_qkv(batch, sq, sk, h, hkv, head_dim, torch.bfloat16, device,
                       seed=head_dim + sq + salt * sk)
    return q, k, v, cfg


def _assert_repeatable(q, k, v, causal, cfg):
    """Three launcher runs with ``cfg`` into NaN-filled buffers: every element written,
    within the DESIGN.md bound of the float64 reference, and bitwise equal."""
    dout = torch.randn_like(q)
    runs = launcher_grads(q, k, v, dout, causal, [cfg] * 3)
    checks = grad_ref_checks(runs[0], q, k, v, dout, causal)
    msg = "; ".join(map(str, checks))
    assert not any(g.isnan().any() for g in runs[0]), "unwritten or NaN gradient: " + msg
    assert all(c.ok for c in checks), msg
    for name, a, b, c in zip(("dq", "dk", "dv"), *runs):
        assert torch.equal(a, b) and torch.equal(a, c), f"{name} differs between runs"


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("shape", SHAPES[:4] + [(2, 100, 1000, 4, 4), (1, 333, 16384, 2, 1)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("expand", [False, True])
def test_ordered_vs_reference(head_dim, shape, expand, device):
    """The ordered reduce (deterministic): rotated query tiles, adds in a fixed order per
    tile, ties when there are fewer query tiles than key tiles (100 x 1000, 1 x 130),
    128 key tiles per head (16k keys); NaN-filled buffers, within the DESIGN.md bound of
    the float64 reference, and three runs bitwise equal."""
    q, k, v, cfg = _reduce_case(head_dim, False, shape, expand, 7, device, ordered=True)
    assert hopper_bwd.reduce_ordered_ok(q, k, False, None, cfg)
    _assert_repeatable(q, k, v, False, cfg)


@pytest.mark.gpu
def test_ordered_public_api_and_fallback(device, monkeypatch):
    """FLASHTILE_HOPPER_BWD_REDUCE_ORDERED=1: flash_attn_func's default (deterministic)
    backward runs the ordered reduce (spied), bitwise repeatable and within the bound;
    with more key tiles per head than SMs (all of a head's programs must be resident) it
    falls back to the two-kernel backward."""
    require_sm90()
    monkeypatch.setenv(hopper_bwd.ORDERED_ENV_VAR, "1")
    monkeypatch.setenv(hopper_bwd.ENV_VAR, "1")
    used = _spy_config(monkeypatch, "reduce_ordered")
    from flashtile.ops._common import sm_count

    too_many = 128 * sm_count(torch.device(device)) + 1  # one key tile more than SMs
    for sk, ordered in ((1100, True), (too_many, False)):
        q, k, v = make_qkv(1, 130, sk, 2, 2, 128, torch.bfloat16, device, seed=sk)
        dout = torch.randn_like(q)
        grads = []
        for _ in range(2):
            inp = [t.detach().clone().requires_grad_() for t in (q, k, v)]
            o = flashtile.flash_attn_func(*inp)
            grads.append(torch.autograd.grad(o, inp, dout))
        torch.cuda.synchronize()
        checks = grad_ref_checks(grads[0], q, k, v, dout, False)
        assert all(c.ok for c in checks), f"{sk} keys: " + "; ".join(map(str, checks))
        assert all(torch.equal(a, b) for a, b in zip(*grads)), f"{sk} keys: not repeatable"
        assert used[-2:] == [ordered, ordered], (sk, used)


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES + [(1, 333, 16384, 2, 1)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("expand", [False, True])
def test_fixed_vs_reference(head_dim, causal, shape, expand, device):
    """The fixed-point adds (reduce_fixed: int32 shares scaled by 2^e per program head,
    ops/fixed_dq.py): NaN-filled buffers, within the DESIGN.md bound of the float64
    reference (also at 16k keys, 128 shares per element), and three runs bitwise equal
    although the programs' adds race."""
    q, k, v, cfg = _reduce_case(head_dim, causal, shape, expand, 11, device, fixed=True)
    _assert_repeatable(q, k, v, causal, cfg)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("fixed", [False, True])
@pytest.mark.parametrize("shape", SHAPES[:2] + SHAPES[3:4], ids=lambda s: "x".join(map(str, s)))
def test_reduce_one_warpgroup(causal, fixed, shape, device):
    """The reduce tiles on one warpgroup of 64 keys at hd 64 (an A/B candidate of suite
    s26a: two programs per SM, 182 registers, 83 KB; not shipped), racing and fixed
    point: within the DESIGN.md bound of the float64 reference."""
    require_sm90()
    batch, sq, sk, h, hkv = shape
    cfg = dataclasses.replace(configs.hopper_bwd_reduce_config(64, causal, sk, h // hkv,
                                                               fixed=fixed),
                              block_n=64, num_warps=4)
    q, k, v = make_qkv(batch, sq, sk, h, hkv, 64, torch.bfloat16, device, seed=sq + 5 * sk)
    dout = torch.randn_like(q)
    (grads,) = launcher_grads(q, k, v, dout, causal, [cfg])
    checks = grad_ref_checks(grads, q, k, v, dout, causal)
    assert all(c.ok for c in checks), "; ".join(map(str, checks))


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("left,softcap", [(None, 0.0), (100, 0.0), (None, 20.0)])
def test_fixed_public_api(causal, left, softcap, device, monkeypatch):
    """FLASHTILE_HOPPER_BWD_REDUCE_FIXED=1: flash_attn_func's default (deterministic)
    backward runs the fixed-point adds (spied), with windows and softcaps, bitwise
    repeatable and within the bound; wide logits too."""
    require_sm90()
    monkeypatch.setenv(hopper_bwd.FIXED_ENV_VAR, "1")
    monkeypatch.setenv(hopper_bwd.ENV_VAR, "1")
    used = _spy_config(monkeypatch, "reduce_fixed")
    window = (-1, -1) if left is None else (left, 0 if causal else -1)
    q, k, v = make_qkv(2, 1029, 1100, 8, 2, 128, torch.bfloat16, device, kind="wide_logits",
                       seed=7 + (left or 0))
    dout = torch.randn_like(q)
    grads = []
    for _ in range(2):
        inp = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        o = flashtile.flash_attn_func(*inp, causal=causal, window_size=window, softcap=softcap)
        grads.append(torch.autograd.grad(o, inp, dout))
    torch.cuda.synchronize()
    checks = grad_ref_checks(grads[0], q, k, v, dout, causal, window_size=window,
                             softcap=softcap)
    assert all(c.ok for c in checks), "; ".join(map(str, checks))
    assert all(torch.equal(a, b) for a, b in zip(*grads)), "not repeatable"
    assert used == [True, True], used


@pytest.mark.gpu
@pytest.mark.parametrize("causal,left", [(False, 1024), (False, 100), (True, 1024)])
def test_window_dispatch_at_8k(causal, left, device, monkeypatch):
    """The shipped window dispatch, nothing forced: at hd 128 with 8k keys a non-causal
    windowed call's deterministic backward runs the fixed-point one-kernel (three
    loops), a causal one two kernels (spied); gradients within the bound of the fp64
    reference and bitwise repeatable; GQA 2:1, ragged query end."""
    require_sm90()
    for var in (hopper_bwd.FIXED_ENV_VAR, hopper_bwd.REDUCE_ENV_VAR,
                hopper_bwd.OVERRIDES_ENV_VAR):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv(hopper_bwd.ENV_VAR, "1")
    used = _spy_config(monkeypatch, "reduce_fixed")
    seqlen_k = configs.FIXED_WINDOW_MIN_SEQLEN
    window = (left, 0 if causal else -1)
    q, k, v = make_qkv(1, seqlen_k - 3, seqlen_k, 4, 2, 128, torch.bfloat16, device,
                       seed=left + causal)
    dout = torch.randn_like(q)
    grads = []
    for _ in range(2):
        inp = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        o = flashtile.flash_attn_func(*inp, causal=causal, window_size=window)
        grads.append(torch.autograd.grad(o, inp, dout))
    torch.cuda.synchronize()
    assert used == [not causal] * 2, used
    checks = grad_ref_checks(grads[0], q, k, v, dout, causal, window_size=window)
    assert all(c.ok for c in checks), "; ".join(map(str, checks))
    assert all(torch.equal(a, b) for a, b in zip(*grads)), "not repeatable"


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("expand", [False, True])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_fixed_prologue_bitwise(causal, expand, shape, device):
    """HopperBwdConfig.fixed_prologue (delta, the bounds and the zeroed int32 sum from one
    launch, ops/fixed_dq.prologue) changes no bit of dq, dk, dv against the launches
    it replaces, into NaN-filled buffers, GQA loop and expanded."""
    require_sm90()
    b, sq, sk, h, hkv = shape
    if expand and h == hkv:
        pytest.skip("expand needs GQA")
    base = dataclasses.replace(configs.hopper_bwd_reduce_config(128, causal, sk, h // hkv,
                                                                fixed=True),
                               gqa_expand=expand)
    assert base.fixed_prologue
    q, k, v = make_qkv(b, sq, sk, h, hkv, 128, torch.bfloat16, device, seed=11)
    dout = torch.randn_like(q)
    on, off = launcher_grads(q, k, v, dout, causal,
                             [base, dataclasses.replace(base, fixed_prologue=False)])
    for name, a, c in zip("dq dk dv".split(), on, off):
        assert not a.isnan().any(), name
        assert torch.equal(a, c), name


def _dkdv_launch_kwargs(monkeypatch):
    """(run, head_dim, seqlen) for the launcher's host side on small CPU tensors with the
    launches captured: run(cfg, causal=False, **kw) calls hopper_attention_backward
    (deterministic=False, ``kw`` e.g. left=) and returns the dK/dV launch's keywords."""
    launched = []
    monkeypatch.setattr(hopper_bwd, "launch", lambda kernel, grid, device, *_, **kw:
                        launched.append((kernel.fn.__name__, kw)))
    b, m, h, d = 1, 64, 2, 64
    q, k, v, out, dout = (torch.randn(b, m, h, d, dtype=torch.bfloat16) for _ in range(5))
    lse = torch.randn(b, h, m)

    def run(cfg, causal=False, **kw):
        launched.clear()
        grads = [torch.empty_like(t) for t in (q, k, v)]
        hopper_bwd.hopper_attention_backward(dout, q, k, v, out, lse, None, causal, *grads,
                                             config=cfg, deterministic=False, **kw)
        return next(kw for name, kw in launched if name == "_bwd_dkdv_kernel")

    return run, d, m


def test_dq_rotate_plumbing(monkeypatch):
    """HopperBwdConfig.dq_rotate reaches the dK/dV launch as DQ_ROT (non-causal, no window,
    racing or fixed-point adds) and raises before launch causal, with a window, with
    the ordered adds (whose own rotation it is) or on the two-kernel tiles."""
    run, d, m = _dkdv_launch_kwargs(monkeypatch)
    for fixed in (False, True):
        base = configs.hopper_bwd_reduce_config(d, False, m, 1, fixed=fixed)
        assert not run(base).get("DQ_ROT", False)
        kw = run(dataclasses.replace(base, dq_rotate=True))
        assert kw["DQ_ROT"] and bool(kw.get("DQ_FIXED")) == fixed
    rot = dataclasses.replace(configs.hopper_bwd_reduce_config(d, True, m, 1, fixed=True),
                              dq_rotate=True)
    with pytest.raises(ValueError, match="dq_rotate"):
        run(rot, causal=True)
    with pytest.raises(ValueError, match="dq_rotate"):
        run(dataclasses.replace(rot, one_loop=0), left=16)
    ordered = configs.hopper_bwd_reduce_config(d, False, m, 1, ordered=True)
    with pytest.raises(ValueError, match="dq_rotate"):
        run(dataclasses.replace(ordered, dq_rotate=True))
    with pytest.raises(ValueError, match="dq_rotate"):  # the two-kernel tiles
        run(dataclasses.replace(configs.hopper_bwd_config(d, False, m), dq_rotate=True))


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("shape", SHAPES[:4] + [(1, 333, 16384, 2, 1)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("expand", [False, True])
def test_dq_rotate(head_dim, shape, expand, device):
    """HopperBwdConfig.dq_rotate (non-causal): the query tiles visited in the rotated
    order. Fixed-point adds: dq bitwise equal to the unrotated kernel's (integer sums do
    not depend on the order), dk / dv within the DESIGN.md bound of the float64 reference
    (their fp32 sums run in another order), three runs bitwise equal; racing adds
    within the bound too; NaN-filled buffers, GQA loop and expanded, 128 key tiles."""
    q, k, v, cfg = _reduce_case(head_dim, False, shape, expand, 17, device, fixed=True)
    rot = dataclasses.replace(cfg, dq_rotate=True)
    _assert_repeatable(q, k, v, False, rot)
    dout = torch.randn_like(q)
    on, off = launcher_grads(q, k, v, dout, False, [rot, cfg])
    assert torch.equal(on[0], off[0]), "dq: the rotated order changed the integer sums"
    racing = dataclasses.replace(configs.hopper_bwd_reduce_config(head_dim, False, shape[2],
                                                                  shape[3] // shape[4]),
                                 gqa_expand=expand, dq_rotate=True)
    (grads,) = launcher_grads(q, k, v, dout, False, [racing], deterministic=False)
    checks = grad_ref_checks(grads, q, k, v, dout, False)
    assert not any(g.isnan().any() for g in grads), "; ".join(map(str, checks))
    assert all(c.ok for c in checks), "; ".join(map(str, checks))


def test_dq_stage2_plumbing(monkeypatch):
    """HopperBwdConfig.dq_stage2 reaches the dK/dV launch as DQ_STAGE2 (with dq_reduce
    only) and counts its second staging tile in smem_bytes."""
    run, d, m = _dkdv_launch_kwargs(monkeypatch)
    base = configs.hopper_bwd_reduce_config(d, False, m, 1)
    for stage2 in (False, True):
        cfg = dataclasses.replace(base, dq_stage2=stage2)
        kw = run(cfg)
        assert kw.get("DQ_STAGE2", False) == stage2, kw.keys()
    plain = configs.hopper_bwd_config(d, False, m)
    assert dataclasses.replace(plain, dq_stage2=True).smem_bytes(d) == plain.smem_bytes(d)
    extra = cfg.smem_bytes(d)[0] - base.smem_bytes(d)[0]
    assert extra == 4 * base.block_m * d, extra  # one more fp32 BLOCK_M x d tile


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_dq_stage2(causal, head_dim, shape, device):
    """HopperBwdConfig.dq_stage2 (two dQ staging tiles, a CTA barrier per step fewer):
    with fixed-point adds dq / dk / dv bitwise equal to the single tile's; with racing
    adds within the DESIGN.md bound of the float64 reference; NaN-filled buffers."""
    require_sm90()
    b, sq, sk, h, hkv = shape
    q, k, v = make_qkv(b, sq, sk, h, hkv, head_dim, torch.bfloat16, device, seed=13)
    dout = torch.randn_like(q)
    fixed = configs.hopper_bwd_reduce_config(head_dim, causal, sk, h // hkv, fixed=True)
    on, off = launcher_grads(q, k, v, dout, causal,
                             [dataclasses.replace(fixed, dq_stage2=True), fixed])
    for name, a, c in zip("dq dk dv".split(), on, off):
        assert not a.isnan().any(), name
        assert torch.equal(a, c), name
    racing = dataclasses.replace(configs.hopper_bwd_reduce_config(head_dim, causal, sk,
                                                                  h // hkv), dq_stage2=True)
    (grads,) = launcher_grads(q, k, v, dout, causal, [racing], deterministic=False)
    checks = grad_ref_checks(grads, q, k, v, dout, causal)
    assert all(c.ok for c in checks), "; ".join(map(str, checks))


@pytest.mark.gpu
def test_fixed_nonfinite(device):
    """A NaN in dO makes its row's multiplier NaN, so that row's dQ is NaN (as fp32 adds
    would make it) and no other row's: the multipliers are per row, the int32 sum of the
    NaN row dequantises to NaN. dK of its key head is NaN (the row's dS reaches every
    key), dV there only in dO's NaN column; the other key head's stay finite."""
    require_sm90()
    cfg = configs.hopper_bwd_reduce_config(128, False, 1100, 2, fixed=True)
    q, k, v = make_qkv(1, 300, 1100, 4, 2, 128, torch.bfloat16, device, seed=5)
    dout = torch.randn_like(q)
    dout[0, 17, 3, 9] = float("nan")  # query head 3: key head 1
    ((dq, dk, dv),) = launcher_grads(q, k, v, dout, False, [cfg])
    assert dq[0, 17, 3].isnan().all(), "the NaN row's dQ is not NaN"
    finite = torch.ones(dq.shape[:3], dtype=torch.bool, device=dq.device)
    finite[0, 17, 3] = False
    assert torch.isfinite(dq[finite]).all(), "a NaN reached another row's dQ"
    assert dk[:, :, 1].isnan().all()  # dS of row 17 is NaN: it reaches every key
    assert dv[:, :, 1, 9].isnan().all()  # dV = P^T dO: only dO's NaN column
    assert torch.isfinite(dv[:, :, 1, :9]).all() and torch.isfinite(dv[:, :, 1, 10:]).all()
    assert torch.isfinite(dk[:, :, 0]).all() and torch.isfinite(dv[:, :, 0]).all()


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("kernel", ["two-kernel", "fixed", "racing"])
@pytest.mark.parametrize("one_loop", [1, 2])
@pytest.mark.parametrize("shape", SHAPES[:2] + SHAPES[3:] + [(1, 333, 16384, 2, 1)],
                         ids=lambda s: "x".join(map(str, s)))
def test_one_loop_causal(head_dim, kernel, one_loop, shape, device):
    """HopperBwdConfig.one_loop (the causal band's masked steps and the rest in one loop,
    the mask on every step or behind a branch on band steps): the same arithmetic as two
    loops, so deterministic kernels (the two-kernel backward, the fixed-point adds) give
    gradients bitwise equal to the two-loop build's, and the racing adds stay within the
    DESIGN.md bound of the float64 reference; NaN-filled buffers, every element written."""
    require_sm90()
    batch, sq, sk, h, hkv = shape
    if kernel == "two-kernel":
        base = configs.hopper_bwd_config(head_dim, True, sk, h // hkv)
    else:
        base = configs.hopper_bwd_reduce_config(head_dim, True, sk, h // hkv,
                                                fixed=kernel == "fixed")
    cfgs = [base, dataclasses.replace(base, one_loop=one_loop)]
    q, k, v = make_qkv(batch, sq, sk, h, hkv, head_dim, torch.bfloat16, device,
                       seed=head_dim + sq + 7 * sk + one_loop)
    dout = torch.randn_like(q)
    runs = launcher_grads(q, k, v, dout, True, cfgs, deterministic=kernel != "racing")
    checks = grad_ref_checks(runs[1], q, k, v, dout, True)
    msg = "; ".join(map(str, checks))
    assert not any(g.isnan().any() for g in runs[1]), "unwritten or NaN gradient: " + msg
    assert all(c.ok for c in checks), msg
    if kernel != "racing":
        for name, a, b in zip(("dq", "dk", "dv"), *runs):
            assert torch.equal(a, b), f"{name} differs from the two-loop build's"


TAIL_SHAPES = [(2, 1029, 1100, 8, 2), (1, 4097, 4097, 4, 4), (2, 700, 1000, 4, 4),
               (1, 333, 16384, 2, 1)]


def _tail_cfg(cfg, shape):
    """``cfg`` with tail_split 4 on the fewest SMs (from 3) for which the plan splits this
    shape's dK/dV launch (ops/tail_split.plan)."""
    from flashtile.ops import tail_split

    batch, sq, sk, h, hkv = shape
    heads = batch * (h if cfg.gqa_expand else hkv)
    programs = -(-sk // cfg.block_n) * heads
    n_m = -(-sq // cfg.block_m)
    slots = next(s for s in range(3, programs + 1)
                 if tail_split.plan(programs, s, n_m, 4)[0])
    return dataclasses.replace(cfg, tail_split=4, tail_slots=slots)


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("shape", TAIL_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("expand", [False, True])
def test_tail_split_vs_reference(head_dim, shape, expand, device, monkeypatch):
    """HopperBwdConfig.tail_split (the last tiles in pieces, their dK / dV partials summed
    by ops/tail_split.combine), on a few SMs so that these shapes split: fixed-point dq
    bitwise equal to the unsplit kernel's (integer sums), dk / dv within the DESIGN.md
    bound of the float64 reference (a ragged last key tile among the pieces), three runs
    bitwise equal; racing adds within the bound; NaN-filled buffers, GQA loop and
    expanded. The combine is spied: the pieces ran."""
    from flashtile.ops import tail_split

    q, k, v, cfg = _reduce_case(head_dim, False, shape, expand, 19, device, fixed=True)
    tail = _tail_cfg(cfg, shape)
    calls = []
    real = tail_split.combine
    monkeypatch.setattr(tail_split, "combine", lambda *a: calls.append(a[1]) or real(*a))
    _assert_repeatable(q, k, v, False, tail)
    assert calls and min(calls) >= 2, calls
    dout = torch.randn_like(q)
    on, off = launcher_grads(q, k, v, dout, False, [tail, cfg])
    assert torch.equal(on[0], off[0]), "dq: the pieces changed the integer sums"
    racing = _tail_cfg(dataclasses.replace(
        configs.hopper_bwd_reduce_config(head_dim, False, shape[2], shape[3] // shape[4]),
        gqa_expand=expand), shape)
    (grads,) = launcher_grads(q, k, v, dout, False, [racing], deterministic=False)
    checks = grad_ref_checks(grads, q, k, v, dout, False)
    assert not any(g.isnan().any() for g in grads), "; ".join(map(str, checks))
    assert all(c.ok for c in checks), "; ".join(map(str, checks))


@pytest.mark.gpu
@pytest.mark.parametrize("seqlen", [4096, 16384])
def test_tail_split_at_the_bench_shape(seqlen, device, monkeypatch):
    """The DESIGN.md hd 128 shape (16k tokens, 16 heads) on the device's own SM count:
    tail_split 8 against 0 through the launcher, the plan's split taken (spied), dq
    bitwise equal, dk / dv within two bf16 units of the unsplit kernel's (fp32 partial
    sums added in another grouping)."""
    from flashtile.ops import tail_split

    require_sm90()
    batch = 16384 // seqlen
    q, k, v = make_qkv(batch, seqlen, seqlen, 16, 16, 128, torch.bfloat16, device, seed=23)
    cfg = configs.hopper_bwd_reduce_config(128, False, seqlen, fixed=True)
    calls = []
    real = tail_split.combine
    monkeypatch.setattr(tail_split, "combine", lambda *a: calls.append(a[1]) or real(*a))
    dout = torch.randn_like(q)
    on, off = launcher_grads(q, k, v, dout, False,
                             [dataclasses.replace(cfg, tail_split=8, tail_slots=None), cfg])
    assert calls, "the plan did not split at this shape on this device"
    assert torch.equal(on[0], off[0])
    for name, a, b in zip(("dk", "dv"), on[1:], off[1:]):
        assert not a.isnan().any(), name
        torch.testing.assert_close(a.float(), b.float(), rtol=2**-7,
                                   atol=1e-3 * b.abs().max().item(),
                                   msg=lambda m, n=name: f"{n}: {m}")


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(2, 4096, 4096, 8, 8), (1, 4097, 4100, 6, 2)],
                         ids=lambda s: "x".join(map(str, s)))
def test_causal_tile_major_blocks(shape, device):
    """The causal one-kernel backward at hd 128 from 4k keys launches tile-major in blocks
    of REDUCE_TILE_HEADS heads (configs.REDUCE_TILE_MAJOR_CAUSAL): each program's sums
    are unchanged by the launch order, so with fixed-point dq all three gradients are
    bitwise those of the head-major launch (a last block of fewer heads: 6 heads in
    blocks of 4), NaN-filled buffers; within the DESIGN.md bound of the reference."""
    require_sm90()
    batch, sq, sk, h, hkv = shape
    cfg = configs.hopper_bwd_reduce_config(128, True, sk, h // hkv, fixed=True)
    assert cfg.tile_major and cfg.tile_heads == configs.REDUCE_TILE_HEADS, cfg
    q, k, v = make_qkv(batch, sq, sk, h, hkv, 128, torch.bfloat16, device, seed=29)
    dout = torch.randn_like(q)
    on, off = launcher_grads(q, k, v, dout, True,
                             [cfg, dataclasses.replace(cfg, tile_major=False)])
    for name, a, b in zip(("dq", "dk", "dv"), on, off):
        assert not a.isnan().any(), name
        assert torch.equal(a, b), name
    checks = grad_ref_checks(on, q, k, v, dout, True)
    assert all(c.ok for c in checks), "; ".join(map(str, checks))


# ----------------------------------------------------------------------------------
# dq_finish: the int32 sum dequantized by finishing programs of the dK/dV launch
# ----------------------------------------------------------------------------------


def _finish_twin(acc, mult, dq, grid, n_rows, qpr, n_f, rows=128):
    """ops/hopper_bwd._finish_dq over every finishing program, transcribed: the units
    each program takes, in the order it takes them (returned), and their dQ written."""
    batch, seqlen_q, nheads, _ = acc.shape
    n_x, n_y = grid
    n_mb = -(-seqlen_q // rows)
    units = n_rows * qpr * n_mb
    order = []
    for f in range((n_y - n_rows) * n_x):
        for u in range(min((f * units) // n_f, units), min(((f + 1) * units) // n_f, units)):
            bh = u // n_mb
            b, h = divmod(bh, nheads)
            lo = (u - bh * n_mb) * rows
            hi = min(seqlen_q, lo + rows)
            dq[b, lo:hi, h] = (acc[b, lo:hi, h].float()
                               / mult[b, h, lo:hi, None]).to(dq.dtype)
            order.append((f, bh // qpr, u))
    return order


@pytest.mark.parametrize("shape,expand,programs", [
    ((2, 700, 1000, 4, 2), False, 0), ((2, 700, 1000, 4, 2), True, 5),
    ((1, 129, 64, 2, 1), False, 1000), ((1, 129, 64, 2, 1), True, 0),
    ((3, 1, 500, 6, 3), False, 5), ((3, 1, 500, 6, 3), True, 1000)],
    ids=lambda x: "x".join(map(str, x)) if isinstance(x, tuple) else str(x))
def test_dq_finish_plumbing(monkeypatch, shape, expand, programs):
    """The launcher with dq_finish (CPU tensors, the dK/dV launch captured, its int32 sum
    filled with random values and its finishing programs emulated by a transcription of
    ``_finish_dq``): the grid gains finishing rows after the key tiles' (one program on
    a CPU tensor's one "SM"), FINISH with the sum, dq's strides, zeroed per-row counters
    and the key-tile row count reach the kernel, no dequantize launch follows;
    finish_programs sets how many finishing programs share the units (rows enough for
    them; more programs than units too); the finishing programs cover every (query head,
    128 rows) unit once, each program a contiguous run in head order, and write dq = sum
    / 2^e_i everywhere (NaN-filled)."""
    launched = []
    dequantized = []
    monkeypatch.setattr(hopper_bwd.fixed_dq, "dequantize",
                        lambda *a: dequantized.append(a))

    def fake_launch(kernel, grid, device, *args, **kw):
        launched.append((kernel.fn.__name__, grid, kw))
        if kernel.fn.__name__ == "_bwd_dkdv_kernel":
            kw["DQ_SUM"].copy_(torch.randint(-2**30, 2**30, kw["DQ_SUM"].shape))

    monkeypatch.setattr(hopper_bwd, "launch", fake_launch)
    b, m, n, h, hkv = shape
    d = 64
    q = torch.randn(b, m, h, d, dtype=torch.bfloat16)
    k, v = (torch.randn(b, n, hkv, d, dtype=torch.bfloat16) for _ in range(2))
    out, dout, lse = torch.randn_like(q), torch.randn_like(q), torch.randn(b, h, m)
    cfg = dataclasses.replace(configs.hopper_bwd_reduce_config(d, False, n, h // hkv,
                                                                fixed=True),
                              gqa_expand=expand, dq_finish=True,
                              finish_programs=programs)
    grads = [torch.full_like(t, float("nan")) for t in (q, k, v)]
    dq_t = torch.full((b, h, m, d), float("nan"), dtype=q.dtype).transpose(1, 2)  # strided
    grads[0] = dq_t
    hopper_bwd.hopper_attention_backward(dout, q, k, v, out, lse, None, False, *grads,
                                         config=cfg)
    grid, kw = next((g, kw) for name, g, kw in launched if name == "_bwd_dkdv_kernel")
    n_kt = -(-n // cfg.block_n)
    rows = b * (h if expand and h != hkv else hkv)
    n_fin = programs or 1  # (one "SM" on a CPU tensor)
    assert grid == (n_kt, rows + -(-n_fin // n_kt)), grid
    assert kw["FINISH"] and kw["n_rows"] == rows and kw["DQ_OUT"] is dq_t
    assert kw["n_fin"] == n_fin
    assert (kw["s_dqb"], kw["s_dqm"], kw["s_dqh"], kw["s_dqd"]) == dq_t.stride()
    assert kw["DONE"].shape == (rows,) and not kw["DONE"].any()
    assert not dequantized
    qpr = 1 if expand and h != hkv else h // hkv
    ref = torch.full_like(dq_t, float("nan"))
    order = _finish_twin(kw["DQ_SUM"], kw["FIXED"], ref, grid, rows, qpr, n_fin)
    assert sorted(u for *_, u in order) == list(range(len(order)))
    assert [y for _, y, _ in order] == sorted(y for _, y, _ in order)  # head order
    assert not ref.isnan().any()
    want = (kw["DQ_SUM"].float() / kw["FIXED"].permute(0, 2, 1)[..., None]).to(q.dtype)
    assert torch.equal(ref, want)


@pytest.mark.gpu
@pytest.mark.parametrize("case", [(2, 4096, 4096, 8, 8, False, False, 0),
                                  (1, 4097, 4100, 6, 2, True, False, 0),
                                  (2, 1029, 1100, 8, 2, False, False, 0),
                                  (2, 1029, 1100, 8, 2, False, True, 0),
                                  (1, 300, 333, 4, 4, True, False, 0),
                                  (2, 4096, 4096, 8, 8, True, False, 7)],
                         ids=lambda c: "x".join(map(str, c)))
def test_dq_finish(case, device):
    """HopperBwdConfig.dq_finish: the finishing programs' dq is bitwise the dequantize
    launch's (the same fp32 division and cast), and dk / dv are unchanged; MHA, GQA in a
    group loop and expanded, causal tile-major blocks, ragged rows, a short key range
    (3 key tiles: many finishing rows per SM count), 7 finishing programs
    (finish_programs); NaN-filled buffers; against the float64 reference within the
    DESIGN.md bound; repeated runs bitwise equal."""
    require_sm90()
    batch, sq, sk, h, hkv, causal, expand, programs = case
    cfg = dataclasses.replace(configs.hopper_bwd_reduce_config(128, causal, sk, h // hkv,
                                                               fixed=True),
                              gqa_expand=expand)
    q, k, v = make_qkv(batch, sq, sk, h, hkv, 128, torch.bfloat16, device, seed=31)
    dout = torch.randn_like(q)
    fin = dataclasses.replace(cfg, dq_finish=True, finish_programs=programs)
    on, again, off = launcher_grads(q, k, v, dout, causal,
                                    [fin, fin, dataclasses.replace(cfg, dq_finish=False)])
    for name, a, c, r in zip(("dq", "dk", "dv"), on, off, again):
        assert not a.isnan().any(), name
        assert torch.equal(a, c), name
        assert torch.equal(a, r), name
    checks = grad_ref_checks(on, q, k, v, dout, causal)
    assert all(c.ok for c in checks), "; ".join(map(str, checks))
