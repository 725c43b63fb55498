"""Which kernels one flashtile forward+backward runs, and how long each takes (torch
profiler), beside the do_bench medians of the forward and of forward+backward. Written
for the hd 128 causal 1k shape that benches slower inside the full 18-shape run than
alone (benchmarks/results.md, session 4).

    python scripts/diag_fwd_bwd.py [B,S,H,D,causal ...]

(session 9: also the varlen bench's dense baseline at 640 tokens, hd 128, which read
94-125 TFLOPS forward+backward where its kernels bench at ~260.)
"""

import sys

import torch
import triton

from flashtile.bench.backends import get_backend

SHAPES = [(16, 1024, 16, 128, True), (16, 1024, 16, 128, False), (4, 4096, 16, 128, True)]


def main() -> None:
    torch.manual_seed(0)
    shapes = [tuple(int(x) for x in a.split(",")) for a in sys.argv[1:]] or SHAPES
    for batch, seqlen, heads, head_dim, causal in shapes:
        causal = bool(causal)
        q, k, v, dout = (torch.randn(batch, seqlen, heads, head_dim, device="cuda",
                                     dtype=torch.bfloat16) for _ in range(4))
        be = get_backend("flashtile")(q, k, v, causal, dout=dout)
        fb = triton.testing.do_bench(be.fwd_bwd, warmup=25, rep=100, return_mode="median")
        f = triton.testing.do_bench(be.fwd, warmup=25, rep=100, return_mode="median")
        acts = [torch.profiler.ProfilerActivity.CUDA, torch.profiler.ProfilerActivity.CPU]
        with torch.profiler.profile(activities=acts) as prof:
            for _ in range(3):
                be.fwd_bwd()
            torch.cuda.synchronize()
        print(f"B{batch} S{seqlen} H{heads} D{head_dim} causal={causal}: "
              f"fwd {f * 1e3:.0f} us, fwd+bwd {fb * 1e3:.0f} us")
        print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=8,
                                        max_name_column_width=50))


if __name__ == "__main__":
    main()
