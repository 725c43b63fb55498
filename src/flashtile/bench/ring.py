"""``flashtile bench --suite ring``: ring attention (context parallelism) scaling.

Launch with torchrun for N GPUs, or as one process (a ring of one)::

    torchrun --nproc-per-node 8 -m flashtile.cli bench --suite ring --csv ring.csv
    flashtile bench --suite ring                      # 1 process, 1 GPU

Shapes: batch 1, bf16, ``nheads = 2048 / head_dim`` (DESIGN.md section 6), zig-zag layout
(balanced causal work). For each global length S (ascending; weak and strong cases of
the same S are measured once) and causal flag, forward and forward+backward:

    strong   S fixed (``--ring-seqlens``), L = S / W tokens per rank
    weak     L fixed (``--ring-local-seqlens``) per rank, S = W * L
    ring TFLOPS/GPU   FLOPs(S) / time / W, FLOPs = 4 * H * S^2 * D (halved for causal),
                      backward 2.5x forward (bench.flops)
    1-GPU TFLOPS      flash_attn_func on the whole S on one GPU, for S up to
                      ``--ring-single-max``; above it, the 1-GPU TFLOPS of the longest
                      measured S <= that cap stands in, marked "(at S')" in the table
    efficiency        ring TFLOPS/GPU / 1-GPU TFLOPS (parallel efficiency per GPU)
    hidden            share of the communication hidden behind compute:
                      (t_compute + t_comm - t_ring) / t_comm, clamped to [0, 1], with
                      t_compute the same kernels with nothing sent and t_comm the same
                      messages with no kernels (n/a with one rank)
    torch-CP          torch.distributed.tensor.experimental.context_parallel over SDPA
                      (PyTorch's ring attention, its default load balancing) on the same
                      problem, when this torch has it, up to ``--ring-cp-max`` (a failure
                      such as OOM is reported n/a)

``--ring-check`` first holds the ring to the single-GPU kernel (``_ring_check``);
``--ring-bwd-max`` skips forward+backward above an S; ``--ring-deadline-s`` starts no
further S once the run has taken that long (each finished case is also printed to
stderr as it completes).

Timing: per measurement one untimed warm-up call, then one timed call whose time, the
slowest rank's, sets the number of timed calls (that one included): as many as fit in
``--ring-budget-s``, at least 1, at most ``--ring-reps``, the same on every rank
(collectives must match). CUDA events, the median per rank, the slowest rank's median
reported. Without a CUDA device: a tiny forward + backward over gloo under the
interpreter against the reference (and ``--ring-check`` on a tiny float32 problem), no
timings.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys

HIDDEN = 2048
CHECK_NAMES = ("out", "lse", "dq", "dk", "dv")
CHECK_TENSORS = {"fwd": 2, "fwd_bwd": 5}  # how many of CHECK_NAMES each pass checks
# issue 10's targets for a causal zig-zag ring of W > 1: (pass, L per rank, efficiency)
TARGETS = (("fwd", 8192, 0.90), ("fwd", 32768, 0.97), ("fwd_bwd", 32768, 0.90))


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
                   help="most timed reps per measurement, the same on every rank "
                        "(default: 10; 5 with --quick)")
    g.add_argument("--ring-budget-s", type=float, default=2.0, metavar="SEC",
                   help="about how long the timed reps of one measurement may take: when "
                        "one call is long, fewer reps (at least 1) (default: 2)")
    g.add_argument("--ring-check", action="store_true",
                   help="before the timings: the ring's out, lse (forward) and dq, dk, dv "
                        "(forward+backward), causal and not, against flash_attn_func on "
                        "the whole sequence on one GPU, each rank its shard; PASS/FAIL "
                        "per case, non-zero exit on a failure")
    g.add_argument("--ring-check-seqlen", type=parse_size, default=16384, metavar="N",
                   help="global length of --ring-check (default: 16k)")
    g.add_argument("--ring-single-max", type=parse_size, default=131072, metavar="N",
                   help="longest S timed on one GPU; above it the efficiency uses the "
                        "1-GPU TFLOPS of the longest measured S <= N (default: 128k)")
    g.add_argument("--ring-bwd-max", type=parse_size, default=None, metavar="N",
                   help="time forward+backward only for S <= N (default: every S)")
    g.add_argument("--ring-cp-max", type=parse_size, default=None, metavar="N",
                   help="time torch's context_parallel only for S <= N (default: every S)")
    g.add_argument("--ring-deadline-s", type=float, default=None, metavar="SEC",
                   help="start no further length once the run (check included) has taken "
                        "SEC seconds; the lengths left out are listed (default: none)")


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
            return _run_cpu(args)
        return _run_gpu(args)
    finally:
        if owned:
            dist.destroy_process_group()


def _run_cpu(args) -> int:
    """No CUDA device: ``--ring-check`` on a tiny float32 problem (padded) and the gloo
    smoke check, both under the interpreter."""
    import torch
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        print("flashtile bench --suite ring: timings need a GPU, and no CUDA device "
              "was found. Running a gloo smoke check (interpreter) instead.")
    status = 0
    if args.ring_check:
        seqlen = 6 * world + 1  # pads to a multiple of 2 * world
        ok, lines, _ = _check_report(_ring_check(seqlen, 2, 16, torch.float32), seqlen, 2, 16,
                                     torch.float32)
        if rank == 0:
            print("\n".join(lines))
        status = 0 if ok else 1
    try:
        line = _smoke()
    except Exception as exc:
        print(f"ring smoke FAILED: {type(exc).__name__}: {exc}")
        return 1
    if rank == 0:
        print(line)
    return status


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
# correctness against the single-GPU kernel (--ring-check)
# ----------------------------------------------------------------------------------


def _references(q, k, v, dout, causal):
    """((out, lse, dq, dk, dv) in float64, the same in the input precision): the two
    references of DESIGN.md's rule, ``reference.flash_attn_func`` with upcast True and
    False and autograd, as tests/test_ring.py takes them, on the whole sequence; one head
    at a time, so only one S x S score matrix lives at once."""
    import torch

    from .. import reference

    refs = []
    for upcast in (True, False):
        parts = []
        for h in range(q.shape[2]):
            x = [t[:, :, h:h + 1].detach().requires_grad_() for t in (q, k, v)]
            out, lse = reference.flash_attn_func(*x, causal=causal, return_lse=True,
                                                 upcast=upcast)
            grads = torch.autograd.grad(out, x, dout[:, :, h:h + 1].to(out.dtype))
            parts.append((out.detach(), lse, *grads))
            del x, out, grads
        refs.append(tuple(torch.cat(ts, dim=1 if i == 1 else 2)
                          for i, ts in enumerate(zip(*parts))))
    return refs


def _ring_check(seqlen, nheads, head_dim, dtype) -> dict:
    """This rank's {(causal, pass): {"ring": [Check], "one": [Check], "diff": [float]}}:
    the zig-zag ring against the single-GPU kernel, causal and not.

    Every rank draws the same full q, k, v, dout (``validate.make_qkv``, seeded from the
    case name), runs ``flash_attn_func`` on the whole sequence on its own device (the
    1-GPU result) and the two references, and the ring on its shard: the forward alone
    under no_grad (pass "fwd": out, lse) and forward+backward (pass "fwd_bwd": out, lse,
    dq, dk, dv). On this rank's real (unpadded) tokens, the ring's tensors and the 1-GPU
    result's are each held to DESIGN.md's rule exactly as tests/test_ring.py holds the
    ring (``validate.check_close`` against the float64 reference with the
    input-precision one as the baseline, validate.run_case's atol on the gradients);
    "diff" is max|ring - 1-GPU|. The ring may not rely on the 1-GPU kernel's error as its
    bound: its partial outputs are rounded to the input dtype W times (docs/ring.md)."""
    import torch

    from ..distributed import ring_flash_attn_func, shard
    from ..distributed.layout import group_info, valid_local_length
    from ..ops.flash import flash_attn_func
    from ..validate import check_close, make_qkv, seed_from

    dev = _device()[0]
    rank, world = group_info()
    results = {}
    for causal in (False, True):
        seed = seed_from(f"ring-check-s{seqlen}-h{nheads}-d{head_dim}-{dtype}-{causal}")
        q, k, v = make_qkv(1, seqlen, seqlen, nheads, nheads, head_dim, dtype, dev, seed=seed)
        gen = torch.Generator().manual_seed(seed + 1)
        dout = torch.randn(q.shape, generator=gen).to(device=dev, dtype=dtype)
        x = [t.detach().requires_grad_() for t in (q, k, v)]
        out, lse = flash_attn_func(*x, causal=causal, return_lse=True)
        one = (out.detach(), lse, *torch.autograd.grad(out, x, dout))
        del x, out, lse
        ref64, reflp = _references(q, k, v, dout, causal)
        scale = max(float(t.abs().max()) for t in (ref64[0], *ref64[2:]))
        atol = 2.0**-22 * head_dim * scale  # as validate.run_case, gradients only

        local = [shard(t, layout="zigzag") for t in (q, k, v)]
        n = valid_local_length(seqlen, rank, world, "zigzag", local[0].shape[1])
        kw = dict(causal=causal, return_lse=True, layout="zigzag", seqlen=seqlen)
        with torch.no_grad():
            got_fwd = ring_flash_attn_func(*local, **kw)
        x = [t.detach().requires_grad_() for t in local]
        out, lse = ring_flash_attn_func(*x, **kw)
        got_bwd = (out.detach(), lse,
                   *torch.autograd.grad(out, x, shard(dout, layout="zigzag")))
        del x, out, lse
        for mode, got in (("fwd", got_fwd), ("fwd_bwd", got_bwd)):
            res = results[causal, mode] = {"ring": [], "one": [], "diff": []}
            for i, (name, g) in enumerate(zip(CHECK_NAMES, got)):
                dim = 2 if name == "lse" else 1  # this rank's real tokens of each
                mine = [g.narrow(dim, 0, n)] + [
                    shard(t[i], layout="zigzag", dim=dim).narrow(dim, 0, n)
                    for t in (one, ref64, reflp)]
                tol = atol if i >= 2 else 0.0
                res["ring"].append(check_close(name, mine[0], *mine[2:], atol=tol))
                res["one"].append(check_close(name, mine[1], *mine[2:], atol=tol))
                res["diff"].append(float((mine[0].double() - mine[1].double()).abs().max())
                                   if n else 0.0)
        del q, k, v, dout, one, ref64, reflp, local, got_fwd, got_bwd
    return results


def _check_report(mine: dict, seqlen, nheads, head_dim, dtype):
    """Gather every rank's ``_ring_check``: (the ring passed everywhere, printable lines,
    {(causal, pass, metric): value over the ranks} for the CSV)."""
    import torch.distributed as dist

    world = dist.get_world_size()
    every = [None] * world
    dist.all_gather_object(every, mine)
    dt = str(dtype).replace("torch.", "")
    lines = [f"ring check: zig-zag ring of {world} vs flash_attn_func on the whole sequence "
             f"on one GPU, S = {seqlen}, H = {nheads}, D = {head_dim}, {dt}, each rank its "
             f"shard; ratio = err / bound of DESIGN.md's rule (validate.check_close, as "
             f"tests/test_ring.py), ring/1-GPU, max over the ranks; PASS: the ring within "
             f"the bound on every rank"]
    all_ok, values = True, {}
    for key in mine:
        causal, mode = key
        ok = all(c.ok for res in every for c in res[key]["ring"])
        all_ok &= ok
        ratios, diffs = [], []
        for i, name in enumerate(CHECK_NAMES[:CHECK_TENSORS[mode]]):
            r, o = (max(res[key][who][i].ratio for res in every) for who in ("ring", "one"))
            diff = max(res[key]["diff"][i] for res in every)
            values[causal, mode, f"{name}_err_ratio"] = r
            values[causal, mode, f"{name}_err_ratio_1gpu"] = o
            values[causal, mode, f"{name}_max_abs_diff_vs_1gpu"] = diff
            ratios.append(f"{name} {r:.2f}/{o:.2f}")
            diffs.append(f"{name} {diff:.1e}")
        lines.append(f"ring check causal={'yes' if causal else 'no ':3} {mode:7} "
                     f"{'PASS' if ok else 'FAIL'}  " + "  ".join(ratios))
        lines.append("    max|ring - 1-GPU|: " + "  ".join(diffs))
        for r, res in enumerate(every):
            for who in ("ring", "one"):
                lines += [f"    rank {r} {'ring' if who == 'ring' else '1-GPU'}: {c}"
                          for c in res[key][who] if not c.ok]
    return all_ok, lines, values


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


def _pick_reps(probe_ms: float, max_reps: int, budget_s: float) -> int:
    """Timed reps (the probe included) that fit in ``budget_s``: at least 1, at most
    ``max_reps``."""
    if not probe_ms > 0:
        return max(1, max_reps)
    return max(1, min(max_reps, int(budget_s * 1e3 / probe_ms)))


def _slowest(value: float) -> float:
    """``value`` maximised over the ranks (a decision every rank must take alike)."""
    import torch
    import torch.distributed as dist

    t = torch.tensor([value], dtype=torch.float64, device=_device()[0])
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t)


def _agree_reps(probe_ms: float, max_reps: int, budget_s: float) -> int:
    """``_pick_reps`` on the slowest rank's probe: the same count on every rank (the
    ring's collectives must match call for call)."""
    return _pick_reps(_slowest(probe_ms), max_reps, budget_s)


def _timed_ms(fn) -> float:
    """One call of ``fn``, in milliseconds (CUDA events on a GPU)."""
    import time

    import torch

    if _device()[0].type == "cuda":
        start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end)
    t0 = time.perf_counter()
    fn()
    return 1e3 * (time.perf_counter() - t0)


def _time_ms(fn, max_reps: int, budget_s: float) -> float:
    """One warm-up call, a timed probe that sets the rep count (``_agree_reps``), the
    rest of the reps; median on this rank, max over ranks."""
    import torch
    import torch.distributed as dist

    dev, _ = _device()
    fn()  # compilation, allocator growth, caches
    if dev.type == "cuda":
        torch.cuda.synchronize()
    dist.barrier()
    times = [_timed_ms(fn)]
    reps = _agree_reps(times[0], max_reps, budget_s)
    times += [_timed_ms(fn) for _ in range(reps - 1)]
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


def _torch_cp_ms(seqlen, head_dim, causal, modes, reps, budget_s) -> tuple[dict, str]:
    """PyTorch's context parallelism over SDPA on the same problem: ({mode: ms}, why a
    mode has no number). A mode that fails on any rank (OOM, an SDPA backend CP does not
    cover) is left out on every rank, and the next one still runs."""
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
    res, notes = {}, []
    with context_parallel(mesh, buffers=[q, k, v, dout], buffer_seq_dims=[2, 2, 2, 2]):
        x = [t.detach().requires_grad_() for t in (q, k, v)]

        def fwd():
            with torch.no_grad():
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        def fwd_bwd():
            out = F.scaled_dot_product_attention(*x, is_causal=causal)
            return torch.autograd.grad(out, x, dout)

        calls = {"fwd": fwd, "fwd_bwd": fwd_bwd}
        for mode in modes:
            try:
                res[mode] = _time_ms(calls[mode], reps, budget_s)
            except Exception as exc:
                notes.append(f"{mode}: {type(exc).__name__}: {exc}"[:160])
                if isinstance(exc, torch.cuda.OutOfMemoryError):
                    torch.cuda.empty_cache()
            if _slowest(0.0 if mode in res else 1.0) > 0:  # failed somewhere: n/a everywhere
                if mode in res:
                    notes.append(f"{mode}: failed on another rank")
                res.pop(mode, None)
    return res, "; ".join(notes)


# ----------------------------------------------------------------------------------
# the run
# ----------------------------------------------------------------------------------


def _size(n: int) -> str:
    """1048576 -> "1M", 131072 -> "128k", 1000 -> "1000"."""
    if n and n % (1 << 20) == 0:
        return f"{n >> 20}M"
    return f"{n >> 10}k" if n and n % 1024 == 0 else str(n)


def _single_ref(seqlen: int, measured, cap: int) -> int | None:
    """The S whose 1-GPU TFLOPS stands for ``seqlen``: ``seqlen`` itself when measured,
    else the longest measured S <= min(seqlen, cap); None when there is none."""
    if seqlen in measured:
        return seqlen
    below = [s for s in measured if s <= min(seqlen, cap)]
    return max(below) if below else None


def _cases(args, world) -> list[tuple[int, list[str]]]:
    """[(S, ["strong"] / ["weak"] / ["strong", "weak"])], S ascending, each S once."""
    from ..distributed.layout import padded_length

    modes: dict[int, list[str]] = {}
    for s in args.ring_seqlens:
        modes.setdefault(padded_length(s, world, "zigzag"), []).append("strong")
    for n in args.ring_local_seqlens:
        modes.setdefault(world * padded_length(n, 1, "zigzag"), []).append("weak")
    return [(s, list(dict.fromkeys(modes[s]))) for s in sorted(modes)]


def _measure(seqlen, local_len, head_dim, causal, modes, single, cp, reps, budget_s) -> dict:
    """{mode: {ring, compute, comm[, single][, cp] (ms)} for each of ``modes`` (passes
    "fwd" / "fwd_bwd"), "cp_note": why torch-CP has no numbers}; ``single``, ``cp``:
    whether to time the 1-GPU kernel and torch's context_parallel."""
    res = {mode: {} for mode in modes}
    res["cp_note"] = ""
    ring = _ring_calls(seqlen, local_len, head_dim, causal)
    for mode in modes:
        for kind in ("ring", "compute", "comm"):
            res[mode][kind] = _time_ms(ring[kind, mode], reps, budget_s)
    del ring
    if single:
        calls = _single_calls(seqlen, head_dim, causal)
        for mode in modes:
            res[mode]["single"] = _time_ms(calls[mode], reps, budget_s)
        del calls
    if not cp:
        return res
    try:
        times, note = _torch_cp_ms(seqlen, head_dim, causal, modes, reps, budget_s)
    except Exception as exc:  # an older torch without it, a mesh or layout it refuses
        times, note = {}, f"{type(exc).__name__}: {exc}"[:160]
    res["cp_note"] = note
    for mode in modes:
        if mode in times:
            res[mode]["cp"] = times[mode]
    return res


def _run_gpu(args) -> int:
    import time

    import torch
    import torch.distributed as dist

    from .flops import BWD_FACTOR, Shape, attn_fwd_flops, tflops
    from .harness import Record
    from .report import Env, _align, write_csv

    world, rank = dist.get_world_size(), dist.get_rank()
    d = args.ring_head_dim
    h = HIDDEN // d
    reps = 5 if args.quick else args.ring_reps
    single_max, bwd_max, cp_max = args.ring_single_max, args.ring_bwd_max, args.ring_cp_max
    env = Env.collect(args.commit)
    records, notes = [], []
    t_start = time.perf_counter()

    status = 0
    if args.ring_check:
        s_check = args.ring_check_seqlen
        ok, lines, worst = _check_report(_ring_check(s_check, h, d, torch.bfloat16),
                                         s_check, h, d, torch.bfloat16)
        status = 0 if ok else 1
        if rank == 0:
            print("\n".join(lines), flush=True)
        for (causal, p, metric), value in worst.items():
            records.append(Record(f"ring_check_w{world}", "flashtile-ring",
                                  Shape(1, s_check, h, d, causal), f"{p}_{metric}", value))
        torch.cuda.empty_cache()

    def flops(seqlen, causal, p):
        factor = 1.0 + BWD_FACTOR if p == "fwd_bwd" else 1.0
        return factor * attn_fwd_flops(1, h, seqlen, seqlen, d, causal)

    # -- measure every case; the table comes after (the 1-GPU fallback needs them all) --
    measured = []  # (["strong"] / ["weak"] / both, S, causal, _measure's dict)
    late = []  # lengths not started: --ring-deadline-s had passed
    for seqlen, scaling in _cases(args, world):
        if args.ring_deadline_s is not None and (
                late or _slowest(time.perf_counter() - t_start) > args.ring_deadline_s):
            late.append(seqlen)
            continue
        passes = ["fwd"] + (["fwd_bwd"] if bwd_max is None or seqlen <= bwd_max else [])
        for causal in (False, True):
            t0 = time.perf_counter()
            res = _measure(seqlen, seqlen // world, d, causal, passes, seqlen <= single_max,
                           cp_max is None or seqlen <= cp_max, reps, args.ring_budget_s)
            measured.append((scaling, seqlen, causal, res))
            if res["cp_note"]:
                notes.append(f"torch-CP S={seqlen} causal={causal}: {res['cp_note']}")
            torch.cuda.empty_cache()
            if rank == 0:  # the ring's numbers now, in case the run is cut short
                got = ", ".join(f"{p} {res[p]['ring']:.3g} ms = "
                                f"{tflops(flops(seqlen, causal, p), res[p]['ring']) / world:.1f}"
                                f" TFLOPS/GPU" for p in passes)
                print(f"ring: {'+'.join(scaling)} S={seqlen} causal={causal}: {got} "
                      f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)

    singles: dict[tuple, dict[int, float]] = {}  # (causal, pass) -> {S: 1-GPU TFLOPS}
    for _, seqlen, causal, res in measured:
        for p in ("fwd", "fwd_bwd"):
            if "single" in res.get(p, {}):
                singles.setdefault((causal, p), {})[seqlen] = tflops(
                    flops(seqlen, causal, p), res[p]["single"])

    table = [["mode", "S", "L/rank", "causal", "pass", "ring TFLOPS/GPU", "1-GPU TFLOPS",
              "efficiency", "hidden", "torch-CP TFLOPS/GPU", "ring/CP"]]
    rows = []  # (causal, pass, L, S, efficiency, ring/CP) for the targets
    fallback = False
    for scaling, seqlen, causal, res in measured:
        shape = Shape(1, seqlen, h, d, causal)
        for p in ("fwd", "fwd_bwd"):
            if p not in res:
                continue
            r = res[p]
            ring_t = tflops(flops(seqlen, causal, p), r["ring"]) / world
            ones = singles.get((causal, p), {})
            ref = _single_ref(seqlen, ones, single_max)
            one_t = ones[ref] if ref is not None else math.nan
            eff = ring_t / one_t if ref is not None else math.nan
            cp_t = tflops(flops(seqlen, causal, p), r["cp"]) / world if "cp" in r else math.nan
            hidden = math.nan
            if world > 1 and r["comm"] > 0:
                hidden = (r["compute"] + r["comm"] - r["ring"]) / r["comm"]
                hidden = min(max(hidden, 0.0), 1.0)
            one_cell = "n/a" if ref is None else f"{one_t:.1f}"
            if ref is not None and ref != seqlen:
                one_cell += f" (at {_size(ref)})"
                fallback = True
            table.append(["+".join(scaling), _size(seqlen), _size(seqlen // world),
                          "yes" if causal else "no", p, f"{ring_t:.1f}", one_cell,
                          "n/a" if math.isnan(eff) else f"{100 * eff:.0f}%",
                          "n/a" if math.isnan(hidden) else f"{100 * hidden:.0f}%",
                          "n/a" if math.isnan(cp_t) else f"{cp_t:.1f}",
                          "n/a" if math.isnan(cp_t) else f"{ring_t / cp_t:.2f}x"])
            rows.append((causal, p, seqlen // world, seqlen, eff, ring_t / cp_t))
            for backend, metric, value in (
                ("flashtile-ring", f"{p}_tflops_per_gpu", ring_t),
                ("flashtile-ring", f"{p}_ms", r["ring"]),
                ("flashtile-ring", f"{p}_compute_only_ms", r["compute"]),
                ("flashtile-ring", f"{p}_comm_only_ms", r["comm"]),
                ("flashtile-ring", f"{p}_comm_hidden_share", hidden),
                ("flashtile-ring", f"{p}_efficiency", eff),
                ("flashtile-ring", f"{p}_efficiency_1gpu_seqlen",
                 float(ref) if ref is not None else math.nan),
                ("flashtile-1gpu", f"{p}_tflops", one_t if ref == seqlen else math.nan),
                ("torch-cp-sdpa", f"{p}_tflops_per_gpu", cp_t),
            ):
                if not math.isnan(value):  # under each scaling mode this S stands for
                    records += [Record(f"ring_{m}_w{world}", backend, shape, metric, value)
                                for m in scaling]
    if rank != 0:
        return status
    if args.csv:
        write_csv(args.csv, records, env)
        print(f"wrote {args.csv}", file=sys.stderr)
    print(_align(table, left=5))
    print(f"{world} rank(s), zig-zag layout, batch 1, bf16, H = {HIDDEN} / D = {h}, D = {d}; "
          "TFLOPS on 4 * H * S^2 * D (halved for causal), backward 2.5x forward; "
          "efficiency = ring TFLOPS/GPU / 1-GPU TFLOPS")
    if fallback:
        print(f"1-GPU TFLOPS \"(at S')\": S above --ring-single-max {_size(single_max)} is not "
              "timed on one GPU; the longest measured S' stands in")
    skipped = [s for s in dict.fromkeys(s for _, s, _, _ in measured)
               if bwd_max is not None and s > bwd_max]
    if skipped:
        print(f"fwd_bwd not timed for S > --ring-bwd-max {_size(bwd_max)}: "
              + ", ".join(map(_size, skipped)))
    if cp_max is not None and any(s > cp_max for _, s, _, _ in measured):
        print(f"torch-CP not timed for S > --ring-cp-max {_size(cp_max)}")
    if late:
        print(f"not measured (--ring-deadline-s {args.ring_deadline_s:g} passed): S = "
              + ", ".join(map(_size, late)))
    if world > 1:
        print("\n".join(_target_lines(rows)))
    for note in dict.fromkeys(notes):
        print(note)
    print(f"ring bench: {time.perf_counter() - t_start:.0f} s")
    print(env.line())
    return status


def _target_lines(rows) -> list[str]:
    """Issue 10's targets against the measured rows (causal, pass, L, S, eff, ring/CP)."""
    lines = []
    for p, local, need in TARGETS:
        got = [(s, e) for c, q, L, s, e, _ in rows if c and q == p and L == local
               and not math.isnan(e)]
        head = f"target: causal {p} at {_size(local)}/GPU, efficiency >= {100 * need:.0f}%:"
        if not got:
            lines.append(f"{head} not measured")
            continue
        lines += [f"{head} {100 * e:.0f}% (S = {_size(s)}) {'met' if e >= need else 'MISSED'}"
                  for s, e in got]
    cps = [(s, c, q, x) for c, q, _, s, _, x in rows if not math.isnan(x)]
    if not cps:
        lines.append("target: faster than torch-CP at every size: no torch-CP numbers")
    else:
        slow = [f"S={_size(s)} {'causal' if c else 'full'} {q} {x:.2f}x"
                for s, c, q, x in cps if x <= 1.0]
        lines.append(f"target: faster than torch-CP at every size: {len(cps) - len(slow)} of "
                     f"{len(cps)} rows" + (" met" if not slow else "; MISSED at "
                                            + ", ".join(slow)))
    return lines
