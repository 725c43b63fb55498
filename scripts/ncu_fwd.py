"""One Gluon forward shape under Nsight Compute (scripts/suites/ncufwd.sh):

    python scripts/ncu_fwd.py --head-dim 64 --seqlen 4096 [--causal]

16k tokens (batch = 16384 / seqlen), hidden 2048 (heads = 2048 / head dim), bf16; three
forward calls (run under ``ncu --launch-skip 2 --launch-count 1``: the third is profiled,
after compilation and a warm call)."""

import argparse

import torch

import flashtile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--seqlen", type=int, default=4096)
    ap.add_argument("--causal", action="store_true")
    args = ap.parse_args()
    b, h = 16384 // args.seqlen, 2048 // args.head_dim
    q, k, v = (torch.randn(b, args.seqlen, h, args.head_dim, device="cuda",
                           dtype=torch.bfloat16) for _ in range(3))
    with torch.no_grad():
        for _ in range(3):
            flashtile.flash_attn_func(q, k, v, causal=args.causal)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
