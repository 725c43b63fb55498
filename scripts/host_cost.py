"""Shared by the host-cost scripts (scripts/host_overhead.py,
scripts/decode_host_overhead.py, scripts/host_gluon.py): ``per_call_us``, and fakes that
let Triton's real launch path run on a CPU-only machine: a driver that answers what
``JITFunction.run`` asks before it launches, and stub compiles whose "compiled kernel"
launches nothing (counted per kernel name when given a dict). Import
without TRITON_INTERPRET: the fakes need the real JIT (importing this module with it set
exits, for every script that uses it)."""

from __future__ import annotations

import os
import sys
import time

if os.environ.get("TRITON_INTERPRET") == "1":
    sys.exit("unset TRITON_INTERPRET: the host-cost scripts run Triton's real launch path "
             "(stubbed or faked), never the interpreter")

from triton.backends.compiler import GPUTarget
from triton.runtime.driver import driver


class FakeDriver:
    """Just what JITFunction.run asks of the driver before it launches."""

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_current_target(self):
        return GPUTarget("cuda", 90, 32)


class StubKernel:
    """Stands in for a CompiledKernel: the launch is a no-op (counted if ``counts``)."""

    function = None
    packed_metadata = None

    def __init__(self, name: str = "", counts: dict | None = None):
        self.name, self.counts = name, counts

    def launch_metadata(self, grid, stream, *args):
        return None

    def run(self, *args):
        if self.counts is not None:
            self.counts[self.name] = self.counts.get(self.name, 0) + 1


def stub_compile(jit_fn, name: str = "", counts: dict | None = None) -> None:
    """Every compile of ``jit_fn`` yields a StubKernel, cached as Triton caches kernels."""
    def _do_compile(key, signature, device, constexprs, options, attrs, warmup):
        kernel = StubKernel(name, counts)
        jit_fn.device_caches[device][0][key] = kernel
        return kernel

    jit_fn._do_compile = _do_compile


def install_driver() -> None:
    driver.set_active(FakeDriver())


def per_call_us(fn, reps: int, rounds: int, warmup: int = 200) -> float:
    """Fastest of ``rounds`` rounds, microseconds of this process's CPU time per call
    (the machine is shared: CPU time and the minimum are the least disturbed)."""
    for _ in range(min(reps, warmup)):
        fn()
    times = []
    for _ in range(rounds):
        t0 = time.process_time()
        for _ in range(reps):
            fn()
        times.append((time.process_time() - t0) / reps * 1e6)
    return min(times)


def ab_plans_lines(fns: dict, reps: int, rounds: int, prefix: str = "", width: int = 18,
                   warmup: int = 50) -> list[str]:
    """The launch plans (``flash.USE_PLANS``) off / on in one process over the calls
    ``fns`` (label -> zero-argument closure), rounds interleaved (the box's load moves
    between runs): one line per call, the fastest round per setting in us per call.
    Leaves the plans on."""
    from flashtile.ops import flash

    best: dict = {}
    for _ in range(rounds):
        for on in (False, True):
            flash.USE_PLANS = on
            for label, fn in fns.items():
                us = per_call_us(fn, reps, 1, warmup=warmup)
                best[label, on] = min(us, best.get((label, on), us))
    flash.USE_PLANS = True
    lines = []
    for label in fns:
        off, on = best[label, False], best[label, True]
        lines.append(f"{prefix}{label:<{width}} {off:8.1f} -> {on:8.1f} us/call "
                     f"({(on / off - 1) * 100:+.0f}%)")
    return lines
