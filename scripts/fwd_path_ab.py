"""The same Gluon forward timed three ways in one process, to find where `flashtile bench`
and `scripts/bench_hopper.py` part (session 14: 1.191 / 1.103 ms at hd 64 non-causal 4k
for the same kernel and config):

  direct   hopper_fwd.hopper_attention_forward with the shipped config (bench_hopper's call)
  api      flashtile.flash_attn_func (the `flashtile` bench backend's forward closure)
  cudnn    SDPA's cuDNN backend (the reference of both)

Each is timed by do_bench (L2 flushed before every call, as both benches do) and by
CUDA events around 50 back-to-back calls (no flush); the rounds alternate. The host
microseconds of one call (perf_counter over 200 calls, synchronised once) go beside.
Session 14 (`s14b`): direct and api within 0.5% at hd 64 / 128, 4k / 16k (api's ~35 us
more host time hidden behind the kernel); the 7% was between machine starts.

    python scripts/fwd_path_ab.py [--head-dims 64] [--seqlens 4096 16384] [--rounds 3]
"""

import argparse
import statistics

import torch
import triton

from flashtile import flash_attn_func
from flashtile.bench.backends import get_backend
from flashtile.bench.flops import attn_flops, paper_shape, tflops
from flashtile.bench.harness import events_us, host_us
from flashtile.ops import hopper_fwd


def closures(q, k, v, causal):
    """path -> zero-argument forward call (output allocation included)."""
    b, s, h, d = q.shape
    cfg = hopper_fwd.call_config(d, causal, s)

    def direct():
        out = torch.empty_like(q)
        lse = torch.empty((b, h, s), dtype=torch.float32, device=q.device)
        return hopper_fwd.hopper_attention_forward(q, k, v, None, causal, out, lse, cfg)[0]

    return {"direct": direct,
            "api": lambda: flash_attn_func(q, k, v, causal=causal),
            "cudnn": get_backend("sdpa-cudnn")(q, k, v, causal).fwd}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--head-dims", type=int, nargs="+", default=[64])
    ap.add_argument("--seqlens", type=int, nargs="+", default=[4096, 16384])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    dev = torch.device("cuda")
    print(f"{torch.cuda.get_device_name(dev)} torch {torch.__version__} triton "
          f"{triton.__version__}")
    print(f"{'shape':<20} {'causal':<6} {'path':<7} {'do_bench ms':>11} {'events ms':>10} "
          f"{'TFLOPS':>7} {'host us':>8}")
    for hd in args.head_dims:
        for seqlen in args.seqlens:
            for causal in (False, True):
                shape = paper_shape(seqlen, hd, causal)
                gen = torch.Generator(device=dev).manual_seed(seqlen + hd)
                q, k, v = (torch.randn(shape.batch, seqlen, shape.nheads, hd, device=dev,
                                       dtype=torch.bfloat16, generator=gen) for _ in range(3))
                fns = closures(q, k, v, causal)
                res = {name: ([], [], []) for name in fns}
                for _ in range(args.rounds):
                    for name, fn in fns.items():
                        res[name][0].append(triton.testing.do_bench(
                            fn, warmup=25, rep=100, return_mode="median"))
                        fn()
                        torch.cuda.synchronize()
                        res[name][1].append(events_us(fn) / 1e3)
                        res[name][2].append(host_us(fn, dev))
                flops = attn_flops(shape, "fwd")
                for name, (db, ev, hu) in res.items():
                    ms = statistics.median(db)
                    print(f"{shape.label():<20} {int(causal):<6} {name:<7} {ms:11.4f} "
                          f"{statistics.median(ev):10.4f} {tflops(flops, ms):7.1f} "
                          f"{statistics.median(hu):8.1f}", flush=True)


if __name__ == "__main__":
    main()
