"""Sample text from a MiniGPT checkpoint: ``flashtile sample`` and ``generate()``.

Each new character comes from the last position's logits through the shared
``sampling.sample`` (temperature, top-k, top-p nucleus, seeded generator; temperature 0
is greedy). ``generate`` yields token ids one at a time, so the CLI prints them as
they come.
There is no KV cache: every step runs the model on the last ``block_size`` tokens
(MiniGPT's contexts are short; the GPT-2 model carries the cache).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

import torch

from .sampling import check_sampling_args, sample

__all__ = ["generate", "load_model"]


@torch.no_grad()
def generate(model, idx: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
             top_k: int = 0, top_p: float = 1.0,
             generator: torch.Generator | None = None) -> Iterator[int]:
    """Yield ``max_new_tokens`` ids continuing ``idx`` (1, T) int64, one at a time."""
    check_sampling_args(temperature, top_k, top_p)
    model.eval()
    block = model.config.block_size
    for _ in range(max_new_tokens):
        logits, _ = model(idx[:, -block:])  # (1, T, vocab)
        nxt = sample(logits[:, -1, :], temperature, top_k, top_p, generator)  # (1,)
        idx = torch.cat([idx, nxt[:, None]], dim=1)
        yield int(nxt.item())


def load_model(ckpt_path, device="cpu", which: str = "best", backend: str | None = None):
    """(model, tokenizer, checkpoint) from a checkpoint file or training directory."""
    from . import checkpoint
    from .data import CharTokenizer
    from .minigpt import MiniGPT, MiniGPTConfig

    ck = checkpoint.load(ckpt_path, device, which=which)
    cfg = MiniGPTConfig.from_dict(ck.meta["model_config"])
    if backend is not None:
        cfg.backend = backend
    model = MiniGPT(cfg).to(device)
    dtype = next(iter(ck.model_state().values())).dtype
    model = model.to(dtype)
    checkpoint.restore(ck, model, rng=False)
    return model.eval(), CharTokenizer(ck.meta["vocab"]), ck


# ----------------------------------------------------------------------------------
# CLI: flashtile sample
# ----------------------------------------------------------------------------------


def configure_parser(p) -> None:
    from .minigpt import BACKENDS

    p.add_argument("--ckpt", required=True, help="training directory or .safetensors file")
    p.add_argument("--which", choices=("best", "last"), default="best")
    p.add_argument("--prompt", default="\n")
    p.add_argument("--max-new-tokens", type=int, default=500)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--top-k", type=int, default=200, help="0: off")
    p.add_argument("--top-p", type=float, default=1.0, help="1.0: off")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--backend", choices=BACKENDS, default=None,
                   help="attention backend (default: the checkpoint's)")
    p.add_argument("--out", default=None, help="also write the text to this file")


def run(args) -> int:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model, tok, ck = load_model(args.ckpt, device, args.which, args.backend)
    if device == "cpu" and model.config.backend == "flashtile":
        print("(no CUDA device: flashtile runs under the Triton interpreter, a few tokens "
              "a second; --backend sdpa is faster here)", file=sys.stderr)
    gen = torch.Generator(device=device).manual_seed(args.seed)
    idx = torch.tensor([tok.encode(args.prompt)], dtype=torch.int64, device=device)
    val = ck.meta.get("extra", {}).get("best_val")
    print(f"# step {ck.step}" + (f", best val {val:.4f}" if val is not None else "")
          + f", backend {model.config.backend}", file=sys.stderr)
    text = [args.prompt]
    sys.stdout.write(args.prompt)
    # bf16 autocast on the GPU, as in training; fp32 under the interpreter
    amp = (torch.autocast("cuda", dtype=torch.bfloat16) if device == "cuda"
           else contextlib.nullcontext())
    with amp:
        for t in generate(model, idx, args.max_new_tokens, args.temperature, args.top_k,
                          args.top_p, gen):
            ch = tok.decode([t])
            text.append(ch)
            sys.stdout.write(ch)
            sys.stdout.flush()
    sys.stdout.write("\n")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write("".join(text) + "\n")
    return 0
