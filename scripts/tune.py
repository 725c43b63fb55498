"""Sweep launch configs of the production kernel on the GPU (forward and backward).

    python scripts/tune.py [--head-dims 64,128,256] [--seqlens 1024,4096,16384] [--csv PATH]

For each DESIGN.md shape (bf16, 16k tokens, hidden 2048) and each candidate config,
prints the median time and TFLOPS beside SDPA's flash and cuDNN backends measured in
the same run. Used to choose the branches of flashtile/configs.py; the chosen numbers
go to benchmarks/results.md.
"""

import argparse
import functools
import sys

import torch
import triton

from flashtile.bench.report import write_rows
from flashtile.configs import BwdConfig, FwdConfig
from flashtile.ops import flash


def flops(b, h, s, d, causal):
    f = 4 * b * h * s * s * d
    return f / 2 if causal else f


def sdpa_ms(q, k, v, causal, backend):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    qt, kt, vt = (t.transpose(1, 2).contiguous() for t in (q, k, v))
    be = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[backend]
    with sdpa_kernel(be):
        fn = lambda: torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
        return triton.testing.do_bench(fn, warmup=50, rep=200, return_mode="median")


# curated candidates (a full product costs too many compiles for one GPU call)
FWD = {
    64: [(128, 64, 4, 3), (128, 64, 4, 4), (128, 128, 8, 3), (128, 64, 8, 3), (64, 64, 4, 3),
         (128, 32, 4, 4), (64, 128, 4, 3)],
    128: [(128, 64, 8, 3), (128, 64, 4, 3), (128, 32, 4, 3), (64, 64, 4, 3), (128, 128, 8, 2),
          (64, 128, 4, 2), (128, 64, 8, 2)],
    256: [(128, 32, 8, 2), (128, 64, 8, 2), (128, 32, 8, 3), (64, 32, 4, 2), (64, 64, 8, 2)],
}
# backward: the dK/dV tile (block_m x block_n, warps, stages) x the dQ kernel's own tile
# (dq_block_m x dq_block_n, warps); spills of each from scripts/compile_sm90.py-style
# compiles (2026-11-29): kept where a kernel spills < 250 bytes
_DKDV = {
    64: [(64, 64, 4, 2), (32, 64, 4, 3), (64, 128, 8, 2)],
    # with dropout (ptxas, sm_90, causal): 64x128 w8 spills 892 B, 64x64 w8 480 B,
    # 32x128 w8 216 B, 32x64 w4 376 B
    128: [(64, 64, 8, 2), (32, 128, 8, 2), (64, 128, 8, 2), (32, 64, 4, 2)],
    # hd 256 (ptxas, sm_90, causal, 2026-11-30): 32x64 w8 s1 (the first guess) 616 B of
    # spills, s2 380 B; 64x64 w8 s1 1008 B; 64x32 w4 s2 340 B but no wgmma (`tune256`,
    # 0e01b69: the best with the 128x32 dQ tile, shipped). Added after that run: 64x32 w8
    # s2 (72 B causal, 0 non-causal, no wgmma), 128x32 w8 s2 (208 / 264 B, no wgmma)
    256: [(32, 64, 8, 1), (32, 64, 8, 2), (64, 64, 8, 1), (64, 32, 4, 2), (64, 32, 8, 2),
          (128, 32, 8, 2)],
}
_DQ = {
    64: [(64, 64, 4), (128, 32, 4), (128, 64, 8)],
    128: [(64, 64, 8), (128, 32, 8), (128, 64, 8)],
    # hd 256 dQ: 32x64 w8 (first guess) runs mma.sync, not wgmma (32 rows over 2
    # warpgroups); 64x32 w8 and 128x32 w8 239 regs, no spills, wgmma; 64x64 w8 84 B
    256: [(32, 64, 8), (64, 32, 8), (128, 32, 8)],
}
BWD = {d: [(*a, *b) for a in _DKDV[d] for b in _DQ[d]] for d in _DKDV}


def fwd_candidates(d):
    return [FwdConfig(*c) for c in FWD[d]]


def bwd_candidates(d):
    return [BwdConfig(*c) for c in BWD[d]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--head-dims", default="64,128,256")
    ap.add_argument("--seqlens", default="4096")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--bwd", action="store_true")
    ap.add_argument("--dropout", type=float, default=0.0,
                    help="attention dropout probability (MiniGPT trains with 0.2)")
    ap.add_argument("--csv")
    args = ap.parse_args()
    rows = []
    for d in map(int, args.head_dims.split(",")):
        for s in map(int, args.seqlens.split(",")):
            for causal in (c == "1" for c in args.causal.split(",")):
                b, h = 16384 // s, 2048 // d
                q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
                           for _ in range(3))
                f = flops(b, h, s, d, causal)
                ref = {be: sdpa_ms(q, k, v, causal, be) for be in ("flash", "cudnn")}
                best = None
                cands = bwd_candidates(d) if args.bwd else fwd_candidates(d)
                drop = dict(dropout_p=args.dropout, rng_state=(1234, 0))
                if args.bwd:
                    out, lse = flash.attention_forward(q, k, v, causal=causal, **drop)
                    dout = torch.randn_like(out)
                for cfg in cands:
                    try:
                        if args.bwd:
                            fn = functools.partial(flash.attention_backward, dout, q, k, v,
                                                   out, lse, causal=causal, config=cfg,
                                                   **drop)
                        else:
                            fn = functools.partial(flash.attention_forward, q, k, v,
                                                   causal=causal, config=cfg, **drop)
                        ms = triton.testing.do_bench(fn, warmup=25, rep=100,
                                                     return_mode="median")
                    except Exception as e:  # out of resources etc.
                        print(f"  {cfg}: {type(e).__name__}", file=sys.stderr)
                        continue
                    tf = (2.5 if args.bwd else 1.0) * f / ms / 1e9
                    rows.append(dict(kind="bwd" if args.bwd else "fwd", d=d, s=s,
                                     causal=int(causal), cfg=str(cfg), ms=ms, tflops=tf))
                    if best is None or ms < best[1]:
                        best = (cfg, ms)
                mult = 2.5 if args.bwd else 1.0
                print(f"d={d} s={s} causal={int(causal)} best {best[0]} "
                      f"{mult * f / best[1] / 1e9:.0f} TFLOPS | sdpa fwd flash "
                      f"{f / ref['flash'] / 1e9:.0f} cudnn {f / ref['cudnn'] / 1e9:.0f}",
                      flush=True)
    if args.csv:
        write_rows(args.csv, rows)


if __name__ == "__main__":
    main()
