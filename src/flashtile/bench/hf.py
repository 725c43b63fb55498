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
compiles included) is reported apart as ``first_call_s``. Forward and train step run in
interleaved rounds, every backend once per round (since session 17: one backend after
the other read the ratio up to ~1% apart between machine starts), after one untimed
round on a warm allocator, each round in the reverse order of the one before. Only
attention differs between backends, so ratios to "sdpa" measured side by side are what
the numbers mean.

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
    impls = {b: name if b == "flashtile" else b for b in args.hf_backends}
    for ctx in args.hf_contexts:
        for backend, why in _measure(model, impls, ctx, args, records).items():
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


def _measure(model, impls, ctx, args, records) -> dict[str, str]:
    """Time forward, train step and decode at ``ctx`` for each backend of ``impls``
    (backend -> attn_implementation); append Records. Forward and train step run in
    interleaved rounds (each round times every backend once, in turn), so a drift of the
    GPU's clocks or of the host between backends lands on all of them alike; decode runs
    per backend. Returns {backend: why it has no numbers}."""
    import torch

    from .flops import Shape
    from .harness import Record

    _config, _model, fields, kernel = MODELS[getattr(args, "hf_model", "llama")]
    shape = Shape(1, ctx, fields["num_attention_heads"], fields["head_dim"], True)
    ids = torch.randint(1, model.config.vocab_size, (1, ctx), device=model.device)
    n = args.hf_new_tokens

    def forward():
        model.eval()
        with torch.no_grad():
            model(ids, use_cache=False)

    def train_step():
        model.train()
        model.zero_grad(set_to_none=True)
        model(ids, labels=ids, use_cache=False).loss.backward()

    def generate(tokens):
        return lambda: model.generate(ids, max_new_tokens=tokens, min_new_tokens=tokens,
                                      do_sample=False, pad_token_id=0)

    def put(backend, metric, value):
        records.append(Record(kernel, backend, shape, metric, value))

    notes, times = {}, {}
    for backend, impl in impls.items():  # warm-up: first calls (compiles) reported apart
        why = _set_impl(model, impl)
        try:
            if why is None:
                put(backend, "first_call_s", _time(forward, 0, ids.device)[0])
                _time(train_step, 0, ids.device)
                times[backend] = ([], [])
        except torch.cuda.OutOfMemoryError:
            why = "out of memory"
        finally:
            model.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()
        if why is not None:
            notes[backend] = why
    # a settle round, untimed: the warm-ups end in empty_cache, so without it the first
    # timed backend would regrow the allocator's cache alone (cudaMalloc in its forward;
    # session 41 read a 2k forward 25% apart between two runs with 2 reps)
    for r in range(args.hf_reps + 1):
        order = list(times)
        for backend in order if r % 2 else order[::-1]:  # the first timed round: in order
            _set_impl(model, impls[backend])
            try:
                fwd, step = _time(forward, 0, ids.device)[0], _time(train_step, 0, ids.device)[0]
                if r:
                    times[backend][0].append(fwd)
                    times[backend][1].append(step)
            except torch.cuda.OutOfMemoryError:
                notes[backend] = "out of memory"
                del times[backend]
            finally:
                model.zero_grad(set_to_none=True)
    torch.cuda.empty_cache()
    for backend, (fwds, steps) in times.items():
        fwd, step = statistics.median(fwds), statistics.median(steps)
        put(backend, "fwd_ms", fwd * 1e3)
        put(backend, "fwd_tokens_per_s", ctx / fwd)
        put(backend, "train_step_ms", step * 1e3)
        put(backend, "train_tokens_per_s", ctx / step)
        _set_impl(model, impls[backend])
        model.eval()
        try:
            _, one = _time(generate(1), args.hf_reps, ids.device)
            _, many = _time(generate(n), args.hf_reps, ids.device)
            put(backend, "decode_tokens_per_s", (n - 1) / max(many - one, 1e-9))
        except torch.cuda.OutOfMemoryError:
            notes[backend] = "out of memory (decode)"
        finally:
            torch.cuda.empty_cache()
    return notes


def _time(fn, reps: int, device) -> tuple[float, float]:
    """(first call s, median of ``reps`` further calls s; 0.0 when ``reps`` is 0),
    synchronised around each."""
    from .harness import _sync

    times = []
    for _ in range(reps + 1):
        _sync(device)
        t0 = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t0)
    return times[0], statistics.median(times[1:]) if reps else 0.0


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
