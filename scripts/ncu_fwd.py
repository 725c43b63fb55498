"""One Gluon forward shape under Nsight Compute (scripts/suites/ncufwd.sh):

    python scripts/ncu_fwd.py --head-dim 64 --seqlen 4096 [--causal] [--backend cudnn]

16k tokens (batch = 16384 / seqlen), hidden 2048 (heads = 2048 / head dim), bf16; three
forward calls (run under ``ncu --launch-skip 2 --launch-count 1``: the third is profiled,
after compilation and a warm call). ``--backend cudnn``: SDPA's cuDNN backend instead of
flash_attn_func (session 32), for its kernel's counters beside flashtile's."""

import argparse

import torch

import flashtile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--seqlen", type=int, default=4096)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--backend", choices=("flashtile", "cudnn"), default="flashtile")
    args = ap.parse_args()
    b, h = 16384 // args.seqlen, 2048 // args.head_dim
    q, k, v = (torch.randn(b, args.seqlen, h, args.head_dim, device="cuda",
                           dtype=torch.bfloat16) for _ in range(3))
    if args.backend == "cudnn":  # SDPA takes (B, H, S, D)
        from torch.nn.attention import SDPBackend, sdpa_kernel
        from torch.nn.functional import scaled_dot_product_attention
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
        with torch.no_grad(), sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            for _ in range(3):
                scaled_dot_product_attention(qt, kt, vt, is_causal=args.causal)
    else:
        with torch.no_grad():
            for _ in range(3):
                flashtile.flash_attn_func(q, k, v, causal=args.causal)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
