"""flashtile.bench: FLOP model, shapes, registry, CSV/table/plot plumbing, and the CPU
path of ``flashtile bench``. No timing is asserted on: on the CPU ``do_bench`` is
replaced by a constant, and the ``gpu`` test checks only that numbers come out."""

import argparse
import csv
import datetime
import math
import statistics

import pytest
import torch

from conftest import HAS_CUDA
from flashtile.bench import backends, cli, energy, harness
from flashtile.bench.backends import BACKENDS, BackendUnavailable, Closures
from flashtile.bench.flops import (
    Shape,
    attn_flops,
    attn_fwd_flops,
    matmul_flops,
    paper_shape,
    paper_shapes,
    tflops,
)
from flashtile.bench.harness import BenchResult, Record, Timing, derived_records
from flashtile.bench.report import CSV_COLUMNS, Env, format_table, write_csv

TINY = Shape(batch=1, seqlen=64, nheads=2, head_dim=64, causal=True)
ENV = Env(gpu="test-gpu", torch="t", triton="tr", commit="abc123", date="2026-01-01")


def _tiny_inputs(device, shape=TINY):
    dims = (shape.batch, shape.seqlen, shape.nheads, shape.head_dim)
    return [torch.randn(dims, dtype=torch.bfloat16, device=device) for _ in range(4)]


def _parse(*argv):
    return cli.configure_parser(argparse.ArgumentParser()).parse_args(argv)


# ----------------------------------------------------------------------------------
# FLOP model and shapes
# ----------------------------------------------------------------------------------


def test_flop_model():
    fwd = 4 * 2 * 3 * 1024 * 512 * 64
    assert attn_fwd_flops(2, 3, 1024, 512, 64, causal=False) == fwd
    assert attn_fwd_flops(2, 3, 1024, 512, 64, causal=True) == fwd / 2
    shape = Shape(batch=4, seqlen=4096, nheads=16, head_dim=128, causal=False)
    base = 4 * 4 * 16 * 4096 * 4096 * 128
    assert attn_flops(shape, "fwd") == base
    assert attn_flops(shape, "bwd") == 2.5 * base
    assert attn_flops(shape, "fwd_bwd") == 3.5 * base
    assert attn_flops(Shape(4, 4096, 16, 128, causal=True), "fwd_bwd") == 1.75 * base
    assert matmul_flops(8192, 8192, 8192) == 2 * 8192**3
    assert tflops(2e12, 1000.0) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="mode"):
        attn_flops(shape, "backward")


def test_paper_shapes():
    shapes = paper_shapes()
    assert len(shapes) == 18
    assert [s.causal for s in shapes] == [False] * 9 + [True] * 9
    for s in shapes:
        assert s.batch * s.seqlen == 16384 and s.nheads * s.head_dim == 2048, s
        assert s.dtype == "bfloat16"
    assert paper_shape(4096, 128, False) == Shape(4, 4096, 16, 128, False)
    assert paper_shape(1024, 64, True) == Shape(16, 1024, 32, 64, True)
    assert paper_shape(16384, 256, False) == Shape(1, 16384, 8, 256, False)
    assert {s.seqlen for s in shapes} == {1024, 4096, 16384}
    assert {s.head_dim for s in shapes} == {64, 128, 256}
    with pytest.raises(ValueError, match="head_dim"):
        paper_shape(1024, 100, False)


def test_cli_shape_selection():
    shapes = cli.select_shapes(
        _parse("--seqlens", "1k", "4096", "--head-dims", "128", "--causal", "yes")
    )
    assert shapes == [Shape(16, 1024, 16, 128, True), Shape(4, 4096, 16, 128, True)]
    assert len(cli.select_shapes(_parse())) == 18
    quick = cli.select_shapes(_parse("--quick"))
    assert {(s.seqlen, s.head_dim) for s in quick} == {(1024, 128), (4096, 128)}
    args = _parse("--no-bwd", "--backends", "flashtile", "sdpa-cudnn", "--csv", "x.csv")
    assert args.no_bwd and args.backends == ["flashtile", "sdpa-cudnn"] and args.csv == "x.csv"
    assert args.suite == "core" and args.plot is None and args.commit is None
    with pytest.raises(SystemExit):
        _parse("--seqlens", "four")


# ----------------------------------------------------------------------------------
# registry and closures
# ----------------------------------------------------------------------------------


def test_registry_lists_backends():
    names = backends.backend_names()
    assert names == ["flashtile", "flashtile-nd", "sdpa-cudnn", "sdpa-flash", "sdpa-efficient",
                     "flex"]
    with pytest.raises(KeyError, match="known: flashtile"):
        backends.get_backend("cutlass")
    with pytest.raises(ValueError, match="already registered"):
        backends.register("flashtile")(lambda q, k, v, causal, dout=None: None)


@pytest.mark.skipif(HAS_CUDA, reason="checks the CPU refusal")
@pytest.mark.parametrize("name", ["sdpa-cudnn", "sdpa-flash", "sdpa-efficient", "flex"])
def test_cuda_backends_refuse_cpu(name):
    q, k, v, dout = _tiny_inputs("cpu")
    with pytest.raises(BackendUnavailable, match="CUDA"):
        backends.get_backend(name)(q, k, v, True, dout=dout)


def test_flashtile_closures(device):
    """fwd equals the public function's output; fwd_bwd returns (dq, dk, dv) equal to
    autograd's, the same on every call, and leaves the caller's tensors untouched."""
    from flashtile.ops.flash import flash_attn_func

    q, k, v, dout = _tiny_inputs(device)
    closures = backends.get_backend("flashtile")(q, k, v, True, dout=dout)
    out = closures.fwd()
    assert torch.equal(out, flash_attn_func(q, k, v, causal=True))
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    flash_attn_func(*leaves, causal=True).backward(dout)
    first, second = closures.fwd_bwd(), closures.fwd_bwd()
    for name, g1, g2, leaf in zip("qkv", first, second, leaves, strict=True):
        assert torch.equal(g1, leaf.grad), f"d{name} differs from autograd"
        assert torch.equal(g1, g2), f"d{name} changed between calls"
    assert q.grad is None and not q.requires_grad


# ----------------------------------------------------------------------------------
# derived metrics, CSV, table
# ----------------------------------------------------------------------------------


def _records():
    shape = Shape(4, 4096, 16, 128, False)
    return shape, [
        Record("attention", "flashtile", shape, "fwd_tflops", 300.0),
        Record("attention", "flashtile", shape, "fwd_bwd_tflops", 200.0),
        Record("attention", "sdpa-cudnn", shape, "fwd_tflops", 600.0),
        Record("attention", "sdpa-cudnn", shape, "fwd_bwd_tflops", 500.0),
        Record(harness.MATMUL_KERNEL, "torch", None, "tflops", 750.0),
    ]


def test_derived_records():
    shape, records = _records()
    got = {(r.backend, r.metric): r.value for r in derived_records(records, 750.0)}
    assert got[("flashtile", "fwd_vs_sdpa_cudnn")] == pytest.approx(0.5)
    assert got[("flashtile", "fwd_bwd_vs_sdpa_cudnn")] == pytest.approx(0.4)
    assert got[("sdpa-cudnn", "fwd_vs_sdpa_cudnn")] == pytest.approx(1.0)
    assert got[("flashtile", "fwd_pct_of_matmul")] == pytest.approx(40.0)
    assert got[("sdpa-cudnn", "fwd_bwd_pct_of_matmul")] == pytest.approx(500 / 7.5)


def test_csv_columns(tmp_path):
    shape, records = _records()
    path = tmp_path / "sub" / "bench.csv"
    write_csv(path, records, ENV)
    with path.open() as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    assert tuple(reader.fieldnames) == CSV_COLUMNS
    assert CSV_COLUMNS == (
        "kernel",
        "backend",
        "batch",
        "seqlen",
        "nheads",
        "head_dim",
        "causal",
        "dtype",
        "metric",
        "value",
        "gpu",
        "torch",
        "triton",
        "commit",
        "date",
    )
    assert len(rows) == len(records)
    first, matmul = rows[0], rows[-1]
    assert (first["batch"], first["seqlen"], first["nheads"], first["head_dim"]) == (
        "4",
        "4096",
        "16",
        "128",
    )
    assert first["causal"] == "0" and first["dtype"] == "bfloat16"
    assert float(first["value"]) == 300.0 and first["metric"] == "fwd_tflops"
    assert first["gpu"] == "test-gpu" and first["commit"] == "abc123"
    assert matmul["kernel"].startswith("matmul") and matmul["seqlen"] == ""


def test_format_table():
    shape, records = _records()
    result = BenchResult(records=records + derived_records(records, 750.0), matmul_tflops=750.0)
    result.notes[(shape, "flex")] = "unavailable: test reason"
    text = format_table(result, ENV)
    header = text.splitlines()[0]
    for column in ("shape", "causal", "backend", "fwd TFLOPS", "fwd+bwd TFLOPS", "fwd/cuDNN"):
        assert column in header
    row = next(line for line in text.splitlines() if " flashtile " in line)
    assert "B4 S4096 H16 D128" in row and "300.0" in row and "0.50x" in row and "40%" in row
    assert "flex: unavailable: test reason (1 shape(s))" in text
    assert "750.0 TFLOPS" in text and "abc123" in text



def test_floor_lines():
    """Issue 4's floor verdict: per way of measuring present, how many floor cells (hd 64
    / 128 from 4k) meet fwd >= 1.0x / fwd+bwd >= 0.95x, and which miss; cells outside the
    floor (hd 256, 1k) and other backends do not count."""
    from flashtile.bench.report import floor_lines

    def rec(shape, metric, value, backend="flashtile"):
        return Record("attention", backend, shape, metric, value)

    a, b = Shape(4, 4096, 16, 128, False), Shape(1, 16384, 32, 64, True)
    outside = [Shape(4, 4096, 8, 256, False), Shape(16, 1024, 16, 128, False)]
    records = [rec(a, "fwd_vs_sdpa_cudnn", 1.02), rec(a, "fwd_bwd_vs_sdpa_cudnn", 0.94),
               rec(b, "fwd_vs_sdpa_cudnn", 0.99), rec(b, "fwd_bwd_vs_sdpa_cudnn", 0.95),
               rec(b, "fwd_bwd_paired_vs_sdpa_cudnn", 0.94972),
               rec(a, "fwd_sustained_vs_sdpa_cudnn", 1.001),
               rec(b, "fwd_sustained_vs_sdpa_cudnn", 1.03),
               rec(a, "fwd_bwd_vs_sdpa_cudnn", 0.5, backend="sdpa-flash")]
    records += [rec(s, "fwd_vs_sdpa_cudnn", 0.5) for s in outside]
    lines = floor_lines(BenchResult(records=records))
    assert lines[0].startswith("issue 4 floor for flashtile")
    rounds = next(line for line in lines if line.strip().startswith("rounds"))
    assert "fwd 1/2" in rounds and "fwd+bwd 1/2" in rounds
    assert "hd 64 16k causal fwd 0.990x" in rounds
    assert "hd 128 4k non-causal fwd+bwd 0.940x" in rounds and "0.500x" not in rounds
    sustained = next(line for line in lines if line.strip().startswith("sustained"))
    assert "fwd 2/2" in sustained and "below" not in sustained and "fwd+bwd" not in sustained
    paired = next(line for line in lines if line.strip().startswith("paired"))
    assert "fwd+bwd 0/1" in paired and "fwd+bwd 0.9497x" in paired  # not "0.950x"
    assert "fwd " not in paired.replace("fwd+bwd", "")  # no paired forward measured
    assert "issue 4 floor" in format_table(BenchResult(records=records))
    assert floor_lines(BenchResult(records=[rec(s, "fwd_vs_sdpa_cudnn", 0.5)
                                            for s in outside])) == []

def test_read_csv_round_trip_and_overlay(tmp_path):
    """read_csv gives back what write_csv wrote; a later file's rows replace an earlier
    one's for the same shape, backend and metric, and add the ones it alone has."""
    from flashtile.bench.report import read_csv

    shape, records = _records()
    records = records + derived_records(records, 750.0)
    write_csv(tmp_path / "a.csv", records, ENV)
    result, envs = read_csv(tmp_path / "a.csv")
    attn = [r for r in records if r.kernel == "attention"]
    key = lambda r: (r.kernel, r.backend, r.shape, r.metric)  # noqa: E731
    assert {key(r): r.value for r in result.records} == pytest.approx(  # 6 digits in a CSV
        {key(r): r.value for r in attn}, rel=1e-5)
    assert result.matmul_tflops == 750.0 and envs == [ENV]
    assert result.backends == ["flashtile", "sdpa-cudnn"]

    other = Shape(1, 16384, 16, 128, True)
    newer = [Record("attention", "flashtile", shape, "fwd_tflops", 330.0),
             Record("attention", "flashtile", other, "fwd_tflops", 400.0)]
    env2 = Env(gpu="test-gpu", torch="t", triton="tr", commit="def456", date="2026-01-02")
    write_csv(tmp_path / "b.csv", newer, env2)
    merged, envs = read_csv([tmp_path / "a.csv", tmp_path / "b.csv"])
    got = {(r.shape, r.backend, r.metric): r.value for r in merged.records}
    assert got[(shape, "flashtile", "fwd_tflops")] == 330.0
    assert got[(other, "flashtile", "fwd_tflops")] == 400.0
    assert got[(shape, "sdpa-cudnn", "fwd_tflops")] == 600.0
    assert [e.commit for e in envs] == ["abc123", "def456"]
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not a flashtile bench CSV"):
        read_csv(tmp_path / "bad.csv")


def test_from_csv_cli(tmp_path, capsys):
    """``flashtile bench --from-csv`` measures nothing: the table and the figures of a
    saved run, on any machine."""
    pytest.importorskip("matplotlib")
    shape, records = _records()
    write_csv(tmp_path / "run.csv", records + derived_records(records, 750.0), ENV)
    args = _parse("--from-csv", str(tmp_path / "run.csv"), "--plot", str(tmp_path / "t.png"),
                  "--ratio-plot", str(tmp_path / "r.png"))
    assert cli.run(args) == 0
    out = capsys.readouterr().out
    assert "B4 S4096 H16 D128" in out and "0.50x" in out and "abc123" in out
    for name in ("t.png", "r.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"
    assert cli.run(_parse("--from-csv", str(tmp_path / "missing.csv"))) == 2


def test_plot_ratios_needs_ratios(tmp_path):
    pytest.importorskip("matplotlib")
    from flashtile.bench.plots import plot_ratios

    shape, records = _records()
    with pytest.raises(ValueError, match="no ratios"):
        plot_ratios(BenchResult(records=records), tmp_path / "r.png")


# ----------------------------------------------------------------------------------
# the harness end to end, with do_bench replaced by a constant
# ----------------------------------------------------------------------------------


def _reference_factory(q, k, v, causal, *, dout=None):
    from flashtile import reference

    return backends._closures(
        lambda *t: reference.flash_attn_func(*t, causal=causal), (q, k, v), dout
    )


def _unavailable_factory(q, k, v, causal, *, dout=None):
    raise BackendUnavailable("not here")


def _broken_factory(q, k, v, causal, *, dout=None):
    return Closures(fwd=lambda: 1 / 0, fwd_bwd=lambda: 1 / 0)


def test_run_benchmark_plumbing(monkeypatch, tmp_path, device):
    """Every backend gets records or a note; derived ratios, CSV, table, plot follow."""
    monkeypatch.setattr(harness, "median_ms", lambda fn, timing: 2.0)
    monkeypatch.setattr(harness, "matmul_ceiling", lambda device, timing: 100.0)
    monkeypatch.setitem(BACKENDS, "sdpa-cudnn", _reference_factory)
    monkeypatch.setitem(BACKENDS, "test-unavailable", _unavailable_factory)
    monkeypatch.setitem(BACKENDS, "test-broken", _broken_factory)
    names = ["flashtile", "sdpa-cudnn", "test-unavailable", "test-broken"]
    result = harness.run_benchmark([TINY], names, device=device, progress=False)
    got = {(r.backend, r.metric): r.value for r in result.records}
    flops = attn_flops(TINY, "fwd_bwd")
    assert got[("flashtile", "fwd_bwd_tflops")] == pytest.approx(tflops(flops, 2.0))
    assert got[("flashtile", "fwd_vs_sdpa_cudnn")] == pytest.approx(1.0)
    assert math.isfinite(got[("flashtile", "fwd_first_call_s")])
    assert result.notes[(TINY, "test-unavailable")] == "unavailable: not here"
    assert result.notes[(TINY, "test-broken")].startswith("failed: ZeroDivisionError")
    write_csv(tmp_path / "r.csv", result.records, ENV)
    assert "test-broken: failed" in format_table(result)
    pytest.importorskip("matplotlib")
    from flashtile.bench.plots import plot_tflops

    png = plot_tflops(result, tmp_path / "fig.png")
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_run_benchmark_rounds(monkeypatch, device):
    """rounds=3: every backend timed three times, backend by backend in turn (A B A B A
    B), the median kept as <mode>_ms (TFLOPS and ratios from it), the spread recorded;
    a backend that failed in the first pass is not timed again."""
    calls = _fake_timings(monkeypatch, {
        "flashtile": [3.0, 1.0, 2.0, 5.0, 4.0, 6.0], "sdpa-cudnn": [2.0] * 6},
        lambda fn, timing: fn.owner)
    monkeypatch.setitem(BACKENDS, "test-broken", _broken_factory)
    log = []
    result = harness.run_benchmark([TINY], ["flashtile", "sdpa-cudnn", "test-broken"],
                                   device=device, progress=False, rounds=3,
                                   timing_log=log.append)
    # first pass fwd, fwd_bwd per backend, then two rounds of both backends in turn
    assert calls == ["flashtile"] * 2 + ["sdpa-cudnn"] * 2 + (
        ["flashtile"] * 2 + ["sdpa-cudnn"] * 2) * 2, calls
    got = {(r.backend, r.metric): r.value for r in result.records}
    # flashtile fwd: 3, 2, 4 -> 3; fwd_bwd: 1, 5, 6 -> 5
    assert got[("flashtile", "fwd_ms")] == 3.0 and got[("flashtile", "fwd_bwd_ms")] == 5.0
    assert got[("flashtile", "fwd_ms_spread")] == pytest.approx(4.0 / 2.0 - 1)
    assert [got[("flashtile", f"fwd_bwd_ms_round{i}")] for i in (1, 2, 3)] == [1.0, 5.0, 6.0]
    assert ("flashtile", "fwd_ms_round4") not in got
    assert got[("flashtile", "fwd_vs_sdpa_cudnn")] == pytest.approx(2.0 / 3.0)
    assert got[("flashtile", "fwd_bwd_tflops")] == pytest.approx(
        tflops(attn_flops(TINY, "fwd_bwd"), 5.0))
    assert ("test-broken", "fwd_ms_spread") not in got
    assert sum(1 for r in result.records if r.metric == "fwd_ms") == 2
    # the timing log: one entry per timing, in the order timed, with its wall-clock span
    assert [(e["backend"], e["mode"], e["round"]) for e in log] == [
        (b, m, r) for r in (1, 2, 3) for b in ("flashtile", "sdpa-cudnn")
        for m in ("fwd", "fwd_bwd")]
    assert [e["ms"] for e in log if e["backend"] == "flashtile"] == [3.0, 1.0, 2.0, 5.0,
                                                                      4.0, 6.0]
    spans = [(datetime.datetime.fromisoformat(e["start"]),
              datetime.datetime.fromisoformat(e["end"])) for e in log]
    assert all(a <= b for a, b in spans) and all(
        spans[i][1] <= spans[i + 1][0] for i in range(len(spans) - 1))
    assert {e["shape"] for e in log} == {TINY.label()} and log[0]["causal"] == TINY.causal



def test_run_benchmark_pairs(monkeypatch, device):
    """pairs=4: after the rounds, each backend against sdpa-cudnn in 4 adjacent pairs,
    the order alternating (ref first, then the backend first); the median of the
    per-pair ratios (ref / backend) and its quartiles land in the records and, as two
    columns, in the table; a run without pairs has neither."""
    calls = _fake_timings(monkeypatch, {
        "flashtile": [3.0, 3.0] + [1.0, 2.0, 4.0, 2.0] * 2 + [3.0, 3.0],
        "sdpa-cudnn": [2.0, 2.0] + [2.0, 3.0, 2.0, 2.0] * 2},
        lambda fn, timing: (fn.owner, timing.rep_ms))
    result = harness.run_benchmark([TINY], ["flashtile", "sdpa-cudnn"], device=device,
                                   progress=False, pairs=4)
    rep = harness.PAIR_TIMING.rep_ms
    # the round (fwd, fwd_bwd per backend), then per mode 4 pairs: ref first, then not
    pair = [("sdpa-cudnn", rep), ("flashtile", rep), ("flashtile", rep), ("sdpa-cudnn", rep)]
    assert calls[4:] == pair * 4 and len(calls) == 20, calls
    got = {(r.backend, r.metric): r.value for r in result.records}
    # fwd ratios ref / flashtile: 2/1, 3/2, 2/4, 2/2 -> median of (2, 1.5, 0.5, 1) = 1.25
    assert got[("flashtile", "fwd_paired_vs_sdpa_cudnn")] == pytest.approx(1.25)
    q1, _, q3 = statistics.quantiles([2.0, 1.5, 0.5, 1.0], n=4)
    assert got[("flashtile", "fwd_paired_q1")] == pytest.approx(q1)
    assert got[("flashtile", "fwd_paired_q3")] == pytest.approx(q3)
    assert ("flashtile", "fwd_bwd_paired_vs_sdpa_cudnn") in got
    assert not any(b == "sdpa-cudnn" and "paired" in m for b, m in got)
    table = format_table(result)
    assert "fwd paired" in table and "1.250x" in table
    plain = harness.run_benchmark([TINY], ["flashtile"], device=device, progress=False,
                                  pairs=4)  # no reference: nothing to pair with
    assert not any("paired" in r.metric for r in plain.records)
    assert "paired" not in format_table(plain)


def _fake_timings(monkeypatch, times, entry):
    """flashtile and sdpa-cudnn closures tagged with their backend, ``median_ms``
    returning each backend's next time from ``times`` (name -> list), no matmul: the
    returned list gets ``entry(fn, timing)`` per timing, in the order timed."""
    calls, left = [], {name: iter(ts) for name, ts in times.items()}

    def fake_median(fn, timing):
        calls.append(entry(fn, timing))
        return next(left[fn.owner])

    def tagged(name, factory):
        def make(q, k, v, causal, *, dout=None):
            c = factory(q, k, v, causal, dout=dout)
            return Closures(fwd=_owned(c.fwd, name), fwd_bwd=_owned(c.fwd_bwd, name))
        return make

    monkeypatch.setattr(harness, "median_ms", fake_median)
    monkeypatch.setattr(harness, "matmul_ceiling", lambda device, timing: 100.0)
    monkeypatch.setitem(BACKENDS, "sdpa-cudnn", tagged("sdpa-cudnn", _reference_factory))
    monkeypatch.setitem(BACKENDS, "flashtile", tagged("flashtile", BACKENDS["flashtile"]))
    return calls

def _owned(fn, name):
    def call():
        return fn()

    call.owner = name
    return call


@pytest.mark.skipif(HAS_CUDA, reason="the CPU path of `flashtile bench`")
def test_cli_run_without_gpu(capsys):
    assert cli.run(_parse()) == 0
    out = capsys.readouterr().out
    assert "timings need a GPU" in out
    assert out.count("smoke ok") == 2


@pytest.mark.gpu
def test_run_benchmark_gpu(tmp_path):
    """A quick real run on one paper shape: numbers come out for both backends, and
    two paired ratios (``pairs``) per mode."""
    shape = paper_shape(1024, 128, True)
    result = harness.run_benchmark(
        [shape], ["flashtile", "sdpa-cudnn"], timing=Timing.quick(), progress=False,
        pairs=2,
    )
    got = {(r.backend, r.metric): r.value for r in result.records}
    assert result.notes == {}
    assert got[("flashtile", "fwd_bwd_tflops")] > 0 and result.matmul_tflops > 0
    assert ("flashtile", "fwd_bwd_vs_sdpa_cudnn") in got
    assert got[("flashtile", "fwd_bwd_peak_mem_mib")] > 0
    assert got[("flashtile", "fwd_bwd_paired_vs_sdpa_cudnn")] > 0


def test_ncu_summary_parses_raw_csv(tmp_path, capsys):
    """scripts/ncu_ladder.py reads ncu's raw CSV (metric names, a units row, a row per
    kernel): times, registers, occupancy, launch shape, the busiest pipes and the top
    stall reasons (per issued instruction); `summarize --files` labels rows by file
    stem."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "ncu_ladder.py"
    spec = importlib.util.spec_from_file_location("ncu_ladder", path)
    ncu = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ncu)
    names = ["ID", "Kernel Name", "gpu__time_duration.sum",
             "launch__registers_per_thread", "launch__grid_size", "launch__block_size",
             "launch__shared_mem_per_block",
             "sm__warps_active.avg.pct_of_peak_sustained_active",
             "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
             "sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active",
             "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
             "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio",
             "smsp__average_warp_latency_issue_stalled_barrier.ratio"]
    units = ["", "", "usecond", "register/thread", "", "", "Kbyte", "%", "%", "%", "ratio",
             "ratio", "ratio"]
    rows = [["0", "_bwd_dkdv_kernel", "2480", "168", "8,192", "128", "49.15", "18.5", "46.0",
             "12.0", "1.1", "1.2", "9.0"]]
    text = "==PROF== junk line\n" + "\n".join(
        ",".join(f'"{c}"' for c in r) for r in [names, units, *rows])
    (tmp_path / "ncu_bwd64.csv").write_text(text)
    (rec,) = ncu.parse(tmp_path / "ncu_bwd64.csv")
    assert rec["kernel"] == "_bwd_dkdv_kernel" and abs(rec["ms"] - 2.48) < 1e-9
    assert rec["regs"] == 168 and rec["occ %"] == 18.5
    # launch shape (LaunchStats): grid, block, shared memory per block in KB
    assert (rec["grid"], rec["block"]) == (8192, 128) and abs(rec["smem KB"] - 49.15) < 1e-9
    assert rec["pipes"].startswith("tensor_op_gmma 46%"), rec["pipes"]
    # the per-issue ratios only (not the latency one), largest first
    assert rec["stalls"] == "wait 1.2, long_scoreboard 1.1", rec["stalls"]
    assert ncu.main(["summarize", str(tmp_path), "--files", "ncu_bwd64.csv"]) == 0
    out = capsys.readouterr().out
    assert ("| ncu_bwd64 | _bwd_dkdv_kernel | 2.48 | - | - | - | 168 | 18.5 | 8192 | 128 "
            "| 49.1 |") in out, out


def test_clock_sampler(monkeypatch):
    """ClockSampler parses nvidia-smi's "clock, power, reasons" lines while open and
    stops when closed; a driver without the reasons field falls back to clock and power;
    without nvidia-smi it has no samples and says so."""
    import subprocess
    import time
    from types import SimpleNamespace

    from flashtile.bench import clocks

    monkeypatch.setattr(clocks.torch.cuda, "current_device", lambda: 0)
    calls = []

    def fake_run(cmd, **kw):
        calls.append(cmd)
        mask = "0x0000000000000004" if len(calls) % 2 else "0x0000000000000000"
        return SimpleNamespace(stdout=f"{1500 + len(calls)}, 600.5, {mask}\n")

    monkeypatch.setattr(subprocess, "run", fake_run)
    with clocks.ClockSampler(period_s=0.001) as sampler:
        while len(sampler.samples) < 4:
            time.sleep(0.001)
    n = len(sampler.samples)
    time.sleep(0.01)
    assert len(sampler.samples) == n  # stopped
    assert sampler.samples[0] == (1501.0, 600.5) and sampler.reasons[:2] == [4, 0]
    assert "clocks_event_reasons.active" in calls[0][1]
    assert 0.3 < sampler.reason_shares()["SW power cap"] < 0.7
    text = sampler.summary()
    assert "SM clock mean" in text and "600 W" in text and "SW power cap" in text

    def old_driver(cmd, **kw):  # the reasons field unknown: an error line, no numbers
        if "clocks_event_reasons" in cmd[1]:
            return SimpleNamespace(stdout="Field \"clocks_event_reasons.active\" is not a "
                                          "valid field to query.\n")
        return SimpleNamespace(stdout="1400, 500\n")

    monkeypatch.setattr(subprocess, "run", old_driver)
    with clocks.ClockSampler(period_s=0.001) as sampler:
        while len(sampler.samples) < 2:
            time.sleep(0.001)
    assert sampler.samples[0] == (1400.0, 500.0) and sampler.reasons == []
    assert "reasons" not in sampler.summary()

    def missing(cmd, **kw):
        raise FileNotFoundError("nvidia-smi")

    monkeypatch.setattr(subprocess, "run", missing)
    with clocks.ClockSampler() as sampler:
        pass
    assert sampler.samples == [] and "no samples" in sampler.summary()


def test_trace_stage_c_analyse():
    """scripts/trace_stage_c.py's analysis of a stage C timeline (rows of 8 ns stamps
    per (item, warpgroup): SM, start, Q ready, prologue done, loops done, end, steps,
    program): phase medians, the gap between programs on an SM, the idle share of the
    SMs' time and the drain past the median SM's end, on a hand-made timeline of 2 SMs
    (SM 0: programs over 0-1 us and 1.2-2 us; SM 1: one over 0-3 us)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "trace_stage_c.py"
    spec = importlib.util.spec_from_file_location("trace_stage_c", path)
    trace = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(trace)
    rows = []
    for sm, start, end in ((0, 10, 1010), (0, 1210, 2010), (1, 10, 3010)):
        w = [sm, start, start + 100, start + 200, end - 100, end, 5, sm]
        rows.append([w, w])
    r = trace.analyse(torch.tensor(rows, dtype=torch.int64))
    assert (r["programs"], r["sms"]) == (3, 2)
    assert r["span_us"] == pytest.approx(3.0)
    assert r["gap_us"] == pytest.approx(0.2)  # SM 0: 1.010 -> 1.210
    assert r["idle_pct"] == pytest.approx(20.0)  # 4.8 us busy of 2 x 3.0
    assert r["drain_us"] == pytest.approx(1.0)  # SM 1 ends at 3.0, the median SM at 2.0
    assert r["q_wait_us"] == pytest.approx(0.1) and r["prologue_us"] == pytest.approx(0.1)
    assert r["program_us"] == pytest.approx(1.0)  # median of 1.0, 0.8, 3.0


def test_clock_join(tmp_path, capsys):
    """scripts/clock_join.py: each timing gets the mean clock / power / temperature of
    the nvidia-smi samples inside its wall-clock span, and the power-capped share;
    header and unparsable lines are skipped; a timing with no sample reads None."""
    import importlib.util
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "clock_join.py"
    spec = importlib.util.spec_from_file_location("clock_join", path)
    cj = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cj)
    smi = tmp_path / "smi.csv"
    smi.write_text(
        "timestamp, clocks.sm, power.draw, temperature.gpu, reasons\n"
        "2026/12/07 10:00:00.100, 1980, 500.0, 50, 0x0000000000000000\n"
        "2026/12/07 10:00:00.200, 1800, 700.0, 60, 0x0000000000000004\n"
        "2026/12/07 10:00:00.300, 1700, 700.0, 62, 0x0000000000000004\n"
        "[Unknown Error]\n"
        "2026/12/07 10:00:01.300, 1500, 690.0, 70, 0x0000000000000004\n")
    timings = tmp_path / "t.jsonl"
    entries = [
        dict(shape="B1 S16 H2 D64", causal=False, backend="flashtile", mode="fwd", round=1,
             start="2026-12-07T10:00:00.050000", end="2026-12-07T10:00:00.250000", ms=1.0),
        dict(shape="B1 S16 H2 D64", causal=False, backend="sdpa-cudnn", mode="fwd",
             round=1, start="2026-12-07T10:00:00.250000", end="2026-12-07T10:00:00.900000",
             ms=1.1),
        dict(shape="B1 S16 H2 D64", causal=False, backend="flashtile", mode="fwd", round=2,
             start="2026-12-07T10:00:00.900000", end="2026-12-07T10:00:01.000000", ms=1.2)]
    timings.write_text("".join(json.dumps(e) + "\n" for e in entries))
    rows = cj.join(entries, cj.read_smi(str(smi)))
    assert [r["samples"] for r in rows] == [2, 1, 0]
    assert rows[0]["mhz"] == 1890 and rows[0]["watts"] == 600 and rows[0]["temp_c"] == 55
    assert rows[0]["power_capped"] == 0.5 and rows[1]["power_capped"] == 1.0
    assert rows[2]["mhz"] is None and rows[2]["power_capped"] is None
    out_csv = tmp_path / "joined.csv"
    assert cj.main(["--smi", str(smi), "--timings", str(timings), "--csv", str(out_csv)]) == 0
    out = capsys.readouterr().out
    assert "B1 S16 H2 D64" in out and "1890" in out
    assert len(list(csv.DictReader(open(out_csv)))) == 3


def test_pairs_compare(tmp_path, capsys):
    """scripts/pairs_compare.py: per cell and mode, flashtile's round-median and paired
    ratios in two runs and how far apart they are; other backends' rows are ignored."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "pairs_compare.py"
    spec = importlib.util.spec_from_file_location("pairs_compare", path)
    pc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pc)

    def write(name, rounds, paired):
        f = tmp_path / name
        with open(f, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["backend", "head_dim", "seqlen", "causal", "metric", "value"])
            for mode in ("fwd", "fwd_bwd"):
                w.writerow(["flashtile", 128, 4096, 0, f"{mode}_vs_sdpa_cudnn", rounds])
                w.writerow(["flashtile", 128, 4096, 0, f"{mode}_paired_vs_sdpa_cudnn",
                            paired])
                w.writerow(["sdpa-cudnn", 128, 4096, 0, f"{mode}_vs_sdpa_cudnn", 1.0])
            w.writerow(["torch", "", "", "", "tflops", 700.0])
        return str(f)

    a, b = write("a.csv", 1.0, 0.98), write("b.csv", 1.05, 0.99)
    rows = pc.compare(pc.load(a), pc.load(b))
    assert [(r["head_dim"], r["seqlen"], r["causal"], r["mode"]) for r in rows] == [
        (128, 4096, False, "fwd"), (128, 4096, False, "fwd_bwd")]
    assert rows[0]["rounds_diff"] == pytest.approx(abs(1.0 / 1.05 - 1))
    assert rows[0]["paired_diff"] == pytest.approx(abs(0.98 / 0.99 - 1))
    assert pc.main([a, b]) == 0
    out = capsys.readouterr().out
    assert "hd 128 4k non-causal" in out and "paired: A vs B median 1.0%" in out
    assert pc.main([a]) == 2


def test_run_benchmark_sustained(monkeypatch, device):
    """sustained_s > 0: after the rounds each backend's calls run back to back
    (energy.sustained, faked here): time, energy and power per call in the records, the
    ratios to sdpa-cudnn derived (its value over the backend's), and the table's
    sustained / energy columns; without an energy counter only the time."""
    _fake_timings(monkeypatch, {"flashtile": [1.0] * 4, "sdpa-cudnn": [1.0] * 4},
                  lambda fn, timing: fn.owner)
    runs = {"flashtile": {"fwd": (2.0, 1400.0), "fwd_bwd": (8.0, 5600.0)},
            "sdpa-cudnn": {"fwd": (2.2, 1430.0), "fwd_bwd": (7.6, 5320.0)}}
    seen = []

    def fake_sustained(fn, seconds, counter):
        seen.append((fn.owner, seconds, counter))
        mode = "fwd" if len([s for s in seen if s[0] == fn.owner]) == 1 else "fwd_bwd"
        ms, mj = runs[fn.owner][mode]
        if counter is None:
            return energy.Sustained(10, ms, None, None)
        return energy.Sustained(10, ms, mj, mj / ms)

    monkeypatch.setattr(harness.energy, "sustained", fake_sustained)
    monkeypatch.setattr(harness.energy, "energy_counter", lambda device: "counter")
    result = harness.run_benchmark([TINY], ["flashtile", "sdpa-cudnn"], device=device,
                                   progress=False, sustained_s=0.5)
    assert [s[0] for s in seen] == ["flashtile"] * 2 + ["sdpa-cudnn"] * 2
    assert all(s[1] == 0.5 and s[2] == "counter" for s in seen)
    got = {(r.backend, r.metric): r.value for r in result.records}
    assert got[("flashtile", "fwd_bwd_sustained_ms")] == 8.0
    assert got[("flashtile", "fwd_bwd_sustained_mj")] == 5600.0
    assert got[("flashtile", "fwd_bwd_sustained_watts")] == pytest.approx(700.0)
    assert got[("flashtile", "fwd_bwd_sustained_vs_sdpa_cudnn")] == pytest.approx(7.6 / 8.0)
    assert got[("flashtile", "fwd_bwd_energy_vs_sdpa_cudnn")] == pytest.approx(5320 / 5600)
    assert got[("flashtile", "fwd_sustained_vs_sdpa_cudnn")] == pytest.approx(2.2 / 2.0)
    table = format_table(result)
    assert "fwd+bwd sust." in table and "0.950x" in table and "fwd+bwd energy" in table
    # no NVML: the time alone, no energy column
    seen.clear()
    monkeypatch.setattr(harness.energy, "energy_counter", lambda device: None)
    _fake_timings(monkeypatch, {"flashtile": [1.0] * 4, "sdpa-cudnn": [1.0] * 4},
                  lambda fn, timing: fn.owner)
    plain = harness.run_benchmark([TINY], ["flashtile", "sdpa-cudnn"], device=device,
                                  progress=False, sustained_s=0.5)
    metrics = {r.metric for r in plain.records}
    assert "fwd_bwd_sustained_ms" in metrics and "fwd_bwd_sustained_mj" not in metrics
    assert "energy" not in format_table(plain)


def test_nvml_energy_through_ctypes():
    """energy.NvmlEnergy calls NVML's C entry points (init, handle by index, the total
    energy counter) and reads the counter through its out-pointer; a failing call raises
    OSError, which energy_counter turns into None."""
    class FakeNvml:
        def __init__(self, rc=0):
            self.mj, self.rc, self.index = 1000, rc, None

        def nvmlInit_v2(self):
            return 0

        def nvmlDeviceGetHandleByIndex_v2(self, index, handle):
            self.index = index
            return 0

        def nvmlDeviceGetTotalEnergyConsumption(self, handle, out):
            out._obj.value = self.mj
            self.mj += 250
            return self.rc

    lib = FakeNvml()
    counter = energy.NvmlEnergy(3, lib=lib)
    assert lib.index == 3
    assert counter.millijoules() == 1250 and counter.millijoules() == 1500
    with pytest.raises(OSError):
        energy.NvmlEnergy(0, lib=FakeNvml(rc=3))  # NVML_ERROR_NOT_SUPPORTED


@pytest.mark.gpu
def test_sustained_gpu():
    """energy.sustained on the GPU: a matmul back to back for 0.2 s gives calls, a time
    per call, and (where NVML answers) energy and a power between 10 W and 2 kW."""
    a = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
    counter = energy.energy_counter()
    run = energy.sustained(lambda: a @ a, 0.2, counter)
    assert run.calls > 10 and run.ms > 0
    if counter is not None:
        assert run.mj_per_call > 0 and 10 < run.watts < 2000


def test_sustained_bookkeeping(monkeypatch):
    """energy.sustained with CUDA faked: it stops once the wall time passes ``seconds``,
    keeps at most two calls' events outstanding (waiting on the oldest), divides the
    events' span and the counter's delta by the calls made, and gives watts as mJ / ms."""
    clock = {"t": 0.0}
    waited = []

    class FakeEvent:
        def __init__(self, enable_timing=False):
            self.t = None

        def record(self):
            self.t = clock["t"]

        def synchronize(self):
            waited.append(self.t)

        def elapsed_time(self, end):
            return (end.t - self.t) * 1e3  # ms

    class FakeCounter:
        def __init__(self):
            self.reads = [5000, 5000 + 7 * 900]  # mJ at the start and the end

        def millijoules(self):
            return self.reads.pop(0)

    calls = []

    def fn():
        calls.append(clock["t"])
        clock["t"] += 0.003  # 3 ms per call

    monkeypatch.setattr(energy.torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(energy.torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(energy.time, "perf_counter", lambda: clock["t"])
    run = energy.sustained(fn, seconds=0.02, counter=FakeCounter())
    # one warm-up call, then calls until 20 ms have passed: 7 of 3 ms
    assert len(calls) == 8 and run.calls == 7
    assert run.ms == pytest.approx(3.0)
    assert run.mj_per_call == pytest.approx(900.0) and run.watts == pytest.approx(300.0)
    # after the third call, each call waited on the event of the call two before it
    assert len(waited) == 7 - 2 + 1  # the in-loop waits, then the end event
    plain = energy.sustained(fn, seconds=0.02)
    assert plain.mj_per_call is None and plain.watts is None and plain.calls == 7


def test_gpu_suites_parse_and_source_their_helpers():
    """Every scripts/suites/*.sh parses (`bash -n`), and one that calls a helper of
    scripts/suites/lib/steps.sh sources that file (or a suite that does) first: a suite
    is written on a machine without a GPU and first runs on device time."""
    import re
    import shutil
    import subprocess
    from pathlib import Path

    if shutil.which("bash") is None:
        pytest.skip("no bash")
    suites = Path(__file__).resolve().parents[1] / "scripts" / "suites"
    steps = (suites / "lib" / "steps.sh").read_text()
    helpers = set(re.findall(r"^([a-z_]+)\(\) \{", steps, re.M))
    assert {"gpu_pytest", "env_ab", "clock_log_start", "clock_log_stop"} <= helpers
    bad = {}
    for path in sorted(suites.glob("*.sh")) + [suites / "lib" / "steps.sh"]:
        check = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        if check.returncode:
            bad[path.name] = check.stderr.strip()
            continue
        text = path.read_text()
        calls = [h for h in helpers if re.search(rf"^\s*{h}\b", text, re.M)]
        found = re.search(r"^source scripts/suites/", text, re.M)  # steps.sh, or a
        src = found.start() if found else -1  # suite that sources it
        if path.parent == suites and calls and not 0 <= src < min(
                re.search(rf"^\s*{h}\b", text, re.M).start() for h in calls):
            bad[path.name] = f"calls {calls} without sourcing steps.sh first"
    assert not bad, bad
