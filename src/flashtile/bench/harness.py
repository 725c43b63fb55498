"""Timing harness: warm up, time with ``triton.testing.do_bench``, derive TFLOPS.

For every (shape, backend) the harness builds the backend's closures (``setup_s``),
calls each closure once and times that call apart (``<mode>_first_call_s``: Triton
compilation, ``torch.compile``, cuDNN plan building), then takes the median of
``do_bench`` (``<mode>_ms``) and the peak memory the call allocates above what was
live before it (``<mode>_peak_mem_mib``). The bf16 matmul ceiling (8192^3
``torch.matmul``) is measured in the same run, and each attention number is also
given as a percentage of it and as a ratio to SDPA cuDNN on the same shape.

Results are long-format ``Record``s (one number each); ``report.py`` turns them into
the CSV and the human table.
"""

from __future__ import annotations

import datetime
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import torch

from . import energy
from .backends import BackendUnavailable, get_backend
from .flops import MODES, Shape, attn_flops, matmul_flops, tflops

ATTN_KERNEL = "attention"
MATMUL_N = 8192
MATMUL_KERNEL = f"matmul_{MATMUL_N}x{MATMUL_N}x{MATMUL_N}"
REFERENCE_BACKEND = "sdpa-cudnn"


@dataclass(frozen=True)
class Timing:
    """``do_bench`` budgets in milliseconds (its own warm-up, then the timed reps)."""

    warmup_ms: int = 25
    rep_ms: int = 100
    # run the call back to back for this long before do_bench (0: not at all). An A/B
    # knob for the low 1k rows of the full run (benchmarks/results.md, session 5): if
    # the GPU clock has not ramped back from the idle of a compile, this lets it
    settle_ms: int = 0

    @classmethod
    def quick(cls) -> Timing:
        """Short budgets for a first look; medians get noisier."""
        return cls(warmup_ms=5, rep_ms=25)


@dataclass(frozen=True)
class Record:
    """One measured or derived number, a row of the long-format CSV."""

    kernel: str
    backend: str
    shape: Shape | None
    metric: str
    value: float


@dataclass
class BenchResult:
    """Everything one run produced; ``notes`` says why a (shape, backend) has no numbers."""

    records: list[Record] = field(default_factory=list)
    backends: list[str] = field(default_factory=list)  # as requested: the table's order
    notes: dict[tuple[Shape, str], str] = field(default_factory=dict)
    matmul_tflops: float | None = None


# ----------------------------------------------------------------------------------
# primitives
# ----------------------------------------------------------------------------------


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_first_call(fn: Callable[[], object], device: torch.device) -> float:
    """Wall seconds of one synchronised call: the compile / warm-up call."""
    _sync(device)
    start = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - start


def host_us(fn: Callable[[], object], device: torch.device | None = None, n: int = 200) -> float:
    """Wall-clock microseconds per call of the Python path: ``n`` calls back to back with
    no synchronisation (short kernels: the GPU keeps up, so the loop runs at the host's
    pace; long ones: the launches queue, and only the host's own time is counted), after
    a synchronised warm-up of 10 calls."""
    for _ in range(10):
        fn()
    torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    elapsed = time.perf_counter() - t0
    torch.cuda.synchronize(device)
    return elapsed / n * 1e6


def cprofile_calls(fn: Callable[[], object], n: int, sorts: Sequence[str] = ("cumulative",),
                   top: int = 25) -> tuple[str, float]:
    """cProfile over ``n`` back-to-back calls of ``fn`` (synchronised before and after):
    the stats table per sort key (``pstats`` keys: "cumulative", "tottime"), ``top``
    rows each from the header on, and the wall microseconds per call under the profiler
    (its own cost included). For the host-cost scripts (scripts/host_split.py,
    hf_host_calls.py, diag_fwd_bwd.py)."""
    import cProfile
    import io
    import pstats

    torch.cuda.synchronize()
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    for _ in range(n):
        fn()
    prof.disable()
    us = (time.perf_counter() - t0) / n * 1e6
    torch.cuda.synchronize()
    parts = []
    for key in sorts:
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats(key).print_stats(top)
        text = buf.getvalue()
        parts.append(f"-- by {key}\n" + text[text.find("   ncalls"):].rstrip())
    return "\n".join(parts), us


def events_us(fn: Callable[[], object], reps: int = 50) -> float:
    """GPU microseconds per call between CUDA events around ``reps`` back-to-back calls
    (no L2 flush between them, unlike do_bench; host time shows only where the host falls
    behind the GPU)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / reps


def median_ms(fn: Callable[[], object], timing: Timing) -> float:
    """Median milliseconds per call from ``triton.testing.do_bench`` (CUDA only), after
    ``timing.settle_ms`` of back-to-back calls when set."""
    from triton.testing import do_bench  # imported late: TRITON_INTERPRET is read at import

    if timing.settle_ms > 0:
        start = time.perf_counter()
        while time.perf_counter() - start < timing.settle_ms / 1e3:
            fn()
            torch.cuda.synchronize()
    return float(do_bench(fn, warmup=timing.warmup_ms, rep=timing.rep_ms, return_mode="median"))


def peak_memory_mib(fn: Callable[[], object], device: torch.device) -> float:
    """MiB allocated at the peak of one call, above what was allocated before it."""
    _sync(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    fn()
    _sync(device)
    return (torch.cuda.max_memory_allocated(device) - before) / 2**20


def matmul_ceiling(device: torch.device, timing: Timing, n: int = MATMUL_N) -> float:
    """TFLOPS of a bf16 ``torch.matmul`` of two (n, n) matrices: the device's ceiling."""
    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, dtype=torch.bfloat16, device=device, generator=gen)
    b = torch.randn(n, n, dtype=torch.bfloat16, device=device, generator=gen)
    fn = lambda: torch.matmul(a, b)
    fn()
    return tflops(matmul_flops(n, n, n), median_ms(fn, timing))


def make_inputs(shape: Shape, device: torch.device, seed: int = 0):
    """Random q, k, v, dout, each (batch, seqlen, nheads, head_dim) in ``shape.dtype``."""
    gen = torch.Generator(device=device).manual_seed(seed)
    dims = (shape.batch, shape.seqlen, shape.nheads, shape.head_dim)
    dtype = getattr(torch, shape.dtype)
    return tuple(torch.randn(dims, dtype=dtype, device=device, generator=gen) for _ in range(4))


# ----------------------------------------------------------------------------------
# one backend on one shape
# ----------------------------------------------------------------------------------


def prepare_backend(
    backend: str, shape: Shape, inputs, modes: Sequence[str] = MODES
) -> tuple[object, list[Record]]:
    """``backend``'s closures on ``shape`` and its untimed records: setup time, first
    call (compile) time and peak memory per mode. Raises ``BackendUnavailable`` or
    errors."""
    q, k, v, dout = inputs
    device = q.device
    rec = lambda metric, value: Record(ATTN_KERNEL, backend, shape, metric, float(value))
    start = time.perf_counter()
    closures = get_backend(backend)(q, k, v, shape.causal, dout=dout)
    records = [rec("setup_s", time.perf_counter() - start)]
    for mode in modes:
        fn = getattr(closures, mode)
        records.append(rec(f"{mode}_first_call_s", time_first_call(fn, device)))
        if device.type == "cuda":
            records.append(rec(f"{mode}_peak_mem_mib", peak_memory_mib(fn, device)))
    return closures, records


def timing_records(backend: str, shape: Shape, mode: str, times: Sequence[float]) -> list[Record]:
    """``<mode>_ms`` (the median of ``times``, one per round) and ``<mode>_tflops``, and
    with several rounds ``<mode>_ms_spread`` (max / min - 1, a fraction, not ms) and each
    round's time as ``<mode>_ms_round<i>`` (i from 1, in the order timed: a slow first
    round after a long setup, or a drift, shows in the CSV)."""
    ms = statistics.median(times)
    out = [Record(ATTN_KERNEL, backend, shape, f"{mode}_ms", ms),
           Record(ATTN_KERNEL, backend, shape, f"{mode}_tflops",
                  tflops(attn_flops(shape, mode), ms))]
    if len(times) > 1:
        out.append(Record(ATTN_KERNEL, backend, shape, f"{mode}_ms_spread",
                          max(times) / min(times) - 1.0))
        out += [Record(ATTN_KERNEL, backend, shape, f"{mode}_ms_round{i}", t)
                for i, t in enumerate(times, 1)]
    return out


# short budgets for the adjacent pairs of ``paired_ratios``: a pair spans ~0.1-0.2 s, less
# than the ~100 ms steps in which the clock moves at the power cap (results.md, session 45)
PAIR_TIMING = Timing(warmup_ms=5, rep_ms=25)


def paired_ratios(ref_fn: Callable[[], object], fn: Callable[[], object], pairs: int,
                  timing: Timing = PAIR_TIMING) -> list[float]:
    """``pairs`` ratios ref time / fn time (above 1: ``fn`` is faster), each from two
    short timings back to back, the order alternating (ref first, then fn first, ...):
    a clock that drifts between pairs falls on both sides of each pair alike."""
    ratios = []
    for i in range(pairs):
        if i % 2 == 0:
            ref = median_ms(ref_fn, timing)
            other = median_ms(fn, timing)
        else:
            other = median_ms(fn, timing)
            ref = median_ms(ref_fn, timing)
        ratios.append(ref / other)
    return ratios


def paired_records(backend: str, shape: Shape, mode: str, ratios: Sequence[float]) -> list[Record]:
    """``<mode>_paired_vs_sdpa_cudnn`` (the median of ``paired_ratios``), and with 4 or more
    pairs ``<mode>_paired_q1`` / ``<mode>_paired_q3`` (their quartiles)."""
    out = [Record(ATTN_KERNEL, backend, shape, f"{mode}_paired_vs_sdpa_cudnn",
                  statistics.median(ratios))]
    if len(ratios) >= 4:
        q1, _, q3 = statistics.quantiles(ratios, n=4)
        out += [Record(ATTN_KERNEL, backend, shape, f"{mode}_paired_q1", q1),
                Record(ATTN_KERNEL, backend, shape, f"{mode}_paired_q3", q3)]
    return out


def sustained_records(backend: str, shape: Shape, mode: str, run: energy.Sustained
                      ) -> list[Record]:
    """``<mode>_sustained_ms`` of one ``energy.sustained`` run, and with an energy counter
    ``<mode>_sustained_mj`` (per call) and ``<mode>_sustained_watts``."""
    out = [Record(ATTN_KERNEL, backend, shape, f"{mode}_sustained_ms", run.ms)]
    if run.mj_per_call is not None:
        out += [Record(ATTN_KERNEL, backend, shape, f"{mode}_sustained_mj", run.mj_per_call),
                Record(ATTN_KERNEL, backend, shape, f"{mode}_sustained_watts", run.watts)]
    return out


def _after_rounds(backend, shape, modes, closures, ref, pairs, sustained_s, counter
                  ) -> list[Record]:
    """``run_benchmark``'s measurements after the rounds for one backend: the paired
    ratios against sdpa-cudnn's closures ``ref`` (``pairs`` > 0; not for sdpa-cudnn
    itself, nor without it), then the sustained runs (``sustained_s`` > 0)."""
    out = []
    for mode in modes:
        if pairs > 0 and ref is not None and backend != REFERENCE_BACKEND:
            out += paired_records(backend, shape, mode, paired_ratios(
                getattr(ref, mode), getattr(closures, mode), pairs))
        if sustained_s > 0:
            out += sustained_records(backend, shape, mode, energy.sustained(
                getattr(closures, mode), sustained_s, counter))
    return out


def _failure_note(exc: Exception) -> str:
    """A backend's failure as a table note (one backend failing must not end the run)."""
    if isinstance(exc, BackendUnavailable):
        return f"unavailable: {exc}"
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    first_line = (str(exc).strip().splitlines() or [""])[0][:200]
    return f"failed: {type(exc).__name__}: {first_line}"


# ----------------------------------------------------------------------------------
# the whole run
# ----------------------------------------------------------------------------------


class _NoProgress:
    """Stand-in for tqdm when it is missing or disabled."""

    def update(self, n: int = 1) -> None:
        pass

    def set_description(self, desc: str) -> None:
        pass

    def close(self) -> None:
        pass


def _progress(total: int, enabled: bool):
    """A tqdm bar on stderr, or a silent stand-in."""
    if not enabled:
        return _NoProgress()
    try:
        from tqdm import tqdm
    except ImportError:
        return _NoProgress()
    return tqdm(total=total, file=sys.stderr, unit="run", dynamic_ncols=True)


def run_benchmark(
    shapes: Sequence[Shape],
    backends: Sequence[str],
    *,
    timing: Timing = Timing(),
    do_bwd: bool = True,
    device: torch.device | str = "cuda",
    progress: bool = True,
    seed: int = 0,
    rounds: int = 1,
    timing_log: Callable[[dict], None] | None = None,
    pairs: int = 0,
    sustained_s: float = 0.0,
) -> BenchResult:
    """Measure the matmul ceiling, then every backend on every shape (same inputs).

    Per shape: every backend is set up (first call, peak memory), then timed ``rounds``
    times, backend by backend in turn, so drift during a shape's measurements falls on
    every backend alike; ``<mode>_ms`` is the median over the rounds (TFLOPS and ratios
    follow from it) and, with rounds > 1, ``<mode>_ms_spread`` is max / min - 1.
    ``timing_log``, if given, receives one dict per timing (shape, causal, backend, mode,
    round, its local wall-clock start and end as ISO strings, ms): to join with a clock
    log sampled beside the run (scripts/clock_join.py).
    ``pairs`` > 0: after the rounds, each backend is also timed against sdpa-cudnn in
    that many adjacent pairs (``paired_ratios``; ``<mode>_paired_vs_sdpa_cudnn`` and its
    quartiles), a ratio that the GPU's clock swings at its power cap move less.
    ``sustained_s`` > 0: then each backend's calls back to back for that many seconds
    (``energy.sustained``): ``<mode>_sustained_ms`` and, where NVML's energy counter
    answers, ``<mode>_sustained_mj`` per call and ``<mode>_sustained_watts``."""
    device = torch.device(device)
    modes = MODES if do_bwd else ("fwd",)
    result = BenchResult(backends=list(backends))
    result.matmul_tflops = matmul_ceiling(device, timing)
    result.records.append(Record(MATMUL_KERNEL, "torch", None, "tflops", result.matmul_tflops))
    counter = energy.energy_counter(device) if sustained_s > 0 else None
    bar = _progress(len(shapes) * len(backends) * rounds, progress)
    try:
        for shape in shapes:
            inputs = make_inputs(shape, device, seed)
            ready = {}  # backend -> (closures, untimed records, times per mode)
            for backend in backends:
                bar.set_description(f"{shape.label()} {'causal ' if shape.causal else ''}{backend}")
                try:
                    closures, records = prepare_backend(backend, shape, inputs, modes)
                    ready[backend] = (closures, records, {m: [] for m in modes})
                except Exception as exc:
                    result.notes[(shape, backend)] = _failure_note(exc)
                    bar.update(rounds)
            for rnd in range(1, rounds + 1):
                for backend, (closures, _records, times) in list(ready.items()):
                    try:
                        for mode in modes:
                            start = datetime.datetime.now()
                            times[mode].append(median_ms(getattr(closures, mode), timing))
                            if timing_log is not None:
                                timing_log(dict(
                                    shape=shape.label(), causal=shape.causal,
                                    backend=backend, mode=mode, round=rnd,
                                    start=start.isoformat(),
                                    end=datetime.datetime.now().isoformat(),
                                    ms=times[mode][-1]))
                    except Exception as exc:
                        result.notes[(shape, backend)] = _failure_note(exc)
                        del ready[backend]
                    bar.update()
            ref = ready.get(REFERENCE_BACKEND, (None,))[0]
            for backend, (closures, records, _times) in ready.items():
                if pairs <= 0 and sustained_s <= 0:
                    break
                bar.set_description(f"{shape.label()} {backend} after the rounds")
                try:
                    records.extend(_after_rounds(backend, shape, modes, closures, ref,
                                                 pairs, sustained_s, counter))
                except Exception as exc:
                    result.notes[(shape, backend)] = _failure_note(exc)
            for backend, (_closures, records, times) in ready.items():
                result.records.extend(records)
                for mode in modes:
                    result.records.extend(timing_records(backend, shape, mode, times[mode]))
            del inputs, ready
    finally:
        bar.close()
    result.records.extend(derived_records(result.records, result.matmul_tflops))
    return result


# sustained metrics -> their ratio to sdpa-cudnn's (its value over the backend's: above 1,
# the backend is faster / spends less energy per call)
_SUSTAINED_RATIOS = {"_sustained_ms": "_sustained_vs_sdpa_cudnn",
                     "_sustained_mj": "_energy_vs_sdpa_cudnn"}


def derived_records(records: Iterable[Record], matmul_tflops: float | None) -> list[Record]:
    """Ratios: ``<mode>_pct_of_matmul`` and ``<mode>_vs_sdpa_cudnn`` for each attention
    row, and ``<mode>_sustained_vs_sdpa_cudnn`` / ``<mode>_energy_vs_sdpa_cudnn`` where
    the run measured sustained calls."""
    records = [r for r in records if r.kernel == ATTN_KERNEL]
    ref = {(r.shape, r.metric): r.value for r in records if r.backend == REFERENCE_BACKEND}
    out = []
    for r in records:
        for suffix, ratio in _SUSTAINED_RATIOS.items():
            base = ref.get((r.shape, r.metric))
            if r.metric.endswith(suffix) and base and r.value:
                mode = r.metric.removesuffix(suffix)
                out.append(Record(r.kernel, r.backend, r.shape, mode + ratio, base / r.value))
        if not r.metric.endswith("_tflops"):
            continue
        mode = r.metric.removesuffix("_tflops")
        if matmul_tflops:
            pct = 100.0 * r.value / matmul_tflops
            out.append(Record(r.kernel, r.backend, r.shape, f"{mode}_pct_of_matmul", pct))
        base = ref.get((r.shape, r.metric))
        if base:
            out.append(
                Record(r.kernel, r.backend, r.shape, f"{mode}_vs_sdpa_cudnn", r.value / base)
            )
    return out


# ----------------------------------------------------------------------------------
# suites without a GPU
# ----------------------------------------------------------------------------------


def gpu_or_smoke(suite: str, instead: str, smoke: Callable, run_gpu: Callable, args,
                 then: Callable | None = None) -> int:
    """A module suite's entry point: its GPU timings (``run_gpu(args)``) when CUDA is
    there; otherwise say so, run ``smoke()`` (a CPU check under the interpreter returning
    a line or lines to print; an exception makes the exit status 1), then print
    ``then()`` if given (host-only output such as decode's fragmentation table)."""
    if torch.cuda.is_available():
        return run_gpu(args)
    print(f"flashtile bench --suite {suite}: timings need a GPU, and no CUDA device was "
          f"found. {instead}")
    try:
        out = smoke()
        print(out if isinstance(out, str) else "\n".join(out))
    except Exception as exc:  # the exit status carries it
        print(f"{suite} smoke FAILED: {type(exc).__name__}: {exc}")
        return 1
    if then is not None:
        print(then())
    return 0

