"""flashtile as a HuggingFace transformers ``attn_implementation`` (integrations/hf.py).

Random-weight models from small configs of real architectures: GPT-2 (layer-wise
scaling), Llama (GQA), Mistral (MQA, sliding window), Gemma-2 (softcap, alternating
sliding / full layers). Each flashtile run is held to the DESIGN.md rule against the
same weights in float64 with "eager" attention (the truth), with the baseline error of
"sdpa" ("eager" for Gemma-2: SDPA has no softcap) in the test precision. CPU runs float32
under the interpreter; ``gpu`` tests run bfloat16 at larger shapes.
"""

import copy
import logging
import subprocess
import sys

import pytest
import torch

transformers = pytest.importorskip("transformers")

from flashtile.integrations import hf  # noqa: E402
from flashtile.validate import check_close  # noqa: E402

NEW_TOKENS = 6
PAD = 0


def tiny_config(arch: str, big: bool = False):
    """2 layers, hidden 64 (CPU: 2 heads of 32, Llama 4 of 16 for GQA 2:1; the
    interpreter's cost grows with the heads); ``big``: 4 layers, hidden 512, 8 heads of 64.
    Init std 0.1 (not 0.02) so scores spread over several units: softmax is far from
    uniform and Gemma-2's softcap (5.0) bends them."""
    hidden, heads, layers = (512, 8, 4) if big else (64, 4 if arch == "llama" else 2, 2)
    common = dict(vocab_size=256 if big else 128, initializer_range=0.1)
    if arch == "gpt2":
        return transformers.GPT2Config(
            n_embd=hidden, n_layer=layers, n_head=heads, n_positions=2048,
            scale_attn_by_inverse_layer_idx=True, attn_pdrop=0.0, resid_pdrop=0.0,
            embd_pdrop=0.0, **common,
        )
    llama_like = dict(
        hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=heads, head_dim=hidden // heads, max_position_embeddings=2048,
        **common,
    )
    if arch == "llama":
        return transformers.LlamaConfig(num_key_value_heads=heads // 2, **llama_like)
    window = 256 if big else 8
    if arch == "mistral":  # MQA
        return transformers.MistralConfig(num_key_value_heads=1, sliding_window=window,
                                          **llama_like)
    if arch == "gemma2":
        return transformers.Gemma2Config(
            num_key_value_heads=heads // 2, sliding_window=window,
            layer_types=["sliding_attention", "full_attention"] * (layers // 2),
            attn_logit_softcapping=5.0, final_logit_softcapping=None,
            query_pre_attn_scalar=hidden // heads, **llama_like,
        )
    raise ValueError(arch)


MODELS = {
    "gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
    "gemma2": "Gemma2ForCausalLM",
}
ARCHS = list(MODELS)


def baseline_impl(arch: str) -> str:
    return "eager" if arch == "gemma2" else "sdpa"


@pytest.fixture(scope="module")
def name():
    return hf.register()


@pytest.fixture(autouse=True)
def no_fallback(monkeypatch):
    """Every test but the fallback one runs on flashtile only: nothing may be logged."""
    warned = set()
    monkeypatch.setattr(hf, "_warned", warned)
    yield
    assert not warned, f"fell back to PyTorch: {sorted(warned)}"


class Trio:
    """One set of weights three ways: flashtile (``x``), the baseline in the same dtype
    (``lp``) and float64 eager (``r64``)."""

    def __init__(self, arch, name, dtype, device, big=False):
        cls = getattr(transformers, MODELS[arch])
        cfg = tiny_config(arch, big)
        self.x = cls._from_config(cfg, attn_implementation=name, dtype=dtype).to(device)
        self.lp = copy.deepcopy(self.x)
        self.lp.set_attn_implementation(baseline_impl(arch))
        self.r64 = copy.deepcopy(self.x).to(torch.float64)
        self.r64.set_attn_implementation("eager")
        self.vocab = cfg.vocab_size
        self.device = device

    def models(self):
        return self.x, self.lp, self.r64

    def ids(self, batch, seqlen):
        return torch.randint(1, self.vocab, (batch, seqlen), device=self.device)


def _assert_ok(*checks):
    bad = [str(c) for c in checks if not c.ok]
    assert not bad, "; ".join(bad)


@torch.no_grad()
def _logits(model, ids, **kwargs):
    return model(ids, **kwargs).logits


def check_logits(trio, ids, **kwargs):
    x, lp, r64 = (_logits(m, ids, **kwargs) for m in trio.models())
    return check_close("logits", x, r64, lp)


# ----------------------------------------------------------------------------------
# CPU (interpreter), float32
# ----------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ARCHS)
def test_logits(arch, name, device):
    """Full-sequence forward (longer than Mistral's / Gemma-2's window) of a batch of 2."""
    trio = Trio(arch, name, torch.float32, device)
    _assert_ok(check_logits(trio, trio.ids(2, 19)))


@pytest.mark.parametrize("arch", ARCHS)
def test_generate_greedy(arch, name, device):
    """Prefill + token-by-token decode over the model's own KV cache (past the sliding
    window for Mistral / Gemma-2): the same greedy tokens as the baseline."""
    trio = Trio(arch, name, torch.float32, device)
    ids = trio.ids(1, 7)
    kw = dict(max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False,
              pad_token_id=PAD)
    got = trio.x.generate(ids, **kw)
    want = trio.lp.generate(ids, **kw)
    assert got.shape[1] == 7 + NEW_TOKENS
    assert torch.equal(got, want), f"flashtile {got.tolist()} vs baseline {want.tolist()}"


def _padded(ids_list, sides, device):
    """Pad sequences of different lengths, row b on ``sides[b]`` ("left" / "right"):
    (ids, mask, position_ids)."""
    width = max(len(s) for s in ids_list)
    ids = torch.full((len(ids_list), width), PAD, dtype=torch.long, device=device)
    mask = torch.zeros_like(ids)
    for b, (s, side) in enumerate(zip(ids_list, sides)):
        cols = slice(width - len(s), width) if side == "left" else slice(0, len(s))
        ids[b, cols], mask[b, cols] = s, 1
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    return ids, mask, positions


def _valid(logits, mask):
    return logits[mask.bool()]  # (valid tokens, vocab)


def check_padded(trio, seqs, sides):
    """Padded batch through flashtile (varlen) vs each sequence's unpadded run (truth
    and baseline)."""
    ids, mask, positions = _padded(seqs, sides, trio.device)
    x = _valid(_logits(trio.x, ids, attention_mask=mask, position_ids=positions), mask)
    lp, r64 = (torch.cat([_logits(m, s[None])[0] for s in seqs]) for m in trio.models()[1:])
    return check_close(f"padded logits {sides}", x, r64, lp)


@pytest.mark.parametrize("arch", ARCHS)
def test_padded_batch(arch, name, device):
    """One batch with an unpadded row (19 tokens), a left-padded and a right-padded row
    (11 tokens each): each row's logits equal its unpadded run."""
    trio = Trio(arch, name, torch.float32, device)
    seqs = [trio.ids(1, 19)[0], trio.ids(1, 11)[0], trio.ids(1, 11)[0]]
    _assert_ok(check_padded(trio, seqs, ["left", "left", "right"]))


def test_generate_left_padded(name, device):
    """Batched greedy generation from a left-padded batch (varlen prefill and decode):
    the same tokens as the baseline's batched run and as each prompt alone."""
    trio = Trio("llama", name, torch.float32, device)
    seqs = [trio.ids(1, 9)[0], trio.ids(1, 5)[0]]
    ids, mask, _ = _padded(seqs, ["left", "left"], device)
    kw = dict(max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False,
              pad_token_id=PAD)
    got = trio.x.generate(ids, attention_mask=mask, **kw)
    assert torch.equal(got, trio.lp.generate(ids, attention_mask=mask, **kw))
    alone = trio.x.generate(seqs[1][None], **kw)
    assert torch.equal(got[1, ids.shape[1]:], alone[0, len(seqs[1]):])


def _grads(model, ids, mask=None):
    model.train()
    labels = ids.masked_fill(mask == 0, -100) if mask is not None else ids
    loss = model(ids, attention_mask=mask, labels=labels).loss
    loss.backward()
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("arch,padded", [("gpt2", False), ("mistral", False),
                                         ("gemma2", False), ("llama", True)])
def test_train_step_grads(arch, padded, name, device):
    """One training step (loss.backward): every parameter's gradient within the rule
    (``padded``: a right-padded batch, labels -100 on the padding)."""
    trio = Trio(arch, name, torch.float32, device)
    if padded:
        seqs = [trio.ids(1, 17)[0], trio.ids(1, 10)[0]]
        ids, mask, _ = _padded(seqs, ["right", "right"], device)
    else:
        ids, mask = trio.ids(2, 17), None
    x, lp, r64 = (_grads(m, ids, mask) for m in trio.models())
    assert x.keys() == r64.keys() and len(x) > 0
    _assert_ok(*(check_close(f"grad {n}", x[n], r64[n], lp[n]) for n in x))


@pytest.mark.parametrize("arch", ["llama", "gemma2"])
def test_fallback_logged_once(arch, name, device, monkeypatch, caplog):
    """A 4-D mask flashtile cannot express (block-diagonal: two documents in one row)
    runs on SDPA (Gemma-2's softcap: the math path), equal to the baseline, and is
    logged once naming the model."""
    monkeypatch.setattr(hf, "_warned", set())  # replaces no_fallback's set
    trio = Trio(arch, name, torch.float32, device)
    ids = trio.ids(1, 12)
    doc = torch.arange(12, device=device) // 5
    keep = (doc[:, None] == doc[None, :]) & torch.ones(12, 12, dtype=torch.bool).tril()
    # additive, as eager attention (Gemma-2's baseline) expects
    mask = torch.zeros(1, 1, 12, 12, device=device).masked_fill(~keep.to(device), -1e30)
    with caplog.at_level(logging.WARNING, logger=hf.__name__):
        x = _logits(trio.x, ids, attention_mask=mask)
        _logits(trio.x, ids, attention_mask=mask)
    lines = [r.getMessage() for r in caplog.records if r.name == hf.__name__]
    assert len(lines) == 1 and arch in lines[0] and "4-D" in lines[0], lines
    _assert_ok(check_close("fallback logits", x, _logits(trio.r64, ids, attention_mask=mask),
                           _logits(trio.lp, ids, attention_mask=mask)))


def test_mask_patterns():
    """The mask patterns recognised (and the ones sent to SDPA)."""
    mu = pytest.importorskip("transformers.masking_utils")
    assert hf._mask_pattern(mu.causal_mask_function) == "causal"
    assert hf._mask_pattern(mu.sliding_window_causal_mask_function(8)) == "sliding"
    assert hf._mask_pattern(mu.bidirectional_mask_function) == "full"
    overlay = mu.and_masks(mu.causal_mask_function, mu.sliding_window_overlay(4))
    assert hf._mask_pattern(overlay) is None
    assert hf._mask_pattern(mu.or_masks(mu.causal_mask_function, lambda b, h, q, k: q == 0)) \
        is None


def test_padding_plan_holes_fall_back(device):
    mask = torch.tensor([[1, 1, 0, 1], [0, 1, 1, 1]], dtype=torch.bool, device=device)
    assert "holes" in hf.padding_plan(mask, 4, 4)
    plan = hf.padding_plan(mask[1:].expand(2, 4), 1, 4)
    assert plan.cu_seqlens_q.tolist() == [0, 1, 2] and plan.max_seqlen_k == 3


def test_register_names():
    assert hf.register() == hf.NAME and "flash" not in hf.NAME
    for bad in ("flashtile", "my_sdpa", "org/kernel", "eager", ""):
        with pytest.raises(ValueError, match="name"):
            hf.register(bad)


def test_bench_table():
    """The hf bench's table from fake records: ratios to sdpa, notes for missing rows."""
    from argparse import Namespace

    from flashtile.bench import hf as bench_hf
    from flashtile.bench.flops import Shape
    from flashtile.bench.harness import Record

    shape = Shape(1, 8192, 32, 64, True)
    records = [Record(bench_hf.MODELS["llama"][3], b, shape, m, v) for b, m, v in [
        ("flashtile", "fwd_ms", 50.0), ("sdpa", "fwd_ms", 60.0), ("sdpa", "train_step_ms", 9.0)]]
    notes = {(8192, "flash_attention_2"): "not importable"}
    args = Namespace(hf_contexts=[8192], hf_backends=list(bench_hf.BACKENDS))
    table = bench_hf.format_table(records, notes, args).splitlines()
    assert table[2].startswith("| 8k | flashtile | 50.0 |") and "1.20x" in table[2]
    assert "not importable" in table[4]


def test_bench_models():
    """The hf bench's model table builds real transformers configs: Llama's GQA at hd 64,
    Mistral's hd 128 with a 4096-token sliding window, ~1.1B parameters each at 16 layers
    (counted from the config, no weights made)."""
    import transformers

    from flashtile.bench import hf as bench_hf

    for name, (config_cls, model_cls, fields, kernel) in bench_hf.MODELS.items():
        cfg = getattr(transformers, config_cls)(num_hidden_layers=16, **fields)
        assert hasattr(transformers, model_cls) and kernel.startswith("hf_" + name)
        attn = cfg.hidden_size * cfg.head_dim * (
            2 * cfg.num_attention_heads + 2 * cfg.num_key_value_heads)
        mlp = 3 * cfg.hidden_size * cfg.intermediate_size
        params = 16 * (attn + mlp) + 2 * cfg.vocab_size * cfg.hidden_size
        assert 0.9e9 < params < 1.3e9, (name, params)
    mistral = transformers.MistralConfig(**bench_hf.MODELS["mistral"][2])
    assert mistral.sliding_window == 4096 and mistral.head_dim == 128


def test_import_registers_nothing():
    """Importing the module imports no transformers, so it cannot register anything."""
    code = "import sys, flashtile.integrations.hf; assert 'transformers' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# ----------------------------------------------------------------------------------
# GPU, bfloat16, larger shapes
# ----------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("arch", ARCHS)
def test_gpu_logits_bf16(arch, name):
    trio = Trio(arch, name, torch.bfloat16, "cuda", big=True)
    _assert_ok(check_logits(trio, trio.ids(2, 1000)))


@pytest.mark.gpu
@pytest.mark.parametrize("arch", ARCHS)
def test_gpu_padded_bf16(arch, name):
    trio = Trio(arch, name, torch.bfloat16, "cuda", big=True)
    seqs = [trio.ids(1, 700)[0], trio.ids(1, 333)[0], trio.ids(1, 333)[0], trio.ids(1, 1)[0]]
    _assert_ok(check_padded(trio, seqs, ["left", "left", "right", "left"]))


@pytest.mark.gpu
@pytest.mark.parametrize("arch", ARCHS)
def test_gpu_decode_bf16(arch, name):
    """KV-cache decode logits (split-KV kernel) of a 500-token prompt + 32 new tokens
    against teacher-forced full forwards of the same tokens. (bf16 greedy tokens may
    legitimately flip on near-ties, so the logits are compared, not the tokens.)"""
    trio = Trio(arch, name, torch.bfloat16, "cuda", big=True)
    ids = trio.ids(2, 500)
    out = trio.x.generate(ids, max_new_tokens=32, min_new_tokens=32, do_sample=False,
                          pad_token_id=PAD, return_dict_in_generate=True, output_logits=True)
    x = torch.stack(out.logits, 1)  # (B, 32, vocab): prefill's last + 31 decode steps
    seq = out.sequences[:, :-1]
    lp, r64 = (_logits(m, seq)[:, 499:] for m in trio.models()[1:])
    _assert_ok(check_close("decode logits", x, r64, lp))


@pytest.mark.gpu
@pytest.mark.parametrize("arch", ARCHS)
def test_gpu_train_step_bf16(arch, name):
    trio = Trio(arch, name, torch.bfloat16, "cuda", big=True)
    ids, mask, _ = _padded([trio.ids(1, 512)[0], trio.ids(1, 300)[0]], ["right"] * 2, "cuda")
    x, lp, r64 = (_grads(m, ids, mask) for m in trio.models())
    _assert_ok(*(check_close(f"grad {n}", x[n], r64[n], lp[n]) for n in x))



def test_bench_measure_interleaves(monkeypatch):
    """The hf bench's _measure on a tiny CPU Llama: every backend it can set gets each
    metric, the one it cannot (flash_attention_2 here) a note; forward and train step are
    timed in rounds that visit every backend in turn (the attn_implementation switches
    per call, so with 2 reps the sequence is warm-ups, then s f, f s, s f)."""
    from argparse import Namespace

    from flashtile.bench import hf as bench_hf

    name = hf.register()
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                   num_attention_heads=2, num_key_value_heads=1,
                                   vocab_size=64)
    model = transformers.LlamaForCausalLM._from_config(cfg, attn_implementation="sdpa",
                                                       dtype=torch.float32)
    seen = []
    real = bench_hf._set_impl

    def spy(m, impl):
        seen.append(impl)
        return real(m, impl)

    monkeypatch.setattr(bench_hf, "_set_impl", spy)
    args = Namespace(hf_reps=2, hf_new_tokens=2, hf_model="llama")
    records = []
    impls = {"flashtile": name, "sdpa": "sdpa", "flash_attention_2": "flash_attention_2"}
    notes = bench_hf._measure(model, impls, 8, args, records)
    have = {(r.backend, r.metric) for r in records}
    for backend in ("flashtile", "sdpa"):
        for metric in ("first_call_s", "fwd_ms", "train_step_ms", "decode_tokens_per_s"):
            assert (backend, metric) in have, (backend, metric)
    assert "flash_attention_2" in notes and not any(r.backend == "flash_attention_2"
                                                    for r in records)
    # warm-ups (three backends), an untimed round, two timed rounds in alternating order,
    # then decode per backend
    assert seen[:9] == [name, "sdpa", "flash_attention_2", "sdpa", name, name, "sdpa",
                        "sdpa", name]
