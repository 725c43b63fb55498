"""Host-side (Python) cost of the public call on the sm_90 Gluon path, on the CPU.

    PYTHONPATH=src python scripts/host_gluon.py [--shape hf2k|1k64c|1k128] [--profile]

scripts/host_overhead.py times the portable path; this one sends ``flash_attn_func`` and
its autograd backward down the Gluon kernels (ops/hopper_fwd.py, ops/hopper_bwd.py) as
an H100 / H200 would: the sm_90 dispatch predicates are told the CPU tensors are on an
sm_90 device (their device-independent halves, ``hopper_problem_ok`` /
``hopper_bwd_problem_ok``, still run), Triton's driver is a fake one and every kernel
compile a stub whose launch does nothing (scripts/host_cost.py), and the cached Gluon
launch (ops/_gluon_common.launch) is on for CPU tensors, as it is for CUDA ones.
``torch.sum(..., out=)`` (the backward's GQA group sums) returns at once: on the CPU it
would add up the partial gradients for milliseconds; on the GPU it is a launch.

What it leaves out, on the GPU machine: Triton's C launcher (packing the arguments and
encoding each TMA descriptor, ~2-5 us per kernel), the CUDA caching allocator,
``torch.cuda.device`` switches. What it shows: flashtile's own Python per call, which
the HF Llama's 2k training step waits on (results.md, session 31: 371 us per forward
and 656 per backward on the GPU machine's host, sdpa 94 per forward).

Shapes (--shape): hf2k, the ~1B Llama of ``bench --suite hf`` at 2k (B1 S2048, 32 query
heads over 8 KV heads, hd 64, causal, bf16, q / k / v as HF hands them: transposed
views of (B, H, S, D)); 1k64c / 1k128, DESIGN.md's B16 S1024 H32 D64 causal / H16 D128;
minigpt, MiniGPT's B4 S256 H6 D64 causal, where the table picks the portable kernels.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats

import torch  # noqa: E402
import triton  # noqa: E402
from host_cost import (  # noqa: E402  (scripts/)
    ab_plans_lines,
    install_driver,
    per_call_us,
    stub_compile,
)
from triton.runtime.jit import JITFunction  # noqa: E402

SHAPES = {  # batch, seqlen, heads, kv heads, head dim, causal, HF layout
    "hf2k": (1, 2048, 32, 8, 64, True, True),
    "1k64c": (16, 1024, 32, 32, 64, True, False),
    "1k128": (16, 1024, 16, 16, 128, False, False),
    "minigpt": (4, 256, 6, 6, 64, True, False),  # the portable kernels' shape on sm_90
}


def install(counts: dict):
    """Send CPU tensors down the Gluon path with stubbed launches (see the docstring)."""
    from flashtile.ops import _checks, _gluon_common, fixed_dq, flash, hopper_bwd, hopper_fwd

    install_driver()
    for mod in (flash, hopper_fwd, hopper_bwd, fixed_dq):
        for name, fn in vars(mod).items():
            if isinstance(fn, JITFunction):
                stub_compile(fn, name, counts)
    _checks.is_interpreting = lambda: True  # the launchers' checks accept CPU tensors
    flash._maybe_sm90 = lambda device: True
    real_fwd_ok, real_bwd_ok = hopper_fwd.hopper_problem_ok, hopper_bwd.hopper_bwd_problem_ok

    def fwd_supported(q, k, v, causal=False, window=(None, None), softcap=0.0, dropout_p=0.0,
                      softmax_scale=None, windows=False, softcaps=False, dropouts=False):
        return real_fwd_ok(q, k, v, causal, window, softcap, dropout_p, softmax_scale,
                           windows, softcaps, dropouts)

    def bwd_supported(q, k, v, causal=False, window=(None, None), softcap=0.0, dropout_p=0.0,
                      softmax_scale=None, seqlen_k=None, windows=False, softcaps=False,
                      bits=False):
        from flashtile import configs
        return real_bwd_ok(q, k, v, causal, window, softcap, dropout_p, softmax_scale,
                           windows, softcaps, bits) and configs.hopper_bwd_preferred(
            q.shape[-1], bool(causal) or window[1] == 0,
            k.shape[1] if seqlen_k is None else seqlen_k)

    real_sum = torch.sum

    def sum_stub(*args, out=None, **kwargs):  # the GQA group sums: CPU work, not host time
        return out if out is not None else real_sum(*args, **kwargs)

    torch.sum = sum_stub
    hopper_fwd.hopper_supported = fwd_supported
    hopper_bwd.hopper_bwd_supported = bwd_supported
    hopper_fwd.PERSISTENT_PROGRAMS = 132
    hopper_bwd.sm_count = lambda device: 132
    _gluon_common._FAST_LAUNCH_DEVICES = ("cuda", "cpu")
    flash._FAST_LAUNCH_DEVICES = ("cuda", "cpu")


def closures(shape: str):
    import flashtile

    batch, seqlen, nheads, nheads_kv, hd, causal, hf = SHAPES[shape]
    dt = torch.bfloat16

    def make(h):
        if hf:  # (B, H, S, D) transposed to (B, S, H, D), as the HF integration passes them
            return torch.randn(batch, h, seqlen, hd, dtype=dt).transpose(1, 2)
        return torch.randn(batch, seqlen, h, hd, dtype=dt)

    q = make(nheads).requires_grad_()
    k, v = make(nheads_kv).requires_grad_(), make(nheads_kv).requires_grad_()
    dout = torch.randn(batch, seqlen, nheads, hd, dtype=dt)

    def fwd():
        return flashtile.flash_attn_func(q, k, v, causal=causal)

    out = fwd()

    def bwd():
        return torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)

    def fwd_nograd():
        with torch.no_grad():
            return fwd()

    return {"forward (grad)": fwd, "backward (autograd.grad)": bwd,
            "forward, no_grad": fwd_nograd}


def _launch_sig(args, roles: dict) -> list:
    """A launch's arguments as comparable values: a tensor by shape, strides, dtype and
    role (the name of the call's input it is, by storage address, or "new"), a TMA
    descriptor by its box, layout and base tensor, anything else as it is."""
    def tensor(t):
        return (tuple(t.shape), t.stride(), t.dtype, roles.get(t.data_ptr(), "new"))

    sig = []
    for x in args:
        if isinstance(x, torch.Tensor):
            x = ("tensor", *tensor(x))
        elif hasattr(x, "block_shape"):
            x = ("desc", tuple(x.block_shape), id(x.layout), tuple(x.shape), tuple(x.strides),
                 *tensor(x.base))
        sig.append(x)
    return sig


def check_plans() -> int:
    """The launch plans (flash.USE_PLANS) must replay exactly what the dispatch launches
    without them: per case, a call with plans off (its second, once the cached launch
    holds every kernel) and the third call with them on (the plan made by the second)
    launch the same compiled kernels over the same grids with the same arguments, and
    the backward makes the same GQA sums. Cases: hd 64 / 128 / 256, causal or not, MHA
    and GQA 4:1, lengths from one query tile to 8k (stage A, B, C one-shot and
    persistent, tile-major), the HF layout (transposed views), a sliding window and a
    softcap. A forward on the Gluon path must make a plan, and a call off it keep the
    "not Gluon" entry (which skips the Gluon predicates next time); the backward makes a
    plan where its config is the two-kernel one without dQ reduce-adds (and every
    descriptor is over a whole tensor). Returns the number of cases; raises on a
    mismatch."""
    import itertools

    import flashtile
    from flashtile.ops import _gluon_common, flash

    launched: list = []
    sums: list = []
    _gluon_common._run_compiled = lambda kernel, grid, stream, args: launched.append(
        (kernel, tuple(grid), args))
    real_sum = torch.sum

    def counting_sum(*args, out=None, **kwargs):
        if out is None:
            return real_sum(*args, **kwargs)
        sums.append((tuple(args[0].shape), kwargs.get("dim"), tuple(out.shape)))
        return out

    torch.sum = counting_sum
    dt, cases, fwd_plans, bwd_plans = torch.bfloat16, 0, 0, 0
    grid = itertools.product((64, 128, 256), (False, True), (1, 4),
                             ((1, 100), (2, 1000), (1, 2048), (1, 8192)), (False, True))
    extra = [(64, True, 4, (1, 2048), True, dict(window_size=(256, 0))),
             (128, False, 1, (2, 1000), False, dict(softcap=30.0)),
             (64, False, 4, (2, 1000), False, dict(window_size=(100, 100), softcap=20.0))]
    for hd, causal, group, (batch, seqlen), hf, *kw in [(*c, {}) for c in grid] + extra:
        kw = kw[0]
        if hd == 256 and seqlen == 8192:
            continue
        flash.clear_plans()

        def make(h, batch=batch, seqlen=seqlen, hd=hd, hf=hf):
            if hf:
                return torch.randn(batch, h, seqlen, hd, dtype=dt).transpose(1, 2)
            return torch.randn(batch, seqlen, h, hd, dtype=dt)

        q = make(8).requires_grad_()
        k, v = make(8 // group).requires_grad_(), make(8 // group).requires_grad_()
        dout = torch.randn(batch, seqlen, 8, hd, dtype=dt)
        roles = {t.data_ptr(): n for n, t in (("q", q), ("k", k), ("v", v), ("dout", dout))}
        runs = {}
        for label, on in (("off", False), ("off", False), ("make", True), ("on", True)):
            flash.USE_PLANS = on
            launched.clear()
            sums.clear()
            out = flashtile.flash_attn_func(q, k, v, causal=causal, **kw)
            n_fwd = len(launched)
            torch.autograd.grad(out, (q, k, v), dout)
            runs[label] = ([(kk, g, _launch_sig(a, roles)) for kk, g, a in launched],
                           list(sums), n_fwd)
        what = f"hd {hd}, causal {causal}, group {group}, B{batch} S{seqlen}, hf {hf}, {kw}"
        # per direction: True a Gluon plan, False "not the Gluon path" (flash._NOT_GLUON)
        kept = {key[0]: bool(plan) for key, plan in flash._PLANS.items()
                if key[0] in ("gfwd", "gbwd")}
        gluon_fwd = runs["off"][2] > 0  # (no Gluon launch in the forward: the portable one)
        gluon_bwd = len(runs["off"][0]) > runs["off"][2]
        if kept.get("gfwd") is not gluon_fwd:
            raise AssertionError(f"{what}: forward on the Gluon path {gluon_fwd}, its plan "
                                 f"entry {kept.get('gfwd')}")
        if not gluon_bwd and kept.get("gbwd") is not False:
            raise AssertionError(f"{what}: the portable backward ran, its Gluon entry "
                                 f"{kept.get('gbwd')}")
        fwd_plans += gluon_fwd
        bwd_plans += bool(kept.get("gbwd"))
        off, on = runs["off"], runs["on"]
        if len(off[0]) != len(on[0]) or off[1] != on[1] or off[2] != on[2]:
            raise AssertionError(f"{what}: {len(off[0])} launches / sums {off[1]} without "
                                 f"plans, {len(on[0])} / {on[1]} with them")
        for i, ((k0, g0, a0), (k1, g1, a1)) in enumerate(zip(off[0], on[0])):
            if k0 is not k1 or g0 != g1 or a0 != a1:
                diff = [(j, x, y) for j, (x, y) in enumerate(zip(a0, a1)) if x != y]
                raise AssertionError(f"{what}: launch {i} ({k0.name}) differs with plans: "
                                     f"grid {g0} / {g1}, arguments {diff[:4]}")
        cases += 1
    flash.USE_PLANS = True
    torch.sum = real_sum
    print(f"Gluon plans: forward in {fwd_plans}, backward in {bwd_plans} of {cases} cases")
    return cases


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="hf2k", choices=sorted(SHAPES))
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--profile", action="store_true", help="cProfile of each call too")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--check", action="store_true",
                    help="only check that the plans replay the launches made without them")
    ap.add_argument("--ab", action="store_true",
                    help="launch plans (flash.USE_PLANS) off / on, rounds interleaved")
    args = ap.parse_args()
    torch.set_num_threads(1)
    counts: dict = {}
    install(counts)
    if args.check:
        print(f"launch plans ok: {check_plans()} cases")
        return
    fns = closures(args.shape)
    print(f"torch {torch.__version__}, triton {triton.__version__}; shape {args.shape} "
          f"{SHAPES[args.shape]}; CPU tensors, Gluon launches stubbed")
    calib = per_call_us(lambda: sum(range(100)), 2000, args.rounds)
    print(f"calibration: sum(range(100)) {calib:.2f} us (a fast server core: ~0.6 us)")
    if args.ab:
        print("\n".join(ab_plans_lines(fns, args.reps, args.rounds, width=26, warmup=20)))
        return
    for label, fn in fns.items():
        counts.clear()
        fn()
        launched = dict(counts)
        us = per_call_us(fn, args.reps, args.rounds, warmup=50)
        print(f"{label:<26} {us:8.1f} us/call   launches {launched}", flush=True)
        if args.profile:
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(args.reps):
                fn()
            prof.disable()
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(args.top)
            print(s.getvalue())


if __name__ == "__main__":
    main()
