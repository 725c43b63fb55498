"""Host-side cost of one ``flash_attn_with_kvcache`` decode call, measured on the CPU.

    PYTHONPATH=src python scripts/decode_host_overhead.py [--reps 2000]

No GPU needed: Triton's driver is replaced by a fake one (device 0, stream 0, target
sm_90), and each kernel's compile step by a stub "compiled kernel" whose launch does
nothing. Everything else runs for real: flashtile's checks, the torch.library custom-op
dispatch, the launcher (configs, heuristic, allocations) and Triton's own Python launch
path (argument binding, specialisation key, cache lookup). Tensors live on the CPU;
check_device is told the interpreter is on so that it accepts them. What this leaves
out, on the GPU machine: the C launcher (cuLaunchKernelEx, ~2-5 us per kernel), the
CUDA caching allocator instead of the CPU one, and ``torch.cuda.device`` context
switches. Run without TRITON_INTERPRET (the fake driver needs the real JIT).

Prints microseconds per call (median of ``--rounds`` rounds of ``--reps`` calls).
"""

from __future__ import annotations

import argparse

import torch  # noqa: E402
import triton  # noqa: E402
from host_cost import install_driver, per_call_us, stub_compile  # noqa: E402  (scripts/)


def install_fakes():
    """Fake driver + stub compiles for every kernel of ops/kvcache.py; CPU tensors pass
    check_device. Returns the kvcache module."""
    from flashtile.ops import _checks, kvcache

    install_driver()
    for name in dir(kvcache):
        obj = getattr(kvcache, name)
        if isinstance(obj, triton.runtime.jit.JITFunction):
            stub_compile(obj)
    _checks.is_interpreting = lambda: True  # accept CPU tensors (the kernels are stubs)
    kvcache._FAST_LAUNCH_DEVICES = ("cuda", "cpu")
    return kvcache


def cases(kvcache, batch=1, ctx=8192, nheads=32, nheads_kv=4, head_dim=128):
    """(label, zero-argument closure): the public call and its layers."""
    dt = torch.bfloat16
    q = torch.randn(batch, 1, nheads, head_dim, dtype=dt)
    k_cache = torch.zeros(batch, ctx, nheads_kv, head_dim, dtype=dt)
    v_cache = torch.zeros_like(k_cache)
    k = torch.randn(batch, 1, nheads_kv, head_dim, dtype=dt)
    v = torch.randn_like(k)
    lens = torch.full((batch,), ctx - 1, dtype=torch.int32)
    f = kvcache.flash_attn_with_kvcache
    yield "public, no append, num_splits=1", lambda: f(q, k_cache, v_cache, cache_seqlens=lens,
                                                         num_splits=1)
    yield "public, no append, num_splits=32", lambda: f(q, k_cache, v_cache, cache_seqlens=lens,
                                                          num_splits=32)
    yield "public, append k/v, num_splits=32", lambda: f(
        q, k_cache, v_cache, k, v, cache_seqlens=lens, num_splits=32)
    yield "public, causal + append, num_splits=32", lambda: f(
        q, k_cache, v_cache, k, v, cache_seqlens=lens, causal=True, num_splits=32)
    # HF's DynamicCache: (B, Hkv, S, D) tensors growing by a token per call, passed as
    # (B, S, Hkv, D) views without cache_seqlens (strides change with S every call)
    flat = torch.zeros(batch * nheads_kv * (ctx + 4096) * head_dim, dtype=dt)
    step = iter(range(10**9))

    def growing():  # a fresh contiguous (B, Hkv, S, D) each call, as torch.cat makes
        s = ctx + next(step) % 4096
        kv = flat[:batch * nheads_kv * s * head_dim].view(batch, nheads_kv, s, head_dim)
        return f(q, kv.transpose(1, 2), kv.transpose(1, 2))
    yield "public, HF-style cache growing per call", growing
    yield "launcher only, num_splits=32", lambda: kvcache.kvcache_forward(
        q, k_cache, v_cache, None, None, lens, None, num_splits=32)
    yield "launcher only, num_splits=1", lambda: kvcache.kvcache_forward(
        q, k_cache, v_cache, None, None, lens, None, num_splits=1)


def check_fast_launch(kvcache) -> int:
    """ops/kvcache._launch must launch the kernel that Triton's own run() would pick:
    aligned / misaligned q, two cache stride patterns, 1 and 4 splits, and caches growing
    by a token per call. Returns the number of cases checked; raises on a mismatch."""
    picked = []
    kvcache.FAST_LAUNCH = True  # on by default (FLASHTILE_FAST_LAUNCH=0 turns it off)
    n_fwd = len(kvcache._kvcache_fwd_kernel.arg_names)
    kvcache._run_compiled = lambda kernel, grid, stream, args: (
        picked.append(kernel) if len(args) == n_fwd else None)
    jf = kvcache._kvcache_fwd_kernel
    real_run = jf.run

    def check(what, q, kc, lens, ns, calls):
        """``calls`` fast-path launches, then Triton's run() on the same arguments: the
        last fast launch (if it was a cache hit) must be run()'s kernel. Returns 1 if
        it was checked (a hit), else 0."""
        picked.clear()
        for _ in range(calls):
            kvcache.kvcache_forward(q, kc, kc, None, None, lens, None, num_splits=ns)
        got = {}
        jf.run = lambda *a, **kw: got.setdefault("k", real_run(*a, **kw))
        kvcache.FAST_LAUNCH = False
        try:
            kvcache.kvcache_forward(q, kc, kc, None, None, lens, None, num_splits=ns)
        finally:
            kvcache.FAST_LAUNCH, jf.run = True, real_run
        if picked and picked[-1] is not got["k"]:
            raise AssertionError(f"{what}, {ns} splits: a different kernel")
        return int(bool(picked))

    dt = torch.bfloat16
    buf = torch.zeros(32 * 128 + 8, dtype=dt)
    lens = torch.full((1,), 100, dtype=torch.int32)
    cases = 0
    for q in (buf[:4096].view(1, 1, 32, 128), buf[1:4097].view(1, 1, 32, 128)):
        for kc in (torch.zeros(1, 512, 4, 128, dtype=dt),
                   torch.zeros(1, 512, 4, 144, dtype=dt)[..., :128]):
            for ns in (1, 4):
                # a miss (cached), then a hit, which must happen here
                hit = check(f"q offset {q.data_ptr() % 16}, cache strides {kc.stride()}",
                            q, kc, lens, ns, calls=2)
                if not hit:
                    raise AssertionError("the second identical launch missed the cache")
                cases += hit
    # a cache growing by a token per call (strides and capacity change, the
    # specialisation classes mostly not): every launch after the first finds its kernel
    # through the class key, and it must be the one Triton's run() picks
    # (head dim 72: the head stride S * 72 is a multiple of 16 only at even S, so the
    # classes alternate and a wrong class key would launch the other kernel)
    for d in (128, 72):
        flat = torch.zeros(4 * 700 * d, dtype=dt)
        q = buf[:32 * d].view(1, 1, 32, d)
        for s in range(500, 540):
            kv = flat[:4 * s * d].view(1, 4, s, d).transpose(1, 2)  # strides change with s
            for ns in (1, 4):
                cases += check(f"growing cache, head dim {d}, length {s}", q, kv, None, ns,
                               calls=1)
    return cases


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ab", action="store_true", help="also each fast path on its own")
    ap.add_argument("--check", action="store_true",
                    help="only check that the fast launch picks Triton's own kernel")
    args = ap.parse_args()
    torch.set_num_threads(1)
    kvcache = install_fakes()
    if args.check:
        print(f"fast launch ok: {check_fast_launch(kvcache)} cases")
        return
    print(f"torch {torch.__version__}, triton {triton.__version__}; decode B1 H32 Hkv4 D128 "
          "ctx 8k bf16, CPU tensors, kernel launches stubbed")
    calib = per_call_us(lambda: sum(range(100)), args.reps, args.rounds)
    print(f"calibration: sum(range(100)) {calib:.2f} us (a fast server core: ~0.6 us)")
    modes = [("fast paths on", True, True), ("custom op + triton run()", False, False)]
    if args.ab:
        modes[1:1] = [("custom op, fast launch", False, True), ("eager, triton run()", True, False)]
    for mode, eager, fast in modes:
        kvcache.EAGER_FAST_PATH, kvcache.FAST_LAUNCH = eager, fast
        print(f"-- {mode}")
        for label, fn in cases(kvcache):
            us = per_call_us(fn, args.reps, args.rounds)
            print(f"{label:<44} {us:8.1f} us/call", flush=True)


if __name__ == "__main__":
    main()
