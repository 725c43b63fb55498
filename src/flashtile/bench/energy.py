"""Sustained time and energy per call: the call back to back for a second, as a training
loop runs it, with NVML's energy counter read around it.

Session 45 found the H100 timing at its 700 W cap, its SM clock moving between 1425 and
1980 MHz with what ran before (benchmarks/results.md): there a kernel's speed is set by
its energy per call as much as by its cycles, and a short do_bench after an idle pause
reads a clock the kernel cannot hold. ``sustained`` runs the call for ``seconds`` with at
most two calls in flight, then reports milliseconds per call over that span and, where
NVML answers, millijoules per call and the mean power.

NVML is reached through ctypes (``libnvidia-ml.so.1``, part of the driver), so no Python
package is needed; ``energy_counter`` returns None where it is not there or the GPU has
no energy counter (pre-Volta).
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch


class NvmlEnergy:
    """NVML's total energy counter of one GPU (millijoules since the driver loaded)."""

    def __init__(self, index: int, lib: ctypes.CDLL | None = None):
        self._lib = lib or ctypes.CDLL("libnvidia-ml.so.1")
        if self._lib.nvmlInit_v2() != 0:
            raise OSError("nvmlInit_v2 failed")
        self._handle = ctypes.c_void_p()
        if self._lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(self._handle)) != 0:
            raise OSError(f"no NVML handle for GPU {index}")
        self.millijoules()  # raises where the counter is not supported

    def millijoules(self) -> int:
        value = ctypes.c_ulonglong()
        rc = self._lib.nvmlDeviceGetTotalEnergyConsumption(self._handle, ctypes.byref(value))
        if rc != 0:
            raise OSError(f"nvmlDeviceGetTotalEnergyConsumption returned {rc}")
        return value.value


def energy_counter(device: torch.device | None = None) -> NvmlEnergy | None:
    """The energy counter of ``device`` (its NVML index taken as its CUDA index: right
    unless CUDA_VISIBLE_DEVICES reorders the GPUs), or None where NVML cannot give it."""
    if not torch.cuda.is_available():
        return None
    index = (device.index if device is not None and device.index is not None
             else torch.cuda.current_device())
    try:
        return NvmlEnergy(index)
    except (OSError, AttributeError):
        return None


@dataclass(frozen=True)
class Sustained:
    """One sustained run: calls, milliseconds per call (CUDA events over the whole run),
    millijoules per call and mean watts (None without an energy counter)."""

    calls: int
    ms: float
    mj_per_call: float | None
    watts: float | None


def sustained(fn: Callable[[], object], seconds: float = 1.0,
              counter: NvmlEnergy | None = None, max_calls: int = 100_000) -> Sustained:
    """Run ``fn`` back to back for ``seconds`` of wall time (after one synchronised call),
    never more than two calls ahead of the GPU, and time the run with CUDA events; with
    ``counter``, the energy it read across the run (a synchronised start and end, so
    idle time is only the few microseconds of the bracketing)."""
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    marks: list[torch.cuda.Event] = []
    e0 = counter.millijoules() if counter is not None else None
    t0 = time.perf_counter()
    start.record()
    calls = 0
    while calls < max_calls:
        fn()
        calls += 1
        mark = torch.cuda.Event()
        mark.record()
        marks.append(mark)
        if len(marks) > 2:  # at most two calls queued behind the one running
            marks.pop(0).synchronize()
        if time.perf_counter() - t0 >= seconds:
            break
    end.record()
    end.synchronize()
    e1 = counter.millijoules() if counter is not None else None
    ms = start.elapsed_time(end) / calls
    if e0 is None or e1 is None:
        return Sustained(calls, ms, None, None)
    mj = (e1 - e0) / calls
    return Sustained(calls, ms, mj, mj / ms)  # mJ / ms = W
