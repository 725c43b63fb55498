"""The kernel ladder: every rung against the fp64 reference by the DESIGN.md rule, with
``ref_lp`` in the precision the rung promises (``flashtile.ladder.reference_for``:
fp32 rungs against an fp32 reference, v4 against emulated tf32, the rest against the
input dtype); the ``flashtile ladder`` command's CPU path, its models and its writers.
CPU runs the kernels under the interpreter on small shapes; ``gpu`` tests run larger
ones on the H200."""

import argparse
import csv
import math

import pytest
import torch

from conftest import DEVICE, HAS_CUDA
from flashtile import ladder
from flashtile.ladder import run as ladder_run
from flashtile.validate import make_qkv

NAMES = ladder.rung_names()

# (batch, seqlen_q, seqlen_k, nheads, head_dim, causal, dtype, kind, layout, scale):
# seqlen 1, odd lengths, seqlen_q != seqlen_k both ways (causal with seqlen_q >
# seqlen_k leaves rows with no key), padded head dims, strided inputs, both
# adversarial kinds, a non-default softmax_scale. One head where 113 x 113 (the
# interpreter's cost is per tile), two elsewhere.
CASES = [
    (1, 1, 1, 2, 64, False, torch.bfloat16, "randn", "contiguous", None),
    (2, 17, 17, 2, 64, True, torch.float16, "randn", "contiguous", None),
    (1, 113, 113, 1, 40, False, torch.bfloat16, "wide_logits", "strided", None),
    (1, 113, 113, 1, 64, True, torch.bfloat16, "late_spike", "contiguous", None),
    (1, 17, 113, 2, 128, True, torch.float16, "late_spike", "strided", None),
    (1, 113, 17, 2, 64, True, torch.bfloat16, "wide_logits", "contiguous", None),
    (1, 113, 17, 2, 32, False, torch.bfloat16, "late_spike", "contiguous", None),
    (1, 1, 113, 2, 64, True, torch.bfloat16, "randn", "contiguous", None),
    (1, 33, 47, 2, 32, True, torch.bfloat16, "randn", "contiguous", 0.3),
]


def _case_id(c):
    b, sq, sk, h, d, causal, dtype, kind, layout, scale = c
    dt = str(dtype).replace("torch.", "")
    mask = ("causal" if causal else "full") + (f"-scale{scale}" if scale else "")
    return f"b{b}-q{sq}-k{sk}-h{h}-d{d}-{mask}-{dt}-{kind}-{layout}"


def _summary(checks) -> str:
    return "; ".join(str(c) for c in checks)


# ----------------------------------------------------------------------------------
# the rungs
# ----------------------------------------------------------------------------------


def test_registry():
    """Bottom to top, v1 first and the production kernel last, each with a precision."""
    rungs = ladder.RUNGS
    assert list(rungs) == NAMES
    assert NAMES[0] == "v1_naive" and NAMES[-1] == "production"
    assert [r.precision for r in rungs.values()] == [
        "fp32", "fp32", "fp32", "tf32", "input", "input", "input", "input"
    ]
    assert all(callable(r.fn) for r in rungs.values())


@pytest.mark.parametrize("case", CASES, ids=_case_id)
@pytest.mark.parametrize("name", NAMES)
def test_rung(name, case, seed, device):
    """out and lse within the DESIGN.md bound of the reference in the rung's precision;
    rows with no key give out = 0 and lse = -inf exactly."""
    batch, sq, sk, h, d, causal, dtype, kind, layout, scale = case
    q, k, v = make_qkv(batch, sq, sk, h, h, d, dtype, device, kind, layout, seed)
    checks = ladder.check_rung(name, q, k, v, causal=causal, softmax_scale=scale)
    assert all(c.ok for c in checks), f"{name} (seed {seed}): {_summary(checks)}"
    if causal and sq > sk:
        out, lse = ladder.RUNGS[name].fn(q, k, v, causal=True)
        empty = slice(0, sq - sk)  # row i sees key j <= i + sk - sq
        assert torch.isneginf(lse[:, :, empty]).all(), lse[:, :, empty]
        assert (out[:, empty] == 0).all()


@pytest.mark.parametrize("name", NAMES)
def test_rung_rejects(name, device):
    """MHA only and 16-bit inputs only, refused before any launch."""
    fn = ladder.RUNGS[name].fn
    q = torch.randn(1, 8, 4, 32, device=device, dtype=torch.bfloat16)
    kv = torch.randn(1, 8, 2, 32, device=device, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="MHA only"):
        fn(q, kv, kv)
    with pytest.raises(TypeError, match="float16 or bfloat16"):
        fn(q.float(), q.float(), q.float())
    with pytest.raises(ValueError, match="softmax_scale"):
        fn(q, q, q, softmax_scale=-1.0)


@pytest.mark.gpu
@pytest.mark.parametrize("seqlens", [(1024, 1024), (1000, 2049), (2049, 1000)])
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", NAMES)
def test_rung_gpu(name, causal, head_dim, seqlens, seed, device):
    sq, sk = seqlens
    for kind in ("randn", "wide_logits", "late_spike"):
        q, k, v = make_qkv(2, sq, sk, 4, 4, head_dim, torch.bfloat16, device, kind,
                           "contiguous", seed)
        checks = ladder.check_rung(name, q, k, v, causal=causal)
        assert all(c.ok for c in checks), f"{name} {kind} (seed {seed}): {_summary(checks)}"


# ----------------------------------------------------------------------------------
# references and configs
# ----------------------------------------------------------------------------------


def test_round_to_tf32():
    """Round to nearest even at 10 mantissa bits; bf16 and fp16 values are exact."""
    x = torch.tensor([1 + 2**-11, 1 + 3 * 2**-11, 1 + 2**-11 + 2**-20, -(1 + 2**-11),
                      float("inf"), float("-inf")])
    want = torch.tensor([1.0, 1 + 2**-9, 1 + 2**-10, -1.0, float("inf"), float("-inf")])
    assert torch.equal(ladder.round_to_tf32(x), want), ladder.round_to_tf32(x)
    small = float(ladder.round_to_tf32(torch.tensor([1e-30]))[0])
    assert math.isclose(small, 1e-30, rel_tol=2**-11)
    for dtype in (torch.bfloat16, torch.float16):
        t = torch.randn(1000).to(dtype).float()
        assert torch.equal(ladder.round_to_tf32(t), t)


def test_reference_for_precisions():
    q, k, v = make_qkv(1, 9, 9, 1, 1, 16, torch.bfloat16, "cpu", "randn", "contiguous", 3)
    for precision, out_dtype in (("fp32", torch.float32), ("tf32", torch.float32),
                                 ("input", torch.bfloat16)):
        out, lse = ladder.reference_for(precision, q, k, v, causal=True)
        assert out.dtype == out_dtype and lse.dtype == torch.float32
    with pytest.raises(ValueError, match="precision"):
        ladder.reference_for("fp8", q, k, v)


def test_gpu_configs():
    """Every head dim the kernels accept maps to a tile (pure functions; no GPU)."""
    from flashtile.ladder import v1_naive, v3_fa1, v4_fa2_tf32, v5_fa2_tensorcore, v6_tuned

    cuda = torch.device("cuda")
    for d in range(8, 257, 8):
        for cfg in (v1_naive.config(d, cuda), v3_fa1.config(d, cuda),
                    v4_fa2_tf32.config(d, cuda), v5_fa2_tensorcore.config(cuda),
                    v6_tuned.config(d, cuda)):
            assert cfg.block_m >= 16 and cfg.block_n >= 16 and cfg.num_warps in (1, 2, 4, 8)
        assert v6_tuned.config(d, cuda).num_stages > 1  # v6 pipelines, the rungs below don't
        assert v5_fa2_tensorcore.config(cuda).num_stages == 1


# ----------------------------------------------------------------------------------
# the command: models, selection, CPU path
# ----------------------------------------------------------------------------------


def test_bytes_model():
    b, h, s, d = 1, 16, 16384, 128
    io = ladder_run.bytes_model("v5_fa2_tensorcore", b, h, s, s, d)
    nn = b * h * s * s * 4
    assert io == b * h * (4 * s * d * 2 + s * 4)
    assert ladder_run.bytes_model("v1_naive", b, h, s, s, d) == io + 4 * nn
    assert ladder_run.bytes_model("v2_fused_softmax", b, h, s, s, d) == io + 3 * nn
    for d in (64, 128):  # FA1's O round trips cost less than v2's N x N traffic
        v2 = ladder_run.bytes_model("v2_fused_softmax", b, 2048 // d, s, s, d)
        assert v2 > ladder_run.bytes_model("v3_fa1", b, 2048 // d, s, s, d) > 2 * io
    for name in ("v4_fa2_tf32", "v6_tuned", "production"):
        assert ladder_run.bytes_model(name, b, h, s, s, d) == io
    assert ladder_run.workspace_bytes("v1_naive", b, h, s, s, d) == 2 * nn
    assert ladder_run.workspace_bytes("v2_fused_softmax", b, h, s, s, d) == nn
    assert ladder_run.workspace_bytes("production", b, h, s, s, d) == 0


def _args(argv):
    parser = ladder_run.configure_parser(argparse.ArgumentParser())
    return parser.parse_args(argv)


def test_selection():
    names, seqlens, head_dims, causal = ladder_run.selection(
        _args(["--seqlens", "1k,2k", "4096", "--head-dims", "64", "--rungs", "production,v1_naive",
               "--causal", "yes"]))
    assert names == ["v1_naive", "production"]  # ladder order
    assert seqlens == [1024, 2048, 4096] and head_dims == [64] and causal == [True]
    names, seqlens, head_dims, causal = ladder_run.selection(_args(["--quick"]))
    assert names == NAMES and seqlens == list(ladder_run.QUICK_SEQLENS)
    assert head_dims == list(ladder_run.QUICK_HEAD_DIMS) and causal == [False, True]
    assert ladder_run.run(_args(["--rungs", "v9_magic"])) == 2
    assert ladder_run.run(_args(["--head-dims", "12"])) == 2


@pytest.mark.skipif(HAS_CUDA, reason="the CPU path runs only without a CUDA device")
def test_cli_cpu_path(capsys):
    """Without CUDA: says timings need a GPU, runs and checks every rung, returns 0."""
    assert ladder_run.run(_args([])) == 0
    out = capsys.readouterr().out
    assert "timings need a GPU" in out
    for name in NAMES:
        assert f"{name} " in out and "FAIL" not in out


@pytest.mark.skipif(HAS_CUDA, reason="the CPU path runs only without a CUDA device")
def test_cli_cpu_path_without_interpreter(monkeypatch, capfd):
    """When this process has triton kernels defined without the interpreter, the smoke
    run happens in a child process with TRITON_INTERPRET=1."""
    monkeypatch.setattr("flashtile.ops._common.is_interpreting", lambda: False)
    assert ladder_run.cpu_smoke(["v6_tuned"]) == 0
    out = capfd.readouterr().out
    assert "v6_tuned" in out and "ok" in out and "FAIL" not in out


class FakeMeter:
    """Stands in for CudaMeter: runs the calls, makes up times, limits memory."""

    def __init__(self, available):
        self.available = available

    def available_bytes(self):
        return self.available

    def time_ms(self, fn):
        fn()
        return 2.0

    def peak_bytes(self, fn):
        fn()
        return 3 * 2**20, 2**20

    def release(self):
        pass


def test_measure_grid_fake_meter():
    """The run's loop on the CPU: validation verdicts, a rung skipped for memory (with
    the GiB it needs), speed-ups over v1 where both ran."""
    shape_fn = lambda s, d, c: ladder_run.Shape(1, s, 2, d, c)
    small, big = 16, 40
    # v1 needs 2 * (B H S S 4) + q + lse: fits at S=16, not at S=40 (+ GiB // 2 slack)
    need_big = ladder_run.workspace_bytes("v1_naive", 1, 2, big, big, 32)
    meter = FakeMeter(available=int((2**30 // 2 + need_big) / 0.9) - 1)
    rows = ladder_run.measure_grid(
        ["v1_naive", "v3_fa1", "v6_tuned"], [small, big], [32], [True], DEVICE, meter,
        shape_fn=shape_fn, validate_seqlen=24,
    )
    assert [(r.rung, r.seqlen) for r in rows] == [
        ("v1_naive", small), ("v3_fa1", small), ("v6_tuned", small),
        ("v1_naive", big), ("v3_fa1", big), ("v6_tuned", big),
    ]
    by = {(r.rung, r.seqlen): r for r in rows}
    assert all(r.valid == "ok" for r in rows), [r.valid for r in rows]
    assert by["v1_naive", big].status.startswith("skipped: needs")
    assert "GiB" in by["v1_naive", big].status
    assert all(by[n, big].ok for n in ("v3_fa1", "v6_tuned"))
    assert by["v3_fa1", small].speedup_vs_v1 is not None
    assert by["v3_fa1", big].speedup_vs_v1 is None  # no v1 to compare with
    r = by["v6_tuned", small]
    assert r.tflops > 0 and r.hbm_tbps > 0 and r.flop_per_byte > 0
    assert r.peak_mem_gib == pytest.approx(3 / 1024) and r.workspace_gib == pytest.approx(2 / 1024)


# ----------------------------------------------------------------------------------
# writers, on made-up rows (nothing here is a measurement)
# ----------------------------------------------------------------------------------


def _fake_rows():
    rows = []
    for d in (64, 128):
        for causal in (False, True):
            for s in (512, 1024, 2048):
                b, h = 16384 // s, 2048 // d
                for i, name in enumerate(NAMES):
                    r = ladder_run.Row(name, b, s, h, d, causal, valid="ok")
                    if name == "v1_naive" and s == 2048:
                        r.status = "skipped: needs 96.0 GiB (80.0 GiB free)"
                    elif name == "v2_fused_softmax" and s == 2048 and causal:
                        r.status = "error: RuntimeError: made up"
                    else:
                        nbytes = ladder_run.bytes_model(name, b, h, s, s, d)
                        flops = 4 * b * h * s * s * d / (2 if causal else 1)
                        r.time_ms = 10.0 / (i + 1) * s / 512
                        r.tflops = flops / (r.time_ms * 1e-3) / 1e12
                        r.hbm_gb, r.flop_per_byte = nbytes / 1e9, flops / nbytes
                        r.hbm_tbps = nbytes / (r.time_ms * 1e-3) / 1e12
                        r.peak_mem_gib = (ladder_run.workspace_bytes(name, b, h, s, s, d)
                                          + 4 * b * s * h * d * 2) / 2**30
                        r.workspace_gib = r.peak_mem_gib / 2
                    rows.append(r)
    ladder_run.fill_speedups(rows)
    return rows


def _env():
    from flashtile.bench.report import Env

    return Env(gpu="fake GPU", torch="0", triton="0", commit="abc", date="2026-01-01")


def test_write_csv(tmp_path):
    rows = _fake_rows()
    path = ladder_run.write_csv(tmp_path / "sub" / "ladder.csv", rows, _env(),
                                {"matmul_tflops": 700.0, "copy_tbps": 4.0})
    with path.open() as f:
        lines = list(csv.DictReader(f))
    assert {"kernel", "backend", "seqlen", "metric", "value", "commit", "note"} <= set(lines[0])
    assert {ln["metric"] for ln in lines if ln["backend"] == "torch"} == {
        "matmul_tflops", "copy_tbps"}
    skipped = [ln for ln in lines if ln["metric"] == "status"]
    assert len(skipped) == 2 * 2 + 2  # v1 at 2048 everywhere, v2 at 2048 causal
    assert any(ln["note"].startswith("skipped: needs 96.0 GiB") for ln in skipped)
    ok = [ln for ln in lines if ln["kernel"] == "ladder" and ln["metric"] == "tflops"]
    assert len(ok) == len([r for r in rows if r.ok])
    assert all(ln["commit"] == "abc" and ln["note"] == "valid: ok" for ln in ok)


def test_write_figures(tmp_path):
    paths = ladder_run.write_figures(tmp_path / "figs", _fake_rows(),
                                     {"matmul_tflops": 700.0, "copy_tbps": 4.0}, title="fake")
    assert [p.name for p in paths] == list(ladder_run.FIGURES)
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_tables():
    rows = _fake_rows()
    table = ladder_run.format_table(rows)
    assert table.count("\n") == len(rows) + 1
    assert "skipped: needs 96.0 GiB" in table and "error: RuntimeError" in table
    pivot = ladder_run.format_pivot(rows, "tflops", "{:.1f}", "TFLOPS")
    assert pivot.count("head dim") == 4 and "skip" in pivot and "error" in pivot
    headline = ladder_run.format_headline(rows, "production", seqlens=(1024,))
    assert headline.startswith("headline, production over v1_naive") and "x" in headline
    assert "no production" in ladder_run.format_headline(rows, "production", seqlens=(4096,))


def test_run_gpu_flow_on_cpu(tmp_path, capsys):
    """The GPU command end to end with the CPU standing in (fake timings and memory):
    CSV written, tables and headline printed, exit status 0 (figures: the test below)."""
    args = _args(["--csv", str(tmp_path / "ladder.csv"), "--figures", "", "--commit", "abc123"])
    status = ladder_run.run_gpu(
        args, ["v1_naive", "production"], [16], [32], [False], device=DEVICE,
        meter=FakeMeter(available=2**40), ceilings={"matmul_tflops": 700.0, "copy_tbps": 4.0},
        shape_fn=lambda s, d, c: ladder_run.Shape(1, s, 2, d, c), validate_seqlen=24,
    )
    assert status == 0
    out = capsys.readouterr().out
    assert "| production |" in out and "headline" in out and "ceilings: bf16 matmul" in out
    assert (tmp_path / "ladder.csv").read_text().count("abc123") > 10
