"""Host microseconds of each attention call in the HF Llama's training step (GPU; issue 9).

    PYTHONPATH=src python scripts/hf_host_calls.py [--context 8192] [--steps 3]

Session 31: the torch profiler of the 1.1B Llama's training step at 8k (`s31a`,
scripts/profile_hf_step.py) showed the GPU idle ~1.1 ms more per step with flashtile
than with "sdpa", most of it one ~650 us gap per step right before a flashtile forward
kernel. A gap there means the host was late with that launch: the GPU had drained what
was queued. Which call, and how much host time does each call take? Per backend
(flashtile's registered name, "sdpa"), per layer: ``time.perf_counter`` around the
attention function transformers calls (forward) and, for flashtile, around its autograd
Function's backward; no synchronisation inside a step (a synchronize between steps, as
the bench's timing does). Also the host time from the step's start to each forward call,
which says where the host falls behind the GPU.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--context", type=int, default=8192)
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--cprofile", type=int, default=0, metavar="N",
                   help="instead: cProfile over N forward calls (inputs that require grad) "
                        "and N backward calls of flash_attn_func at the model's attention "
                        "shape, (B, H, S, D) views as transformers passes them")
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("hf_host_calls: needs a GPU", file=sys.stderr)
        return 1
    if args.cprofile:
        return cprofile_attention(args.context, args.cprofile)
    import transformers
    from transformers import AttentionInterface

    from flashtile.bench.hf import MODELS
    from flashtile.integrations import hf
    from flashtile.ops import flash

    name = hf.register()
    records: list[tuple[str, str, int, float, float]] = []  # backend, what, layer, us, t0
    state = {"backend": "", "t0": 0.0, "fwd": 0, "bwd": 0}  # calls so far in the step

    def timed(fn, what):
        def wrapper(*a, **kw):
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                now = time.perf_counter()
                records.append((state["backend"], what, state[what], (now - t) * 1e6,
                                (t - state["t0"]) * 1e6))
                state[what] += 1
        return wrapper

    sdpa_fn = AttentionInterface._global_mapping["sdpa"]
    AttentionInterface.register(name, timed(hf.attention_forward, "fwd"))
    AttentionInterface.register("sdpa", timed(sdpa_fn, "fwd"))
    bwd = flash.FlashAttnFunction.backward
    flash.FlashAttnFunction.backward = staticmethod(timed(bwd, "bwd"))

    config_cls, model_cls, fields, _ = MODELS["llama"]
    cfg = getattr(transformers, config_cls)(num_hidden_layers=args.layers,
                                            max_position_embeddings=args.context + 1024,
                                            **fields)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = getattr(transformers, model_cls)._from_config(
            cfg, attn_implementation="sdpa", dtype=torch.bfloat16)
    ids = torch.randint(0, cfg.vocab_size, (1, args.context), device="cuda")
    for backend in (name, "sdpa", name, "sdpa"):
        model.set_attn_implementation(backend)
        state["backend"] = "flashtile" if backend == name else "sdpa"
        for step in range(args.steps + 1):
            torch.cuda.synchronize()
            n0 = len(records)
            state.update(fwd=0, bwd=0, t0=time.perf_counter())
            loss = model(ids, labels=ids).loss
            loss.backward()
            model.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            if step == 0:  # warm-up (compiles)
                del records[n0:]
    print(f"HF Llama {args.layers} layers, context {args.context}, "
          f"{args.steps} steps x 2 rounds per backend; host us per attention call "
          f"(median over steps; L0 = a step's first call: the last layer's in the backward);"
          f" @ = host us from the step's start to the call")
    for backend in ("flashtile", "sdpa"):
        for what in ("fwd", "bwd"):
            rows = [r for r in records if r[0] == backend and r[1] == what]
            if not rows:
                continue
            layers = sorted({r[2] for r in rows})
            per = {la: [r for r in rows if r[2] == la] for la in layers}
            cells = [f"L{la}: {statistics.median(x[3] for x in per[la]):.0f}"
                     + f" @{statistics.median(x[4] for x in per[la]):.0f}"
                     for la in layers[:4]]
            rest = [statistics.median(x[3] for x in per[la]) for la in layers[4:]]
            print(f"{backend:9s} {what}: " + ", ".join(cells)
                  + (f", L4-L{layers[-1]} median {statistics.median(rest):.0f}" if rest
                     else ""))
    return 0


def cprofile_attention(context: int, n: int) -> int:
    """cProfile of ``n`` forward and ``n`` backward calls at B1 H32 KV8 D64 causal."""
    from flashtile.bench.harness import cprofile_calls
    from flashtile.ops import flash

    q, k, v = (torch.randn(1, h, context, 64, device="cuda", dtype=torch.bfloat16)
               .transpose(1, 2).requires_grad_() for h in (32, 8, 8))
    dout = torch.randn(1, context, 32, 64, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):  # compiles, caches
        torch.autograd.grad(flash.flash_attn_func(q, k, v, causal=True), (q, k, v), dout)
    outs = []
    text, us = cprofile_calls(lambda: outs.append(flash.flash_attn_func(q, k, v, causal=True)),
                              n, ("tottime",), 18)
    print(f"forward: {us:.0f} us per call under cProfile\n{text}")
    it = iter(outs)
    text, us = cprofile_calls(lambda: torch.autograd.grad(next(it), (q, k, v), dout), n,
                              ("tottime",), 18)
    print(f"backward: {us:.0f} us per call under cProfile\n{text}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
