"""Launch plans of the Gluon path (ops/_launch.make_plan / run_plan, ops/flash.py): a
repeated call signature replays the launches its first call made, skipping the dispatch.

CPU (every CI run): the plan machinery on fake records; the environment the plans are
keyed on (``dispatch_env``) holds every variable the package reads; and, in a subprocess
with a fake driver and stub compiles (scripts/host_gluon.py --check), the plans replay
exactly the launches the dispatch makes without them over 91 cases. GPU: outputs and
gradients bitwise equal with plans on and off, the plans made and replayed.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import flashtile
from flashtile.ops import _common, _launch, flash
from flashtile.validate import make_qkv
from sm90 import require_sm90

ROOT = Path(__file__).resolve().parents[1]


class _Desc:
    """A TMA descriptor as make_plan reads one (TensorDescriptor's fields)."""

    def __init__(self, base, block, layout="L", padding="zero"):
        self.base, self.block_shape, self.layout, self.padding = base, block, layout, padding
        self.shape, self.strides = list(base.shape), list(base.stride())


def _rebuild(x, block, layout):
    return _Desc(x, block, layout)


def _records(q, out, scratch, part, grad):
    return [
        ("expect", 2),
        ("alloc", scratch, False),
        ("launch", "K1", (4, 2), [_Desc(q, [1, 64]), scratch, 7, 0.5, None, "x"]),
        ("sum", part, (2, 2, 3), 1, grad),
        ("launch", "K2", (8,), [out, _Desc(scratch, [2, 2]), True]),
    ]


def test_make_plan_replays_over_new_tensors(monkeypatch):
    """A plan's steps run over the new call's tensors: descriptors rebuilt over them with
    the recorded boxes and layouts, scratch allocated again (its shape and dtype), sums
    over the new tensors' views, plain arguments as recorded, launches in order."""
    q, out, part, grad = torch.zeros(2, 3), torch.zeros(4), torch.ones(2, 6), torch.zeros(2, 3)
    scratch = torch.zeros(5, dtype=torch.int32)
    plan = _launch.make_plan(_records(q, out, scratch, part, grad), (q, out, part, grad))
    assert plan is not None
    q2, out2, part2, grad2 = (torch.randn_like(t) for t in (q, out, part, grad))
    monkeypatch.setattr(_launch, "current_stream", lambda device: 0)  # no driver here
    ran = []
    _launch.run_plan(plan, (q2, out2, part2, grad2), torch.device("cpu"),
                     lambda kernel, grid, stream, args: ran.append((kernel, grid, args)),
                     _rebuild)
    assert [(k, g) for k, g, _ in ran] == [("K1", (4, 2)), ("K2", (8,))]
    a1, a2 = ran[0][2], ran[1][2]
    assert a1[0].base is q2 and a1[0].block_shape == [1, 64] and a1[0].layout == "L"
    assert a1[1] is not scratch and a1[1].shape == (5,) and a1[1].dtype == torch.int32
    assert a1[2:] == [7, 0.5, None, "x"]
    assert a2[0] is out2 and a2[1].base is a1[1] and a2[2] is True
    assert torch.equal(grad2, part2.view(2, 2, 3).sum(1))
    held = [x for step in plan for x in step if isinstance(x, tuple)]
    assert not any(isinstance(x, (torch.Tensor, _Desc)) for t in held for x in t), (
        "a plan keeps the recording call's tensors alive")


@pytest.mark.parametrize("breakage", ["no expect", "launch count", "unknown tensor",
                                      "view descriptor", "object argument", "no kernel",
                                      "unknown sum"])
def test_make_plan_refuses(breakage):
    """No plan unless every launch is accounted for and every tensor is the call's own or
    recorded scratch: a plan that guessed would replay the wrong thing silently."""
    q, out, part, grad = torch.zeros(2, 3), torch.zeros(4), torch.ones(2, 6), torch.zeros(2, 3)
    scratch = torch.zeros(5)
    records = _records(q, out, scratch, part, grad)
    if breakage == "no expect":
        records.pop(0)
    elif breakage == "launch count":
        records[0] = ("expect", 3)
    elif breakage == "unknown tensor":
        records[2][3][1] = torch.zeros(5)
    elif breakage == "view descriptor":
        records[2][3][0] = _Desc(q.view(3, 2), [1, 64])
        records[2][3][0].base = q  # a descriptor whose shape is not its base's
    elif breakage == "object argument":
        records[2][3][4] = object()
    elif breakage == "no kernel":
        records[4] = ("launch", None, (8,), records[4][3])
    else:
        records[3] = ("sum", torch.ones(2, 6), (2, 2, 3), 1, grad)
    assert _launch.make_plan(records, (q, out, part, grad)) is None


def test_recording_is_per_thread():
    """A recording sees only its own thread's launches: another thread recording or
    launching at the same time (DataParallel's threads) neither adds to it nor ends it."""
    import threading

    seen = {}

    def other():
        _launch.record("expect", 9)  # not recording in this thread: dropped
        with _launch.recording() as mine:
            _launch.record("expect", 2)
        seen["other"] = mine

    with _launch.recording() as records:
        _launch.record("expect", 1)
        worker = threading.Thread(target=other)
        worker.start()
        worker.join()
        _launch.record("alloc", torch.zeros(1), False)
    assert [e[0] for e in records] == ["expect", "alloc"] and records[0] == ("expect", 1)
    assert seen["other"] == [("expect", 2)]


def test_dispatch_env_holds_every_variable():
    """Every FLASHTILE_* variable the package names is in DISPATCH_ENV (the plans' key),
    except FLASHTILE_FAST_LAUNCH and FLASHTILE_LAUNCH_PLANS, read once at import."""
    names = set()
    for path in (ROOT / "src" / "flashtile").rglob("*.py"):
        names |= set(re.findall(r"FLASHTILE_[A-Z0-9_]+", path.read_text()))
    names -= {"FLASHTILE_FAST_LAUNCH", "FLASHTILE_LAUNCH_PLANS"}
    missing = sorted(n for n in names if n not in _common.DISPATCH_ENV)
    assert not missing, missing


def test_dispatch_env_follows_the_environment(monkeypatch):
    """dispatch_env reads the variables as they are now, set or unset between calls."""
    monkeypatch.delenv("FLASHTILE_HOPPER_SCHEDULE", raising=False)
    before = _common.dispatch_env()
    monkeypatch.setenv("FLASHTILE_HOPPER_SCHEDULE", "C")
    after = _common.dispatch_env()
    i = _common.DISPATCH_ENV.index("FLASHTILE_HOPPER_SCHEDULE")
    assert before[i] is None and after[i] in ("C", b"C") and before != after
    monkeypatch.delenv("FLASHTILE_HOPPER_SCHEDULE")
    assert _common.dispatch_env() == before


def test_plans_replay_the_dispatch():
    """scripts/host_gluon.py --check: with a fake driver and stub compiles, the third call
    of each case (its plan's replay) launches what the second call without plans does:
    the same compiled kernels, grids and arguments, the same GQA sums (hd 64 / 128 /
    256, causal or not, MHA / GQA, one query tile to 8k, the HF layout, windows,
    softcaps). A subprocess without TRITON_INTERPRET."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT / "src")
    res = subprocess.run([sys.executable, str(ROOT / "scripts/host_gluon.py"), "--check"],
                         capture_output=True, text=True, env=env, timeout=600,
                         cwd=ROOT / "scripts")
    assert res.returncode == 0 and "launch plans ok: 91 cases" in res.stdout, (
        res.stdout[-2000:] + res.stderr[-3000:])


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim,causal,group,seqlen", [
    (64, True, 4, 2048), (64, False, 1, 1000), (128, True, 1, 4096), (128, False, 4, 1024),
    (256, True, 2, 1024)])
def test_plans_bitwise(head_dim, causal, group, seqlen, device, monkeypatch):
    """On the GPU: forward and backward with plans on, called three times (the first
    makes the plans, the others replay them), bitwise equal to a call without plans, and
    a Gluon plan was made (the forward's, or at hd 64 non-causal 1k, where the forward
    is the portable kernel's, the backward's)."""
    require_sm90()
    q, k, v = make_qkv(2, seqlen, seqlen, 8, 8 // group, head_dim, torch.bfloat16, device,
                       seed=head_dim + seqlen)
    dout = torch.randn_like(q)

    def step():
        inp = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        out = flashtile.flash_attn_func(*inp, causal=causal)
        return (out, *torch.autograd.grad(out, inp, dout))

    monkeypatch.setattr(flash, "USE_PLANS", False)
    want = step()
    monkeypatch.setattr(flash, "USE_PLANS", True)
    flash.clear_plans()
    runs = [step() for _ in range(3)]
    torch.cuda.synchronize()
    made = {key[0] for key, plan in flash._PLANS.items() if plan}  # (not _NOT_GLUON)
    assert "gfwd" in made or (head_dim, causal) == (64, False) and "gbwd" in made, made
    for got in runs:
        for name, a, b in zip(("out", "dq", "dk", "dv"), want, got):
            assert torch.equal(a, b), name
