"""The host-side fast paths of flash_attn_func (scripts/host_overhead.py times them):
eager calls skip the custom-op dispatch, calls with nothing for autograd to record skip
FlashAttnFunction, configs and constexprs are memoised, and check_qkv has a quick
accept. Each must be indistinguishable from the path it shortcuts: same kernels, same
RNG draw, bitwise the same outputs and gradients, same errors; torch.compile still sees
the custom ops."""

import os

import pytest
import torch

import flashtile
from flashtile import configs
from flashtile.ops import _checks, flash
from flashtile.ops._common import softcap_flag
from flashtile.validate import make_qkv

CASES = [  # (batch, seqlen_q, seqlen_k, nheads, nheads_kv, head_dim, dtype, kwargs)
    (2, 40, 40, 2, 2, 32, torch.bfloat16, dict(causal=True, dropout_p=0.2)),
    (1, 33, 50, 4, 2, 40, torch.float16, dict(window_size=(9, 3), softcap=5.0)),
    (1, 24, 24, 2, 1, 32, torch.float32, dict(dropout_p=0.1, softmax_scale=0.3)),
]


class _OpSpy:
    """Counts calls of a torch.ops.flashtile op (and runs it)."""

    def __init__(self, op):
        self.op, self.calls = op, 0

    def __call__(self, *args):
        self.calls += 1
        return self.op(*args)


@pytest.fixture
def op_spies(monkeypatch):
    spies = {name: _OpSpy(getattr(torch.ops.flashtile, name))
             for name in ("flash_attn_fwd", "flash_attn_bwd")}
    for name, spy in spies.items():
        monkeypatch.setattr(torch.ops.flashtile, name, spy)
    return spies


def _fwd_bwd(q, k, v, dout, seed, kwargs):
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    torch.manual_seed(seed)
    out, lse = flashtile.flash_attn_func(q, k, v, return_lse=True, **kwargs)
    out.backward(dout)
    return out, lse, q.grad, k.grad, v.grad


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[6]}-{sorted(c[7])}")
def test_eager_path_bitwise_equals_custom_op(case, device, op_spies, monkeypatch):
    """Training call: the eager path (launchers called from FlashAttnFunction) and the
    custom-op path give bitwise-equal out, lse, dq, dk, dv for the same seed (dropout
    included: the same RNG draw); the eager path never enters the ops."""
    b, sq, sk, h, hkv, d, dtype, kwargs = case
    q, k, v = make_qkv(b, sq, sk, h, hkv, d, dtype, device)
    dout = torch.randn_like(q)
    eager = _fwd_bwd(q, k, v, dout, 1234, kwargs)
    assert op_spies["flash_attn_fwd"].calls == 0 and op_spies["flash_attn_bwd"].calls == 0
    after_eager = torch.randint(0, 2**31 - 1, (1,)).item()
    monkeypatch.setattr(flash, "EAGER_FAST_PATH", False)
    ops = _fwd_bwd(q, k, v, dout, 1234, kwargs)
    assert op_spies["flash_attn_fwd"].calls == 1 and op_spies["flash_attn_bwd"].calls == 1
    after_ops = torch.randint(0, 2**31 - 1, (1,)).item()
    for a, c, name in zip(eager, ops, ("out", "lse", "dq", "dk", "dv")):
        assert torch.equal(a, c), f"{name}: eager path and custom op differ"
    assert after_eager == after_ops, "the two paths consumed the RNG differently"


def test_forward_only_paths_bitwise_equal(device, op_spies, monkeypatch):
    """No autograd to record (no_grad, or inputs that need no grad): flash_attn_func calls
    the launcher directly; same result as FlashAttnFunction over the custom op."""
    q, k, v = make_qkv(1, 48, 48, 2, 2, 32, torch.bfloat16, device)
    kwargs = dict(causal=True, dropout_p=0.25, return_lse=True)
    results = []
    for fast in (True, False):
        monkeypatch.setattr(flash, "EAGER_FAST_PATH", fast)
        torch.manual_seed(7)
        with torch.no_grad():
            results.append(flashtile.flash_attn_func(q, k, v, **kwargs))
        torch.manual_seed(7)
        results.append(flashtile.flash_attn_func(q, k, v, **kwargs))  # grad on, frozen
    assert op_spies["flash_attn_fwd"].calls == 2  # only the EAGER_FAST_PATH=False calls
    for out, lse in results[1:]:
        assert torch.equal(out, results[0][0]) and torch.equal(lse, results[0][1])
        assert out.grad_fn is None and not out.requires_grad


def test_compile_sees_custom_ops(device):
    """Under torch.compile the forward and backward graphs hold the custom ops (the
    eager path must not leak into tracing); fullgraph, bitwise the eager results."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    graphs = {"fw": [], "bw": []}

    def recorder(kind):
        def compiler(gm, example_inputs):
            graphs[kind].append(gm)
            return make_boxed_func(gm.forward)
        return compiler

    backend = aot_autograd(fw_compiler=recorder("fw"), bw_compiler=recorder("bw"))
    q, k, v = make_qkv(1, 40, 40, 2, 2, 32, torch.bfloat16, device)
    dout = torch.randn_like(q)

    def attn(q, k, v):
        return flashtile.flash_attn_func(q, k, v, causal=True, dropout_p=0.2)

    torch._dynamo.reset()
    compiled = torch.compile(attn, backend=backend, fullgraph=True)
    results = []
    for fn in (compiled, attn):
        qq, kk, vv = (t.detach().requires_grad_() for t in (q, k, v))
        torch.manual_seed(3)
        out = fn(qq, kk, vv)
        out.backward(dout)
        results.append((out, qq.grad, kk.grad, vv.grad))
    targets = {kind: [str(n.target) for g in gs for n in g.graph.nodes]
               for kind, gs in graphs.items()}
    assert any("flash_attn_fwd" in t for t in targets["fw"]), targets["fw"]
    assert any("flash_attn_bwd" in t for t in targets["bw"]), targets["bw"]
    for a, b, name in zip(*results, ("out", "dq", "dk", "dv")):
        assert torch.equal(a, b), f"{name}: compiled and eager differ"


def test_memoised_configs_are_the_configs():
    """The memoised lookups return what configs.* return, the same object on a repeat."""
    cpu = torch.device("cpu")
    for block_d in (16, 32, 64, 128, 256):
        for causal in (False, True):
            for dtype in (torch.float16, torch.bfloat16, torch.float32):
                for seqlen in (1, 256, 2048, 4096):
                    f = flash._fwd_config(block_d, causal, dtype, cpu, seqlen)
                    assert f == configs.fwd_config(block_d, causal, dtype, cpu, seqlen)
                    assert flash._fwd_config(block_d, causal, dtype, cpu, seqlen) is f
                    b, dq = flash._bwd_configs(block_d, causal, dtype, cpu, seqlen)
                    want = configs.bwd_config(block_d, causal, dtype, cpu, seqlen)
                    assert (b, dq) == (want, want.dq())
                    assert flash._bwd_configs(block_d, causal, dtype, cpu, seqlen)[0] is b


def test_launch_arguments_by_name(monkeypatch):
    """The launchers pass every kernel parameter positionally (what _launch needs): each
    launch has one value per parameter, and the values by name are what the keyword
    launches passed (strides, lengths, scale, window, RNG state, constexprs)."""
    launches = []
    monkeypatch.setattr(flash, "_launch", lambda fn, grid, device, n_ptr, args, nw, ns:
                        launches.append((fn, n_ptr, args, nw, ns)))
    q = torch.randn(2, 10, 4, 40, dtype=torch.bfloat16)
    k, v = (torch.randn(2, 12, 2, 48, dtype=torch.bfloat16)[..., :40] for _ in range(2))
    out, lse = flash.attention_forward(q, k, v, window_size=(5, 0), softcap=3.0,
                                       dropout_p=0.1, rng_state=(11, 22))
    dout = torch.randn_like(q)
    flash.attention_backward(dout, q, k, v, out, lse, window_size=(5, 0), softcap=3.0,
                             dropout_p=0.1, rng_state=(11, 22))
    assert [fn for fn, *_ in launches] == [
        flash._attn_fwd_kernel, flash._attn_bwd_preprocess_kernel, flash._attn_bwd_dkdv_kernel,
        flash._attn_bwd_dq_kernel]
    fwd_cfg = configs.fwd_config(64, True, q.dtype, q.device, 10)
    bwd_cfg = configs.bwd_config(64, True, q.dtype, q.device, 12)
    common = dict(seqlen_q=10, seqlen_k=12, nheads=4, group=2, sm_scale=40 ** -0.5,
                  softcap=3.0, window_left=5, window_right=0, dropout_p=0.1, seed=11,
                  rng_offset=22, HEAD_DIM=40, BLOCK_D=64, HAS_LEFT=True, HAS_RIGHT=True,
                  SOFTCAP=softcap_flag(3.0, q.dtype), DROPOUT=True,
                  UPCAST=flash.is_interpreting(), DOT_PREC="tf32")
    want = [
        dict(common, Q=q, K=k, V=v, O=out, LSE=lse, stride_kn=96, stride_vh=48,
             stride_om=160, BLOCK_M=fwd_cfg.block_m, BLOCK_N=fwd_cfg.block_n),
        dict(O=out, DO=dout, stride_dom=160, seqlen_q=10, nheads=4, HEAD_DIM=40, BLOCK_D=64,
             BLOCK_M=bwd_cfg.block_m),
        dict(common, Q=q, DO=dout, LSE=lse, stride_kb=12 * 96, stride_dkn=80,
             BLOCK_M=bwd_cfg.block_m, BLOCK_N=bwd_cfg.block_n),
        dict(common, K=k, DO=dout, stride_dqm=160, BLOCK_M=bwd_cfg.dq().block_m,
             BLOCK_N=bwd_cfg.dq().block_n),
    ]
    for (fn, n_ptr, args, *_), expect in zip(launches, want):
        names = list(fn.arg_names)
        assert len(args) == len(names), fn
        assert all(isinstance(a, torch.Tensor) for a in args[:n_ptr])
        assert not any(isinstance(a, torch.Tensor) for a in args[n_ptr:])
        got = dict(zip(names, args))
        for name, value in expect.items():
            assert got[name] is value if isinstance(value, torch.Tensor) else (
                got[name] == value and type(got[name]) is type(value)), (fn, name, got[name])
    assert launches[1][3:] == (None, None)  # preprocess: Triton's default options
    assert launches[2][3:] == (bwd_cfg.num_warps, bwd_cfg.num_stages)
    assert launches[3][3:] == (bwd_cfg.dq().num_warps, bwd_cfg.num_stages)


def test_quick_qkv_check_never_accepts_bad_input(device):
    """check_qkv's quick accept holds for good input and for none of test_api's bad ones
    (those still get their own errors: tests/test_api.py)."""
    from test_api import BAD, _qkv

    assert _checks._qkv_ok(*_qkv(device), 4)
    assert _checks._qkv_ok(*_qkv(device, hkv=1), 4)
    q, k, v = _qkv(device)
    assert _checks._qkv_ok(q[0], k[0], v[0], 3)
    for _, mutate, kwargs, _, _ in BAD:
        if not kwargs:
            assert not _checks._qkv_ok(*mutate(*_qkv(device)), 4)


def test_window_default_shortcut(device):
    assert flash._is_no_window((-1, -1))
    for w in ((-1.0, -1), (-1, -1.0), [-1, -1], (-1, 0), (True, -1), (-1, -1, -1)):
        assert not flash._is_no_window(w)
    # on the test device: a CPU tensor on a CUDA machine fails the device check first
    q, k, v = (torch.zeros(1, 4, 1, 16, device=device) for _ in range(3))
    with pytest.raises(TypeError, match="window_size left"):
        flashtile.flash_attn_func(q, k, v, window_size=(-1.0, -1.0))


def test_fast_launch_picks_tritons_kernels():
    """ops/flash._launch (FLASHTILE_FAST_LAUNCH=1) caches compiled kernels under its own
    key: it must launch the kernel Triton's run() would, for all four kernels (alignment,
    strides, lengths, dropout with a new seed each call). Runs the real JIT with a fake
    driver and stub compiles, in a subprocess without TRITON_INTERPRET."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(root / "src")
    res = subprocess.run([sys.executable, str(root / "scripts/host_overhead.py"), "--check"],
                         capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0 and "fast launch ok: 24 cases" in res.stdout, res.stderr[-3000:]


def test_gluon_fast_launch_picks_tritons_kernels():
    """ops/_gluon_common.launch (cached_launch_kw) must launch the kernel Triton's run()
    would for the Gluon forward and backward (hd 64 / 128, causal or not, MHA and GQA,
    two batches and lengths). Fake driver, stub compiles, a subprocess without
    TRITON_INTERPRET."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(root / "src")
    res = subprocess.run([sys.executable, str(root / "scripts/host_overhead.py"),
                          "--check-gluon"], capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0 and "gluon launch ok: 16 cases" in res.stdout, res.stderr[-3000:]


def test_fast_launch_on_by_default():
    """The cached launch is the default (FLASHTILE_FAST_LAUNCH=0 turns it off)."""
    assert flash.FAST_LAUNCH == (os.environ.get("FLASHTILE_FAST_LAUNCH", "1") not in ("", "0"))
