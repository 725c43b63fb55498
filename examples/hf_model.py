"""A HuggingFace model on flashtile with one argument, checked against transformers' own
attention: logits, decode through the KV cache, and a left-padded batch.

    python examples/hf_model.py                   # a GPU if there is one
    python examples/hf_model.py --tokens 4        # CPU: Triton's interpreter, tiny model

Builds a random-weight Mistral-style model (grouped-query heads, a sliding window) from a
small config, so nothing is downloaded; pass ``--model PATH`` for a checkpoint folder of
any causal LM instead. Needs ``transformers`` (``pip install -e ".[test]"``). Exits 1 on
a miss.
"""

import argparse
import os
import sys

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before flashtile imports triton

from flashtile.integrations import hf  # noqa: E402
from flashtile.validate import check_close  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=None, help="a local checkpoint folder (default: random)")
    p.add_argument("--tokens", type=int, default=None, help="greedy tokens (16 GPU, 4 CPU)")
    a = p.parse_args(argv)
    try:
        import transformers
    except ImportError:
        print("needs transformers: pip install -e '.[test]'")
        return 2
    device = "cuda" if torch.cuda.is_available() else "cpu"
    gpu = device == "cuda"
    dtype = torch.bfloat16 if gpu else torch.float32
    torch.manual_seed(0)

    name = hf.register()  # "tile_attention": the name to pass as attn_implementation
    if a.model:
        model = transformers.AutoModelForCausalLM.from_pretrained(
            a.model, attn_implementation=name, dtype=dtype).to(device)
    else:
        hidden, heads = (1024, 16) if gpu else (64, 4)
        cfg = transformers.MistralConfig(
            vocab_size=512 if gpu else 128, hidden_size=hidden, intermediate_size=2 * hidden,
            num_hidden_layers=4 if gpu else 2, num_attention_heads=heads,
            num_key_value_heads=heads // 4, head_dim=hidden // heads,
            sliding_window=256 if gpu else 8, max_position_embeddings=4096,
            initializer_range=0.1)
        model = transformers.AutoModelForCausalLM.from_config(
            cfg, attn_implementation=name, dtype=dtype).to(device)
    model.eval()
    baseline = transformers.AutoModelForCausalLM.from_config(
        model.config, attn_implementation="sdpa", dtype=dtype).to(device).eval()
    baseline.load_state_dict(model.state_dict())
    exact = transformers.AutoModelForCausalLM.from_config(
        model.config, attn_implementation="eager", dtype=torch.float64).to(device).eval()
    exact.load_state_dict(model.state_dict())

    vocab = model.config.vocab_size
    seqlen = 1024 if gpu else 24
    ids = torch.randint(1, vocab, (2, seqlen), device=device)
    ok = True

    with torch.no_grad():  # 1. logits against sdpa, both measured from fp64 eager
        c = check_close("logits", model(ids).logits, exact(ids).logits, baseline(ids).logits)
        print(f"logits: max error {c.err:.2e}, bound {c.bound:.2e}  {'ok' if c.ok else 'FAIL'}")
        ok &= c.ok

    n = a.tokens or (16 if gpu else 4)  # 2. greedy decode through the model's KV cache
    gen = dict(max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0)
    out = model.generate(ids[:1], return_dict_in_generate=True, output_logits=True, **gen)
    seq = out.sequences[:, :-1]  # each decode step's logits against a full forward
    with torch.no_grad():
        r64, lp = (m(seq).logits[:, seqlen - 1 :] for m in (exact, baseline))
    c = check_close("decode logits", torch.stack(out.logits, 1), r64, lp)
    same = torch.equal(out.sequences, baseline.generate(ids[:1], **gen))
    print(f"decode logits, {n} tokens: max error {c.err:.2e}, bound {c.bound:.2e}  "
          f"{'ok' if c.ok else 'FAIL'}; greedy tokens {'identical' if same else 'differ'} "
          f"to sdpa's {out.sequences[0, seqlen:].tolist()}")
    # in 16-bit a near-tie between the top two logits may flip a token legitimately
    ok &= c.ok and (same or dtype != torch.float32)

    # 3. a left-padded batch: each row's last-token logits equal to its unpadded run's
    short = ids[1, : seqlen // 2]
    batch = torch.zeros_like(ids)
    batch[0], batch[1, seqlen - short.numel():] = ids[0], short
    mask = (batch != 0).long()
    mask[0] = 1
    with torch.no_grad():
        padded = model(batch, attention_mask=mask).logits[:, -1]
        alone = torch.cat([model(ids[:1]).logits[:, -1], model(short[None]).logits[:, -1]])
        ref = torch.cat([exact(ids[:1]).logits[:, -1], exact(short[None]).logits[:, -1]])
        lp = torch.cat([baseline(ids[:1]).logits[:, -1], baseline(short[None]).logits[:, -1]])
    c = check_close("padded", padded, ref, lp)
    c_alone = check_close("unpadded", alone, ref, lp)
    print(f"left-padded batch: max error {c.err:.2e} (unpadded runs {c_alone.err:.2e}), "
          f"bound {c.bound:.2e}  {'ok' if c.ok else 'FAIL'}")
    ok &= c.ok
    skipped = hf.fallback_reasons()
    if skipped:
        print(f"fell back to sdpa for: {skipped}")
    return 0 if ok and not skipped else 1


if __name__ == "__main__":
    sys.exit(main())
