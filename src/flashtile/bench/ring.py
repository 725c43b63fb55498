"""``flashtile bench --suite ring``: ring attention (context parallelism) scaling.

Launch with torchrun for N GPUs, or as one process (a ring of one)::

    torchrun --nproc-per-node 8 -m flashtile.cli bench --suite ring --csv ring.csv
    flashtile bench --suite ring                      # 1 process, 1 GPU

Shapes: batch 1, bf16, ``nheads = 2048 / head_dim`` (DESIGN.md section 6), zig-zag layout
(balanced causal work). For each mode, global length S and causal flag, forward and
forward+backward:

    strong   S fixed (``--ring-seqlens``), L = S / W tokens per rank
    weak     L fixed (``--ring-local-seqlens``) per rank, S = W * L
    ring TFLOPS/GPU   FLOPs(S) / time / W, FLOPs = 4 * H * S^2 * D (halved for causal),
                      backward 2.5x forward (bench.flops)
    1-GPU TFLOPS      flash_attn_func on the whole S on one GPU; ring/1-GPU is the
                      parallel efficiency per GPU
    hidden            share of the communication hidden behind compute:
                      (t_compute + t_comm - t_ring) / t_comm, clamped to [0, 1], with
                      t_compute the same kernels with nothing sent and t_comm the same
                      messages with no kernels (n/a with one rank)
    torch-CP          torch.distributed.tensor.experimental.context_parallel over SDPA
                      (PyTorch's ring attention, its default load balancing) on the same
                      problem, when this torch has it

Timing: a fixed number of reps on every rank (collectives must match), CUDA events, the
median per rank, the slowest rank's median reported. Without a CUDA device: a tiny
forward + backward over gloo under the interpreter against the reference, no timings.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys

HIDDEN = 2048


def configure_parser(parser: argparse.ArgumentParser) -> None:
    from .cli import parse_size

    g = parser.add_argument_group("ring suite (--suite ring)")
    g.add_argument("--ring-seqlens", type=parse_size, nargs="+", default=[16384, 32768],
                   metavar="N", help="global lengths for strong scaling (default: 16k 32k)")
    g.add_argument("--ring-local-seqlens", type=parse_size, nargs="+", default=[8192],
                   metavar="N", help="per-rank lengths for weak scaling (default: 8k)")
    g.add_argument("--ring-head-dim", type=int, default=128, metavar="D",
                   help="head dim (default: 128)")
    g.add_argument("--ring-reps", type=int, default=10, metavar="N",
                   help="timed reps per measurement, the same on every rank (default: 10)")


# ----------------------------------------------------------------------------------
# process group
# ----------------------------------------------------------------------------------


def _init_group() -> bool:
    """Join torchrun's group (env://) or start a group of one; True if we started it."""
    import socket

    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        return False
    cuda = torch.cuda.is_available()
    backend = "nccl" if cuda else "gloo"
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        if cuda:
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
        dist.init_process_group(backend)
    else:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=0,
                                world_size=1)
    return True


def run(args: argparse.Namespace) -> int:
    import torch

    cuda = torch.cuda.is_available()
    if not cuda and "flashtile.ops.flash" not in sys.modules:
        os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch.distributed as dist

    owned = _init_group()
    try:
        if not cuda:
            if dist.get_rank() == 0:
                print("flashtile bench --suite ring: timings need a GPU, and no CUDA device "
                      "was found. Running a gloo smoke check (interpreter) instead.")
            try:
                line = _smoke()
            except Exception as exc:
                print(f"ring smoke FAILED: {type(exc).__name__}: {exc}")
                return 1
            if dist.get_rank() == 0:
                print(line)
            return 0
        return _run_gpu(args)
    finally:
        if owned:
            dist.destroy_process_group()


def _smoke() -> str:
    """Zig-zag causal ring over gloo on a padded length, forward + backward, vs the
    plain-PyTorch reference of the whole sequence (every rank checks the gathered out)."""
    import torch
    import torch.distributed as dist

    from .. import reference
    from ..distributed import ring_flash_attn_func, shard, unshard

    world = dist.get_world_size()
    seqlen = 8 * world - 1  # pads one token
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, seqlen, 2, 32, generator=gen) for _ in range(3))
    local = [shard(t, layout="zigzag").requires_grad_() for t in (q, k, v)]
    out_l = ring_flash_attn_func(*local, causal=True, layout="zigzag", seqlen=seqlen)
    grads = torch.autograd.grad(out_l.sum(), local)
    out = unshard(out_l.detach(), seqlen, layout="zigzag")
    ref = reference.flash_attn_func(q, k, v, causal=True)
    err = (out.double() - ref.double()).abs().max().item()
    if not err < 1e-4 or not all(torch.isfinite(g).all() for g in grads):
        raise RuntimeError(f"max|out - ref64| = {err:.3e} or non-finite gradients")
    return (f"ring smoke ok: {world} rank(s), gloo, zig-zag causal, seqlen {seqlen} (padded), "
            f"forward + backward, max|out - ref64| = {err:.2e}")


# ----------------------------------------------------------------------------------
# timing
# ----------------------------------------------------------------------------------


def _device():
    """(device, dtype) of the measurements: CUDA bf16; CPU fp32 only to exercise this
    file's logic on a machine without a GPU (tiny shapes, interpreter)."""
    import torch

    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device()), torch.bfloat16
    return torch.device("cpu"), torch.float32


def _time_ms(fn, reps: int, warmup: int = 3) -> float:
    """Median over ``reps`` on this rank (CUDA events), max over ranks."""
    import time

    import torch
    import torch.distributed as dist

    dev, _ = _device()
    cuda = dev.type == "cuda"
    for _ in range(warmup):
        fn()
    if cuda:
        torch.cuda.synchronize()
    dist.barrier()
    times = []
    for _ in range(reps):
        if cuda:
            start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append(1e3 * (time.perf_counter() - t0))
    med = torch.tensor([statistics.median(times)], device=dev)
    dist.all_reduce(med, op=dist.ReduceOp.MAX)
    return float(med)


def _ring_calls(seqlen, local_len, head_dim, causal):
    """{(kind, mode): closure} for the ring (kind ring / compute / comm) on this rank."""
    import torch
    import torch.distributed as dist

    from ..distributed.ring import _TAG_DKV, _TAG_KV, Ring, RingFlashAttnFunction

    dev, dt = _device()
    h = HIDDEN // head_dim
    ring = Ring.create(None, "zigzag", causal, seqlen, local_len)
    scale = 1.0 / math.sqrt(head_dim)
    q, k, v = (torch.randn(1, local_len, h, head_dim, device=dev, dtype=dt, requires_grad=True)
               for _ in range(3))
    dout = torch.randn_like(q)
    calls = {}
    for kind, comm in (("ring", True), ("compute", False)):
        def fwd(comm=comm):
            with torch.no_grad():
                return RingFlashAttnFunction.apply(q, k, v, scale, ring, comm)[0]

        def fwd_bwd(comm=comm):
            out = RingFlashAttnFunction.apply(q, k, v, scale, ring, comm)[0]
            return torch.autograd.grad(out, (q, k, v), dout)

        calls[kind, "fwd"], calls[kind, "fwd_bwd"] = fwd, fwd_bwd
    kv = [torch.empty((2, *k.shape), device=dev, dtype=dt) for _ in range(2)]
    dkv = [torch.empty((2, *k.shape), device=dev, dtype=torch.float32) for _ in range(2)]

    def comm_only(bwd: bool):
        n = dist.get_world_size()
        if n == 1:  # a ring of one sends nothing
            return
        rounds = [(kv, _TAG_KV)] * (n - 1) + ([(kv, _TAG_KV)] * (n - 1) + [(dkv, _TAG_DKV)] * n
                                              if bwd else [])
        for bufs, tag in rounds:
            for w in ring.exchange(bufs[0], bufs[1], tag):
                w.wait()

    calls["comm", "fwd"] = lambda: comm_only(False)
    calls["comm", "fwd_bwd"] = lambda: comm_only(True)
    return calls


def _single_calls(seqlen, head_dim, causal):
    import torch

    from ..ops.flash import flash_attn_func

    dev, dt = _device()
    h = HIDDEN // head_dim
    q, k, v = (torch.randn(1, seqlen, h, head_dim, device=dev, dtype=dt, requires_grad=True)
               for _ in range(3))
    dout = torch.randn_like(q)

    def fwd():
        with torch.no_grad():
            return flash_attn_func(q, k, v, causal=causal)

    def fwd_bwd():
        return torch.autograd.grad(flash_attn_func(q, k, v, causal=causal), (q, k, v), dout)

    return {"fwd": fwd, "fwd_bwd": fwd_bwd}


def _torch_cp_ms(seqlen, head_dim, causal, reps) -> dict[str, float]:
    """PyTorch's context parallelism over SDPA on the same problem: {mode: ms}."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.experimental import context_parallel

    dev, dt = _device()
    h = HIDDEN // head_dim
    mesh = init_device_mesh(dev.type, (dist.get_world_size(),))
    q, k, v, dout = (torch.randn(1, h, seqlen, head_dim, device=dev, dtype=dt)
                     for _ in range(4))  # (B, H, S, D): SDPA's layout, sharded in place
    res = {}
    with context_parallel(mesh, buffers=[q, k, v, dout], buffer_seq_dims=[2, 2, 2, 2]):
        x = [t.detach().requires_grad_() for t in (q, k, v)]

        def fwd():
            with torch.no_grad():
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        def fwd_bwd():
            out = F.scaled_dot_product_attention(*x, is_causal=causal)
            return torch.autograd.grad(out, x, dout)

        res["fwd"], res["fwd_bwd"] = _time_ms(fwd, reps), _time_ms(fwd_bwd, reps)
    return res


# ----------------------------------------------------------------------------------
# the run
# ----------------------------------------------------------------------------------


def _measure(seqlen, local_len, head_dim, causal, reps) -> dict:
    """{mode: {ring, compute, comm, single, cp (ms)}, "cp_note": str}."""
    res = {"fwd": {}, "fwd_bwd": {}, "cp_note": ""}
    ring = _ring_calls(seqlen, local_len, head_dim, causal)
    single = _single_calls(seqlen, head_dim, causal)
    for mode in ("fwd", "fwd_bwd"):
        for kind in ("ring", "compute", "comm"):
            res[mode][kind] = _time_ms(ring[kind, mode], reps)
        res[mode]["single"] = _time_ms(single[mode], reps)
    try:
        cp = _torch_cp_ms(seqlen, head_dim, causal, reps)
    except Exception as exc:  # an older torch, or an SDPA backend CP does not cover
        res["cp_note"] = f"{type(exc).__name__}: {exc}"[:160]
        cp = {}
    for mode in ("fwd", "fwd_bwd"):
        res[mode]["cp"] = cp.get(mode, math.nan)
    return res


def _run_gpu(args) -> int:
    import torch.distributed as dist

    from ..distributed.layout import padded_length
    from .flops import BWD_FACTOR, Shape, attn_fwd_flops, tflops
    from .harness import Record
    from .report import Env, _align, write_csv

    world, rank = dist.get_world_size(), dist.get_rank()
    d = args.ring_head_dim
    h = HIDDEN // d
    reps = 5 if args.quick else args.ring_reps
    env = Env.collect(args.commit)
    cases = [("strong", padded_length(s, world, "zigzag")) for s in args.ring_seqlens]
    cases += [("weak", world * padded_length(n, 1, "zigzag")) for n in args.ring_local_seqlens]
    table = [["mode", "S", "L/rank", "causal", "pass", "ring TFLOPS/GPU", "1-GPU TFLOPS",
              "ring/1-GPU", "hidden", "torch-CP TFLOPS/GPU", "ring/CP"]]
    records, notes = [], []
    for mode, seqlen in cases:
        for causal in (False, True):
            res = _measure(seqlen, seqlen // world, d, causal, reps)
            shape = Shape(1, seqlen, h, d, causal)
            for p, factor in (("fwd", 1.0), ("fwd_bwd", 1.0 + BWD_FACTOR)):
                r = res[p]
                flops = factor * attn_fwd_flops(1, h, seqlen, seqlen, d, causal)
                ring_t, one_t = tflops(flops, r["ring"]) / world, tflops(flops, r["single"])
                cp_t = tflops(flops, r["cp"]) / world if not math.isnan(r["cp"]) else math.nan
                hidden = math.nan
                if world > 1 and r["comm"] > 0:
                    hidden = (r["compute"] + r["comm"] - r["ring"]) / r["comm"]
                    hidden = min(max(hidden, 0.0), 1.0)
                table.append([mode, str(seqlen), str(seqlen // world), "yes" if causal else "no",
                              p, f"{ring_t:.1f}", f"{one_t:.1f}", f"{ring_t / one_t:.2f}x",
                              "n/a" if math.isnan(hidden) else f"{100 * hidden:.0f}%",
                              "n/a" if math.isnan(cp_t) else f"{cp_t:.1f}",
                              "n/a" if math.isnan(cp_t) else f"{ring_t / cp_t:.2f}x"])
                kernel = f"ring_{mode}_w{world}"
                for backend, metric, value in (
                    ("flashtile-ring", f"{p}_tflops_per_gpu", ring_t),
                    ("flashtile-ring", f"{p}_ms", r["ring"]),
                    ("flashtile-ring", f"{p}_compute_only_ms", r["compute"]),
                    ("flashtile-ring", f"{p}_comm_only_ms", r["comm"]),
                    ("flashtile-ring", f"{p}_comm_hidden_share", hidden),
                    ("flashtile-1gpu", f"{p}_tflops", one_t),
                    ("torch-cp-sdpa", f"{p}_tflops_per_gpu", cp_t),
                ):
                    if not math.isnan(value):
                        records.append(Record(kernel, backend, shape, metric, value))
            if res["cp_note"]:
                notes.append(f"torch-CP S={seqlen} causal={causal}: {res['cp_note']}")
            if rank == 0:
                print(f"ring: {mode} S={seqlen} causal={causal} done", file=sys.stderr)
    if rank != 0:
        return 0
    if args.csv:
        write_csv(args.csv, records, env)
        print(f"wrote {args.csv}", file=sys.stderr)
    print(_align(table, left=5))
    print(f"{world} rank(s), zig-zag layout, batch 1, bf16, H = {HIDDEN} / D = {h}, D = {d}; "
          "TFLOPS on 4 * H * S^2 * D (halved for causal), backward 2.5x forward")
    for note in dict.fromkeys(notes):
        print(note)
    print(env.line())
    return 0
