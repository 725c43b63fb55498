"""Host-side (Python) cost of one ``flash_attn_func`` forward and backward, on the CPU.

    PYTHONPATH=src python scripts/host_overhead.py [--mode grid|triton|fast] [--ops]
                                                   [--profile] [--check]

No GPU needed, and no TRITON_INTERPRET (the kernels never run). One way to stub the
launches per process (--mode):

  grid     every ``kernel[grid]`` of ops/flash.py is a no-op: what is left is flashtile's
           own host path (checks, autograd.Function, custom-op dispatch or the eager fast
           path, configs, allocations, RNG draw).
  triton   Triton's driver is replaced by a fake one (device 0, stream 0, sm_90) and each
           kernel's compile by a stub compiled kernel whose launch does nothing: adds
           Triton's own Python launch path (argument binding, specialisation key, cache
           lookup), as on the GPU.
  fast     triton + FLASHTILE_FAST_LAUNCH's cached launches (ops/flash._launch).

--ops forces the custom ops (flash.EAGER_FAST_PATH = False); --check only checks that
the fast launch picks the kernels Triton's run() picks. PYTHONPATH=<older tree>/src
times an older flashtile (grid / triton modes).

Tensors live on the CPU (check_device is told the interpreter is on so that it accepts
them; the launchers still see "not interpreting", so meta-parameters are the GPU ones).
Left out, on the GPU machine: the C launcher (~2-5 us per kernel), the CUDA caching
allocator instead of the CPU one (torch.empty of these sizes costs more on the CPU),
``torch.cuda.device`` switches and the sm_90 dispatch predicates
(hopper_fwd.hopper_supported etc., which return early on CPU tensors).

Forward: ``flash_attn_func`` on inputs that require grad (training). Backward:
``torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)`` on one saved graph
(autograd engine + FlashAttnFunction.backward + launcher). Microseconds of process CPU
time per call: the fastest of ``--rounds`` rounds of ``--reps`` calls (the machine is
shared; CPU time and the minimum are the least disturbed).

Record (2-core shared CPU box, sum(range(100)) 0.8-0.9 us; B2 S256 H6 D64 bf16 causal;
old and new tree in one process, calls interleaved round by round, min of 80 x 50):

    us/call                     grid stub        triton run      fast launch
                                before  after    before  after   after
    fwd, dropout 0.2 (grad)      176     83       215    119      101
    bwd, dropout 0.2             235    127       324    205      168
    fwd, dropout 0.2, no_grad    165     52       212     88       70
    fwd, dropout 0.0 (grad)      144     64       188    100       81
    bwd, dropout 0.0             235    125       324    203      164
    fwd, dropout 0.0, no_grad    147     39       188     72       55
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import io
import os
import pstats

import torch  # noqa: E402
import triton  # noqa: E402
from host_cost import (  # noqa: E402  (scripts/)
    ab_plans_lines,
    install_driver,
    per_call_us,
    stub_compile,
)

KERNELS = ("_attn_fwd_kernel", "_attn_bwd_preprocess_kernel", "_attn_bwd_dkdv_kernel",
           "_attn_bwd_dq_kernel")


class _NoLaunch:
    """Stands in for a JITFunction: ``kernel[grid](...)`` does nothing (counted)."""

    def __init__(self, name, counts):
        self.name, self.counts = name, counts

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.counts[self.name] = self.counts.get(self.name, 0) + 1
        return launch


def install(mode: str, counts: dict):
    """Stub the launches of ops/flash.py: "grid" (kernel[grid] is a no-op), "triton"
    (fake driver, stub compiles), "fast" ("triton" + FAST_LAUNCH: cached compiled kernels
    launched without Triton's binding). Returns the module. Works on older trees too
    (attributes they lack are left alone)."""
    from flashtile.ops import _checks, flash

    _checks.is_interpreting = lambda: True  # accept CPU tensors (the kernels are stubs)
    if mode == "grid":
        for name in KERNELS:
            setattr(flash, name, _NoLaunch(name, counts))
        return flash
    install_driver()
    for name in KERNELS:
        stub_compile(getattr(flash, name), name, counts)
    if mode == "fast":
        flash.FAST_LAUNCH = True
        flash._FAST_LAUNCH_DEVICES = ("cuda", "cpu")
    return flash


def _launchers_step(flash, q, k, v, dout, p):
    out, lse = flash.attention_forward(q, k, v, causal=True, dropout_p=p,
                                       rng_state=flash.draw_rng_state())
    flash.attention_backward(dout, q, k, v, out, lse, causal=True, dropout_p=p,
                             rng_state=flash.draw_rng_state())


def _recording_run(real_run, name, got, *args, **kwargs):
    kernel = real_run(*args, **kwargs)
    got.setdefault(name, (kernel, args, kwargs))
    return kernel


# arguments that differ between two calls of the same step by design: a new RNG draw
_PER_CALL = frozenset(("seed", "rng_offset"))


def _arg_sig(fn, args, kwargs=None) -> list:
    """Every parameter of ``fn`` as the launch gave it (keywords and defaults filled in),
    tensors as (shape, strides, dtype), descriptors as (box, base shape, base strides),
    the per-call RNG state left out: what a launch's arguments must agree on."""
    from flashtile.ops._launch import _signature

    _, names, _, defaults, _ = _signature(fn)
    kwargs = kwargs or {}
    full = list(args) + [kwargs.get(n, defaults[i]) for i, n in enumerate(names)
                         if i >= len(args)]
    sig = []
    for n, x in zip(names, full):
        if n in _PER_CALL:
            continue
        if isinstance(x, torch.Tensor):
            x = (tuple(x.shape), x.stride(), x.dtype)
        elif hasattr(x, "block_shape"):
            x = (tuple(x.block_shape), tuple(x.base.shape), x.base.stride())
        sig.append((n, x))
    return sig


def _same_picks(step, kernels: dict, module, picked: dict, n: int, what: str) -> None:
    """Run ``step`` with ``module.FAST_LAUNCH`` on twice (Triton compiles a stub and the
    cache fills; then the cached launches record their kernels in ``picked``) and once
    off with Triton's own run() of each of ``kernels`` recorded. Raises unless Triton ran
    ``n`` of them and every one was a cache hit launching the same compiled kernel."""
    real_runs = {name: fn.run for name, fn in kernels.items()}
    module.FAST_LAUNCH = True
    step()
    picked.clear()
    step()
    got: dict = {}
    for name, fn in kernels.items():
        fn.run = functools.partial(_recording_run, real_runs[name], name, got)
    module.FAST_LAUNCH = False
    try:
        step()
    finally:
        for name, fn in kernels.items():
            fn.run = real_runs[name]
    if len(got) != n or sorted(picked) != sorted(got):
        raise AssertionError(f"{what}: cache hits {sorted(picked)}, Triton ran {sorted(got)}")
    for name, (kernel, args, kwargs) in got.items():
        mine, my_args = picked[name]
        if mine is not kernel:
            raise AssertionError(f"{name}: {what}: a different kernel than Triton's")
        fn = kernels[name]
        if _arg_sig(fn, my_args) != _arg_sig(fn, args, kwargs):
            raise AssertionError(f"{name}: {what}: other arguments than Triton's launch got")


def check_fast_launch(flash) -> int:
    """ops/flash._launch must launch the kernel that Triton's own run() picks, for all
    four kernels: aligned / misaligned q, contiguous / padded head strides, batch 1 / 2,
    two sequence lengths, dropout off / on (a new seed every call: still a cache hit).
    Returns the number of cases checked; raises on a mismatch."""
    picked: dict = {}
    flash._FAST_LAUNCH_DEVICES = ("cuda", "cpu")
    flash._run_compiled = lambda kernel, grid, stream, args: picked.__setitem__(
        kernel.name, (kernel, args))
    kernels = {name: getattr(flash, name) for name in KERNELS}
    dt, cases = torch.bfloat16, 0
    for batch in (1, 2):
        for seqlen in (256, 100):
            for pad, offset in ((0, 0), (0, 1), (8, 0)):
                buf = torch.randn(batch * seqlen * 6 * (64 + pad) + 8, dtype=dt)
                x = buf[offset:offset + batch * seqlen * 6 * (64 + pad)]
                q = x.view(batch, seqlen, 6, 64 + pad)[..., :64]
                k, v = (torch.randn(batch, seqlen, 6, 64, dtype=dt) for _ in range(2))
                dout = torch.randn(batch, seqlen, 6, 64, dtype=dt)
                for p in (0.0, 0.2):
                    step = functools.partial(_launchers_step, flash, q, k, v, dout, p)
                    _same_picks(step, kernels, flash, picked, len(KERNELS),
                                f"batch {batch}, seqlen {seqlen}, pad {pad}, offset {offset}, "
                                f"dropout {p}")
                    cases += 1
    return cases


def _gluon_step(hd, causal, group, batch, seqlen, dt=torch.bfloat16):
    """One Gluon forward and backward on new CPU tensors (launches stubbed)."""
    from flashtile.ops import hopper_bwd, hopper_fwd

    q = torch.randn(batch, seqlen, 8, hd, dtype=dt)
    k, v = (torch.randn(batch, seqlen, 8 // group, hd, dtype=dt) for _ in range(2))
    out = torch.empty_like(q)
    lse = torch.empty(batch, 8, seqlen)
    hopper_fwd.hopper_attention_forward(q, k, v, None, causal, out, lse)
    grads = [torch.empty_like(t) for t in (q, k, v)]
    hopper_bwd.hopper_attention_backward(torch.randn_like(q), q, k, v, out, lse, None, causal,
                                         *grads)


def check_gluon_launch() -> int:
    """ops/_gluon_common.launch (the cached Gluon launch) must launch the kernel Triton's
    run() picks: the Gluon forward (every schedule the table ships at hd 64 / 128, the
    persistent stage C on 132 programs) and
    the two-kernel backward (the lse2 preprocess that lse2_pre ships with, dK/dV, dQ), MHA
    and GQA (the expanded dK/dV programs), causal or not, two batches and two lengths,
    each call on new tensors (the fixed-point one-kernel backward, the deterministic
    default at hd 128 non-causal from 4k keys, switched off: its bound kernels are
    Triton's, not stubbed here).
    Returns the number of cases checked; raises on a mismatch."""
    from flashtile.ops import _gluon_common, flash, hopper_bwd, hopper_fwd

    os.environ[hopper_bwd.FIXED_ENV_VAR] = "0"

    kernels = {"fwd": hopper_fwd._fwd_kernel, "fwd_ws": hopper_fwd._fwd_ws_kernel,
               "fwd_c": hopper_fwd._fwd_c_kernel, "fwd_cp": hopper_fwd._fwd_cp_kernel,
               "dkdv": hopper_bwd._bwd_dkdv_kernel,
               "dq": hopper_bwd._bwd_dq_kernel,
               "delta": flash._attn_bwd_preprocess_lse2_kernel}
    for name, fn in kernels.items():
        stub_compile(fn, name)
    picked: dict = {}
    hopper_fwd.PERSISTENT_PROGRAMS = 132  # the persistent stage C's grid: an H200's SMs
    _gluon_common._FAST_LAUNCH_DEVICES = ("cuda", "cpu")
    _gluon_common._run_compiled = lambda kernel, grid, stream, args: picked.__setitem__(
        kernel.name, (kernel, args))
    cases = 0
    for hd in (64, 128):
        for causal in (False, True):
            for group in (1, 4):
                for batch, seqlen in ((1, 4096), (2, 1000)):
                    step = functools.partial(_gluon_step, hd, causal, group, batch, seqlen)
                    _same_picks(step, kernels, _gluon_common, picked, 4,
                                f"hd {hd}, causal {causal}, group {group}, batch {batch}, "
                                f"seqlen {seqlen}")
                    cases += 1
    return cases


def closures(dropout_p, causal=True, dtype=torch.bfloat16, batch=2, seqlen=256, nheads=6,
             head_dim=64):
    import flashtile

    q, k, v = (torch.randn(batch, seqlen, nheads, head_dim, dtype=dtype, requires_grad=True)
               for _ in range(3))
    dout = torch.randn(batch, seqlen, nheads, head_dim, dtype=dtype)

    def fwd():
        return flashtile.flash_attn_func(q, k, v, dropout_p=dropout_p, causal=causal)

    out = fwd()
    inputs = (q, k, v)

    def bwd():
        return torch.autograd.grad(out, inputs, dout, retain_graph=True)

    def fwd_nograd():
        with torch.no_grad():
            return fwd()

    return fwd, bwd, fwd_nograd


def ab_plans(flash, reps: int, rounds: int) -> None:
    """The launch plans off / on in one process, rounds interleaved (the box's load
    moves between runs): fastest round per setting, us per call."""
    print(f"torch {torch.__version__}, triton {triton.__version__}; B2 S256 H6 D64 bf16 "
          "causal, CPU tensors, launches stubbed (fast); launch plans off / on")
    for p in (0.2, 0.0):
        fns = dict(zip(("forward", "backward", "forward, no_grad"), closures(p)))
        for line in ab_plans_lines(fns, reps, rounds, prefix=f"dropout {p}: "):
            print(line, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--mode", default="grid", choices=("grid", "triton", "fast"),
                    help="one per process (the stubs stay installed)")
    ap.add_argument("--ops", action="store_true",
                    help="force the custom ops (flash.EAGER_FAST_PATH = False)")
    ap.add_argument("--profile", action="store_true", help="cProfile of the hot path too")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--check", action="store_true",
                    help="only check that the fast launch picks Triton's own kernels")
    ap.add_argument("--ab-plans", action="store_true",
                    help="fast mode, launch plans (flash.USE_PLANS) off / on, interleaved")
    ap.add_argument("--check-gluon", action="store_true",
                    help="the same for the cached Gluon launch (ops/_gluon_common.launch)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    counts: dict = {}
    mode = "fast" if args.ab_plans else args.mode
    flash = install("triton" if args.check or args.check_gluon else mode, counts)
    if args.check_gluon:
        print(f"gluon launch ok: {check_gluon_launch()} cases")
        return
    if args.check:
        print(f"fast launch ok: {check_fast_launch(flash)} cases")
        return
    if args.ab_plans:
        ab_plans(flash, args.reps, args.rounds)
        return
    if args.ops:
        flash.EAGER_FAST_PATH = False
    print(f"torch {torch.__version__}, triton {triton.__version__}; B2 S256 H6 D64 bf16 causal, "
          f"CPU tensors, launches stubbed ({args.mode}){', custom ops forced' if args.ops else ''}")
    calib = per_call_us(lambda: sum(range(100)), 2000, args.rounds)
    print(f"calibration: sum(range(100)) {calib:.2f} us (a fast server core: ~0.6 us)")
    for p in (0.2, 0.0):
        fwd, bwd, fwd_ng = closures(p)
        counts.clear()
        fwd(), bwd()
        launched = dict(counts)
        for label, fn in (("forward", fwd), ("backward", bwd), ("forward, no_grad", fwd_ng)):
            us = per_call_us(fn, args.reps, args.rounds, warmup=100)
            print(f"dropout {p}: {label:<18} {us:8.1f} us/call", flush=True)
        if launched != dict.fromkeys(KERNELS, 1):
            raise AssertionError(f"the stubs did not see one launch per kernel: {launched}")
        if args.profile and p > 0:
            for label, fn in (("forward", fwd), ("backward", bwd)):
                prof = cProfile.Profile()
                prof.enable()
                for _ in range(2000):
                    fn()
                prof.disable()
                s = io.StringIO()
                pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(args.top)
                print(f"   cProfile {label}, dropout {p}, 2000 calls (tottime):")
                print("\n".join("   " + ln for ln in s.getvalue().splitlines()[6:]))


if __name__ == "__main__":
    main()
