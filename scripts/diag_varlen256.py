"""One hd 256 varlen call in a fresh process, for locating a launch failure (s35a: env_ab
--varlen at one 16k-long sequence, H8, non-causal, died with 'unspecified launch
failure'). Prints OK with the max |difference| against the dense call on the same
tokens (one sequence: the same attention), or the error.

    python scripts/diag_varlen256.py --lens 16384 [--causal] [--bwd] [--dense-only]
"""

import argparse

import torch

from flashtile import flash_attn_func, flash_attn_varlen_func


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lens", type=int, nargs="+", default=[16384])
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--bwd", action="store_true", help="a backward too")
    ap.add_argument("--dense-only", action="store_true", help="the dense call of lens[0]")
    ap.add_argument("--repeat", type=int, default=20,
                    help="calls after the first (s35a failed in the timing loop, after "
                    "the warm-up calls had passed)")
    a = ap.parse_args()
    torch.manual_seed(0)
    n = sum(a.lens)
    q, k, v = (torch.randn(n, a.heads, 256, device="cuda", dtype=torch.bfloat16,
                           requires_grad=a.bwd) for _ in range(3))
    tag = f"lens={a.lens} causal={a.causal} bwd={a.bwd} dense_only={a.dense_only}"
    phase = "first call"
    try:
        n0 = a.lens[0]
        dense = flash_attn_func(*(t[:n0].unsqueeze(0) for t in (q, k, v)), causal=a.causal)[0]
        torch.cuda.synchronize()
        if a.dense_only:
            print("OK", tag)
            return 0
        cu = torch.tensor([0] + a.lens, device="cuda").cumsum(0).to(torch.int32)
        out = flash_attn_varlen_func(q, k, v, cu, cu, max(a.lens), max(a.lens), causal=a.causal)
        torch.cuda.synchronize()
        diff = (out[:n0].float() - dense.float()).abs().max().item()
        if a.bwd:
            out.backward(torch.randn_like(out))
            torch.cuda.synchronize()
        flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
        for i in range(a.repeat):  # as do_bench: an L2 flush, then the call
            phase = f"call {i + 1} forward"
            flush.zero_()
            out = flash_attn_varlen_func(q, k, v, cu, cu, max(a.lens), max(a.lens),
                                         causal=a.causal)
            torch.cuda.synchronize()
            if a.bwd:
                phase = f"call {i + 1} backward"
                out.backward(torch.randn_like(out))
                torch.cuda.synchronize()
        print(f"OK {tag} max|varlen - dense| on seq 0 = {diff:.3e}, {a.repeat} more calls")
        return 0
    except Exception as e:  # noqa: BLE001 (report and exit 1)
        print(f"FAILED {tag} at {phase}: {type(e).__name__}: {str(e).splitlines()[0]}")
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
