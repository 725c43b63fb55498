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

# nvidia-smi's clocks_event_reasons.active bits (why the clock is below its maximum)
REASONS = {0x1: "idle", 0x2: "app clocks", 0x4: "SW power cap", 0x8: "HW slowdown",
           0x20: "sync boost", 0x40: "SW thermal", 0x80: "HW thermal",
           0x100: "HW power brake"}
_QUERY = "clocks.sm,power.draw,clocks_event_reasons.active"


class ClockSampler:
    """SM clock (MHz), board power (W) and the clock-event reasons (nvidia-smi's bit mask,
    REASONS) sampled from nvidia-smi in a thread while ``with`` is open: ``samples``
    holds (clock, power) pairs, ``reasons`` the masks (empty where the driver does not
    report them: the query falls back to clock and power)."""

    def __init__(self, period_s: float = 0.02):
        self.period_s, self.samples, self.reasons = period_s, [], []
        self._stop = threading.Event()

    def _run(self):
        fields = _QUERY
        while not self._stop.is_set():
            cmd = ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits",
                   "-i", str(torch.cuda.current_device())]
            try:
                out = subprocess.run(cmd, capture_output=True, text=True, timeout=5).stdout
                vals = [x.strip() for x in out.strip().split(",")]
                clock, power = float(vals[0]), float(vals[1])
                mask = int(vals[2], 16) if fields == _QUERY else None
            except (OSError, ValueError, IndexError, subprocess.SubprocessError):
                if fields == _QUERY:  # no reasons field on this driver: clock and power
                    fields = "clocks.sm,power.draw"
                    continue
                return
            self.samples.append((clock, power))
            if mask is not None:
                self.reasons.append(mask)
            self._stop.wait(self.period_s)

    def __enter__(self):
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def reason_shares(self) -> dict[str, float]:
        """Share of the samples in which each reason was active (only those seen)."""
        n = len(self.reasons)
        return {name: sum(1 for m in self.reasons if m & bit) / n
                for bit, name in REASONS.items() if any(m & bit for m in self.reasons)}

    def summary(self) -> str:
        if not self.samples:
            return "no samples (nvidia-smi?)"
        clocks, powers = zip(*self.samples)
        text = (f"SM clock mean {statistics.mean(clocks):.0f} MHz (min {min(clocks):.0f}), "
                f"power mean {statistics.mean(powers):.0f} W, {len(clocks)} samples")
        if self.reasons:
            shares = self.reason_shares()
            text += ", clock reasons: " + (", ".join(
                f"{name} {100 * share:.0f}%" for name, share in shares.items()) or "none")
        return text
