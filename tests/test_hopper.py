"""The Gluon Hopper forward (ops/hopper_fwd.py).

CPU (every CI run): cross-compilation for sm_90 of every shipped config (Gluon kernels
cannot run under the interpreter) and the dispatch predicate. GPU (``gpu`` marker, an
H200 through scripts/gpu_check.sh hopper): the Gluon path against the float64 reference
with the DESIGN.md tolerance, against the portable path, stages A, B and C (the opt-in
ping-pong schedule) each against the reference. ``FLASHTILE_HOPPER_SCHEDULE=C`` runs the
whole grid (test_hopper_vs_reference) on stage C.
"""

import dataclasses
import math
import os

import pytest
import torch

import flashtile
from conftest import HAS_CUDA
from flashtile import configs, reference
from flashtile.ops import flash, hopper_fwd
from flashtile.validate import Case, check_close, make_qkv, run_case
from sm90 import (
    IS_SM90,
    assert_sm90_build,
    compile_records,
    compile_script,
    require_sm90,
)

_SCRIPT = compile_script()
VARIANTS = [name for name, *_ in _SCRIPT.hopper_variants()]
# CI builds the core tier; the extended one (compile_sm90.EXTENDED_FWD: opt-in and
# unreachable variants) runs under the slow mark: pytest -m slow -k compiles_extended
CORE = [n for n in VARIANTS if _SCRIPT.variant_tier(n) == "core"]
EXTENDED = [n for n in VARIANTS if _SCRIPT.variant_tier(n) == "extended"]


# ----------------------------------------------------------------------------------
# CPU: cross-compilation for sm_90
# ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compiled():
    """Compile every core variant once (tests/sm90.py: a child process without
    TRITON_INTERPRET)."""
    return compile_records("--hopper", "--tier", "core")


@pytest.fixture(scope="module")
def compiled_extended():
    """The extended tier's variants, compiled once."""
    return compile_records("--hopper", "--tier", "extended")


def test_variant_tiers():
    """Every variant sits in one tier; the extended tier names only variants no shipped
    call reaches: none of the shipped configs' builds (hopper_fwd_config_c's hd 128 /
    256 split rings, the one-shot stage C, stage A) is in it."""
    assert sorted(CORE + EXTENDED) == sorted(VARIANTS) and CORE and EXTENDED
    for shipped in ("hopper-Cp-split-lag d128 bfloat16", "hopper-Cp-split-paired d128-causal "
                    "bfloat16", "hopper-Cp-split-noO d256 bfloat16", "hopper-C d128-causal "
                    "bfloat16", "hopper d64 bfloat16", "hopper-Cp-split-window d128 bfloat16"):
        assert shipped in CORE, shipped


@pytest.mark.slow
@pytest.mark.parametrize("name", EXTENDED)
def test_compiles_extended_for_sm90(name, compiled_extended):
    """test_compiles_for_sm90's checks on the extended tier."""
    check_build(name, compiled_extended.get(name))


@pytest.mark.parametrize("name", CORE)
def test_compiles_for_sm90(name, compiled):
    """check_build on the core tier: what CI builds."""
    check_build(name, compiled.get(name))


def check_build(name, rec):
    """Builds for sm_90 with wgmma and TMA, no spills or local memory (a register-capped
    config: its cap kept, at most 64 bytes spilled), and fits the H100/H200 shared memory
    (227 KB per block)."""
    if rec is not None and "max_regs=128" in rec["config"] and "warp_specialize=False" in rec[
            "config"]:
        # a capped stage A (two programs per SM): within the cap, a few spilled words; with
        # a sliding window's left-edge loop, 192 bytes (ptxas, session 11)
        assert_sm90_build(name, rec, max_spill=256 if "window" in name else 64)
        assert int(rec["regs"]) <= 128, f"{name}: {rec}"
    elif name.endswith("bits-ws"):  # causal: 16 bytes spilled before the loops (ptxas)
        assert_sm90_build(name, rec, max_spill=32)
    elif name.startswith("hopper-Cp"):
        # the persistent stage C: 0-40 bytes of values computed before the partitions
        # split, stored once and reloaded per work item, none in the step loops (ptxas and
        # SASS, sm_90, session 20)
        assert_sm90_build(name, rec, max_spill=48)
    elif name.startswith("hopper-dropout d128") and name.endswith(" bits"):
        # hd 128 writing the bit blocks at 255 registers: one word spilled in the step
        # loop (one STL / LDL pair a step; ptxas, session 19)
        assert_sm90_build(name, rec, max_spill=16)
    else:
        assert_sm90_build(name, rec)
    if "warp_specialize=True" in rec["config"]:
        assert rec["setmaxnreg"], f"{name}: warp-specialised but no register reallocation"
    # varlen: the dense kernel plus four device-side descriptors (128 bytes each); dense
    # launches build none
    assert rec["scratch"] == (512 if rec["varlen"] else 0), f"{name}: {rec}"
    if name.endswith("bits-ws"):
        # the dropout partition (4 warps at 96 registers) beside 2 consumer warpgroups
        assert rec["warps"] == 12 and 96 in rec["nreg"], f"{name}: {rec}"
    if "pingpong=True" in rec["config"]:
        # stage C: 2 consumer warpgroups + the producer (padded to a warpgroup), the
        # consumers raised to 240 registers, PV left in flight across the next softmax
        assert rec["warps"] == 12 and 240 in rec["nreg"], f"{name}: {rec}"
        assert rec["overlap"], f"{name}: no wgmma wait with a group left in flight: {rec}"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("block_rows,block_cols", [(128, None), (64, None), (64, 32)])
def test_tma_desc_fields(dtype, block_rows, block_cols):
    """_gluon_common.tma_desc skips TensorDescriptor's own validation for speed: its
    fields must be the ones the validating constructor sets (padded and strided views
    included), and its layout the one get_default_for gives."""
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    from flashtile.ops._gluon_common import GL_DTYPES, tma_desc

    base = torch.zeros(2, 300, 6, 80, dtype=dtype)
    for x in (base[..., :64], base[:, :257, :4, :64].transpose(1, 1), torch.ones(1, 5, 3, 64,
                                                                                dtype=dtype)):
        got = tma_desc(x, block_rows, block_cols)
        block = [1, block_rows, 1, block_cols or x.shape[-1]]
        want = TensorDescriptor(x, list(x.shape), list(x.stride()), block,
                                gl.NVMMASharedLayout.get_default_for(block, GL_DTYPES[dtype]))
        assert got.base is x and type(got) is TensorDescriptor
        for field in ("shape", "strides", "block_shape", "layout", "padding"):
            assert getattr(got, field) == getattr(want, field), field


@pytest.mark.parametrize("config_fn", [configs.hopper_fwd_config, configs.hopper_fwd_config_c])
def test_configs_fit_smem(config_fn):
    for hd in hopper_fwd.HOPPER_HEAD_DIMS:
        for causal in (False, True):
            cfg = config_fn(hd, causal, 4096)
            assert cfg.block_m == 16 * cfg.num_warps, cfg
            assert cfg.smem_bytes(hd) <= 227 * 1024, (hd, cfg, cfg.smem_bytes(hd))


def test_schedule_table():
    """Every shipped schedule is a known one; the portable kernel is chosen where the
    table says (default_config None), and the other schedules get their own tiles."""
    for hd in hopper_fwd.HOPPER_HEAD_DIMS:
        for causal in (False, True):
            for seqlen in (1, 512, 1024, 4096, 16384, 65536):
                sched = configs.hopper_fwd_schedule(hd, causal, seqlen)
                assert sched in ("A", "B", "C", "portable"), (hd, causal, seqlen, sched)
                cfg = hopper_fwd.default_config(hd, causal, seqlen)
                if sched == "portable":
                    assert cfg is None
                else:
                    assert cfg.schedule == sched, (hd, causal, seqlen, cfg)
    # the measured choices (configs.py comments, benchmarks/results.md 836b108, fbfae63)
    assert configs.hopper_fwd_schedule(64, False, 4096) == "A"
    assert configs.hopper_fwd_schedule(64, False, 512) == "portable"
    assert configs.hopper_fwd_schedule(64, True, 511) == "portable"
    # hd 64 causal from 512 to 1k: stage A on 64 x 64 tiles, ring 3 capped (s32a: +15%)
    short64 = hopper_fwd.default_config(64, True, 512)
    assert (short64.block_m, short64.block_n, short64.num_stages, short64.max_regs) == (
        64, 64, 3, 128)
    assert hopper_fwd.default_config(64, True, 1023).block_m == 64
    assert hopper_fwd.default_config(64, True, 1024).block_m == 128
    assert configs.hopper_fwd_schedule(64, True, 4096) == "A"
    assert configs.hopper_fwd_schedule(64, True, 16384) == "A"
    assert hopper_fwd.default_config(64, True, 4096).max_regs == 128  # two programs / SM
    assert configs.hopper_fwd_schedule(128, False, 4096) == "C"
    assert configs.hopper_fwd_schedule(128, True, 16384) == "C"
    # causal below 2k: stage A on 64 x 64 tiles (s31i: 373 against stage C's 352 at 1k),
    # C from 2k
    assert configs.hopper_fwd_schedule(128, True, 1024) == "A"
    assert configs.hopper_fwd_schedule(128, True, 2047) == "A"
    assert configs.hopper_fwd_schedule(128, True, 2048) == "C"
    short = hopper_fwd.default_config(128, True, 1024)
    assert (short.block_m, short.block_n, short.num_warps, short.num_stages) == (64, 64, 4, 2)
    assert hopper_fwd.default_config(128, True, 512).block_m == 64  # s31k: +26% at 512
    # non-causal from 512 to 1k: stage A on 64 x 64 tiles (s32a: +34% over portable)
    assert hopper_fwd.default_config(128, False, 511) is None  # portable
    short128 = hopper_fwd.default_config(128, False, 512)
    assert (short128.schedule, short128.block_m, short128.block_n, short128.num_stages) == (
        "A", 64, 64, 2)
    assert hopper_fwd.default_config(128, False, 1023).block_m == 64
    assert configs.hopper_fwd_dropout_config(128, True, 1024).block_m == 128
    assert configs.hopper_fwd_schedule(128, False, 1024) == "C"
    # stage C's persistent grid with the split ring at hd 128: causal below 16k, paired
    # (s21a / s21b), one-shot from 16k; non-causal at every length (16k since session 43,
    # s43c / s43d) on K ring 2 / V ring 3 (s22a), with the O store's wait deferred and the
    # next Q loaded before the last PV (o_lag / q_early, s43b-s43d; causal they lost)
    for causal, s in ((False, 1024), (False, 8192), (False, 16384), (True, 1024),
                      (True, 8192)):
        cfg = configs.hopper_fwd_config_c(128, causal, s)
        assert cfg.persistent and cfg.paired == causal
        assert (cfg.num_stages, cfg.v_stages) == ((3, 2) if causal else (2, 3))
        assert cfg.o_lag == cfg.q_early == (not causal)
    cfg = configs.hopper_fwd_config_c(128, True, 16384)
    assert not (cfg.persistent or cfg.v_stages or cfg.paired or cfg.o_lag or cfg.q_early)
    # hd 256: stage C from 1k on the persistent grid's split ring without O buffers (K 2 /
    # V 3, paired when causal; s33e), stage A below
    for causal in (False, True):
        assert configs.hopper_fwd_schedule(256, causal, 1023) == "A"
        for s in (1024, 4096, 16384):
            assert configs.hopper_fwd_schedule(256, causal, s) == "C"
            cfg = configs.hopper_fwd_config_c(256, causal, s)
            assert (cfg.persistent, cfg.paired, cfg.o_stage) == (True, causal, False)
            assert (cfg.num_stages, cfg.v_stages) == (2, 3)
            assert cfg.smem_bytes(256) <= 227 * 1024
            assert cfg.one_shot().smem_bytes(256) <= cfg.smem_bytes(256)


def test_stage_c_config_checked():
    with pytest.raises(ValueError, match="stage C"):
        configs.HopperFwdConfig(128, 128, 8, 2, warp_specialize=False, pingpong=True)
    with pytest.raises(ValueError, match="stage C"):
        configs.HopperFwdConfig(64, 128, 4, 2, warp_specialize=True, pingpong=True)
    with pytest.raises(ValueError, match="persistent"):
        configs.HopperFwdConfig(128, 128, 8, 2, warp_specialize=True, persistent=True)
    with pytest.raises(ValueError, match="persistent grid"):
        configs.HopperFwdConfig(128, 128, 8, 3, warp_specialize=True, pingpong=True,
                                v_stages=2)
    with pytest.raises(ValueError, match="persistent grid"):
        configs.HopperFwdConfig(128, 128, 8, 3, warp_specialize=True, pingpong=True,
                                paired=True)
    # the split ring's shared memory: Q, K ring 3, V ring 2, O (hd 128: 224 KB)
    split = configs.HopperFwdConfig(128, 128, 8, 3, warp_specialize=True, pingpong=True,
                                    persistent=True, v_stages=2)
    assert split.smem_bytes(128) == (2 * 128 + 5 * 128) * 128 * 2 <= 227 * 1024
    # the one-shot grid (varlen, odd causal tile counts, the switch) shares one ring as
    # deep as the deeper of the split ring's two, in the same shared memory
    k2v3 = dataclasses.replace(split, num_stages=2, v_stages=3)
    for cfg in (split, k2v3):
        one = cfg.one_shot()
        assert (one.num_stages, one.v_stages, one.persistent) == (3, 0, False)
        assert one.smem_bytes(128) <= cfg.smem_bytes(128)
        assert cfg.one_shot_stages == one.num_stages == one.one_shot_stages
    # hd 256: the split ring without the O buffers (o_stage=False), K 2 / V 3 in 224 KB
    no_o = configs.HopperFwdConfig(128, 64, 8, 2, warp_specialize=True, pingpong=True,
                                   persistent=True, v_stages=3, o_stage=False)
    assert no_o.smem_bytes(256) == (128 + 5 * 64) * 256 * 2 <= 227 * 1024
    assert dataclasses.replace(no_o, o_stage=True).smem_bytes(256) > 227 * 1024
    # its one-shot grid: a shared ring of 2 (a ring of 3 beside Q would take 256 KB)
    assert no_o.one_shot().o_stage and no_o.one_shot().num_stages == 2
    assert no_o.one_shot_stages == 2
    assert dataclasses.replace(no_o.one_shot(), num_stages=3).smem_bytes(256) > 227 * 1024
    with pytest.raises(ValueError, match="o_stage"):
        configs.HopperFwdConfig(128, 64, 8, 2, warp_specialize=True, pingpong=True,
                                persistent=True, o_stage=False)


def test_persistent_kernel_choice(monkeypatch):
    """Stage C's persistent grid runs where its config asks (or the switch forces it),
    never for varlen launches; the one-shot stage C kernel otherwise."""
    monkeypatch.delenv("FLASHTILE_HOPPER_C_PERSISTENT", raising=False)
    cfg = configs.hopper_fwd_config_c(128, True, 16384)  # (causal from 16k: one-shot)
    on = dataclasses.replace(cfg, persistent=True)
    assert hopper_fwd._kernel_args(cfg)[0] is hopper_fwd._fwd_c_kernel
    assert hopper_fwd._kernel_args(on)[0] is hopper_fwd._fwd_cp_kernel
    assert hopper_fwd._kernel_args(on, persistent_ok=False)[0] is hopper_fwd._fwd_c_kernel
    monkeypatch.setenv("FLASHTILE_HOPPER_C_PERSISTENT", "1")
    assert hopper_fwd._kernel_args(cfg)[0] is hopper_fwd._fwd_cp_kernel
    assert hopper_fwd._kernel_args(cfg, persistent_ok=False)[0] is hopper_fwd._fwd_c_kernel
    monkeypatch.setenv("FLASHTILE_HOPPER_C_PERSISTENT", "0")
    assert hopper_fwd._kernel_args(on)[0] is hopper_fwd._fwd_c_kernel
    # a paired config's call that cannot pair (causal, odd query-tile count): one-shot
    # unless forced on
    monkeypatch.delenv("FLASHTILE_HOPPER_C_PERSISTENT")
    paired = configs.hopper_fwd_config_c(128, True, 4096)
    assert hopper_fwd._kernel_args(paired)[0] is hopper_fwd._fwd_cp_kernel
    assert hopper_fwd._kernel_args(paired, unpaired=True)[0] is hopper_fwd._fwd_c_kernel
    monkeypatch.setenv("FLASHTILE_HOPPER_C_PERSISTENT", "1")
    assert hopper_fwd._kernel_args(paired, unpaired=True)[0] is hopper_fwd._fwd_cp_kernel
    # stage A / B configs never take it
    assert hopper_fwd._kernel_args(configs.hopper_fwd_config(128, False, 4096))[0] is (
        hopper_fwd._fwd_kernel)


def test_persistent_flags_reach_kernel():
    """hd 128 non-causal's o_lag / q_early reach the persistent kernel's arguments (every
    call of the config since session 44, windows and softcaps included); causal's config
    has neither."""
    extra = hopper_fwd._kernel_args(configs.hopper_fwd_config_c(128, False, 4096))[3]
    assert extra["O_LAG"] and extra["Q_EARLY"] and extra["V_STAGES"] == 3
    causal = hopper_fwd._kernel_args(configs.hopper_fwd_config_c(128, True, 4096))[3]
    assert "O_LAG" not in causal and "Q_EARLY" not in causal


def test_schedule_env(monkeypatch):
    """FLASHTILE_HOPPER_SCHEDULE forces a schedule for A/B runs, also where the table
    picks the portable kernel; unset, the shipped table."""
    monkeypatch.delenv("FLASHTILE_HOPPER_SCHEDULE", raising=False)
    assert hopper_fwd.default_config(128, False, 4096) == configs.hopper_fwd_config_c(
        128, False, 4096)
    assert hopper_fwd.default_config(64, True, 256) is None
    for sched in "ABC":
        monkeypatch.setenv("FLASHTILE_HOPPER_SCHEDULE", sched)
        assert hopper_fwd.default_config(128, True, 4096).schedule == sched
        assert hopper_fwd.default_config(64, True, 4096).schedule == sched
        assert hopper_fwd.default_config(64, True, 256).schedule == sched


# ----------------------------------------------------------------------------------
# CPU: dispatch
# ----------------------------------------------------------------------------------


def _qkv(head_dim=64, dtype=torch.bfloat16, seqlen=33, hkv=2, device="cpu"):
    q = torch.randn(2, seqlen, 4, head_dim, dtype=dtype, device=device)
    k = torch.randn(2, seqlen + 5, hkv, head_dim, dtype=dtype, device=device)
    return q, k, torch.randn_like(k)


@pytest.mark.skipif(IS_SM90, reason="checks the fallbacks of a non-Hopper machine")
def test_not_supported_off_hopper():
    """CPU tensors, the interpreter, or any non-sm_90 device: the portable path."""
    q, k, v = _qkv()
    assert not hopper_fwd.hopper_supported(q, k, v)
    if HAS_CUDA:
        assert not hopper_fwd.hopper_supported(*(t.cuda() for t in (q, k, v)))


def test_disable_env(monkeypatch):
    monkeypatch.setenv("FLASHTILE_DISABLE_HOPPER", "1")
    q, k, v = _qkv(device="cuda" if HAS_CUDA else "cpu")
    assert not hopper_fwd.hopper_supported(q, k, v)


@pytest.mark.parametrize(
    "kwargs,ok",
    [
        (dict(), True),
        (dict(causal=True), True),
        (dict(window=(None, 0)), True),  # causal as the launchers spell it
        (dict(window=(None, None)), True),
        (dict(window=(16, 0)), False),
        (dict(window=(None, 4)), False),
        (dict(window=(-1, -1)), False),  # launchers: ints are bounds, None is unbounded
        (dict(softcap=30.0), False),
        (dict(dropout_p=0.1), False),
        (dict(dropout_p=0.1, dropouts=True), True),  # stage A draws it (hd 64)
        (dict(softmax_scale=-0.1), False),
        (dict(softmax_scale=0.05), True),
    ],
)
def test_problem_ok_masks(kwargs, ok):
    assert hopper_fwd.hopper_problem_ok(*_qkv(), **kwargs) is ok


@pytest.mark.parametrize(
    "window,causal,ok",
    [
        ((16, 0), False, True),  # a causal sliding window
        ((16, None), True, True),  # the same, causal spelled by the flag
        ((0, 0), False, True),  # each row sees only its diagonal key
        ((16, None), False, True),  # a left bound only (non-causal)
        ((-3, 0), False, False),  # a negative left bound: the portable kernel
        ((16, 4), False, False),  # a right bound other than causal's
        ((None, 4), False, False),
    ],
)
def test_problem_ok_windows(window, causal, ok, monkeypatch):
    """Sliding windows (a left bound) reach the Gluon forward by default (unset) and
    with FLASHTILE_HOPPER_WINDOW=1 when the caller can run them (``windows=True``:
    flash.attention_forward through ``window_config``), never otherwise (the backward
    and varlen callers), nor with =0 or empty."""
    q, k, v = _qkv()
    for value in (None, "1"):
        if value is None:
            monkeypatch.delenv("FLASHTILE_HOPPER_WINDOW", raising=False)
        else:
            monkeypatch.setenv("FLASHTILE_HOPPER_WINDOW", value)
        assert hopper_fwd.hopper_problem_ok(q, k, v, causal, window, windows=True) is ok
        assert hopper_fwd.hopper_problem_ok(q, k, v, causal, window) is (
            ok and window[0] is None)
    for value in ("0", ""):
        monkeypatch.setenv("FLASHTILE_HOPPER_WINDOW", value)
        assert hopper_fwd.hopper_problem_ok(q, k, v, causal, window, windows=True) is (
            ok and window[0] is None)


def test_problem_ok_softcap(monkeypatch):
    """A softcap reaches the Gluon forward unless FLASHTILE_HOPPER_SOFTCAP=0 (on by
    default since session 13) and only from a caller that runs it (``softcaps=True``:
    the dense and varlen forwards; never the backward's check); never a negative one."""
    q, k, v = _qkv()
    for value in (None, "1"):
        if value is None:
            monkeypatch.delenv("FLASHTILE_HOPPER_SOFTCAP", raising=False)
        else:
            monkeypatch.setenv("FLASHTILE_HOPPER_SOFTCAP", value)
        assert hopper_fwd.hopper_problem_ok(q, k, v, True, softcap=30.0, softcaps=True)
        assert hopper_fwd.hopper_problem_ok(q, k, v, False, (100, None), softcap=5.0,
                                            windows=True, softcaps=True)
        assert not hopper_fwd.hopper_problem_ok(q, k, v, True, softcap=30.0)
        assert not hopper_fwd.hopper_problem_ok(q, k, v, True, softcap=-1.0, softcaps=True)
        assert not hopper_fwd.hopper_problem_ok(q, k, v, True, softcap=30.0, dropout_p=0.1,
                                                softcaps=True)
    monkeypatch.setenv("FLASHTILE_HOPPER_SOFTCAP", "0")
    assert not hopper_fwd.hopper_problem_ok(q, k, v, True, softcap=30.0, softcaps=True)
    assert hopper_fwd.hopper_problem_ok(q, k, v, True, softcaps=True)


def test_softcap_config(monkeypatch):
    """A softcapped call takes the window's configs at hd 128 / 256 and the portable
    kernel at hd 64 (measured faster there), unless a schedule is forced."""
    monkeypatch.delenv("FLASHTILE_HOPPER_SCHEDULE", raising=False)
    capped = configs.hopper_fwd_config(64, True, 4096, windowed=True)  # (head-major)
    assert capped.max_regs is not None
    assert hopper_fwd.window_config(64, True, 4096) == capped
    for causal in (True, False):
        assert hopper_fwd.window_config(64, causal, 16384, softcap=True) is None
    for hd, causal in ((128, True), (128, False), (256, True), (256, False)):
        assert hopper_fwd.window_config(hd, causal, 16384, softcap=True) == (
            hopper_fwd.window_config(hd, causal, 16384))
    monkeypatch.setenv("FLASHTILE_HOPPER_SCHEDULE", "A")
    assert hopper_fwd.window_config(64, True, 4096, softcap=True) == capped


def test_sm90_source_binds_defaults():
    """The CPU sm_90 builds (compile_sm90, _gluon_common.sm90_source) bind every constexpr
    parameter they do not name to its default, as a launch does (Triton's ASTSource binds
    none: such a parameter compiled unspecialised); named ones keep their values, and the
    signature follows the kernel's parameter order."""
    from flashtile.ops._gluon_common import sm90_source

    kernel = hopper_fwd._fwd_cp_kernel
    src = sm90_source(kernel, {"seqlen_q": "i32", "LSE": "*fp32"},
                      {"HEAD_DIM": 128, "V_STAGES": 3})
    const = {kernel.arg_names[i]: v for (i,), v in src.constants.items()}
    assert const["HEAD_DIM"] == 128 and const["V_STAGES"] == 3
    assert const["O_VIA_Q"] is False and const["PAIRED"] is False  # the defaults
    assert list(src.signature) == [n for n in kernel.arg_names if n in src.signature]
    assert src.signature["LSE"] == "*fp32" and src.signature["O_VIA_Q"] == "constexpr"


def test_config_overrides_env(monkeypatch):
    """FLASHTILE_HOPPER_FWD_OVERRIDES replaces fields of the config a call runs (the
    shipped schedule's, or a window's), for A/B runs through the public call; where the
    table picks the portable kernel it stays None; unset, the shipped config."""
    monkeypatch.delenv("FLASHTILE_HOPPER_SCHEDULE", raising=False)
    monkeypatch.delenv(hopper_fwd.OVERRIDES_ENV_VAR, raising=False)
    shipped = hopper_fwd.default_config(256, False, 512)  # stage A (below 1k at hd 256)
    assert not shipped.lazy_rescale and shipped.schedule == "A"
    monkeypatch.setenv(hopper_fwd.OVERRIDES_ENV_VAR, "lazy_rescale=1")
    got = hopper_fwd.default_config(256, False, 512)
    assert got.lazy_rescale and got.block_m == shipped.block_m
    assert hopper_fwd.window_config(256, True, 512, softcap=True).lazy_rescale
    assert hopper_fwd.default_config(64, False, 512) is None  # portable
    monkeypatch.setenv(hopper_fwd.OVERRIDES_ENV_VAR, "num_stages=3")
    assert hopper_fwd.default_config(128, False, 4096).num_stages == 3  # stage C's too
    monkeypatch.delenv(hopper_fwd.OVERRIDES_ENV_VAR)
    assert hopper_fwd.default_config(256, False, 512) == shipped


def test_tile_major_launch(monkeypatch):
    """HopperFwdConfig.tile_heads (FLASHTILE_HOPPER_FWD_OVERRIDES=tile_heads=N for A/B
    runs) reaches stage A's dense causal launch as TILE_MAJOR with at most B * H heads a
    block; non-causal, varlen and stage C launches ignore it (CPU tensors, a spy in
    place of the launch)."""
    launches = []
    monkeypatch.setattr(hopper_fwd, "_gluon_launch",
                        lambda kernel, grid, *a, **kw: launches.append((kernel, grid, kw)))
    monkeypatch.setattr(hopper_fwd, "PERSISTENT_PROGRAMS", 4)  # no device to count SMs of
    q = torch.zeros(2, 1024, 6, 64, dtype=torch.bfloat16)
    k = torch.zeros(2, 1024, 2, 64, dtype=torch.bfloat16)
    lse = torch.zeros(2, 6, 1024)
    a = dataclasses.replace(configs.hopper_fwd_config(64, True, 1024), tile_heads=8)
    c = dataclasses.replace(configs.hopper_fwd_config_c(128, True, 4096), tile_heads=8)
    for cfg, causal, varlen in ((a, True, {}), (a, False, {}), (a, True, {"VARLEN": True}),
                                (dataclasses.replace(a, tile_heads=100), True, {}),
                                (c, True, {})):
        hopper_fwd._launch(cfg, 1024, 2, q, k, k, q, lse, (None,) * 6, 1024, 1024, None,
                           causal, **varlen)
    got = [(kw.get("TILE_MAJOR", False), kw.get("tile_heads")) for _, _, kw in launches]
    assert got == [(True, 8), (False, None), (False, None), (True, 12), (False, None)], got
    assert launches[0][1] == (8, 12)  # the grid is the head-major one; the kernel reorders
    monkeypatch.delenv("FLASHTILE_HOPPER_SCHEDULE", raising=False)
    monkeypatch.setenv(hopper_fwd.OVERRIDES_ENV_VAR, "tile_heads=8")
    assert hopper_fwd.default_config(64, True, 4096).tile_heads == 8
    monkeypatch.setenv(hopper_fwd.OVERRIDES_ENV_VAR, "tile_heads=0")
    assert hopper_fwd.default_config(64, True, 16384).tile_heads == 0


def test_tile_heads_shipped(monkeypatch):
    """The shipped order (configs.TILE_HEADS_SHORT from TILE_HEADS_MIN, TILE_HEADS from
    TILE_HEADS_LONG): hd 64 causal stage A tile-major from 4k query rows, in blocks of 16
    heads below 8k and of 8 from 8k, head-major below 4k and at every other head dim, in
    non-causal calls, with dropout and with a sliding window."""
    monkeypatch.delenv(hopper_fwd.OVERRIDES_ENV_VAR, raising=False)
    monkeypatch.delenv("FLASHTILE_HOPPER_SCHEDULE", raising=False)
    lo, long = configs.TILE_HEADS_MIN, configs.TILE_HEADS_LONG
    assert (lo, long, configs.TILE_HEADS_SHORT, configs.TILE_HEADS) == (4096, 8192, 16, 8)
    for hd, causal, s, want in ((64, True, lo, configs.TILE_HEADS_SHORT),
                                (64, True, long - 1, configs.TILE_HEADS_SHORT),
                                (64, True, long, configs.TILE_HEADS),
                                (64, True, 4 * long, configs.TILE_HEADS),
                                (64, True, lo - 1, 0), (64, True, 1024, 0),
                                (64, False, lo, 0), (128, True, lo, 0), (256, True, lo, 0)):
        got = hopper_fwd.default_config(hd, causal, s)
        assert got.tile_heads == want, (hd, causal, s, got)
        if hd == 64 and causal:
            assert configs.hopper_fwd_schedule(hd, causal, s) == "A", s
    assert configs.hopper_fwd_dropout_config(64, True, lo).tile_heads == 0
    # a sliding window keeps head-major (the order was measured on full causal calls)
    assert hopper_fwd.window_config(64, True, lo).tile_heads == 0


def test_varlen_config_hd256(monkeypatch):
    """Varlen calls at hd 256 run what they ran before the dense persistent split ring
    shipped (hopper_fwd._varlen_config): stage A, the one-shot stage C with a window or
    softcap from 8k queries or with FLASHTILE_HOPPER_SCHEDULE=C; other head dims the
    dense call's config."""
    monkeypatch.delenv("FLASHTILE_HOPPER_SCHEDULE", raising=False)
    for causal in (False, True):
        for s, masked, want in ((1024, False, "A"), (16384, False, "A"), (4096, True, "A"),
                                (8192, True, "C")):
            dense = hopper_fwd.call_config(256, causal, s, 100 if masked else None)
            assert dense.persistent and not dense.o_stage
            cfg = hopper_fwd._varlen_config(dense, 256, causal, s, masked)
            assert cfg.schedule == want and not cfg.persistent, (causal, s, masked, cfg)
            if want == "C":  # with the turn waits, as before (turn_waits)
                assert cfg == dataclasses.replace(dense.one_shot(), turn_waits=True)
                assert cfg.num_stages == 2
            else:
                assert cfg == configs.hopper_fwd_config(256, causal, s)
        hd128 = hopper_fwd.default_config(128, causal, 4096)
        assert hopper_fwd._varlen_config(hd128, 128, causal, 4096, False) is hd128
    monkeypatch.setenv("FLASHTILE_HOPPER_SCHEDULE", "C")
    forced = hopper_fwd.call_config(256, False, 1024)
    assert hopper_fwd._varlen_config(forced, 256, False, 1024, False) == dataclasses.replace(
        forced.one_shot(), turn_waits=True)


def test_turn_waits_config(monkeypatch):
    """Stage C's turn waits (HopperFwdConfig.turn_waits) reach the kernel as PINGPONG:
    off at hd 256 non-causal only (s36a), on everywhere else stage C ships;
    FLASHTILE_HOPPER_C_PINGPONG=0 / 1 forces them off / on."""
    monkeypatch.delenv("FLASHTILE_HOPPER_C_PINGPONG", raising=False)
    for hd in (64, 128, 256):
        for causal in (False, True):
            for s in (1024, 4096, 16384):
                cfg = configs.hopper_fwd_config_c(hd, causal, s)
                assert cfg.turn_waits == (hd < 256 or causal), (hd, causal, s)
                assert hopper_fwd._kernel_args(cfg)[3]["PINGPONG"] == cfg.turn_waits
    free = configs.hopper_fwd_config_c(256, False, 4096)
    waits = configs.hopper_fwd_config_c(128, False, 4096)
    monkeypatch.setenv("FLASHTILE_HOPPER_C_PINGPONG", "1")
    assert hopper_fwd._kernel_args(free)[3]["PINGPONG"] is True
    monkeypatch.setenv("FLASHTILE_HOPPER_C_PINGPONG", "0")
    assert hopper_fwd._kernel_args(waits)[3]["PINGPONG"] is False


def test_window_config():
    """A windowed call runs the shipped schedule's stage where it is C (stage C's
    warpgroups mask their left-edge tiles), stage A where it is A or B (B has no
    window), the portable kernel where the table picks it."""
    for hd, causal, seqlen in ((64, True, 4096), (128, False, 16384), (128, True, 1024),
                               (128, True, 16384), (256, True, 4096)):
        cfg = hopper_fwd.window_config(hd, causal, seqlen)
        shipped = hopper_fwd.default_config(hd, causal, seqlen)
        if shipped.pingpong:
            assert cfg == shipped
        else:
            assert cfg == configs.hopper_fwd_config(hd, causal, seqlen, windowed=True)
            assert cfg.schedule == "A" and not cfg.warp_specialize and not cfg.pingpong
    assert hopper_fwd.window_config(128, False, 16384).schedule == "C"
    for causal in (True, False):  # hd 256: stage C (persistent) from 1k, as the schedule
        for s in (1024, 8192):
            assert hopper_fwd.window_config(256, causal, s) == configs.hopper_fwd_config_c(
                256, causal, s)
            assert hopper_fwd.window_config(256, causal, s, softcap=True).persistent
        assert hopper_fwd.window_config(256, causal, 1023).schedule == "A"
    assert hopper_fwd.window_config(64, True, 256) is None  # the table's portable kernel
    # from 512 queries (configs.SHORT_A_MIN) the 64 x 64 stage A tiles, windows too
    assert hopper_fwd.window_config(64, True, 512) == configs.hopper_fwd_config(64, True, 512)
    assert hopper_fwd.window_config(64, True, 512).block_m == 64
    # what a call runs: the shipped schedule, or the window's with a left bound / softcap
    assert hopper_fwd.call_config(64, True, 4096) == hopper_fwd.default_config(64, True, 4096)
    assert hopper_fwd.call_config(64, True, 4096, left=5) == hopper_fwd.window_config(
        64, True, 4096)
    assert hopper_fwd.call_config(64, True, 4096, softcap=30.0) is None  # portable


@pytest.mark.parametrize("head_dim,ok", [(64, True), (128, True), (256, True), (40, False),
                                         (96, False), (192, False)])
def test_problem_ok_head_dims(head_dim, ok):
    assert hopper_fwd.hopper_problem_ok(*_qkv(head_dim)) is ok


@pytest.mark.parametrize("dtype,ok", [(torch.float16, True), (torch.bfloat16, True),
                                      (torch.float32, False)])
def test_problem_ok_dtypes(dtype, ok):
    assert hopper_fwd.hopper_problem_ok(*_qkv(dtype=dtype)) is ok


def test_problem_ok_strides_and_sizes():
    q, k, v = _qkv()
    # MQA/GQA and the validation grid's padded (B, H, S, D + 8) views are TMA-addressable
    assert hopper_fwd.hopper_problem_ok(*_qkv(hkv=1))
    padded = torch.randn(2, 4, 33, 72, dtype=torch.bfloat16)[..., :64].transpose(1, 2)
    assert hopper_fwd.hopper_problem_ok(padded, k, v)
    # a row stride of 68 bf16 elements (136 bytes) is not 16-byte aligned
    odd = torch.randn(2, 4, 33, 68, dtype=torch.bfloat16)[..., :64].transpose(1, 2)
    assert not hopper_fwd.hopper_problem_ok(odd, k, v)
    # a base 2 bytes past an aligned allocation
    shifted = torch.randn(2 * 33 * 4 * 64 + 1, dtype=torch.bfloat16)[1:].view(2, 33, 4, 64)
    assert not hopper_fwd.hopper_problem_ok(shifted, k, v)
    # empty keys go to the portable path (no TMA descriptor over a zero-sized dimension)
    assert not hopper_fwd.hopper_problem_ok(q, k[:, :0], v[:, :0])


# ----------------------------------------------------------------------------------
# GPU: numerics
# ----------------------------------------------------------------------------------

GPU_SEQLENS = [(1, 1), (17, 17), (1000, 1000), (4097, 4097), (113, 239), (239, 113)]
GPU_CASES = [
    Case(batch=2, seqlen_q=sq, seqlen_k=sk, nheads=4, nheads_kv=hkv, head_dim=hd,
         causal=causal, dtype=dtype, backward=(sq <= 1000))
    for hd in (64, 128, 256)
    for causal in (False, True)
    for (sq, sk) in GPU_SEQLENS
    for hkv, dtype in ((4, torch.bfloat16), (1, torch.float16))
    if not (hd == 256 and sq == 4097)
]
GPU_ADVERSARIAL = [
    Case(batch=2, seqlen_q=777, seqlen_k=1029, nheads=4, nheads_kv=2, head_dim=hd,
         causal=causal, dtype=torch.bfloat16, kind=kind, layout=layout)
    for hd in (64, 128)
    for causal in (False, True)
    for kind, layout in (("wide_logits", "strided"), ("late_spike", "contiguous"))
]


@pytest.fixture
def hopper_calls(monkeypatch):
    """Counts launches of the Gluon path, so each test proves it ran the kernel it
    claims to test."""
    calls = []
    real = hopper_fwd.hopper_attention_forward

    def spy(*args, **kwargs):
        calls.append(args[0].shape)
        return real(*args, **kwargs)

    monkeypatch.setattr(hopper_fwd, "hopper_attention_forward", spy)
    monkeypatch.setattr(flash, "USE_PLANS", False)  # a plan's replay would skip the spy
    return calls


def _record_launches(monkeypatch):
    """Spy on hopper_fwd._launch: the list of (config, keyword arguments) of each Gluon
    forward launch, so a test proves which stage ran with which window / softcap."""
    calls = []
    real = hopper_fwd._launch

    def spy(cfg, *args, **kwargs):
        calls.append((cfg, kwargs))
        return real(cfg, *args, **kwargs)

    monkeypatch.setattr(hopper_fwd, "_launch", spy)
    monkeypatch.setattr(flash, "USE_PLANS", False)  # a plan's replay would skip the spy
    return calls


def _force_gluon(monkeypatch, head_dim, causal, seqlen_q):
    """Where the shipped table sends this shape to the portable kernel, run stage A
    instead (unless FLASHTILE_HOPPER_SCHEDULE already forces a stage): these tests are
    of the Gluon kernels, at shapes small enough to test many."""
    if (not os.environ.get("FLASHTILE_HOPPER_SCHEDULE")
            and configs.hopper_fwd_schedule(head_dim, causal, seqlen_q) == "portable"):
        monkeypatch.setenv("FLASHTILE_HOPPER_SCHEDULE", "A")


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES + GPU_ADVERSARIAL, ids=lambda c: c.name)
def test_hopper_vs_reference(case, device, hopper_calls, monkeypatch):
    """flash_attn_func through the Gluon forward (the shipped schedule, stage A where the
    table picks the portable kernel): out and lse (and, where the case has a backward,
    dq/dk/dv of the portable backward fed the Gluon lse) within the DESIGN.md bound of
    the float64 reference."""
    require_sm90()
    _force_gluon(monkeypatch, case.head_dim, case.causal, case.seqlen_q)
    result = run_case(case, device)
    assert hopper_calls, f"{case.name}: the Gluon path was not taken"
    assert result.ok, result.summary()


SHORT_CAUSAL_CASES = [  # hd 128 causal below 2k queries: stage A's 64 x 64 tiles
    Case(batch=2, seqlen_q=sq, seqlen_k=sk, nheads=4, nheads_kv=hkv, head_dim=128,
         causal=True, window_size=win, softcap=cap, dtype=dtype, backward=(sq <= 1100))
    for (sq, sk) in ((1, 700), (200, 333), (512, 512), (1024, 1024), (1100, 1500),
                     (2047, 2047))
    for hkv, dtype in ((4, torch.bfloat16), (2, torch.float16))
    for win, cap in (((-1, -1), 0.0), ((17, 0), 0.0), ((700, 0), 30.0))
] + [  # hd 128 non-causal and hd 64 causal from 512 to 1k queries (configs.SHORT_A_MIN)
    Case(batch=2, seqlen_q=sq, seqlen_k=sk, nheads=4, nheads_kv=hkv, head_dim=hd,
         causal=causal, window_size=win, softcap=cap, dtype=dtype, backward=True)
    for hd, causal in ((128, False), (64, True))
    for (sq, sk) in ((512, 512), (700, 333), (1023, 1500))
    for hkv, dtype in ((4, torch.bfloat16), (2, torch.float16))
    for win, cap in (((-1, -1), 0.0), ((17, 0 if causal else -1), 0.0),
                     ((300, 0 if causal else -1), 30.0 if hd == 128 else 0.0))
]


@pytest.mark.gpu
@pytest.mark.parametrize("case", SHORT_CAUSAL_CASES, ids=lambda c: c.name)
def test_short_causal_tile_vs_reference(case, device, hopper_calls, monkeypatch):
    """hd 128 causal calls of up to 2k queries take stage A on 64 x 64 tiles
    (configs.HD128_CAUSAL_SHORT_A_MAX), and hd 128 non-causal / hd 64 causal ones from
    512 to 1k queries (configs.SHORT_A_MIN), windows and softcaps too: out and lse (and
    the portable or Gluon backward fed them, where the case has one) within the DESIGN.md
    bound of the float64 reference; bottom-right alignment with more keys than
    queries."""
    require_sm90()
    for var in ("FLASHTILE_HOPPER_SCHEDULE", "FLASHTILE_HOPPER_WINDOW",
                "FLASHTILE_HOPPER_SOFTCAP"):
        monkeypatch.delenv(var, raising=False)
    cfg = hopper_fwd.call_config(case.head_dim, case.causal, case.seqlen_q,
                                 None if case.window_size[0] < 0 else case.window_size[0],
                                 case.softcap)
    assert (cfg.schedule, cfg.block_m, cfg.block_n) == ("A", 64, 64), cfg
    result = run_case(case, device)
    assert hopper_calls, f"{case.name}: the Gluon path was not taken"
    assert result.ok, result.summary()


WINDOW_CASES = [
    Case(batch=2, seqlen_q=sq, seqlen_k=sk, nheads=4, nheads_kv=2, head_dim=hd,
         causal=causal, window_size=(left, 0 if causal else -1), dtype=torch.bfloat16,
         backward=(sq <= 1000))
    for hd in (64, 128, 256)
    for causal in (True, False)
    for left in (0, 17, 128, 700)
    for (sq, sk) in ((1000, 1000), (239, 113), (113, 239), (2113, 2113))
    if not (hd == 256 and sq > 1000)
]


@pytest.mark.gpu
@pytest.mark.parametrize("case", WINDOW_CASES, ids=lambda c: c.name)
def test_hopper_window_vs_reference(case, device, hopper_calls, monkeypatch):
    """Sliding windows (causal or a left bound alone) through stage A's left-edge tiles
    (``window_config``; stage A forced where the table picks the portable kernel): out
    and lse, and where the case has one the portable backward fed them, within the
    DESIGN.md bound of the float64 reference. Windows of 0 keys to longer than the
    sequence, ragged and unequal lengths."""
    require_sm90()
    monkeypatch.delenv("FLASHTILE_HOPPER_WINDOW", raising=False)  # on by default
    _force_gluon(monkeypatch, case.head_dim, case.causal, case.seqlen_q)
    result = run_case(case, device)
    assert hopper_calls, f"{case.name}: the Gluon path was not taken"
    assert result.ok, result.summary()


@pytest.mark.gpu
@pytest.mark.parametrize("case", WINDOW_CASES, ids=lambda c: c.name)
def test_hopper_c_window_vs_reference(case, device, monkeypatch):
    """The same windows through stage C (FLASHTILE_HOPPER_SCHEDULE=C, every head dim):
    each consumer warpgroup's left-edge tiles masked, the producer loading from the
    first warpgroup's left edge, the second releasing the tiles left of its own. out and
    lse (and the portable backward fed them) within the DESIGN.md bound."""
    require_sm90()
    monkeypatch.delenv("FLASHTILE_HOPPER_WINDOW", raising=False)
    monkeypatch.setenv("FLASHTILE_HOPPER_SCHEDULE", "C")
    stages = _record_launches(monkeypatch)
    result = run_case(case, device)
    assert stages and all(cfg.schedule == "C" and kw.get("left") is not None
                          for cfg, kw in stages), stages
    assert result.ok, result.summary()


SOFTCAP_CASES = [
    Case(batch=2, seqlen_q=sq, seqlen_k=sk, nheads=4, nheads_kv=2, head_dim=hd,
         causal=causal, window_size=win, softcap=cap, dtype=torch.bfloat16,
         backward=(sq <= 1000))
    for hd in (64, 128, 256)
    for causal in (True, False)
    for cap in (30.0, 2.0)
    for win in ((-1, -1), (128, 0 if causal else -1))
    for (sq, sk) in ((1000, 1000), (239, 113), (113, 239), (2113, 2113))
    if not (hd == 256 and sq > 1000)
]


@pytest.mark.gpu
@pytest.mark.parametrize("case", SOFTCAP_CASES, ids=lambda c: c.name)
def test_hopper_softcap_vs_reference(case, device, monkeypatch):
    """A softcap through the Gluon forward (on by default; ``window_config``: stage A or
    C, stage A forced where the table picks the portable kernel and at hd 64, whose
    softcapped calls run the portable forward by default): out and lse, and the portable
    backward fed them, within the DESIGN.md bound of the float64 reference; strong (2)
    and mild (30) caps, with and without a sliding window."""
    require_sm90()
    monkeypatch.delenv("FLASHTILE_HOPPER_SOFTCAP", raising=False)
    monkeypatch.delenv("FLASHTILE_HOPPER_WINDOW", raising=False)
    _force_gluon(monkeypatch, case.head_dim, case.causal, case.seqlen_q)
    if case.head_dim == 64 and not os.environ.get("FLASHTILE_HOPPER_SCHEDULE"):
        monkeypatch.setenv("FLASHTILE_HOPPER_SCHEDULE", "A")
    calls = _record_launches(monkeypatch)
    result = run_case(case, device)
    assert calls and all(kw.get("softcap") == case.softcap for _cfg, kw in calls), calls
    assert result.ok, result.summary()


@pytest.mark.gpu
@pytest.mark.parametrize("seqlen_q,seqlen_k", [(300, 40), (129, 1), (1, 700)])
def test_hopper_fully_masked_rows(seqlen_q, seqlen_k, device, hopper_calls, monkeypatch):
    """Causal with seqlen_q > seqlen_k leaves top rows with no key: out 0, lse -inf."""
    require_sm90()
    _force_gluon(monkeypatch, 64, True, seqlen_q)
    case = Case(seqlen_q=seqlen_q, seqlen_k=seqlen_k, head_dim=64, causal=True,
                dtype=torch.bfloat16, backward=False)
    result = run_case(case, device)
    assert hopper_calls and result.ok, result.summary()
    q, k, v = make_qkv(1, seqlen_q, seqlen_k, 2, 2, 64, torch.bfloat16, device)
    out, lse = flashtile.flash_attn_func(q, k, v, causal=True, return_lse=True)
    empty = ~reference.attention_mask(seqlen_q, seqlen_k, True, (None, None)).any(-1)
    empty = empty.to(device)
    assert torch.isneginf(lse[..., empty]).all() and (out[:, empty] == 0).all()
    assert torch.isfinite(lse[..., ~empty]).all()


def _forward_checks(out, lse, q, k, v, causal):
    checks = []
    refs = [reference.flash_attn_func(q, k, v, causal=causal, return_lse=True, upcast=up)
            for up in (True, False)]
    (o64, l64), (olp, llp) = refs
    checks.append(check_close("out", out, o64, olp))
    checks.append(check_close("lse", lse, l64, llp))
    return checks


def _stage_config(schedule, head_dim, causal, seqlen_q):
    """The shipped config forced to stage A or B, or the opt-in stage C config."""
    if schedule == "C":
        return configs.hopper_fwd_config_c(head_dim, causal, seqlen_q)
    return dataclasses.replace(configs.hopper_fwd_config(head_dim, causal, seqlen_q),
                               warp_specialize=schedule == "B")


def _run_stage(cfg, batch, seqlen_q, seqlen_k, nheads, nheads_kv, head_dim, causal, dtype,
               device, seed):
    """Launch the Gluon forward with ``cfg`` into NaN-poisoned buffers; assert every
    output element is written and out/lse are within the DESIGN.md bound (the message
    carries the config, the max errors and the bounds)."""
    q, k, v = make_qkv(batch, seqlen_q, seqlen_k, nheads, nheads_kv, head_dim, dtype, device,
                       seed=seed)
    out = torch.full_like(q, float("nan"))
    lse = torch.full((batch, nheads, seqlen_q), float("nan"), device=device)
    hopper_fwd.hopper_attention_forward(q, k, v, None, causal, out, lse, config=cfg)
    torch.cuda.synchronize()
    checks = _forward_checks(out, lse, q, k, v, causal)
    msg = f"{cfg} sq={seqlen_q} sk={seqlen_k} causal={causal}: " + "; ".join(map(str, checks))
    n_nan = (int(out.isnan().sum()), int(lse.isnan().sum()))
    assert n_nan == (0, 0), f"unwritten output (NaN out, lse) {n_nan}: " + msg
    assert all(c.ok for c in checks), msg


@pytest.mark.gpu
@pytest.mark.parametrize("schedule", ["A", "B", "C"], ids=["stageA", "stageB", "stageC"])
@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seqlen_q,seqlen_k", [(1, 1), (200, 333), (1030, 1030)])
def test_stages_vs_reference(schedule, head_dim, causal, seqlen_q, seqlen_k, device):
    """Every kernel (the shipped config forced to stage A or B; stage C's own config),
    into NaN-poisoned buffers: every output element written and within the bound."""
    require_sm90()
    cfg = _stage_config(schedule, head_dim, causal, seqlen_q)
    _run_stage(cfg, 2, seqlen_q, seqlen_k, 4, 2, head_dim, causal, torch.bfloat16, device,
               seed=seqlen_q * 7 + head_dim)


@pytest.mark.gpu
@pytest.mark.parametrize("exp2_emu", [1, 2, 4])
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seqlen_q,seqlen_k", [(1, 1), (200, 333), (1030, 1030), (333, 77)])
def test_stage_a_exp2_emu_vs_reference(exp2_emu, head_dim, causal, seqlen_q, seqlen_k,
                                       device):
    """Stage A with some of the softmax's exponentials on the FMA pipe
    (HopperFwdConfig.exp2_emu quarters, _gluon_common.exp2_fma): every output written
    and within the bound, fully masked rows included (exp2_fma gives exactly 0 below
    -127, so their l stays 0)."""
    require_sm90()
    cfg = dataclasses.replace(_stage_config("A", head_dim, causal, seqlen_q),
                              exp2_emu=exp2_emu)
    _run_stage(cfg, 2, seqlen_q, seqlen_k, 4, 2, head_dim, causal, torch.bfloat16, device,
               seed=seqlen_q * 3 + exp2_emu)


@pytest.mark.gpu
@pytest.mark.parametrize("tile_heads", [1, 5, 8, 16, 1000])
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("seqlen_q,seqlen_k", [(200, 333), (1030, 1030), (2048, 2048),
                                               (333, 77), (4096, 4096), (8192, 8192)])
def test_stage_a_tile_major(tile_heads, head_dim, seqlen_q, seqlen_k, device, monkeypatch):
    """Stage A's causal grid launched tile-major in blocks of ``tile_heads`` heads
    (HopperFwdConfig.tile_heads, _gluon_common.tile_ids) over 2 x 6 batch-heads (blocks
    of 5 leave one of 2; 16 and 1000 cover the whole grid): the launch gets the order,
    every output is written and within the bound, and out and lse are bitwise the
    head-major launch's (each program computes the same tile either way). 4k and 8k are
    where the order ships (configs.TILE_HEADS_MIN, TILE_HEADS_LONG); at 8k one batch of
    6 heads: the fp32 reference's scores of two took 25 GiB a worker and ran four
    workers out of an H100's memory (`s41a`)."""
    require_sm90()
    batch = 1 if seqlen_q >= 8192 else 2
    launches = _record_gluon_launches(monkeypatch, lambda kernel, kwargs: kwargs)
    cfg = dataclasses.replace(configs.hopper_fwd_config(head_dim, True, seqlen_q),
                              tile_heads=tile_heads)
    q, k, v = make_qkv(batch, seqlen_q, seqlen_k, 6, 2, head_dim, torch.bfloat16, device,
                       seed=seqlen_q + tile_heads)
    runs = []
    for c in (cfg, dataclasses.replace(cfg, tile_heads=0)):
        out = torch.full_like(q, float("nan"))
        lse = torch.full((batch, 6, seqlen_q), float("nan"), device=device)
        hopper_fwd.hopper_attention_forward(q, k, v, None, True, out, lse, config=c)
        runs.append((out, lse))
    torch.cuda.synchronize()
    assert launches[0].get("TILE_MAJOR")
    assert launches[0]["tile_heads"] == min(tile_heads, 6 * batch)
    assert not launches[1].get("TILE_MAJOR"), launches[1]
    (out, lse), (out0, lse0) = runs
    assert (int(out.isnan().sum()), int(lse.isnan().sum())) == (0, 0), f"unwritten: {cfg}"
    checks = _forward_checks(out, lse, q, k, v, True)
    assert all(c.ok for c in checks), f"{cfg}: " + "; ".join(map(str, checks))
    assert torch.equal(out, out0) and torch.equal(lse, lse0), "differs from head-major"


STAGE_C_SEQLENS = [(1, 1), (17, 17), (1000, 1000), (4097, 4097), (113, 239), (239, 113),
                   (300, 40), (129, 1), (1, 700)]


@pytest.mark.gpu
@pytest.mark.parametrize("seqlen_q,seqlen_k", STAGE_C_SEQLENS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("nheads_kv,dtype", [(4, torch.bfloat16), (2, torch.float16),
                                             (1, torch.bfloat16)], ids=["mha-bf16",
                                                                        "gqa-fp16", "mqa-bf16"])
def test_stage_c_vs_reference(seqlen_q, seqlen_k, causal, head_dim, nheads_kv, dtype, device):
    """Stage C on its one-shot grid (the shipped config below 4k at hd 128 non-causal is
    the persistent one: test_stage_c_persistent_*) through the launcher with its explicit
    config: ragged lengths, a program whose second warpgroup tile is past the end (seqlen
    1, 17), causal rows with no key (seqlen_q > seqlen_k), the causal drain of the shorter
    warpgroup, GQA and MQA, fp16 and bf16."""
    require_sm90()
    if head_dim == 256 and seqlen_q == 4097:
        pytest.skip("hd 256 covered at the shorter lengths (the reference is slow)")
    cfg = configs.hopper_fwd_config_c(head_dim, causal, seqlen_q).one_shot()
    _run_stage(cfg, 2, seqlen_q, seqlen_k, 4, nheads_kv, head_dim, causal, dtype, device,
               seed=seqlen_q * 13 + seqlen_k + head_dim)


@pytest.mark.gpu
@pytest.mark.parametrize("seqlen_q,seqlen_k", [(1, 1), (17, 17), (1000, 1000), (4097, 4097),
                                               (239, 113), (300, 40), (1, 700)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_stage_c_k_wait_first_vs_reference(seqlen_q, seqlen_k, causal, head_dim, device):
    """Stage C in the other consumer order from the shipped one (HopperFwdConfig.
    c_k_wait_first: each step waits for its K tile before its tensor-core turn; on at hd
    128, off at hd 64 / 256), so both orders stay tested: every output written and within
    the bound, GQA, ragged and key-less rows."""
    require_sm90()
    if head_dim == 256 and seqlen_q == 4097:
        pytest.skip("hd 256 covered at the shorter lengths (the reference is slow)")
    shipped = configs.hopper_fwd_config_c(head_dim, causal, seqlen_q)
    cfg = dataclasses.replace(shipped, c_k_wait_first=not shipped.c_k_wait_first)
    _run_stage(cfg, 2, seqlen_q, seqlen_k, 4, 2, head_dim, causal, torch.bfloat16, device,
               seed=seqlen_q * 11 + seqlen_k + head_dim)


@pytest.mark.gpu
@pytest.mark.parametrize("config_seqlen", [1000, 16384])
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_stage_c_free_running_vs_reference(config_seqlen, head_dim, causal, device,
                                           monkeypatch):
    """Stage C with the ping-pong turns off (FLASHTILE_HOPPER_C_PINGPONG=0, the A/B
    switch for the schedule alone): the same numbers, on the config of 1000 queries
    (hd 128: the persistent split ring) and of 16k (hd 128: the one-shot grid)."""
    require_sm90()
    monkeypatch.setenv("FLASHTILE_HOPPER_C_PINGPONG", "0")
    cfg = configs.hopper_fwd_config_c(head_dim, causal, config_seqlen)
    _run_stage(cfg, 2, 1000, 1000, 4, 2, head_dim, causal, torch.bfloat16, device, seed=9)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_stage_c_ring2_vs_reference(causal, device):
    """Stage C at hd 128 with the 2-slot ring (the bench's alternative): slot reuse every
    other tile, the tightest ring protocol."""
    require_sm90()
    cfg = dataclasses.replace(configs.hopper_fwd_config_c(128, causal, 1000), num_stages=2)
    _run_stage(cfg, 2, 1000, 1000, 4, 2, 128, causal, torch.bfloat16, device, seed=5)


PERSISTENT_SEQLENS = [(1, 1), (17, 17), (1000, 1000), (113, 239), (239, 113), (300, 40),
                      (129, 1), (1, 700)]


def _record_gluon_launches(monkeypatch, entry=lambda kernel, kwargs: (kernel, kwargs)):
    """Spy on hopper_fwd's Gluon launches (each still runs): the list of ``entry(kernel,
    kwargs)`` per launch."""
    launches = []
    real = hopper_fwd._gluon_launch

    def spy(kernel, *args, **kwargs):
        launches.append(entry(kernel, kwargs))
        return real(kernel, *args, **kwargs)

    monkeypatch.setattr(hopper_fwd, "_gluon_launch", spy)
    return launches


def _record_kernels(monkeypatch):
    """Spy on hopper_fwd's Gluon launches: the list of kernels launched."""
    return _record_gluon_launches(monkeypatch, lambda kernel, kwargs: kernel)


@pytest.mark.gpu
@pytest.mark.parametrize("epilogue", ["tma", "split"])
@pytest.mark.parametrize("programs", [None, 1, 3], ids=["per-sm", "1prog", "3progs"])
@pytest.mark.parametrize("seqlen_q,seqlen_k", PERSISTENT_SEQLENS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("nheads_kv,dtype", [(2, torch.bfloat16), (1, torch.float16)],
                         ids=["gqa-bf16", "mqa-fp16"])
def test_stage_c_persistent_vs_reference(epilogue, programs, seqlen_q, seqlen_k, causal,
                                         head_dim, nheads_kv, dtype, device, monkeypatch):
    """Stage C on the persistent grid (HopperFwdConfig.persistent) into NaN-poisoned
    buffers: one program per SM, or 1 / 3 programs walking every work item, so ring
    positions, turn counts and Q phases carry across items (causal items whose two
    warpgroups take unequal step counts, rows with no key, a second warpgroup past the
    end); O through the Q buffer and TMA (the next Q loaded after the store), or
    ("split", HopperFwdConfig.v_stages=2, hd 64 / 128) through its own buffer beside a V
    ring of its own; GQA and MQA, bf16 and fp16."""
    require_sm90()
    if epilogue == "split" and head_dim == 256:
        pytest.skip("the split ring is built for hd 64 / 128 (hd 256's ring is 2 deep)")
    monkeypatch.setattr(hopper_fwd, "PERSISTENT_PROGRAMS", programs)
    kernels = _record_kernels(monkeypatch)
    cfg = dataclasses.replace(configs.hopper_fwd_config_c(head_dim, causal, seqlen_q).one_shot(),
                              persistent=True, v_stages=2 if epilogue == "split" else 0)
    _run_stage(cfg, 2, seqlen_q, seqlen_k, 4, nheads_kv, head_dim, causal, dtype, device,
               seed=seqlen_q * 5 + seqlen_k + head_dim)
    assert kernels == [hopper_fwd._fwd_cp_kernel], kernels


@pytest.mark.gpu
@pytest.mark.parametrize("programs", [None, 3], ids=["per-sm", "3progs"])
@pytest.mark.parametrize("seqlen_q,seqlen_k", [(1000, 1000), (239, 113), (4096, 4096)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("head_dim,k_stages", [(128, 3), (256, 2)])
def test_stage_c_split_no_o_stage(programs, seqlen_q, seqlen_k, causal, head_dim, k_stages,
                                  device, monkeypatch):
    """The persistent grid's split ring without the O buffers (HopperFwdConfig.o_stage=
    False): hd 256's K ring 2 / V ring 3 (shipped from 1k queries since session 35, s33e)
    and hd 128's K 3 / V 3 (measured in s40a); O through the Q tile and the next Q loaded
    after the store; causal in the paired order (even query-tile counts here);
    NaN-poisoned buffers against the reference."""
    require_sm90()
    if seqlen_q == 4096 and programs is not None:
        pytest.skip("4096 with one program per SM only (the reference is slow)")
    monkeypatch.setattr(hopper_fwd, "PERSISTENT_PROGRAMS", programs)
    kernels = _record_kernels(monkeypatch)
    cfg = dataclasses.replace(
        configs.hopper_fwd_config_c(head_dim, causal, seqlen_q).one_shot(),
        persistent=True, num_stages=k_stages, v_stages=3, o_stage=False, paired=causal)
    _run_stage(cfg, 2, seqlen_q, seqlen_k, 4, 2, head_dim, causal, torch.bfloat16, device,
               seed=seqlen_q + 7 * seqlen_k + head_dim)
    assert kernels == [hopper_fwd._fwd_cp_kernel], kernels


# hd 256 from 1k queries through the public call (stage C on the split ring without O
# buffers): even query-tile counts (1024: 8 tiles; 1500: 12) on the persistent grid,
# paired when causal; odd ones (1100: 9, 2113: 17) causal on the one-shot grid's ring of
# 2; more keys than queries and fewer; MHA, MQA and GQA with a window and a softcap
HD256_C_CASES = [
    Case(batch=1, seqlen_q=sq, seqlen_k=sk, nheads=4, nheads_kv=hkv, head_dim=256,
         causal=causal, window_size=(win, 0 if causal else -1) if win else (-1, -1),
         softcap=cap, dtype=dtype, backward=False)
    for causal in (False, True)
    for (sq, sk) in ((1024, 1024), (1100, 1100), (2113, 1500), (1500, 2113))
    for hkv, dtype, win, cap in ((4, torch.bfloat16, 0, 0.0), (1, torch.float16, 0, 0.0),
                                 (2, torch.bfloat16, 700, 30.0))
]


@pytest.mark.gpu
@pytest.mark.parametrize("case", HD256_C_CASES, ids=lambda c: c.name)
def test_hd256_stage_c_vs_reference(case, device, monkeypatch):
    """hd 256 calls from 1k queries run stage C as shipped (configs.hopper_fwd_schedule):
    the persistent kernel (non-causal without the turn waits), or for a causal call with
    an odd query-tile count the one-shot one (its shared ring of 2 fits the split ring's
    224 KB); out and lse within the
    DESIGN.md bound of the float64 reference."""
    require_sm90()
    for var in ("FLASHTILE_HOPPER_SCHEDULE", "FLASHTILE_HOPPER_WINDOW",
                "FLASHTILE_HOPPER_SOFTCAP", "FLASHTILE_HOPPER_C_PERSISTENT",
                "FLASHTILE_HOPPER_C_PINGPONG", hopper_fwd.OVERRIDES_ENV_VAR):
        monkeypatch.delenv(var, raising=False)
    kernels = _record_kernels(monkeypatch)
    result = run_case(case, device)
    odd = case.causal and math.ceil(case.seqlen_q / 128) % 2
    want = hopper_fwd._fwd_c_kernel if odd else hopper_fwd._fwd_cp_kernel
    assert kernels and set(kernels) == {want}, kernels
    assert result.ok, result.summary()


@pytest.mark.gpu
@pytest.mark.parametrize("v_stages", [0, 2])
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_stage_c_persistent_many_items(v_stages, head_dim, causal, device, monkeypatch):
    """One program per SM with more work items than SMs (2 x 4 heads x 33 tiles = 264 on
    an H200): the grid as shipped, each program walking two or more items; the shared
    ring and the split one (v_stages 2)."""
    require_sm90()
    cfg = dataclasses.replace(configs.hopper_fwd_config_c(head_dim, causal, 4097).one_shot(),
                              persistent=True, v_stages=v_stages)
    _run_stage(cfg, 2, 4097, 4097, 4, 2, head_dim, causal, torch.bfloat16, device, seed=3)


@pytest.mark.gpu
@pytest.mark.parametrize("v_stages", [0, 2])
@pytest.mark.parametrize("programs", [None, 1, 3], ids=["per-sm", "1prog", "3progs"])
@pytest.mark.parametrize("seqlen_q,seqlen_k", [(1, 1), (256, 256), (1000, 1000), (300, 40),
                                               (239, 113), (129, 1), (4096, 4096)])
@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_stage_c_persistent_paired_vs_reference(v_stages, programs, seqlen_q, seqlen_k,
                                                head_dim, device, monkeypatch):
    """The persistent grid's paired causal order (HopperFwdConfig.paired: a head's j-th
    longest query tile, then its j-th shortest) into NaN-poisoned buffers, so an item the
    order skipped shows: even query-tile counts (2, 8, 32: paired) and odd ones (1, 3:
    the one-shot grid, as shipped), key-less rows, one program per SM or 1 / 3
    programs; with the split ring too (v_stages 2, hd 64 / 128)."""
    require_sm90()
    if v_stages and head_dim == 256:
        pytest.skip("the split ring is built for hd 64 / 128")
    if seqlen_q == 4096 and (programs is not None or head_dim == 256):
        pytest.skip("4096 with one program per SM at hd 64 / 128 (the reference is slow)")
    monkeypatch.setattr(hopper_fwd, "PERSISTENT_PROGRAMS", programs)
    kernels = _record_kernels(monkeypatch)
    cfg = dataclasses.replace(configs.hopper_fwd_config_c(head_dim, True, seqlen_q).one_shot(),
                              persistent=True, paired=True, v_stages=v_stages)
    _run_stage(cfg, 2, seqlen_q, seqlen_k, 4, 2, head_dim, True, torch.bfloat16, device,
               seed=seqlen_q * 3 + seqlen_k + head_dim)
    even = (seqlen_q + 127) // 128 % 2 == 0
    assert kernels == [hopper_fwd._fwd_cp_kernel if even else hopper_fwd._fwd_c_kernel], kernels


@pytest.mark.gpu
@pytest.mark.parametrize("programs", [None, 3], ids=["per-sm", "3progs"])
@pytest.mark.parametrize("seqlen_q,seqlen_k", [(1, 1), (1000, 1000), (300, 40), (239, 113),
                                               (2048, 2048)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_stage_c_persistent_k2v3_vs_reference(programs, seqlen_q, seqlen_k, causal, head_dim,
                                              device, monkeypatch):
    """The split ring the other way round (K ring 2, V ring 3: num_stages=2, v_stages=3;
    opt-in, session 21), paired when causal as shipped, into NaN-poisoned buffers: ring
    positions across items with the two rings out of step, key-less rows, ragged tiles."""
    require_sm90()
    monkeypatch.setattr(hopper_fwd, "PERSISTENT_PROGRAMS", programs)
    kernels = _record_kernels(monkeypatch)
    cfg = dataclasses.replace(configs.hopper_fwd_config_c(head_dim, causal, seqlen_q).one_shot(),
                              persistent=True, num_stages=2, v_stages=3, paired=causal)
    _run_stage(cfg, 2, seqlen_q, seqlen_k, 4, 2, head_dim, causal, torch.bfloat16, device,
               seed=seqlen_q * 5 + seqlen_k + head_dim + 1)
    even = (seqlen_q + 127) // 128 % 2 == 0
    assert kernels == [hopper_fwd._fwd_cp_kernel if even or not causal
                       else hopper_fwd._fwd_c_kernel], kernels


@pytest.mark.gpu
@pytest.mark.parametrize("flags", ["o_lag", "q_early", "o_lag,q_early"])
@pytest.mark.parametrize("programs", [None, 1, 3], ids=["per-sm", "1prog", "3progs"])
@pytest.mark.parametrize("seqlen_q,seqlen_k", [(1, 1), (1000, 1000), (300, 40), (239, 113),
                                               (129, 1), (2048, 2048)])
@pytest.mark.parametrize("causal", [False, True])
def test_stage_c_persistent_lag_vs_reference(flags, programs, seqlen_q, seqlen_k, causal,
                                             device, monkeypatch):
    """hd 128's shipped split rings (non-causal K 2 / V 3, causal K 3 / V 2 paired) with the
    O store's wait deferred to the next item (HopperFwdConfig.o_lag) and / or the next Q
    loaded before the last PV (q_early), into NaN-poisoned buffers: 1 or 3 programs walk
    many items, so a store still reading its buffer while the next O lands, or a Q tile
    overwritten under a GEMM, would show; items with no key (a whole warpgroup past the
    end, key-less rows) take the no-tile branch."""
    require_sm90()
    if flags in ("o_lag", "q_early") and programs != 3:
        pytest.skip("each flag alone with 3 programs only (both together everywhere)")
    monkeypatch.setattr(hopper_fwd, "PERSISTENT_PROGRAMS", programs)
    kernels = _record_kernels(monkeypatch)
    cfg = dataclasses.replace(configs.hopper_fwd_config_c(128, causal, 4096),
                              **{f: True for f in flags.split(",")})
    _run_stage(cfg, 2, seqlen_q, seqlen_k, 4, 2, 128, causal, torch.bfloat16, device,
               seed=seqlen_q * 7 + seqlen_k + len(flags))
    even = (seqlen_q + 127) // 128 % 2 == 0
    assert kernels == [hopper_fwd._fwd_cp_kernel if even or not causal
                       else hopper_fwd._fwd_c_kernel], kernels


PERSISTENT_CAP_CASES = [c for c in WINDOW_CASES + SOFTCAP_CASES if c.head_dim == 128]


@pytest.mark.gpu
@pytest.mark.parametrize("lag", [False, True], ids=["no-lag", "lag-qearly"])
@pytest.mark.parametrize("case", PERSISTENT_CAP_CASES, ids=lambda c: c.name)
def test_stage_c_persistent_window_softcap(case, lag, device, monkeypatch):
    """Sliding windows and softcaps through the persistent stage C (stage C forced,
    FLASHTILE_HOPPER_C_PERSISTENT=1, 3 programs: each walks many items, each item with
    its own left-edge tiles), flash_attn_func's full call: out and lse (and the backward
    fed them) within the DESIGN.md bound. ``lag``: with o_lag and q_early forced on
    (FLASHTILE_HOPPER_FWD_OVERRIDES), else off; the spy checks that they reach the
    kernel."""
    require_sm90()
    for var in ("FLASHTILE_HOPPER_WINDOW", "FLASHTILE_HOPPER_SOFTCAP"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("FLASHTILE_HOPPER_SCHEDULE", "C")
    monkeypatch.setenv("FLASHTILE_HOPPER_C_PERSISTENT", "1")
    flags = "1" if lag else "0"
    monkeypatch.setenv(hopper_fwd.OVERRIDES_ENV_VAR, f"o_lag={flags},q_early={flags}")
    monkeypatch.setattr(hopper_fwd, "PERSISTENT_PROGRAMS", 3)
    launches = _record_gluon_launches(monkeypatch, lambda kernel, kwargs: (
        kernel, bool(kwargs.get("O_LAG")), bool(kwargs.get("Q_EARLY"))))
    result = run_case(case, device)
    assert (hopper_fwd._fwd_cp_kernel, lag, lag) in launches, launches
    assert result.ok, result.summary()


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_hopper_vs_portable(head_dim, causal, device, monkeypatch):
    """The Gluon and the portable forward on the same inputs: both within the bound of
    the reference, and within the sum of their bounds of each other."""
    require_sm90()
    q, k, v = make_qkv(2, 1537, 1537, 8, 2, head_dim, torch.bfloat16, device, seed=head_dim)
    out_h, lse_h = flash.attention_forward(q, k, v, causal=causal)
    monkeypatch.setenv("FLASHTILE_DISABLE_HOPPER", "1")
    assert not hopper_fwd.hopper_supported(q, k, v, causal)
    out_p, lse_p = flash.attention_forward(q, k, v, causal=causal)
    ch = _forward_checks(out_h, lse_h, q, k, v, causal)
    cp = _forward_checks(out_p, lse_p, q, k, v, causal)
    msg = "gluon: " + "; ".join(map(str, ch)) + " | portable: " + "; ".join(map(str, cp))
    assert all(c.ok for c in ch + cp), msg
    d_out = (out_h.float() - out_p.float()).abs().max().item()
    d_lse = (lse_h - lse_p).abs().max().item()
    assert d_out <= ch[0].bound + cp[0].bound, f"max|out_gluon - out_portable| {d_out}; {msg}"
    assert d_lse <= ch[1].bound + cp[1].bound, f"max|lse_gluon - lse_portable| {d_lse}; {msg}"


@pytest.mark.gpu
def test_hopper_out_buffer_not_tma_addressable(device):
    """An out= view whose row stride TMA cannot address is written through a copy."""
    require_sm90()
    q, k, v = make_qkv(1, 100, 100, 2, 2, 64, torch.bfloat16, device)
    out = torch.full((1, 100, 2, 68), float("nan"), dtype=q.dtype, device=device)[..., :64]
    flash.attention_forward(q, k, v, causal=True, out=out)
    ref = reference.flash_attn_func(q, k, v, causal=True, upcast=True)
    err = (out.double() - ref).abs().max().item()
    assert math.isfinite(err) and err < 2e-2, err


@pytest.mark.gpu
def test_hopper_no_recompile_on_seqlen_or_batch(device):
    require_sm90()
    kernels = (hopper_fwd._fwd_kernel, hopper_fwd._fwd_ws_kernel, hopper_fwd._fwd_c_kernel)

    def n_compiled():  # device_caches: device -> (kernel_cache, key_cache, target, ...)
        return [sum(len(c[0]) for c in kern.device_caches.values()) for kern in kernels]

    def run(b, s):
        q, k, v = make_qkv(b, s, s + 3, 4, 2, 128, torch.bfloat16, device)
        flashtile.flash_attn_func(q, k, v, causal=True)

    run(2, 128)  # hd 128 causal: stage A below 4k, C from 4k (configs.hopper_fwd_schedule)
    run(1, 4096)
    before = n_compiled()
    assert sum(before) >= 1, f"no Gluon kernel compiled: {before}"
    for b, s in [(1, 1), (3, 17), (2, 1000), (1, 5000), (5, 333)]:
        run(b, s)
    assert n_compiled() == before, (before, n_compiled())
