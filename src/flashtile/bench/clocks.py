"""SM clock and board power while a piece of GPU work runs (nvidia-smi in a thread).

Session 17 found the same GEMM kernels 4-6.5% slower in the HF Llama's training step at
32k with flashtile's attention than with cuDNN's, and the SM clock 1655 against 1776 MHz
on average at 656 against 633 W: under the board's power limit the clock follows the
energy the kernels spend, so a kernel that does more work per output (flashtile's
backward: 7 GEMMs per tile pair against cuDNN's 5) slows what runs after it too.
"""

from __future__ import annotations

import statistics
import subprocess
import threading

import torch


class ClockSampler:
    """SM clock (MHz) and board power (W) sampled from nvidia-smi in a thread while
    ``with`` is open: ``samples`` holds (clock, power) pairs."""

    def __init__(self, period_s: float = 0.02):
        self.period_s, self.samples, self._stop = period_s, [], threading.Event()

    def _run(self):
        cmd = ["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits",
               "-i", str(torch.cuda.current_device())]
        while not self._stop.is_set():
            try:
                out = subprocess.run(cmd, capture_output=True, text=True, timeout=5).stdout
                clock, power = (float(x) for x in out.strip().split(","))
                self.samples.append((clock, power))
            except (OSError, ValueError, subprocess.SubprocessError):
                return
            self._stop.wait(self.period_s)

    def __enter__(self):
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def summary(self) -> str:
        if not self.samples:
            return "no samples (nvidia-smi?)"
        clocks, powers = zip(*self.samples)
        return (f"SM clock mean {statistics.mean(clocks):.0f} MHz (min {min(clocks):.0f}), "
                f"power mean {statistics.mean(powers):.0f} W, {len(clocks)} samples")
