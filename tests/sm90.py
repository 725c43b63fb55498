"""Helpers of the sm_90 cross-compilation tests (tests/test_hopper*.py): the
scripts/compile_sm90.py module, and its JSON report run in a child process without
TRITON_INTERPRET (test processes on a CPU run under the interpreter, where Gluon
cannot build)."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from conftest import HAS_CUDA

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "compile_sm90.py"
IS_SM90 = HAS_CUDA and torch.cuda.get_device_capability() == (9, 0)


def compile_script():
    """scripts/compile_sm90.py as a module (its variant lists name the test cases)."""
    spec = importlib.util.spec_from_file_location("compile_sm90", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def compile_records(*flags: str) -> dict:
    """name -> record of every variant ``compile_sm90.py FLAGS --json`` compiles."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    res = subprocess.run([sys.executable, str(SCRIPT), *flags, "--json"], env=env,
                         capture_output=True, text=True, timeout=1500)
    recs = {}
    for line in res.stdout.splitlines():
        if line.startswith("{"):
            rec = json.loads(line)
            recs[rec["name"]] = rec
    assert recs, (f"compile_sm90.py {' '.join(flags)} printed nothing (rc {res.returncode}):"
                  f"\n{res.stderr}")
    return recs


def assert_sm90_build(name: str, rec: dict | None, max_spill: int = 0) -> None:
    """One compiled variant built for sm_90 with wgmma and TMA, no spills or local
    memory (at most ``max_spill`` bytes where a variant is known to spill), and fits the
    H100/H200 shared memory (227 KB per block)."""
    assert rec is not None, f"{name}: not compiled"
    assert rec["ok"], f"{name} {rec['config']}: {rec.get('error')}"
    assert rec["wgmma"] and rec["tma"], f"{name}: no wgmma / TMA in the PTX: {rec}"
    if max_spill:
        assert int(rec["spill_bytes"]) <= max_spill, f"{name}: spills: {rec}"
    else:
        assert rec["spill_bytes"] == "0" and not rec["local"], f"{name}: spills: {rec}"
    assert rec["smem"] <= 227 * 1024, f"{name}: {rec['smem']} bytes of shared memory"



def training_runs(monkeypatch, var: str, values, q, k, v, dout, causal: bool,
                  dropout_p: float = 0.2, seed: int = 11) -> list:
    """(out, dq, dk, dv) of flash_attn_func's training call once per value of the
    environment variable ``var``, each from the same torch seed (so the same dropout
    draw): the GPU dropout tests' A/B of two paths."""
    import flashtile

    runs = []
    for value in values:
        monkeypatch.setenv(var, value)
        qkv = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        torch.manual_seed(seed)
        o = flashtile.flash_attn_func(*qkv, causal=causal, dropout_p=dropout_p)
        runs.append((o, *torch.autograd.grad(o, qkv, dout)))
    return runs


def assert_within_2m6(names, got, want) -> None:
    """Each tensor of ``got`` within 2^-6 of the largest magnitude of its ``want``."""
    for name, a, b in zip(names, got, want):
        scale = float(b.abs().max())
        assert float((a.float() - b.float()).abs().max()) <= 2.0**-6 * scale, name


def require_sm90() -> None:
    """Skip the calling test unless an sm_90 GPU (H100/H200) is here."""
    import pytest

    if not IS_SM90:
        pytest.skip("needs an sm_90 GPU (H100/H200)")


def grad_ref_checks(grads, q, k, v, dout, causal, **kw):
    """dq / dk / dv against the float64 and input-precision references (DESIGN.md rule,
    flashtile.validate.check_close); ``kw`` for reference.flash_attn_func (window_size,
    softcap, dropout_p, dropout_mask)."""
    from flashtile import reference
    from flashtile.validate import check_close

    refs = []
    for upcast in (True, False):
        inp = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        o = reference.flash_attn_func(*inp, causal=causal, upcast=upcast, **kw)
        refs.append(torch.autograd.grad(o, inp, dout.to(o.dtype)))
    scale = max(float(g.abs().max()) for g in refs[0])
    atol = 2.0**-22 * q.shape[-1] * scale
    return [check_close(name, g, r64, rlp, atol=atol)
            for name, g, r64, rlp in zip(("dq", "dk", "dv"), grads, *refs)]


def launcher_grads(q, k, v, dout, causal, cfgs, deterministic=True):
    """[dq, dk, dv] of hopper_bwd.hopper_attention_backward with each config of ``cfgs``
    (the same config again for repeat runs), into NaN-filled buffers (every element must
    be written), after one forward; synchronised."""
    from flashtile.ops import flash, hopper_bwd

    out, lse = flash.attention_forward(q, k, v, causal=causal)
    runs = []
    for cfg in cfgs:
        grads = [torch.full_like(t, float("nan")) for t in (q, k, v)]
        hopper_bwd.hopper_attention_backward(dout, q, k, v, out, lse, None, causal, *grads,
                                             config=cfg, deterministic=deterministic)
        runs.append(grads)
    torch.cuda.synchronize()
    return runs
