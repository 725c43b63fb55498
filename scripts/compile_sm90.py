"""Compile the production kernels for sm_90 on a machine with no GPU (free: no device
time) and report registers/spills/shared memory and whether wgmma was used.

    python scripts/compile_sm90.py [--head-dims 64,128,256] [--ptx DIR]
    python scripts/compile_sm90.py --hopper [--json]   # the Gluon forward, every config
    python scripts/compile_sm90.py --hopper-bwd [--json]   # the Gluon backward
    python scripts/compile_sm90.py --hopper-bwd --spec --loops --variants "d128-causal"
        # the backward as a launch at the DESIGN.md shape specialises its ints, with the
        # spilled values each loop of the SASS reloads / stores per iteration (nvdisasm)

Run without TRITON_INTERPRET. Catches compile errors and resource problems before a
GPU call; the same check runs in CI (tests/test_compile.py).
"""

import argparse
import os
import re
import sys
import time

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from flashtile import configs
from flashtile.ops import flash

TARGET = GPUTarget("cuda", 90, 32)


def _signature(kernel, dtype, constexprs):
    """Argument types: pointers for UPPER_CASE tensors, fp32 for floats, i32 ints."""
    floats = {"sm_scale", "softcap", "dropout_p"}
    sig = {}
    for name in kernel.arg_names:
        if name in constexprs:
            sig[name] = "constexpr"
        elif name.isupper() or name in ("DO", "DK", "DV", "DQ"):
            sig[name] = "*fp32" if name in ("LSE", "DELTA") else f"*{dtype}"
        elif name in floats:
            sig[name] = "fp32"
        else:
            sig[name] = "i32"
    return sig


def compile_kernel(kernel, dtype, constexprs, num_warps, num_stages):
    constexprs = dict(constexprs)
    rng_dev = constexprs.pop("RNG_DEV", False)
    rng_bits = constexprs.pop("RNG_BITS", False)
    sig = _signature(kernel, dtype, constexprs)
    if rng_dev:  # the dropout RNG state on the device (draw_rng_state inside capture)
        sig["seed"] = "*i64"
    if rng_bits:  # a dropout_bits_buffer (FLASHTILE_DROPOUT_BITS=1): the forward writes it
        sig["seed"] = "*i32"
    # as a real launch of packed bf16 tensors specialises them: base pointers 16-byte
    # aligned, strides divisible by 16 (those not in do_not_specialize)
    nospec = set(getattr(kernel, "do_not_specialize", []) or [])
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(kernel.arg_names)
             if sig[n].startswith("*") or (n.startswith("stride") and n not in nospec
                                           and i not in nospec)}
    src = ASTSource(fn=kernel, signature=sig, constexprs=constexprs, attrs=attrs)
    return triton.compile(src, target=TARGET,
                          options=dict(num_warps=num_warps, num_stages=num_stages))


def variants(head_dim):
    bd = max(16, 1 << (head_dim - 1).bit_length())
    for causal in (False, True):
        base = dict(HEAD_DIM=head_dim, BLOCK_D=bd, HAS_LEFT=False, HAS_RIGHT=causal,
                    SOFTCAP=False, DROPOUT=False, UPCAST=False, DOT_PREC="tf32")
        yield f"d{head_dim}{'-causal' if causal else ''}", base
    yield f"d{head_dim}-window-softcap-dropout", dict(
        base, HAS_LEFT=True, HAS_RIGHT=True, SOFTCAP=2, DROPOUT=True)  # 2: tanh.approx
    yield f"d{head_dim}-causal-dropout", dict(base, DROPOUT=True)  # MiniGPT's attention
    # and with its RNG state loaded from the device (CUDA graph capture)
    yield f"d{head_dim}-causal-dropout-rngdev", dict(base, DROPOUT=True, RNG_DEV=True)
    # and reading the decisions as bits
    yield f"d{head_dim}-causal-dropout-bits", dict(base, DROPOUT=True, RNG_BITS=True)


def ptxas_usage(ptx: str) -> tuple[str, str]:
    """Registers and spill bytes from Triton's bundled ptxas -v (the kernels' own numbers
    need a GPU to load the cubin)."""
    import subprocess
    import tempfile

    ptxas = os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/ptxas")
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(ptx)
    res = subprocess.run([ptxas, "-arch=sm_90a", "-v", f.name, "-o", os.devnull],
                         capture_output=True, text=True)
    regs = re.search(r"Used (\d+) registers", res.stderr)
    spill = re.search(r"(\d+) bytes spill stores", res.stderr)
    return (regs.group(1) if regs else "?"), (spill.group(1) if spill else "?")


def report(name, k, counts=False):
    ptx = k.asm.get("ptx", "")
    regs, spills = ptxas_usage(ptx)
    line = (f"{name:<48} regs={regs:>4} spill_bytes={spills:>5} smem={k.metadata.shared:>6} "
            f"wgmma={'yes' if 'wgmma' in ptx else 'NO'}")
    if counts:  # layout shuffles and shared-memory round trips (TTGIR), Philox multiplies
        ttgir = k.asm.get("ttgir", "")
        line += (f" convert_layout={ttgir.count('ttg.convert_layout')}"
                 f" local_alloc={ttgir.count('ttg.local_alloc')}"
                 f" mul.hi={ptx.count('mul.hi')}")
    return line


def hopper_variants():
    """(name, head_dim, causal, dtype, config, varlen): the Gluon forward's stage A tiles
    (configs.hopper_fwd_config) in both dtypes, stage B ("alt") at hd 64/128 and the
    stage C tiles (configs.hopper_fwd_config_c); configs.hopper_fwd_schedule picks which
    one a call runs. "varlen": the same kernels as ops/varlen.py launches them (packed
    sequences, device-side descriptors), bf16; (the last field "window" /
    "window-varlen") stage A with a sliding window's left edge, dense / varlen,
    ("hopper-C-window") stage C with it, and ("softcap") stages A / C with a softcap."""
    import dataclasses

    import torch

    from flashtile.ops.hopper_bwd import HOPPER_BWD_HEAD_DIMS

    for hd in HOPPER_BWD_HEAD_DIMS:
        for causal in (False, True):
            cfg = configs.hopper_fwd_config(hd, causal, 4096)
            for dt in (torch.bfloat16, torch.float16):
                yield (f"hopper d{hd}{'-causal' if causal else ''} {str(dt)[6:]}", hd, causal,
                       dt, cfg, False)
            yield (f"hopper-varlen d{hd}{'-causal' if causal else ''} bfloat16", hd, causal,
                   torch.bfloat16, cfg, True)
            if hd <= 128:
                alt = dataclasses.replace(cfg, warp_specialize=not cfg.warp_specialize)
                yield (f"hopper d{hd}{'-causal' if causal else ''} bfloat16 alt", hd, causal,
                       torch.bfloat16, alt, False)
            if causal and hd <= 128:  # the tile-major launch order (opt-in, tile_heads)
                yield (f"hopper d{hd}-causal bfloat16 tile-major", hd, causal, torch.bfloat16,
                       dataclasses.replace(cfg, tile_heads=8), False)
            else:  # opt-in stage A variants at hd 256: Q in registers (q_regs, measured
                # -1..-3%), FA4's lazy rescale (lazy_rescale, not yet GPU-run)
                for field in ("q_regs", "lazy_rescale"):
                    yield (f"hopper d{hd}{'-causal' if causal else ''} bfloat16 {field}", hd,
                           causal, torch.bfloat16, dataclasses.replace(cfg, **{field: True}),
                           False)
            # stage C (ping-pong schedule): both dtypes at hd 64/128, bf16 at 256
            cfg_c = configs.hopper_fwd_config_c(hd, causal, 4096).one_shot()
            for dt in (torch.bfloat16, torch.float16) if hd <= 128 else (torch.bfloat16,):
                yield (f"hopper-C d{hd}{'-causal' if causal else ''} {str(dt)[6:]}", hd, causal,
                       dt, cfg_c, False)
            yield (f"hopper-C-varlen d{hd}{'-causal' if causal else ''} bfloat16", hd, causal,
                   torch.bfloat16, cfg_c, True)
    # stage A's short causal hd 128 tiles (configs.HD128_CAUSAL_SHORT_A_MAX: under 2k queries)
    # and the 64 x 64 tiles of hd 128 non-causal / hd 64 causal from 512 to 1k queries
    # (configs.SHORT_A_MIN)
    for hd, causal, variants in ((128, True, (False, "window", "softcap")),
                                 (128, False, (False, "window", "softcap")),
                                 (64, True, (False, "window"))):
        short = configs.hopper_fwd_config(hd, causal, 1000)
        for variant in variants:
            tag = f" {variant}" if variant else ""
            yield (f"hopper-short d{hd}{'-causal' if causal else ''} bfloat16{tag}", hd,
                   causal, torch.bfloat16, short, variant)
    # stage A with a sliding window's left edge (HAS_LEFT; ops/hopper_fwd.window_config)
    for hd in HOPPER_BWD_HEAD_DIMS:
        for causal in (False, True):
            yield (f"hopper-window d{hd}{'-causal' if causal else ''} bfloat16", hd, causal,
                   torch.bfloat16, configs.hopper_fwd_config(hd, causal, 4096), "window")
            yield (f"hopper-window-varlen d{hd}{'-causal' if causal else ''} bfloat16", hd,
                   causal, torch.bfloat16, configs.hopper_fwd_config(hd, causal, 4096),
                   "window-varlen")
            # and stage C's (the window's config where the schedule runs C)
            yield (f"hopper-C-window d{hd}{'-causal' if causal else ''} bfloat16", hd, causal,
                   torch.bfloat16, configs.hopper_fwd_config_c(hd, causal, 4096).one_shot(),
                   "window")
            # a softcap (SOFTCAP; on by default at hd 128 / 256), stages A and C; not the
            # register-capped stage A (hd 64 causal: 104 B of spills with tanh.approx), as
            # hd 64 softcaps run the portable forward
            cfg_a = configs.hopper_fwd_config(hd, causal, 4096)
            if cfg_a.max_regs is None:
                yield (f"hopper-softcap d{hd}{'-causal' if causal else ''} bfloat16", hd,
                       causal, torch.bfloat16, cfg_a, "softcap")
            yield (f"hopper-C-softcap d{hd}{'-causal' if causal else ''} bfloat16", hd,
                   causal, torch.bfloat16, configs.hopper_fwd_config_c(hd, causal, 4096).one_shot(),
                   "softcap")
    # dropout (stage A uncapped, configs.hopper_fwd_dropout_config): the seed as host ints,
    # the on-device int64 pair (graph capture) or a dropout_bits_buffer (the words written)
    for hd in configs.HOPPER_DROPOUT_HEAD_DIMS:
        for causal in (False, True):
            for rng in ("seed", "pair", "bits", "bits-ws"):
                yield (f"hopper-dropout d{hd}{'-causal' if causal else ''} bfloat16 {rng}", hd,
                       causal, torch.bfloat16, configs.hopper_fwd_dropout_config(hd, causal, 4096),
                       f"dropout-{rng}")
    # stage C waiting for K before its turn (HopperFwdConfig.c_k_wait_first, opt-in)
    for hd in (64, 128, 256):
        yield (f"hopper-C-kfirst d{hd}-causal bfloat16", hd, True, torch.bfloat16,
               dataclasses.replace(configs.hopper_fwd_config_c(hd, True, 4096).one_shot(),
                                   c_k_wait_first=True), False)
    # stage C at hd 128 with the smaller ring (160 KB), for A/B runs
    yield ("hopper-C d128 bfloat16 ring2", 128, False, torch.bfloat16,
           dataclasses.replace(configs.hopper_fwd_config_c(128, False, 4096).one_shot(),
                               num_stages=2), False)
    # stage C on the persistent grid (HopperFwdConfig.persistent, _fwd_cp_kernel): every
    # head dim, both dtypes at hd 128, and with a window's left edge / a softcap
    for hd in (64, 128, 256):
        for causal in (False, True):
            cfg_p = dataclasses.replace(configs.hopper_fwd_config_c(hd, causal, 4096).one_shot(),
                                        persistent=True)
            tag = f"d{hd}{'-causal' if causal else ''}"
            for dt in (torch.bfloat16, torch.float16) if hd == 128 else (torch.bfloat16,):
                yield (f"hopper-Cp {tag} {str(dt)[6:]}", hd, causal, dt, cfg_p, False)
            if hd <= 128:  # the split ring (V's own ring, an O staging buffer)
                yield (f"hopper-Cp-split {tag} bfloat16", hd, causal, torch.bfloat16,
                       dataclasses.replace(cfg_p, v_stages=2), False)
            if causal:  # the paired item order (HopperFwdConfig.paired), alone and with
                # the split ring (hd 128's shipped causal config below 8k)
                yield (f"hopper-Cp-paired {tag} bfloat16", hd, causal, torch.bfloat16,
                       dataclasses.replace(cfg_p, paired=True), False)
                if hd <= 128:
                    yield (f"hopper-Cp-split-paired {tag} bfloat16", hd, causal,
                           torch.bfloat16, dataclasses.replace(cfg_p, paired=True,
                                                               v_stages=2), False)
            if hd >= 128:  # the split ring without the O buffers (HopperFwdConfig.o_stage):
                # hd 256 K ring 2 / V ring 3 in 224 KB (shipped from 1k since session 35,
                # s33e); hd 128 K 3 / V 3 in 224 KB (opt-in, s40a)
                yield (f"hopper-Cp-split-noO {tag} bfloat16", hd, causal, torch.bfloat16,
                       dataclasses.replace(cfg_p, num_stages=3 if hd == 128 else 2,
                                           v_stages=3, o_stage=False, paired=causal), False)
            if hd == 128:  # the split ring the other way round (K ring 2, V ring 3; opt-in)
                yield (f"hopper-Cp-split-k2v3 {tag} bfloat16", hd, causal, torch.bfloat16,
                       dataclasses.replace(cfg_p, num_stages=2, v_stages=3, paired=causal),
                       False)
                # the shipped split ring with the O store's wait deferred and the next Q
                # loaded before the last PV (HopperFwdConfig.o_lag / q_early, opt-in)
                yield (f"hopper-Cp-split-lag {tag} bfloat16", hd, causal, torch.bfloat16,
                       dataclasses.replace(configs.hopper_fwd_config_c(hd, causal, 4096),
                                           o_lag=True, q_early=True), False)
            if hd >= 128:  # the shipped split rings (hd 128 non-causal K 2 / V 3, causal
                # K 3 / V 2 paired; hd 256 K 2 / V 3 without O buffers) with a window's
                # left edge / a softcap
                for extra in ("window", "softcap"):
                    yield (f"hopper-Cp-split-{extra} {tag} bfloat16", hd, causal,
                           torch.bfloat16, configs.hopper_fwd_config_c(hd, causal, 4096),
                           extra)
            if hd == 128:
                yield (f"hopper-Cp-window {tag} bfloat16", hd, causal, torch.bfloat16, cfg_p,
                       "window")
                yield (f"hopper-Cp-softcap {tag} bfloat16", hd, causal, torch.bfloat16, cfg_p,
                       "softcap")


# Forward variants CI does not compile (tests/test_hopper.py runs them under the `slow`
# mark; `--tier extended` here): what no shipped call reaches and a shipped variant's
# code path already builds. Session 44 measured the whole list at 824 s of one CPU core
# (37% of it these), near the compile fixture's 900 s limit and CI's 20 minutes.
# (regex on the variant name, why)
EXTENDED_FWD = (
    (r" float16$", "fp16 twins of bf16 builds (same code; GPU tests run fp16)"),
    (r" (alt|q_regs|lazy_rescale)$", "stage A experiments, opt-in (steps 86, 88)"),
    (r"^hopper-C-kfirst ", "K before the turn at hd 64 / 256, opt-in (step 41)"),
    (r" ring2$", "the one-shot stage C on a ring of 2, opt-in"),
    (r"^hopper-Cp(-paired|-window|-softcap)? ", "the persistent grid without the split ring"),
    (r"^hopper-Cp-split(-paired)? d64", "hd 64 on the split ring, opt-in (step 97)"),
    (r"^hopper-Cp-split d128", "hd 128 split ring K 3 / V 2 unpaired (shipped: K 2 / V 3, "
                               "causal paired)"),
    (r"^hopper-Cp-split-noO d128", "hd 128 without O buffers, opt-in (step 98)"),
    (r"^hopper-Cp-split-k2v3 d128", "K 2 / V 3 without o_lag / q_early (shipped with them)"),
)


def variant_tier(name: str) -> str:
    """"extended" for a forward variant EXTENDED_FWD names, else "core" (CI builds it)."""
    return "extended" if any(re.search(rx, name) for rx, _ in EXTENDED_FWD) else "core"


def hopper_main(as_json: bool, only: str | None = None, loops: bool = False,
                tier: str = "all") -> None:
    """Compile the Gluon forward for sm_90: one line per variant (JSON with --json);
    ``tier`` "core" / "extended": only the variants ``variant_tier`` puts there."""
    import json

    from flashtile.ops import hopper_fwd

    for name, hd, causal, dt, cfg, varlen in hopper_variants():
        if only and only not in name:  # --variants
            continue
        if tier != "all" and variant_tier(name) != tier:
            continue
        is_varlen = varlen in (True, "window-varlen")
        is_window = varlen in ("window", "window-varlen")
        rec = dict(name=name, head_dim=hd, causal=causal, dtype=str(dt), config=repr(cfg),
                   varlen=is_varlen, window=is_window)
        t0 = time.perf_counter()
        try:
            dropout = varlen[len("dropout-"):] if str(varlen).startswith("dropout-") else None
            k = hopper_fwd.compile_sm90(hd, causal, dt, cfg, varlen=is_varlen,
                                        window=is_window, softcap=varlen == "softcap",
                                        dropout=dropout)
            ptx = k.asm.get("ptx", "")
            regs, spills = ptxas_usage(ptx)
            rec.update(ok=True, regs=regs, spill_bytes=spills, smem=k.metadata.shared,
                       ptx_sha=ptx_digest(ptx),
                       wgmma="wgmma.mma_async" in ptx, tma="cp.async.bulk.tensor" in ptx,
                       setmaxnreg="setmaxnreg" in ptx, local=bool(re.search(r"\.local", ptx)),
                       # stage C: a wgmma wait that leaves one group (PV) in flight
                       overlap="wgmma.wait_group.sync.aligned 1;" in ptx,
                       warps=k.metadata.num_warps,
                       # device-side TMA descriptors (varlen): global scratch per program
                       scratch=getattr(k.metadata, "global_scratch_size", 0),
                       nreg=sorted({int(n) for n in re.findall(r"setmaxnreg\.\w+\.sync\.aligned"
                                                               r"\.u32\s+(\d+)", ptx)}))
            if loops:
                rec["loops"] = sass_loops(k)
        except Exception as exc:  # report every variant, then fail in the caller
            rec.update(ok=False, error=f"{type(exc).__name__}: {exc}"[-4000:])
        rec["seconds"] = round(time.perf_counter() - t0, 2)  # CPU cost of the variant (CI)
        if as_json:
            print(json.dumps(rec), flush=True)
        elif rec["ok"]:
            print(f"{name:<36} {cfg.block_m}x{cfg.block_n} w{cfg.num_warps} s{cfg.num_stages} "
                  f"stage={cfg.schedule} regs={rec['regs']:>4} "
                  f"spill_bytes={rec['spill_bytes']:>5} smem={rec['smem']:>6} "
                  f"wgmma={'yes' if rec['wgmma'] else 'NO'} warps={rec['warps']} "
                  f"setmaxnreg={rec['nreg']}", flush=True)
            for lp in rec.get("loops", []):
                print(f"    loop {lp['start']:#x}-{lp['end']:#x}: {lp['instructions']} "
                      f"instructions, {lp['ldl']} LDL / {lp['stl']} STL per iteration",
                      flush=True)
        else:
            print(f"{name:<36} FAILED {rec['error']}", flush=True)


def ptx_digest(ptx: str) -> str:
    """sha256 (first 16 hex digits) of the PTX without its source locations (``.loc``,
    ``.file``, the debug sections) and comments: equal digests say a refactor left a
    kernel's code as it was, however its source lines moved (``--json`` records it)."""
    import hashlib

    keep = []
    for line in ptx.splitlines():
        text = line.split("//", 1)[0].rstrip()
        head = text.lstrip()
        if not head or head.startswith((".loc", ".file")):
            continue
        if head.startswith(".section") and "debug" in head:
            break  # the debug sections run to the end of the file
        keep.append(text)
    return hashlib.sha256("\n".join(keep).encode()).hexdigest()[:16]


def hopper_bwd_variants():
    """(name, head_dim, causal, dtype, config): every shipped Gluon backward config
    (ops/hopper_bwd.py) in both dtypes, plus the other hd 128 Q/dO tile and the hd 64
    dK/dV kernel without its register cap for A/B runs, (names ending " gqa-expand") the
    dK/dV kernel with one program per query head (HopperBwdConfig.gqa_expand), (names
    ending " window") a sliding window's left bound at hd 64 / 128, and (names ending
    " varlen") the varlen build of the shipped kernels at hd 64 / 128 (" window varlen":
    both), (" softcap") a softcap and (" dropout") dropout from the forward's bit words
    at hd 64 / 128; (" spec") the int arguments specialised as a launch at the DESIGN.md
    shape does (16 / 32 heads, MHA: ops/hopper_bwd.compile_sm90's ``ints``)."""
    import dataclasses

    import torch

    from flashtile.ops.hopper_bwd import HOPPER_BWD_HEAD_DIMS

    for hd in HOPPER_BWD_HEAD_DIMS:
        for causal in (False, True):
            cfg = configs.hopper_bwd_config(hd, causal, 4096)
            tag = f"hopper-bwd d{hd}{'-causal' if causal else ''}"
            for dt in (torch.bfloat16, torch.float16):
                yield f"{tag} {str(dt)[6:]}", hd, causal, dt, cfg
            if hd == 128 and not causal:
                alt = dataclasses.replace(cfg, block_m=32)
                yield f"{tag} bfloat16 alt", hd, causal, torch.bfloat16, alt
            if hd == 256:  # the dK/dV kernel in two column-block launches and the 4-warp dQ
                # kernel (before col_split / dq_col_split)
                split = dataclasses.replace(cfg, block_m=32, num_warps=4, d_split=2,
                                            col_split=False, dq_block_n=32, dq_num_warps=4,
                                            dq_col_split=False)
                yield f"{tag} bfloat16 dsplit", hd, causal, torch.bfloat16, split
            if hd == 64 and not causal:  # the shipped dK/dV tiles without their cap
                free = dataclasses.replace(cfg, max_regs=None)
                yield f"{tag} bfloat16 uncapped", hd, causal, torch.bfloat16, free
            if hd <= 128:  # GQA with per-query-head dK/dV programs (gqa_expand)
                gqa = dataclasses.replace(configs.hopper_bwd_config(hd, causal, 4096),
                                          gqa_expand=True)
                yield f"{tag} bfloat16 gqa-expand", hd, causal, torch.bfloat16, gqa
                # and over packed varlen sequences (opt-in there: gqa_expand=1 override)
                yield f"{tag} bfloat16 gqa-expand varlen", hd, causal, torch.bfloat16, gqa
            if hd <= 128:  # the shipped stats_tma + lse2_pre + group_branch, one by one
                # (head-major, as they were measured: tile_major's index code costs the
                # no-stats build 44-100 B of spills)
                head = dataclasses.replace(cfg, tile_major=False)
                yield (f"{tag} bfloat16 no-stats", hd, causal, torch.bfloat16,
                       dataclasses.replace(head, stats_tma=False, lse2_pre=False,
                                           group_branch=False))
                yield (f"{tag} bfloat16 stats", hd, causal, torch.bfloat16,
                       dataclasses.replace(head, lse2_pre=False, group_branch=False))
                yield (f"{tag} bfloat16 stats lse2", hd, causal, torch.bfloat16,
                       dataclasses.replace(head, group_branch=False))
            if hd <= 128 and causal:  # the other grid order (HopperBwdConfig.tile_major;
                # shipped at causal 4k-16k in session 27, nowhere since session 28)
                yield (f"{tag} bfloat16 tile-major", hd, causal, torch.bfloat16,
                       dataclasses.replace(cfg, tile_major=True))
            if hd <= 128:  # the same kernels over packed varlen sequences (opt-in)
                yield f"{tag} bfloat16 varlen", hd, causal, torch.bfloat16, cfg
            if hd == 256:  # windows and softcaps on the column-split tiles (opt-in,
                # FLASHTILE_HOPPER_BWD_HD256_MASKS=1)
                yield f"{tag} bfloat16 window", hd, causal, torch.bfloat16, cfg
                yield (f"{tag} bfloat16 softcap", hd, causal, torch.bfloat16,
                       configs.hopper_bwd_config(hd, causal, 4096, softcap=True))
            if hd <= 128:  # a sliding window's left bound (HAS_LEFT), dense and varlen
                yield f"{tag} bfloat16 window", hd, causal, torch.bfloat16, cfg
                yield f"{tag} bfloat16 window varlen", hd, causal, torch.bfloat16, cfg
                # a softcap (SOFTCAP, on by default), on its own tiles
                yield (f"{tag} bfloat16 softcap", hd, causal, torch.bfloat16,
                       configs.hopper_bwd_config(hd, causal, 4096, softcap=True))
                # 1 - t^2 folded into P^T early (HopperBwdConfig.softcap_fold), with the
                # launch's ints
                yield (f"{tag} bfloat16 softcap fold spec", hd, causal, torch.bfloat16,
                       dataclasses.replace(configs.hopper_bwd_config(
                           hd, causal, 4096, softcap=True), softcap_fold=True))
                # dropout read from the forward's bit words (DROPOUT)
                yield (f"{tag} bfloat16 dropout", hd, causal, torch.bfloat16,
                       configs.hopper_bwd_config(hd, causal, 4096, dropout=True))
            reduce = configs.hopper_bwd_reduce_config(hd, causal, 4096)
            if reduce is not None:  # deterministic=False: dQ in the dK/dV kernel (one kernel)
                yield f"{tag} bfloat16 reduce", hd, causal, torch.bfloat16, reduce
                yield (f"{tag} bfloat16 reduce gqa-expand", hd, causal, torch.bfloat16,
                       dataclasses.replace(reduce, gqa_expand=True))
                yield (f"{tag} bfloat16 reduce early", hd, causal, torch.bfloat16,
                       dataclasses.replace(reduce, reduce_late=False))
                if not causal:  # deterministic: ordered adds (non-causal only)
                    yield (f"{tag} bfloat16 reduce ordered", hd, causal, torch.bfloat16,
                           configs.hopper_bwd_reduce_config(hd, causal, 4096, ordered=True))
                # deterministic: fixed-point adds into int32 (ops/fixed_dq.py)
                fixed = configs.hopper_bwd_reduce_config(hd, causal, 4096, fixed=True)
                yield f"{tag} bfloat16 reduce fixed", hd, causal, torch.bfloat16, fixed
                # with the ints a launch at the DESIGN.md shape specialises (" spec"): as
                # shipped (causal hd 128: one loop, the mask behind a band branch), and
                # causal with one loop masking every step (HopperBwdConfig.one_loop)
                yield (f"{tag} bfloat16 reduce fixed spec", hd, causal, torch.bfloat16,
                       fixed)
                # two dQ staging tiles (HopperBwdConfig.dq_stage2, opt-in): a CTA barrier
                # per step fewer (as measured in session 30: without dq_finish, whose
                # branch adds 4 B of spills to it causal, 20 in all)
                yield (f"{tag} bfloat16 reduce fixed stage2 spec", hd, causal,
                       torch.bfloat16, dataclasses.replace(fixed, dq_stage2=True,
                                                           dq_finish=False))
                if causal:
                    yield (f"{tag} bfloat16 reduce fixed one-loop spec", hd, causal,
                           torch.bfloat16, dataclasses.replace(fixed, one_loop=1))
                if hd == 128:  # with a window: three loops (the band, the rest, the far
                    # edge); head-major, as windows run it (causal ones on two kernels)
                    yield (f"{tag} bfloat16 reduce fixed window spec", hd, causal,
                           torch.bfloat16, dataclasses.replace(fixed, tile_major=False))
                if not causal:
                    yield (f"{tag} bfloat16 reduce fixed gqa-expand", hd, causal,
                           torch.bfloat16, dataclasses.replace(fixed, gqa_expand=True))
                    # the rotated visiting order alone (HopperBwdConfig.dq_rotate, opt-in)
                    yield (f"{tag} bfloat16 reduce fixed rotate spec", hd, causal,
                           torch.bfloat16, dataclasses.replace(fixed, dq_rotate=True))
                    # the last tiles in 3 pieces (HopperBwdConfig.tail_split)
                    yield (f"{tag} bfloat16 reduce fixed tail spec", hd, causal,
                           torch.bfloat16, dataclasses.replace(fixed, tail_split=3))
            fused = configs.hopper_bwd_fused_config(hd, causal)
            if fused not in (None, cfg):  # the fused kernel's tiles (not shipped), ordered
                yield f"{tag} bfloat16 fused", hd, causal, torch.bfloat16, fused
                # and racing (dQ by TMA reduce-adds)
                yield f"{tag} bfloat16 racing", hd, causal, torch.bfloat16, fused
                # and with the dQ GEMMs behind dK, stored a step later (dq_defer)
                defer = dataclasses.replace(fused, dq_defer=True)
                yield f"{tag} bfloat16 racing defer", hd, causal, torch.bfloat16, defer
                yield f"{tag} bfloat16 fused defer", hd, causal, torch.bfloat16, defer


def sass_loops(kernel) -> list[dict]:
    """Per loop of ``kernel``'s SASS (nvdisasm of its cubin; a loop is a backward branch
    spanning more than 64 instructions, shortest first): its instruction count and the
    local-memory loads (LDL, spill reloads) and stores (STL) it executes per iteration.
    The mbarrier waits' retry paths sit out of line at the kernel's end and branch back
    into the loop, so longer spans that end there overlap the loop: the shortest span
    starting in a loop is its body.
    ptxas's spill bytes say how much spilled; this says where, which is what costs: a
    reload in a hot loop stalls on L1TEX every step (session 28: 25 per step of the
    causal one-kernel backward's main loop, 8.55 GB of local loads per backward)."""
    import subprocess
    import tempfile

    nvdisasm = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin",
                            "nvdisasm")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(kernel.asm["cubin"])
        f.flush()
        sass = subprocess.run([nvdisasm, "-c", f.name], capture_output=True, text=True,
                              check=True).stdout
    ins, labels, pending = [], {}, []
    for line in sass.splitlines():
        m = re.match(r"\s*\.L_x_(\d+):", line)
        if m:
            pending.append(int(m.group(1)))
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if m:
            addr = int(m.group(1), 16)
            ins.append((addr, m.group(2)))
            for lab in pending:
                labels[lab] = addr
            pending = []
    loops = []
    for addr, text in ins:
        m = re.search(r"BRA.*\.L_x_(\d+)", text)
        if m and int(m.group(1)) in labels:
            top = labels[int(m.group(1))]
            if top < addr and (addr - top) // 16 > 64:
                body = [t for a, t in ins if top <= a <= addr]
                loops.append(dict(start=top, end=addr, instructions=len(body),
                                  ldl=sum("LDL" in t for t in body),
                                  stl=sum("STL" in t for t in body)))
    loops.sort(key=lambda lp: lp["end"] - lp["start"])
    return loops


def hopper_bwd_main(as_json: bool, only: str | None = None, spec: bool = False,
                    loops: bool = False) -> None:
    """Compile the Gluon backward (dK/dV and dQ kernels) for sm_90: one line per kernel
    of each variant (JSON with --json)."""
    import json

    from flashtile.ops import hopper_bwd

    for name, hd, causal, dt, cfg in hopper_bwd_variants():
        if only and only not in name:  # --variants
            continue
        t0 = time.perf_counter()
        try:
            kernels = hopper_bwd.compile_sm90(hd, causal, dt, cfg,
                                              deterministic=" racing" not in name,
                                              varlen=name.endswith(" varlen"),
                                              window=" window" in name,
                                              softcap=name.endswith(" softcap")
                                              or " softcap fold" in name,
                                              dropout=name.endswith(" dropout"),
                                              ints=dict(nheads=2048 // hd, group=1,
                                                        tile_heads=1)
                                              if spec or " spec" in name else None)
        except Exception as exc:  # report every variant, then fail in the caller
            kernels = {kn: exc for kn in (("fused",) if cfg.fused else ("dkdv", "dq"))}
        seconds = round(time.perf_counter() - t0, 2)  # the variant's kernels together (CI)
        for kname, k in kernels.items():
            rec = dict(name=f"{name} {kname}", head_dim=hd, causal=causal, dtype=str(dt),
                       config=repr(cfg), seconds=seconds)
            if isinstance(k, Exception):
                rec.update(ok=False, error=f"{type(k).__name__}: {k}"[-4000:])
            else:
                ptx = k.asm.get("ptx", "")
                regs, spills = ptxas_usage(ptx)
                rec.update(ok=True, regs=regs, spill_bytes=spills, smem=k.metadata.shared,
                           ptx_sha=ptx_digest(ptx),
                           wgmma="wgmma.mma_async" in ptx, tma="cp.async.bulk.tensor" in ptx,
                           local=bool(re.search(r"\.local", ptx)))
                if loops:
                    rec["loops"] = sass_loops(k)
            if as_json:
                print(json.dumps(rec), flush=True)
            elif rec["ok"]:
                print(f"{rec['name']:<40} regs={rec['regs']:>4} "
                      f"spill_bytes={rec['spill_bytes']:>5} smem={rec['smem']:>6} "
                      f"wgmma={'yes' if rec['wgmma'] else 'NO'}  {cfg}", flush=True)
                for lp in rec.get("loops", []):
                    print(f"    loop {lp['start']:#x}-{lp['end']:#x}: {lp['instructions']} "
                          f"instructions, {lp['ldl']} LDL / {lp['stl']} STL per iteration",
                          flush=True)
            else:
                print(f"{rec['name']:<40} FAILED {rec['error']}", flush=True)


def main():
    if os.environ.get("TRITON_INTERPRET") == "1":
        sys.exit("unset TRITON_INTERPRET: this compiles for the GPU")
    ap = argparse.ArgumentParser()
    ap.add_argument("--head-dims", default="64,128,256")
    ap.add_argument("--ptx", help="write PTX files here")
    ap.add_argument("--hopper", action="store_true",
                    help="compile the Gluon sm_90 forward (ops/hopper_fwd.py) instead")
    ap.add_argument("--hopper-bwd", action="store_true",
                    help="compile the Gluon sm_90 backward (ops/hopper_bwd.py) instead")
    ap.add_argument("--counts", action="store_true",
                    help="also count TTGIR convert_layout / local_alloc and PTX mul.hi")
    ap.add_argument("--variants", help="only variants whose name contains this text")
    ap.add_argument("--tier", choices=("all", "core", "extended"), default="all",
                    help="with --hopper: the variants CI builds (core), the rest "
                         "(extended, EXTENDED_FWD), or all")
    ap.add_argument("--json", action="store_true",
                    help="with --hopper / --hopper-bwd: one JSON line each")
    ap.add_argument("--spec", action="store_true",
                    help="with --hopper-bwd: every variant with the ints a launch at the "
                         "DESIGN.md shape specialises (MHA, 2048 / head_dim heads)")
    ap.add_argument("--loops", action="store_true",
                    help="with --hopper / --hopper-bwd: spill reloads / stores per loop "
                         "(nvdisasm)")
    args = ap.parse_args()
    if args.hopper_bwd:
        return hopper_bwd_main(args.json, args.variants, args.spec, args.loops)
    if args.hopper:
        return hopper_main(args.json, args.variants, args.loops, args.tier)
    import torch

    dev = torch.device("cuda")  # only used as a key: configs treat it as sm_90 below
    configs._arch = lambda device: 90  # noqa: SLF001 (pretend: we compile for sm_90)
    for hd in map(int, args.head_dims.split(",")):
        for vname, meta in variants(hd):
            if args.variants and args.variants not in vname:
                continue
            fc = configs.fwd_config(meta["BLOCK_D"], meta["HAS_RIGHT"], torch.bfloat16, dev, 4096)
            bc = configs.bwd_config(meta["BLOCK_D"], meta["HAS_RIGHT"], torch.bfloat16, dev, 4096)
            jobs = [
                ("fwd", flash._attn_fwd_kernel, dict(meta, BLOCK_M=fc.block_m, BLOCK_N=fc.block_n),
                 fc),
                ("bwd_dkdv", flash._attn_bwd_dkdv_kernel,
                 dict(meta, BLOCK_M=bc.block_m, BLOCK_N=bc.block_n), bc),
                ("bwd_dq", flash._attn_bwd_dq_kernel,
                 dict(meta, BLOCK_M=bc.dq().block_m, BLOCK_N=bc.dq().block_n), bc.dq()),
            ]
            for kname, kern, cx, cfg in jobs:
                k = compile_kernel(kern, "bf16", cx, cfg.num_warps, cfg.num_stages)
                print(report(f"{kname} {vname} {cfg.block_m}x{cfg.block_n} w{cfg.num_warps} "
                             f"s{cfg.num_stages}", k, args.counts), flush=True)
                if args.ptx:
                    os.makedirs(args.ptx, exist_ok=True)
                    with open(os.path.join(args.ptx, f"{kname}_{vname}.ptx"), "w") as f:
                        f.write(k.asm["ptx"])
                if re.search(r"\.local", k.asm.get("ptx", "")):
                    print("   note: PTX uses local memory")


if __name__ == "__main__":
    main()
