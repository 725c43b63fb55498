"""``flashtile generate``: stream GPT-2 text (or token ids) to the terminal.

    flashtile generate --model path/to/gpt2 --prompt "Hello, my name is" --max-new-tokens 64
    flashtile generate --model gpt2 ...           # a hub id, when the machine is online
    flashtile generate --selftest                 # pinned greedy sequence, random tiny model

Weights: a folder with ``config.json`` + ``model.safetensors`` (HuggingFace's GPT-2
format), or a hub id. Text needs GPT-2's BPE vocabulary on disk (``vocab.json`` +
``merges.txt`` or ``tokenizer.json`` in the model folder, or tiktoken's cached "gpt2"
files); without it, ``--prompt`` takes token ids ("464 2068 7586") and ids are printed.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

# --selftest: a tiny GPT-2 with an untied LM head (so greedy decoding is not a copy of
# the last token), init_random(seed=0, embed_std=0.3), fp32, prompt SELFTEST_PROMPT.
# Smallest top-1/top-2 margin along the sequence: 0.065 (fp32 noise is ~1e-6).
SELFTEST_PROMPT = [1, 2, 3, 4]
SELFTEST_TOKENS = [427, 67, 358, 175, 212, 157, 183, 457, 385, 151]


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", metavar="PATH|HUB_ID",
                   help="checkpoint folder (config.json + model.safetensors) or hub id")
    p.add_argument("--prompt", default="\n", help="text, or token ids when no vocabulary")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--temperature", type=float, default=0.8, help="0 = greedy (default 0.8)")
    p.add_argument("--top-k", type=int, default=200, help="0 = off (default 200)")
    p.add_argument("--top-p", type=float, default=1.0, help="1 = off (default 1.0)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", default="flashtile", choices=("flashtile", "sdpa", "reference"))
    p.add_argument("--dtype", default="auto", choices=("auto", "float32", "bfloat16", "float16"),
                   help="auto: bfloat16 on a GPU, float32 on a CPU")
    p.add_argument("--no-cuda-graph", action="store_true", help="eager decode steps")
    p.add_argument("--selftest", action="store_true",
                   help="check a pinned greedy sequence of a fixed-seed random model")


def run(args) -> int:
    if args.selftest:
        return selftest(args.backend)
    if not args.model:
        print("flashtile generate: no weights given. Pass --model PATH (a folder with "
              "config.json + model.safetensors, as saved by transformers) or a hub id such "
              "as gpt2 when online; `flashtile generate --selftest` runs without weights.",
              file=sys.stderr)
        return 2
    from .generate import Generator, load_tokenizer
    from .weights import CheckpointError, load_gpt2, resolve_checkpoint

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dtype = {"auto": torch.bfloat16 if device.type == "cuda" else torch.float32}.get(
        args.dtype) or getattr(torch, args.dtype)
    try:
        folder = resolve_checkpoint(args.model)
        model = load_gpt2(folder, dtype=dtype, device=device, backend=args.backend)
    except (FileNotFoundError, CheckpointError) as exc:
        print(f"flashtile generate: no usable weights: {exc}", file=sys.stderr)
        return 2
    tok = load_tokenizer(folder)
    try:
        prompt = tok.encode(args.prompt) if tok else _parse_ids(args.prompt)
    except ValueError as exc:
        print(f"flashtile generate: {exc}", file=sys.stderr)
        return 2
    if tok is None:
        print("(no GPT-2 vocabulary on disk: token ids in and out)", file=sys.stderr)
    room = model.config.n_positions - len(prompt)
    n_new = min(args.max_new_tokens, room)
    if n_new < 1 or not prompt:
        print(f"flashtile generate: the prompt needs 1..{model.config.n_positions - 1} tokens",
              file=sys.stderr)
        return 2
    gen = Generator(model, 1, len(prompt) + n_new, cuda_graph=not args.no_cuda_graph)
    try:
        steps = gen.stream([prompt], n_new, args.temperature, args.top_k or None,
                           args.top_p, args.seed, eos_token_id=tok.eos_token_id if tok else None)
        t0 = time.perf_counter()
        count = _print_stream(steps, tok, args.prompt)
    except ValueError as exc:
        print(f"flashtile generate: {exc}", file=sys.stderr)
        return 2
    dt = time.perf_counter() - t0
    from .gpt2_attention import decode_attention_name

    print(f"\n[{count} tokens in {dt:.2f} s, {count / dt:.1f} tok/s incl. prefill; "
          f"{model.dtype}, decode attention: {decode_attention_name(args.backend)}"
          f"{', CUDA graph' if gen.use_graph else ''}]", file=sys.stderr)
    return 0


def _parse_ids(text: str) -> list[int]:
    try:
        return [int(t) for t in text.replace(",", " ").split()]
    except ValueError:
        raise ValueError(
            "no GPT-2 vocabulary is available offline (vocab.json + merges.txt in the model "
            "folder, or tiktoken's cached gpt2 files), so --prompt must be token ids, "
            "e.g. --prompt '464 2068 7586'"
        ) from None


def _print_stream(steps, tok, prompt_text) -> int:
    """Print each token as it arrives; text is re-decoded so multi-byte characters split
    across tokens come out whole."""
    out, shown, count = [], "", 0
    if tok is not None:
        sys.stdout.write(prompt_text)
    for ids in steps:
        count += 1
        out.append(ids[0])
        if tok is None:
            sys.stdout.write(f"{ids[0]} ")
        else:
            text = tok.decode(out)
            if not text.endswith("\ufffd"):
                sys.stdout.write(text[len(shown):])
                shown = text
        sys.stdout.flush()
    sys.stdout.write("\n")
    return count


def selftest_model(backend: str = "flashtile", device=None):
    from .gpt2 import GPT2, config_for

    cfg = config_for("tiny", tie_word_embeddings=False)
    model = GPT2(cfg, backend=backend).init_random(seed=0, embed_std=0.3)
    return model.to(device or ("cuda" if torch.cuda.is_available() else "cpu"))


def selftest(backend: str = "flashtile") -> int:
    """Greedy decoding of the pinned model, alone and in a batch with a longer prompt;
    both must give SELFTEST_TOKENS."""
    from .generate import Generator
    from .gpt2_attention import decode_attention_name

    model = selftest_model(backend)
    n = len(SELFTEST_TOKENS)
    t0 = time.perf_counter()
    alone = [ids[0] for ids in Generator(model, 1, 32).stream([SELFTEST_PROMPT], n)]
    other = list(range(20, 33))
    batched = Generator(model, 2, 32).generate([other, SELFTEST_PROMPT], n)[1].tolist()
    ok = alone == SELFTEST_TOKENS and batched == SELFTEST_TOKENS
    print(f"flashtile generate --selftest ({backend}, {model.device.type}, decode attention: "
          f"{decode_attention_name(backend)}): {time.perf_counter() - t0:.1f} s")
    print(f"  expected          {SELFTEST_TOKENS}")
    print(f"  batch 1           {alone}")
    print(f"  batch 2 (varlen)  {batched}")
    print("PASS" if ok else "FAIL: greedy decoding changed")
    return 0 if ok else 1
