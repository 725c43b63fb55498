"""The scripts in examples/ run and pass their own checks (each exits 1 on a miss), at
their CPU sizes under the interpreter here, their GPU sizes on a GPU. One test breaks a
kernel on purpose to show that the examples' checks can fail."""

import importlib.util
import pathlib

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def load(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_example_is_tested():
    assert {p.stem for p in EXAMPLES.glob("*.py")} == set(CASES)


CASES = {
    "quickstart": ([], ["out: max error", "dv: max error"]),
    "paged_decode": ([], ["took", "KV memory"]),
    "varlen_packing": ([], ["sequences, lengths", "padding"]),
    "hf_model": (["--tokens", "3"], ["decode logits", "left-padded batch"]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_example(name, capsys):
    if name == "hf_model":
        pytest.importorskip("transformers")
    argv, expect = CASES[name]
    rc = load(name).main(argv)
    printed = capsys.readouterr().out
    assert rc == 0, printed
    for text in expect:
        assert text in printed, printed


def test_quickstart_check_bites(monkeypatch, capsys):
    """A kernel whose output is off by a little more than bf16's rounding fails the
    example's check."""
    import flashtile

    real = flashtile.flash_attn_func

    def off(q, k, v, **kwargs):
        out = real(q, k, v, **kwargs)
        return out + 0.05 * out.detach().abs().amax()

    monkeypatch.setattr(flashtile, "flash_attn_func", off)
    assert load("quickstart").main([]) == 1
    assert "FAIL" in capsys.readouterr().out
