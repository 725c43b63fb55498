"""``flashtile bench --suite hf``: a ~1B-parameter Llama-shaped model in HuggingFace
transformers, attention by flashtile vs "sdpa" vs "flash_attention_2" (if importable).

Model (``--hf-model llama``, the default): ``LlamaConfig`` with hidden 2048, 16 layers, 32
query heads and 8 KV heads (GQA 4:1) of head dim 64, MLP 8192, vocab 32000: 1.1B
parameters, random bf16 weights made on the GPU (the shape of Llama-3.2-1B with a smaller
vocabulary). ``--hf-model mistral``: ``MistralConfig`` with Mistral-7B's attention per
layer (head dim 128, GQA 4:1, a 4096-token sliding window) at hidden 2048 (16 query heads,
4 KV heads), MLP 8192, vocab 32000, ~1.1B parameters: every layer's attention is a
sliding window, which "sdpa" runs through a materialised mask. Batch 1, per context
length (2k, 8k, 32k tokens by default) and backend, the same weights each time:

    forward     ``model(ids)`` under no_grad (logits for every position): tokens/s = ctx / t
    train step  forward + cross-entropy loss + backward (no optimizer step): ctx / t
    generate    greedy decode after a ctx-token prompt, over the model's DynamicCache:
                tokens/s = (N - 1) / (t(N new tokens) - t(1 new token)), prefill excluded

Each time is the median of ``--hf-reps`` runs after one warm-up; the warm-up (Triton
compiles included) is reported apart as ``first_call_s``. Only attention differs
between backends, so ratios to "sdpa" measured side by side are what the numbers mean.

Without a CUDA device, ``run`` says that timings need a GPU and runs a tiny model under
the interpreter against "sdpa" instead.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

BACKENDS = ("flashtile", "sdpa", "flash_attention_2")
# name -> (transformers config class, model class, config fields, record kernel name)
MODELS = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(
        hidden_size=2048, intermediate_size=8192, num_attention_heads=32,
        num_key_value_heads=8, head_dim=64, vocab_size=32000), "hf_llama_1b"),
    "mistral": ("MistralConfig", "MistralForCausalLM", dict(
        hidden_size=2048, intermediate_size=8192, num_attention_heads=16,
        num_key_value_heads=4, head_dim=128, vocab_size=32000, sliding_window=4096),
        "hf_mistral_1b"),
}


def configure_parser(parser: argparse.ArgumentParser) -> None:
    from .cli import parse_size

    g = parser.add_argument_group("hf suite (--suite hf)")
    g.add_argument("--hf-contexts", type=parse_size, nargs="+", default=[2048, 8192, 32768],
                   metavar="N", help="context lengths, 8k style (default: 2k 8k 32k)")
    g.add_argument("--hf-backends", nargs="+", choices=BACKENDS, default=list(BACKENDS),
                   metavar="NAME", help=f"attention backends (default: {' '.join(BACKENDS)})")
    g.add_argument("--hf-layers", type=int, default=16,
                   help="decoder layers (default: 16, ~1.1B parameters)")
    g.add_argument("--hf-new-tokens", type=int, default=32,
                   help="tokens generated per timed generate call (default: 32)")
    g.add_argument("--hf-reps", type=int, default=3, help="timed runs per number (default: 3)")
    g.add_argument("--hf-model", choices=sorted(MODELS), default="llama",
                   help="llama (GQA, hd 64; default) or mistral (GQA, hd 128, sliding window)")


def run(args: argparse.Namespace) -> int:
    from .harness import gpu_or_smoke

    return gpu_or_smoke("hf", "Running a tiny Llama under the Triton interpreter against "
                        "sdpa instead.", _smoke, _run_gpu, args)


# ----------------------------------------------------------------------------------
# CPU smoke
# ----------------------------------------------------------------------------------


def _smoke() -> str:
    if os.environ.get("TRITON_INTERPRET") != "1":
        if "flashtile.ops.flash" in sys.modules:
            raise RuntimeError("flashtile's kernels were imported without TRITON_INTERPRET=1")
        os.environ["TRITON_INTERPRET"] = "1"
    import torch
    import transformers

    from ..integrations import hf

    name = hf.register()
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=128,
    )
    model = transformers.LlamaForCausalLM._from_config(cfg, attn_implementation="sdpa",
                                                       dtype=torch.float32).eval()
    ids = torch.randint(1, 128, (1, 16))
    kw = dict(max_new_tokens=3, min_new_tokens=3, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        want, want_gen = model(ids).logits, model.generate(ids, **kw)
        model.set_attn_implementation(name)
        got, got_gen = model(ids).logits, model.generate(ids, **kw)
    err = (got - want).abs().max().item()
    if not err < 1e-4 or not torch.equal(got_gen, want_gen):
        raise RuntimeError(f"max|logits - sdpa| = {err:.2e}, tokens {got_gen.tolist()} vs "
                           f"{want_gen.tolist()}")
    return (f"hf smoke ok: tiny Llama (GQA 4:2), max|logits - sdpa| = {err:.1e}, "
            f"3 greedy tokens equal")


# ----------------------------------------------------------------------------------
# GPU measurements
# ----------------------------------------------------------------------------------


def _run_gpu(args) -> int:
    import torch
    import transformers

    from ..integrations import hf
    from .report import Env, write_csv

    env = Env.collect(args.commit)
    name = hf.register()
    torch.manual_seed(0)
    config_cls, model_cls, fields, _kernel = MODELS[getattr(args, "hf_model", "llama")]
    cfg = getattr(transformers, config_cls)(
        num_hidden_layers=args.hf_layers,
        max_position_embeddings=max(args.hf_contexts) + 1024, **fields)
    with torch.device("cuda"):
        model = getattr(transformers, model_cls)._from_config(
            cfg, attn_implementation="sdpa", dtype=torch.bfloat16)
    params = sum(p.numel() for p in model.parameters())
    print(f"hf: {model_cls}, {params / 1e9:.2f}B parameters, {args.hf_layers} layers, "
          f"transformers {transformers.__version__}", file=sys.stderr)
    records, notes = [], {}
    start = time.perf_counter()
    for ctx in args.hf_contexts:
        for backend in args.hf_backends:
            impl = name if backend == "flashtile" else backend
            why = _set_impl(model, impl)
            if why is None:
                why = _measure(model, backend, ctx, args, records)
            if why is not None:
                notes[(ctx, backend)] = why
                print(f"hf: {backend} ctx {ctx}: {why}", file=sys.stderr)
    print(f"hf: measured in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    if hf.fallback_reasons():
        print(f"hf: flashtile fell back to PyTorch for {hf.fallback_reasons()}")
    if args.csv:
        write_csv(args.csv, records, env)
        print(f"wrote {args.csv}", file=sys.stderr)
    print(format_table(records, notes, args))
    print(f"{env.gpu}, torch {env.torch}, triton {env.triton}, transformers "
          f"{transformers.__version__}, commit {env.commit}, {env.date}")
    return 0


def _set_impl(model, impl: str) -> str | None:
    """Switch the model's attention; the reason it cannot, or None."""
    if impl == "flash_attention_2":
        import importlib.util

        if importlib.util.find_spec("flash_attn") is None:
            return "not importable (flash_attn is not installed)"
    try:
        model.set_attn_implementation(impl)
    except (ImportError, ValueError, KeyError, RuntimeError) as exc:
        return f"not available: {type(exc).__name__}: {str(exc)[:120]}"
    return None


def _measure(model, backend, ctx, args, records) -> str | None:
    """Time forward, train step and decode for one (backend, ctx); append Records."""
    import torch

    from .flops import Shape
    from .harness import Record

    _config, _model, fields, kernel = MODELS[getattr(args, "hf_model", "llama")]
    shape = Shape(1, ctx, fields["num_attention_heads"], fields["head_dim"], True)
    ids = torch.randint(1, model.config.vocab_size, (1, ctx), device=model.device)
    n = args.hf_new_tokens

    def forward():
        with torch.no_grad():
            model(ids, use_cache=False)

    def train_step():
        model.zero_grad(set_to_none=True)
        model(ids, labels=ids, use_cache=False).loss.backward()

    def generate(tokens):
        return lambda: model.generate(ids, max_new_tokens=tokens, min_new_tokens=tokens,
                                      do_sample=False, pad_token_id=0)

    put = lambda metric, value: records.append(Record(kernel, backend, shape, metric, value))
    try:
        model.eval()
        first, fwd = _time(forward, args.hf_reps, ids.device)
        put("first_call_s", first)
        put("fwd_ms", fwd * 1e3)
        put("fwd_tokens_per_s", ctx / fwd)
        model.train()
        _, step = _time(train_step, args.hf_reps, ids.device)
        model.zero_grad(set_to_none=True)
        put("train_step_ms", step * 1e3)
        put("train_tokens_per_s", ctx / step)
        model.eval()
        _, one = _time(generate(1), args.hf_reps, ids.device)
        _, many = _time(generate(n), args.hf_reps, ids.device)
        put("decode_tokens_per_s", (n - 1) / max(many - one, 1e-9))
    except torch.cuda.OutOfMemoryError:
        return "out of memory"
    finally:
        model.zero_grad(set_to_none=True)
        torch.cuda.empty_cache()
    return None


def _time(fn, reps: int, device) -> tuple[float, float]:
    """(first call s, median of ``reps`` further calls s), synchronised around each."""
    from .harness import _sync

    times = []
    for _ in range(reps + 1):
        _sync(device)
        t0 = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t0)
    return times[0], statistics.median(times[1:])


_COLUMNS = (  # (header, metric, format)
    ("fwd ms", "fwd_ms", "{:.1f}"),
    ("fwd tok/s", "fwd_tokens_per_s", "{:.0f}"),
    ("train ms", "train_step_ms", "{:.1f}"),
    ("train tok/s", "train_tokens_per_s", "{:.0f}"),
    ("decode tok/s", "decode_tokens_per_s", "{:.1f}"),
    ("1st call s", "first_call_s", "{:.1f}"),
)


def format_table(records, notes, args) -> str:
    """Markdown table: one row per (context, backend), ratios to sdpa for fwd / train."""
    cells = {(r.shape.seqlen, r.backend, r.metric): r.value for r in records}
    head = ["context", "backend", *(c[0] for c in _COLUMNS), "fwd vs sdpa", "train vs sdpa"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for ctx in args.hf_contexts:
        for backend in args.hf_backends:
            if (ctx, backend) in notes:
                lines.append(f"| {_k(ctx)} | {backend} | {notes[(ctx, backend)]} |")
                continue
            row = [_k(ctx), backend]
            row += [fmt.format(cells[(ctx, backend, m)]) if (ctx, backend, m) in cells else "-"
                    for _, m, fmt in _COLUMNS]
            for metric in ("fwd_ms", "train_step_ms"):  # speed-up: sdpa time / this time
                mine, base = cells.get((ctx, backend, metric)), cells.get((ctx, "sdpa", metric))
                row.append(f"{base / mine:.2f}x" if mine and base else "-")
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def _k(n: int) -> str:
    return f"{n // 1024}k" if n % 1024 == 0 else str(n)
