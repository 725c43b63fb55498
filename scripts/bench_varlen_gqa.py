"""The varlen Gluon backward with GQA: one dK/dV program per KV head looping over its
group (shipped), against one per query head (``gqa_expand``), on the GPU.

    python scripts/bench_varlen_gqa.py [--head-dims 64,128] [--lens 8192,6000,3000,7000]
        [--configs "" "gqa_expand=1" "gqa_expand=1,max_regs=168"]

Packed bf16 sequences of ``--lens`` (H ``--nheads``, Hkv ``--nheads-kv``, causal by
default), one ``flash_attn_varlen_func`` forward, then its backward
(``torch.autograd.grad``) under each ``FLASHTILE_HOPPER_BWD_OVERRIDES`` value of
``--configs`` ("" = the shipped config), timed in ``--rounds`` interleaved rounds
(do_bench medians; the median over rounds is printed). Each config's gradients are
compared with the shipped config's (max |difference| / max |shipped|), flagged MISMATCH
above 2e-2. TFLOPS count 2.5x the forward's FLOPs (causal: half the square) per sequence.
"""

from __future__ import annotations

import argparse
import statistics
import sys

import torch
import triton


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--head-dims", default="64,128")
    ap.add_argument("--lens", default="8192,6000,3000,7000")
    ap.add_argument("--nheads", type=int, default=32)
    ap.add_argument("--nheads-kv", type=int, default=8)
    ap.add_argument("--causal", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--configs", nargs="+", default=["", "gqa_expand=1",
                                                     "gqa_expand=1,max_regs=168"])
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_varlen_gqa: needs a GPU")
        return 2
    import os

    import flashtile
    from flashtile.ops import hopper_bwd

    lens = [int(x) for x in args.lens.split(",")]
    causal = bool(args.causal)
    cu = torch.tensor([0] + lens, device="cuda").cumsum(0).to(torch.int32)
    total, longest = sum(lens), max(lens)
    h, hkv = args.nheads, args.nheads_kv
    print(f"{torch.cuda.get_device_name()} torch {torch.__version__} triton "
          f"{triton.__version__}; lens {lens} H{h} KV{hkv} causal={int(causal)}")
    status = 0
    for d in map(int, args.head_dims.split(",")):
        gen = torch.Generator(device="cuda").manual_seed(d)
        q = torch.randn(total, h, d, device="cuda", dtype=torch.bfloat16, generator=gen)
        k, v = (torch.randn(total, hkv, d, device="cuda", dtype=torch.bfloat16, generator=gen)
                for _ in range(2))
        dout = torch.randn_like(q)
        for t in (q, k, v):
            t.requires_grad_()
        out = flashtile.flash_attn_varlen_func(q, k, v, cu, cu, longest, longest,
                                               causal=causal)
        flops = sum(4 * h * n * n * d * (0.5 if causal else 1.0) for n in lens) * 2.5

        def bwd(out=out, inputs=(q, k, v), dout=dout):
            return torch.autograd.grad(out, inputs, dout, retain_graph=True)

        times: dict = {c: [] for c in args.configs}
        grads: dict = {}
        for _ in range(args.rounds):
            for c in args.configs:
                os.environ[hopper_bwd.OVERRIDES_ENV_VAR] = c
                if c not in grads:
                    grads[c] = bwd()
                times[c].append(triton.testing.do_bench(bwd, warmup=10, rep=60,
                                                        return_mode="median"))
        os.environ.pop(hopper_bwd.OVERRIDES_ENV_VAR, None)
        base = grads[args.configs[0]]
        for c in args.configs:
            diffs = [float((a.float() - b.float()).abs().max() / b.float().abs().max())
                     for a, b in zip(grads[c], base)]
            ok = max(diffs) <= 2e-2
            status |= 0 if ok else 1
            ms = statistics.median(times[c])
            print(f"hd {d:3d} {c or 'shipped':<28} {ms:8.3f} ms {flops / ms / 1e9:7.1f} TFLOPS"
                  f"  spread {max(times[c]) / min(times[c]):.2f}  rel diff "
                  f"{max(diffs):.1e}{'' if ok else '  MISMATCH'}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
