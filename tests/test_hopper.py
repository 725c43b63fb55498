"""The Gluon Hopper forward (ops/hopper_fwd.py).

CPU (every CI run): cross-compilation for sm_90 of every shipped config (Gluon kernels
cannot run under the interpreter) and the dispatch predicate. GPU (``gpu`` marker, an
H200 through scripts/gpu_check.sh hopper): the Gluon path against the float64 reference
with the DESIGN.md tolerance, against the portable path, stage A against stage B.
"""

import dataclasses
import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import flashtile
from conftest import HAS_CUDA
from flashtile import configs, reference
from flashtile.ops import flash, hopper_fwd
from flashtile.validate import Case, check_close, make_qkv, run_case

ROOT = Path(__file__).resolve().parents[1]
_SCRIPT = ROOT / "scripts" / "compile_sm90.py"


def _script():
    spec = importlib.util.spec_from_file_location("compile_sm90", _SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


VARIANTS = [name for name, *_ in _script().hopper_variants()]
IS_SM90 = HAS_CUDA and torch.cuda.get_device_capability() == (9, 0)


# ----------------------------------------------------------------------------------
# CPU: cross-compilation for sm_90
# ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compiled():
    """Compile every variant once, in a child process without TRITON_INTERPRET (this
    process runs under the interpreter on CPU, where Gluon cannot build)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    res = subprocess.run([sys.executable, str(_SCRIPT), "--hopper", "--json"], env=env,
                         capture_output=True, text=True, timeout=900)
    recs = {}
    for line in res.stdout.splitlines():
        if line.startswith("{"):
            rec = json.loads(line)
            recs[rec["name"]] = rec
    assert recs, f"compile_sm90.py --hopper printed nothing (rc {res.returncode}):\n{res.stderr}"
    return recs


@pytest.mark.parametrize("name", VARIANTS)
def test_compiles_for_sm90(name, compiled):
    """Builds for sm_90 with wgmma and TMA, no spills or local memory, and fits the
    H100/H200 shared memory (227 KB per block)."""
    rec = compiled.get(name)
    assert rec is not None, f"{name}: not compiled"
    assert rec["ok"], f"{name} {rec['config']}: {rec.get('error')}"
    assert rec["wgmma"] and rec["tma"], f"{name}: no wgmma / TMA in the PTX: {rec}"
    assert rec["spill_bytes"] == "0" and not rec["local"], f"{name}: spills: {rec}"
    assert rec["smem"] <= 227 * 1024, f"{name}: {rec['smem']} bytes of shared memory"
    if "warp_specialize=True" in rec["config"]:
        assert rec["setmaxnreg"], f"{name}: warp-specialised but no register reallocation"


def test_configs_fit_smem():
    for hd in hopper_fwd.HOPPER_HEAD_DIMS:
        for causal in (False, True):
            cfg = configs.hopper_fwd_config(hd, causal, 4096)
            assert cfg.block_m == 16 * cfg.num_warps, cfg
            assert cfg.smem_bytes(hd) <= 227 * 1024, (hd, cfg, cfg.smem_bytes(hd))


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
        (dict(softmax_scale=-0.1), False),
        (dict(softmax_scale=0.05), True),
    ],
)
def test_problem_ok_masks(kwargs, ok):
    assert hopper_fwd.hopper_problem_ok(*_qkv(), **kwargs) is ok


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
    return calls


def _gpu_sm90():
    if not IS_SM90:
        pytest.skip("needs an sm_90 GPU (H100/H200)")


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES + GPU_ADVERSARIAL, ids=lambda c: c.name)
def test_hopper_vs_reference(case, device, hopper_calls):
    """flash_attn_func through the Gluon forward: out and lse (and, where the case has
    a backward, dq/dk/dv of the portable backward fed the Gluon lse) within the
    DESIGN.md bound of the float64 reference."""
    _gpu_sm90()
    result = run_case(case, device)
    assert hopper_calls, f"{case.name}: the Gluon path was not taken"
    assert result.ok, result.summary()


@pytest.mark.gpu
@pytest.mark.parametrize("seqlen_q,seqlen_k", [(300, 40), (129, 1), (1, 700)])
def test_hopper_fully_masked_rows(seqlen_q, seqlen_k, device, hopper_calls):
    """Causal with seqlen_q > seqlen_k leaves top rows with no key: out 0, lse -inf."""
    _gpu_sm90()
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


@pytest.mark.gpu
@pytest.mark.parametrize("warp_specialize", [False, True], ids=["stageA", "stageB"])
@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seqlen_q,seqlen_k", [(1, 1), (200, 333), (1030, 1030)])
def test_stages_vs_reference(warp_specialize, head_dim, causal, seqlen_q, seqlen_k, device):
    """Both kernels (the shipped config with warp_specialize forced either way), into
    NaN-poisoned buffers: every output element written and within the bound."""
    _gpu_sm90()
    cfg = dataclasses.replace(configs.hopper_fwd_config(head_dim, causal, seqlen_q),
                              warp_specialize=warp_specialize)
    q, k, v = make_qkv(2, seqlen_q, seqlen_k, 4, 2, head_dim, torch.bfloat16, device,
                       seed=seqlen_q * 7 + head_dim)
    out = torch.full_like(q, float("nan"))
    lse = torch.full((2, 4, seqlen_q), float("nan"), device=device)
    hopper_fwd.hopper_attention_forward(q, k, v, None, causal, out, lse, config=cfg)
    torch.cuda.synchronize()
    checks = _forward_checks(out, lse, q, k, v, causal)
    msg = f"{cfg}: " + "; ".join(map(str, checks))
    assert not out.isnan().any() and not lse.isnan().any(), "unwritten output: " + msg
    assert all(c.ok for c in checks), msg


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_hopper_vs_portable(head_dim, causal, device, monkeypatch):
    """The Gluon and the portable forward on the same inputs: both within the bound of
    the reference, and within the sum of their bounds of each other."""
    _gpu_sm90()
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
    _gpu_sm90()
    q, k, v = make_qkv(1, 100, 100, 2, 2, 64, torch.bfloat16, device)
    out = torch.full((1, 100, 2, 68), float("nan"), dtype=q.dtype, device=device)[..., :64]
    flash.attention_forward(q, k, v, causal=True, out=out)
    ref = reference.flash_attn_func(q, k, v, causal=True, upcast=True)
    err = (out.double() - ref).abs().max().item()
    assert math.isfinite(err) and err < 2e-2, err


@pytest.mark.gpu
def test_hopper_no_recompile_on_seqlen_or_batch(device):
    _gpu_sm90()
    kernels = (hopper_fwd._fwd_kernel, hopper_fwd._fwd_ws_kernel)

    def n_compiled():  # device_caches: device -> (kernel_cache, key_cache, target, ...)
        return [sum(len(c[0]) for c in kern.device_caches.values()) for kern in kernels]

    def run(b, s):
        q, k, v = make_qkv(b, s, s + 3, 4, 2, 128, torch.bfloat16, device)
        flashtile.flash_attn_func(q, k, v, causal=True)

    run(2, 128)
    before = n_compiled()
    assert sum(before) >= 1, f"no Gluon kernel compiled: {before}"
    for b, s in [(1, 1), (3, 17), (2, 1000), (1, 4096), (5, 333)]:
        run(b, s)
    assert n_compiled() == before, (before, n_compiled())
