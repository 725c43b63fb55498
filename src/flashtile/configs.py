"""Launch configurations as data.

Each config is a frozen dataclass returned by a pure function of the problem's
(head_dim, causal, dtype, arch, seqlen bucket). Every branch names the measurement that
chose it; branches without a measurement say so ("first guess"), and are replaced when
an H200 run decides them (benchmarks/results.md).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import torch

# Under the interpreter every tile op is a numpy call: fewer, larger tiles run faster,
# but the tests want several tiles per sequence to exercise the online softmax.
_INTERP_BLOCK = 32


@dataclass(frozen=True)
class FwdConfig:
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int


@dataclass(frozen=True)
class BwdConfig:
    block_m: int  # query tile of the dK/dV kernel (and of the dQ kernel unless dq_* set)
    block_n: int  # key tile of the dK/dV kernel (and of the dQ kernel unless dq_* set)
    num_warps: int
    num_stages: int
    # the dQ kernel's own tile: it keeps a (dq_block_m, D) accumulator and streams key
    # tiles, the transpose of the dK/dV kernel's shape, so it wants tall query tiles
    dq_block_m: int | None = None
    dq_block_n: int | None = None
    dq_num_warps: int | None = None

    def dq(self) -> BwdConfig:
        """The dQ kernel's (block_m, block_n, num_warps, num_stages)."""
        return BwdConfig(self.dq_block_m or self.block_m, self.dq_block_n or self.block_n,
                         self.dq_num_warps or self.num_warps, self.num_stages)


def _arch(device: torch.device) -> int:
    if device.type != "cuda":
        return 0
    return _arch_of(device.index if device.index is not None else torch.cuda.current_device())


@functools.cache
def _arch_of(index: int) -> int:
    """A device's capability as 90, 80, ...; read once per device index (it never changes,
    and the torch call costs microseconds on every launch)."""
    major, minor = torch.cuda.get_device_capability(index)
    return major * 10 + minor


def fwd_config(
    head_dim: int, causal: bool, dtype: torch.dtype, device: torch.device, seqlen_q: int
) -> FwdConfig:
    """Forward tile shape. ``head_dim`` is the padded (power of two) head dim."""
    arch = _arch(device)
    if arch == 0:
        return FwdConfig(_INTERP_BLOCK, _INTERP_BLOCK, 1, 1)
    if dtype == torch.float32:
        # fp32 inputs use IEEE fp32 dots: small tiles keep registers in check (first guess)
        return FwdConfig(64, 32, 4, 2)
    if head_dim <= 64:
        # H200, 2026-11-29, scripts/tune.py at 4k after the stride-specialisation fix
        # (pipelined): non-causal 128x64 w8 s3 413 TFLOPS (w4: 390); causal 64x64 w4 s3
        # 370 (SDPA flash 304 / 282). The first, unpipelined sweep had picked 128x64 w4.
        return FwdConfig(64, 64, 4, 3) if causal else FwdConfig(128, 64, 8, 3)
    if head_dim <= 128:
        # H200, 2026-11-29: 128x64 w8 s3 435-446 TFLOPS non-causal at 4k/16k (flash 337-349)
        return FwdConfig(128, 64, 8, 3)
    # hd 256: BLOCK_M 128 gives each of the 2 warpgroups a 64-row wgmma; 64x64 tiles ran
    # 214-252 TFLOPS. H200, 2026-11-29, scripts/tune.py: 128x32 w8 s3 404 TFLOPS at
    # seqlen 1k, 128x64 w8 s2 487 at 16k (SDPA flash 308 / 323)
    if seqlen_q <= 2048:
        return FwdConfig(128, 32, 8, 3)
    return FwdConfig(128, 64, 8, 2)


def bwd_config(
    head_dim: int, causal: bool, dtype: torch.dtype, device: torch.device, seqlen_k: int
) -> BwdConfig:
    """Backward tile shape (dK/dV and dQ kernels share it)."""
    arch = _arch(device)
    if arch == 0:
        return BwdConfig(_INTERP_BLOCK, _INTERP_BLOCK, 1, 1)
    if dtype == torch.float32:
        return BwdConfig(32, 32, 4, 1)
    # H200, 2026-11-29, commit cb2c6ab, `gpu_check.sh tune` (scripts/tune.py --bwd, 9
    # candidates per shape, benchmarks/results.md). hd 64: 32x64 w4 s3 with a 64x64 w4
    # dQ tile won at every shape, 256/1k/4k non-causal 196/293/330 TFLOPS, causal
    # 110/217/282 (the 64x64 w4 s2 first guess: 171/271/326 and 103/197/259).
    if head_dim <= 64:
        return BwdConfig(32, 64, 4, 3, 64, 64, 4)
    if head_dim <= 128:
        # hd 128 at 4k: 64x128 w8 s2 with a 128x64 w8 dQ tile, 361 / 284 TFLOPS
        # non-causal / causal (the 64x64 w8 s2 first guess: 171 / 142 at 836b108)
        return BwdConfig(64, 128, 8, 2, 128, 64, 8)
    # hd 256: `gpu_check.sh tune256` (H200, commit 0e01b69, scripts/tune.py --bwd, 4 dK/dV
    # x 3 dQ tiles). dK/dV tiles of 32 keys x 64 query rows (w4 s2) with 128-row x 32-key
    # dQ tiles (w8) won at every shape: backward TFLOPS at 1k/4k/16k non-causal
    # 206/233/233, causal 162/212/239,
    # against the first guess (32 x 64 w8 s1, dQ 32 x 64 w8) 97/105/100 and 71/85/92.
    # The dQ tile is most of it: 32-row dQ tiles over 8 warps compile to mma.sync, 128 x
    # 32 to wgmma (sm_90 PTX). The Gluon hd 256 backward measured 156-198 in the same run.
    return BwdConfig(64, 32, 4, 2, 128, 32, 8)


def check_smem(cfg, head_dim: int, elem_bytes: int, device: torch.device) -> None:
    """Raise before launch when a config cannot fit the device's shared memory."""
    if device.type != "cuda":
        return
    props = torch.cuda.get_device_properties(device)
    budget = getattr(props, "shared_memory_per_block_optin", 0) or 0
    if budget == 0:
        return
    need = (cfg.block_m + 2 * cfg.block_n * max(cfg.num_stages - 1, 1)) * head_dim * elem_bytes
    if need > budget:
        raise ValueError(
            f"config {cfg} needs ~{need} bytes of shared memory at head_dim={head_dim}, "
            f"device allows {budget}"
        )


# ----------------------------------------------------------------------------------
# Hopper (sm_90) Gluon forward, ops/hopper_fwd.py
# ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class HopperFwdConfig:
    block_m: int  # query rows per program: 16 per consumer warp (64 per warpgroup)
    block_n: int  # keys per tile (wgmma n of QK^T)
    num_warps: int  # consumer warps (4 per warpgroup)
    num_stages: int  # depth of the K/V shared-memory ring
    warp_specialize: bool = False  # stage B: 1-warp TMA producer partition
    load_regs: int = 24  # producer registers per thread (setmaxnreg) when specialised
    # stage C (opt-in, not yet measured): each of the two consumer warpgroups owns its
    # own block_m / 2 query rows, ping-pong between them, PV overlapping the next
    # softmax; needs warp_specialize=True (its producer) and block_m == 128, num_warps 8
    pingpong: bool = False
    # stage A: Q loaded once into registers as the A operand of every S = Q K^T wgmma
    # instead of read from shared memory at each (64 more registers per thread at hd 256;
    # measured -1% to -3% there, `s32d`: opt-in, _stage_a_tiles)
    q_regs: bool = False
    # stage A: FA4's lazy rescale (ops/hopper_fwd._lazy_softmax_step): O and l rescaled only
    # in steps where some row's max grew by more than a factor 256, the others' P against
    # the stale max. At hd 256 the rescale is 128 of a step's ~436 instructions per warp
    # (SASS, sm_90), between the two GEMMs of a lock-step program. Measured -6% to -9% at
    # hd 256 (`s33c`, c8a0c2e: the per-program decision adds two CTA barriers a step):
    # opt-in
    lazy_rescale: bool = False
    # stage A only (B and C size their partitions with setmaxnreg): registers per thread
    # cap (ptxas maxnreg), None for the compiler's choice; 128 lets two 8-warp programs
    # share an SM (64K registers)
    max_regs: int | None = None
    # stage A only: of the S tile's four column quarters, how many take their exponentials
    # on the FMA pipe (_gluon_common.exp2_fma) instead of MUFU, which sets the pace of the
    # hd 64 softmax (ncu, 75f7b8b: MUFU.EX2 26.5% of the stall samples at hd 64 causal 4k).
    # `exp2emu` (44d83a4): emu 1 6-8% slower than 0 at hd 64 (causal and not, 1k-16k), 2
    # and 4 slower still: the emulation's ten instructions sit on the softmax's own
    # stream, the critical path with two programs per SM. Shipped at 0
    exp2_emu: int = 0
    # stage A only: HopperBwdConfig.early_expect's ring refill (the slot's barriers armed
    # before the step's CTA barrier: 3 bar.sync per step instead of 4, ptxas sm_90).
    # `s14fwd` (569592b), stage A forward TFLOPS at 4k / 16k, off -> on: hd 64 non-causal
    # 488.6 / 466.1 -> 498.4 / 475.9, causal 408.7 / 444.3 -> 426.3 / 456.1 (0.98x / 1.00x
    # -> 1.03x / 1.03x cuDNN); hd 256 non-causal 531.8 / 541.8 -> 546.7 / 562.0, causal
    # 468.5 / 548.0 -> 488.5 / 558.4 (+1.9% to +4.3%); hd 128 in hopper_fwd_config. On in
    # every stage A config
    early_expect: bool = False
    # stage C only: each consumer step waits for its K tile, then for its tensor-core turn
    # (the other way round before). The GEMMs issue when both hold, either way; Triton's
    # barrier pass then puts 3 warpgroup bar.sync per consumer step instead of 4 (ptxas
    # sm_90, hd 64 / 128 / 256, causal or not). On at hd 128 (`ckfirst`, session 15:
    # -0.9 to +4.4%), off at hd 256 (-1.8 to 0%); hd 64 does not run stage C
    c_k_wait_first: bool = False
    # stage C only: the two consumer warpgroups take turns issuing their GEMMs (FA3's
    # ping-pong, two mbarriers); False lets them run free (the same kernel, no turn
    # waits). FLASHTILE_HOPPER_C_PINGPONG=0 / 1 forces it off / on for every stage C
    # launch. Off at hd 256 non-causal (hopper_fwd_config_c: +7-8% there, `s36a`)
    turn_waits: bool = True
    # stage C only: a persistent grid (ops/hopper_fwd._fwd_cp_kernel), one program per SM
    # walking its query tiles, the next tile's K / V and Q loaded under the current one's
    # end. Dense calls (varlen keeps the one-shot grid); shipped per hopper_fwd_config_c
    persistent: bool = False
    # the persistent grid only: V through a ring of its own this deep (0: K and V share
    # the num_stages ring). The 224 KB of hd 128 then hold an O staging tile per
    # warpgroup besides Q (K ring 3, V ring 2), so the next item's Q loads right after
    # the last PV while O leaves through TMA. Measured in `s21a` (hopper_fwd_config_c)
    v_stages: int = 0
    # with v_stages: O staged through a buffer of its own (True), or through the Q tile as
    # without v_stages (False: the next item's Q then loads after the O store). At hd 256
    # the O buffers do not fit beside a split ring (K 2 / V 3 with them: 288 KB; without:
    # 224 KB)
    o_stage: bool = True
    # the persistent grid, causal calls with an even number of query tiles: each program
    # takes its items in pairs, a head's j-th longest query tile then its j-th shortest,
    # so that the round robin hands out equal work (the plain round robin leaves the
    # busiest program 1/0.64-1/0.89 of the mean, `s20a`). An odd count runs one-shot.
    # Measured in `s21a` (hopper_fwd_config_c)
    paired: bool = False
    # the persistent grid's split ring with its O buffers (v_stages, o_stage) only; other
    # configs ignore them (so an override reaches every call of an A/B run). o_lag:
    # an item's epilogue does not wait for its O store to read the buffer; the next
    # item's epilogue waits before writing it (a whole item later). q_early: the next
    # item's Q loads before the item's last PV GEMM instead of after it (its S GEMMs have
    # retired). Each takes part of the per-item fixed cost (4.4 us at hd 128, 1.74 us per
    # key step, scripts/trace_stage_c.py, `s20d` / `s22a`) off the warpgroup's path
    o_lag: bool = False
    q_early: bool = False
    # stage A, dense causal calls (other stages and varlen ignore it): launch the (query
    # tile, batch * head) grid tile-major within blocks of this many heads
    # (_gluon_common.tile_ids, as the backward's HopperBwdConfig.tile_heads): every head
    # of a block has its longest query tile started before any head's next, so the grid
    # ends on short tiles. 0: head-major (a head's tiles longest first, then the next
    # head's), where the last heads' longest tiles start near the end of the launch
    tile_heads: int = 0

    def __post_init__(self):
        if self.pingpong and not (self.warp_specialize and self.block_m == 128
                                  and self.num_warps == 8):
            raise ValueError(f"stage C needs warp_specialize=True, block_m=128, num_warps=8: "
                             f"{self}")
        if self.persistent and not self.pingpong:
            raise ValueError(f"the persistent grid is stage C's (pingpong=True): {self}")
        if (self.v_stages or self.paired) and not self.persistent:
            raise ValueError(f"v_stages and paired are the persistent grid's: {self}")
        if not self.o_stage and not self.v_stages:
            raise ValueError(f"o_stage=False: with v_stages (the split ring): {self}")


    @property
    def schedule(self) -> str:
        """'A' (one partition), 'B' (producer + lock-step consumers) or 'C' (ping-pong)."""
        return "C" if self.pingpong else "B" if self.warp_specialize else "A"

    def one_shot(self) -> HopperFwdConfig:
        """The same tiles on the one-shot grid (no persistent grid, split ring or pairs):
        K and V share one ring as deep as the split ring's shared memory holds (hd 128's
        K 2 / V 3 and K 3 / V 2 with O buffers both become a ring of 3; hd 256's K 2 /
        V 3 without them a ring of 2)."""
        return dataclasses.replace(self, persistent=False, v_stages=0, paired=False,
                                   o_stage=True, o_lag=False, q_early=False,
                                   num_stages=self.one_shot_stages)

    @property
    def one_shot_stages(self) -> int:
        """``one_shot().num_stages`` without building the config (the launch reads it on
        every call; a dataclasses.replace there was a few us of host time, s31e): the
        deepest shared K/V ring beside the Q tile in the split ring's rows of shared
        memory (Q, O buffers, K and V rings)."""
        if not self.v_stages:
            return self.num_stages
        q_o = 2 * self.block_m if self.o_stage else self.block_m
        rows = q_o + (self.num_stages + self.v_stages) * self.block_n
        return (rows - self.block_m) // (2 * self.block_n)

    def smem_bytes(self, head_dim: int, elem_bytes: int = 2) -> int:
        """Q tile + K and V rings (barriers are a few bytes); with v_stages, V's ring and
        the O staging tiles (unless not o_stage)."""
        if self.v_stages:
            q_o = 2 * self.block_m if self.o_stage else self.block_m
            return ((q_o + (self.num_stages + self.v_stages) * self.block_n)
                    * head_dim * elem_bytes)
        return (self.block_m + 2 * self.num_stages * self.block_n) * head_dim * elem_bytes


def hopper_fwd_config_c(head_dim: int, causal: bool, seqlen_q: int) -> HopperFwdConfig:
    """Stage C (ping-pong consumers) tiles: 128 query rows per program (two 64-row
    warpgroup tiles). Resources from compiling for sm_90 on the CPU (tests/test_hopper.py);
    dispatched where ``hopper_fwd_schedule`` says C."""
    if head_dim <= 64:
        return HopperFwdConfig(128, 128, 8, 3, warp_specialize=True, pingpong=True)  # 112 KB
    if head_dim <= 128:
        # ring of 3: 224 KB smem (229752 bytes compiled, under the 232448 limit): each
        # slot is released only mid-iteration, so 2 would leave TMA half a tile of lead.
        # c_k_wait_first: `ckfirst` (e9fa1bf, session 15), off -> on in one process at
        # 4k / 16k: non-causal 637.1 / 602.7 -> 646.1 / 603.9, causal 517.3 / 599.3 ->
        # 540.2 / 593.7 TFLOPS (+1.4 / +0.2 / +4.4 / -0.9%); at hd 256 -1.8 to 0%: off
        # persistent (one program per SM walking its items; _fwd_cp_kernel) below 4k
        # non-causal: `s20d` (84dc8a0, 5 interleaved rounds) one-shot / persistent
        # 498.2 / 518.0 TFLOPS at 1k, 556.3 / 561.3 at 2k, 586.0 / 584.7 at 4k, 608.6 /
        # 609.9 at 16k: it saves part of each short item's fixed cost (scripts/
        # trace_stage_c.py: 5.2 -> 4.4 us per item); causal it loses (its static order is
        # unbalanced, `s20a`).
        # v_stages=2 (a V ring of its own, O staged apart, so the next Q loads right after
        # the last PV) and, causal, the paired order: `s21a` (07c370f, 5 interleaved
        # rounds) one-shot / persistent / split (+ paired causal) TFLOPS, non-causal 487.4
        # / 511.5 / 533.7 at 1k, 543.9 / 559.7 / 564.7 at 2k, 579.7 / 581.0 / 585.1 at 4k,
        # 603.5 / 603.3 / 592.6 at 16k; causal 341.4 / 285.8 / 357.3 at 1k, 442.4 / 424.5
        # / 476.2 at 2k, 510.2 / 501.3 / 543.2 at 4k, 603.4 / 440.0 / 589.0 at 16k (the
        # split ring's step is 1-4% slower, trace_stage_c.py: its V ring of 2, which long
        # loops do not amortise). `s21b` (4906dc1, 3 rounds) at 8k: one-shot / split
        # 591.5 / 601.2 non-causal, 546.8 / 574.9 causal (paired). Causal with an odd
        # query-tile count runs one-shot.
        # Non-causal, the split ring the other way round (K ring 2, V ring 3): `s22a`
        # (2bbb2e4, 5 interleaved rounds) one-shot / K3 V2 / K2 V3 TFLOPS 481.3 / 524.7 /
        # 526.7 at 1k, 574.3 / 582.0 / 590.0 at 4k, 596.6 / 584.4 / 584.5 at 8k (cuDNN
        # 597.0), 596.5 / 592.2 / 597.3 at 16k; trace_stage_c.py step at 16k 1.876 (K3 V2)
        # against 1.738 us (V holds its slot through PV, a step longer than K). Causal
        # keeps K3 V2: 534.6 / 527.3 at 4k, 567.8 / 562.8 at 8k
        # Session 43 (H100, scripts/env_ab.py --measures fwd through the public call, L2
        # flushed / back to back; s43b, s43c, s43d): o_lag + q_early on the non-causal
        # split ring +2.1 / +1.3%, +2.9 / +1.9%, +2.0 / +1.2% at 1k; +1.4 / +1.0%, +0.1 /
        # +0.8%, +1.2 / +1.0% at 4k; +0.9 / -0.3%, -0.3 / +0.9%, +0.5 / -3.1% at 8k;
        # causal (K 3 / V 2 paired) o_lag -0.4% / -2.2% at 4k / 8k and q_early -4% to
        # -8%: non-causal only. At 16k the non-causal split ring (with them) beat the
        # one-shot grid by +2.0 / +2.8% (split alone), +1.9 / +2.3%, +3.0 / +1.9%, where
        # s22a (H200) had read them level: persistent at every non-causal length.
        # boundary_step (the item boundary as a step; removed in session 44) measured
        # -1.8% / +0.4% / +0.2% at 1k / 4k / 8k (s43b). Windowed and softcapped calls
        # ran without o_lag / q_early in session 43 (untested); session 44 measured them
        # level with the flags (s44b: window 1024 +1.1 / +1.9% at 4k, -0.9 / -0.0% at
        # 16k; softcap 30 -1.6 / +0.8%, +1.4 / +0.2%) and GPU-tested them (s44c), so
        # every call of this config runs them
        persistent = not causal or seqlen_q < 16384
        k2v3 = not causal
        return HopperFwdConfig(128, 128, 8, 2 if k2v3 else 3, warp_specialize=True,
                               pingpong=True, c_k_wait_first=True, persistent=persistent,
                               v_stages=(3 if k2v3 else 2) if persistent else 0,
                               paired=persistent and causal, o_lag=k2v3, q_early=k2v3)
    # hd 256: the O accumulator (64 x 256 fp32) is 128 registers per thread; 64-key
    # tiles. The one-shot grid's shared ring of 2 (192 KB) measured below stage A (C 514 /
    # 503 against A 532 / 531 at 4k / 16k non-causal). The persistent grid's split ring
    # with its O buffers fits only V ring 1 (K 2 / V 1: each V load exposed); without them
    # (O through the Q tile, o_stage=False) K 2 / V 3 in 224 KB. `s33e` (c95ce3e, H200,
    # scripts/bench_hopper.py, 3 rounds), forward TFLOPS K2 V3 no O / K2 V1 + O / stage A
    # (cuDNN): non-causal 562.1 / 408.3 / 484.8 (578.7) at 1k, 623.0 / 446.7 / 538.6
    # (639.3) at 4k, 642.3 / 445.1 / 555.1 (662.7) at 16k; causal (paired) 448.7 / 357.3
    # / 363.4 (433.9), 609.6 / 468.3 / 463.7 (536.9), 651.5 / 489.7 / 512.0 (590.8).
    # Predicted +3-8% over the one-shot C (the deeper V lead); it gained +26-44% over the
    # V ring of 1 and +16-35% over A. Varlen and causal calls with an odd query-tile count
    # take the one-shot grid (one_shot(): a shared ring of 2 in the same shared memory)
    # The turn waits (turn_waits): without them `s36a` (17308a5, H100, scripts/env_ab.py
    # --measures fwd, 3 interleaved rounds, L2 flushed) measured the forward +7.0% / +8.2%
    # / +8.0% non-causal at 1k / 4k / 16k and -4.6% / -3.3% / -0.2% causal (s35a, H100,
    # bench_hopper: +4-7% / level; s33e, H200, the one-shot C: +8-9% non-causal). At hd 256
    # a 64-key step's softmax is small beside its two GEMMs, so taking turns mostly idles
    # the tensor cores; causal, the masked band's longer softmax keeps them worth it
    return HopperFwdConfig(128, 64, 8, 2, warp_specialize=True, pingpong=True,
                           persistent=True, v_stages=3, o_stage=False, paired=causal,
                           turn_waits=causal)


# hd 128 causal calls with fewer query rows than this run stage A on 64-row, 64-key
# one-warpgroup tiles (from 1k instead of stage C, below 1k instead of stage A's 128-row
# tiles): `s31i` (20b49e9, scripts/bench_hopper.py, 3 rounds) 373.0 / 362.3 TFLOPS (ring
# 2 / 3) against the persistent paired stage C's 351.6 / 353.2 at 1k (s31h: 366.3 against
# 351.8), and 415.7 against 479.6 at 2k; cuDNN 407-414 at 1k. `s31k` (cdf0f12) at 512:
# 290.5 against the 128-row tiles' 231.1 (cuDNN 330.5-332.7); 64 x 32 at 1k 328.6. Below
# 512 not measured. A short causal query tile sees few key tiles (4.5 on average at 1k):
# shorter programs, two per SM (80 KB), lose less to each one's fixed cost
HD128_CAUSAL_SHORT_A_MAX = 2048


# hd 128 non-causal and hd 64 causal calls with SHORT_A_MIN <= seqlen_q < 1024 run stage A
# on 64 x 64 one-warpgroup tiles too, where the portable kernel ran: `s32a` (1b99241,
# scripts/bench_hopper.py --a-config, 3 rounds) at 512, forward TFLOPS 396.8 against the
# portable 295.3 (hd 128 non-causal, ring 2; cuDNN 509.4) and 244.5 against 212.5 (hd 64
# causal, ring 3 capped at 128 registers as stage A's hd 64 causal tiles; the capped
# 128-row tiles 218.1; cuDNN 259.4). Below 512 and between 512 and 1k not measured
SHORT_A_MIN = 512


def _short_tile(head_dim: int, causal: bool, seqlen_q: int) -> HopperFwdConfig | None:
    """Stage A's 64 x 64 tiles where the query length picks them (hd 128 causal below
    HD128_CAUSAL_SHORT_A_MAX; hd 128 non-causal and hd 64 causal from SHORT_A_MIN to 1k),
    else None. The one rule for hopper_fwd_schedule (stage A) and hopper_fwd_config (the
    tiles)."""
    if 64 < head_dim <= 128 and causal and seqlen_q < HD128_CAUSAL_SHORT_A_MAX:
        return HopperFwdConfig(64, 64, 4, 2, early_expect=True)  # 80 KB
    if not SHORT_A_MIN <= seqlen_q < 1024:
        return None
    if head_dim <= 64 and causal:
        return HopperFwdConfig(64, 64, 4, 3, max_regs=128, early_expect=True)
    if 64 < head_dim <= 128 and not causal:
        return HopperFwdConfig(64, 64, 4, 2, early_expect=True)
    return None


def hopper_fwd_config(head_dim: int, causal: bool, seqlen_q: int,
                      windowed: bool = False) -> HopperFwdConfig:
    """Stage A/B tiles of the Gluon forward for fp16/bf16 on sm_90 (stage A here; B is
    the same tiles with ``warp_specialize=True``). Resources from compiling for sm_90 on
    the CPU (tests/test_hopper.py: no spills, fits 227 KB). ``windowed``: a call with a
    sliding window or softcap, which keeps the head-major grid (TILE_HEADS was measured
    on full causal calls only)."""
    short = _short_tile(head_dim, causal, seqlen_q)
    if short is not None:
        return short
    cfg = _stage_a_tiles(head_dim, causal)
    if head_dim <= 64 and causal and not windowed and seqlen_q >= TILE_HEADS_MIN:
        heads = TILE_HEADS if seqlen_q >= TILE_HEADS_LONG else TILE_HEADS_SHORT
        cfg = dataclasses.replace(cfg, tile_heads=heads)
    return cfg


# Stage A's hd 64 causal grid (full causal calls: windows and softcaps keep head-major,
# not measured) tile-major within blocks of TILE_HEADS_SHORT heads from TILE_HEADS_MIN
# query rows and of TILE_HEADS from TILE_HEADS_LONG (HopperFwdConfig.tile_heads; steps 99,
# 101). H100, scripts/env_ab.py --measures fwd, L2 flushed, against head-major.
# Session 41 (baaa237; `s40a` 3 rounds, then 5, 5 and 9), blocks of 8: 8k +11.3% / +4.1%
# / +3.3%, 16k +6.0% / +3.3% / +3.3%; 4k +7.6% / +2.2% / -1.7% / -1.6%, 2k -1.8%, 1k
# -2.7% / -3.3%; blocks of 4 / 16 0-2% below 8 from 4k (one run), the whole grid -15% to
# +3%. As shipped from 8k (`s41a`, 2fc09de, 5 rounds): +4.1% / +3.8% at 8k / 16k.
# Session 42 (7f9a294 / e7eee39, 9 and 7 rounds): at 4k blocks of 16 +5.5% / +4.2%,
# blocks of 8 +2.7% / +3.1%; at 2k 16 +0.6% (head-major stays below 4k); at 8k 16 / 8
# +2.6% / +0.8%, at 16k +3.6% / +5.2% (8 stays from 8k). As shipped from 4k (`s42d`,
# c0c83dd, 7 rounds): +2.5% at 4k
TILE_HEADS = 8
TILE_HEADS_SHORT = 16
TILE_HEADS_MIN = 4096
TILE_HEADS_LONG = 8192


def _stage_a_tiles(head_dim: int, causal: bool) -> HopperFwdConfig:
    """hopper_fwd_config's tiles wherever the query length does not pick others."""
    if head_dim <= 64:
        # ring of 3, 112 KB smem: two programs per SM when registers allow. Non-causal
        # compiles to 127 registers; causal to 187 (the masked tiles' index compares), so
        # it is capped at 128 (52 bytes of spills, 2 stores + 2 loads per unmasked step)
        return HopperFwdConfig(128, 128, 8, 3, max_regs=128 if causal else None,
                               early_expect=True)
    if head_dim <= 128:
        # ring of 2, 160 KB smem; early_expect: `s14a` (36b9475), causal 1k / 2k / 4k
        # 322.0 / 396.4 / 451.6 TFLOPS against 312.3 / 378.7 / 433.9 off (+3.1% to +4.7%)
        return HopperFwdConfig(128, 128, 8, 2, early_expect=True)
    # hd 256: 128x64, ring of 2 (192 KB smem); the O accumulator is 128 fp32 registers
    # per thread, so S stays at 64 columns. Q in registers (q_regs, opt-in): per step the
    # two warpgroups' S GEMMs read Q and K (128 KB), the PV GEMMs V (64 KB), TMA writes K
    # and V (64 KB), 2048 cycles of shared-memory bandwidth against 2048 of tensor-core
    # work at peak, and Q from registers takes 64 KB off (254-255 regs, no spills; 209-212
    # from shared memory). `s32d` (fe44063, bench_hopper, 3 rounds) measured it -1.3% to
    # -3.4% at 1k-16k (+0.5% causal 16k), where +8-15% was predicted: not shipped
    return HopperFwdConfig(128, 64, 8, 2, early_expect=True)


# Dropout on the Gluon forward (stage A: the draw in the wgmma layout, ops/hopper_fwd.py)
# at these head dims. hd 64: 246-250 registers uncapped writing the bit blocks, no spills
# (sm_90 ptxas), measured 56.2 / 121.5 us against the portable forward's 96.5 / 223.4 at
# MiniGPT's 64 x 256 / 16 x 1024 (s18c / s18d). hd 128 since session 19 (the 16-bit
# draw, one Philox call per 8 elements): 206-255 registers, 0-16 bytes spilled (one word
# in the step loop writing the bit blocks). `s19f` (08bcc1c), 8 heads of 128, causal,
# dropout 0.2, forward us per call writing the bits: 158.7 / 475.0 at 16 x 1024 / 4 x 4096
# against the portable forward's 336.5 / 1101.7 (cuDNN's forward 159.2 / 549.8). hd 256
# keeps the portable forward with dropout (112 / 8 bytes of spills with the 32-bit draw,
# not measured).
HOPPER_DROPOUT_HEAD_DIMS = (64, 128)


def hopper_fwd_dropout_config(head_dim: int, causal: bool, seqlen_q: int) -> HopperFwdConfig:
    """Stage A's tiles with dropout: hopper_fwd_config's, uncapped (the Philox draw
    needs the registers; capped at 128 the hd 64 causal build spills 880 bytes in the
    step loop), at every query length."""
    # (the 128-row tiles at every length: the short causal hd 128 tile is not measured
    # with dropout)
    return dataclasses.replace(_stage_a_tiles(head_dim, causal), max_regs=None)


# Which forward runs on sm_90, per (head dim, causal, seqlen_q): a Gluon schedule "A",
# "B", "C" or "portable" (the tile-level kernel of ops/flash.py). H200, bf16, forward
# TFLOPS at 16k tokens (DESIGN.md shapes), 2026-11-29, commit 836b108:
# scripts/bench_hopper.py at 4k/16k (C / B / A / portable / cuDNN) and the ladder's
# production (A, B at hd64 causal) vs portable rungs at 512..16k (benchmarks/results.md).
def hopper_fwd_schedule(head_dim: int, causal: bool, seqlen_q: int) -> str:
    if _short_tile(head_dim, causal, seqlen_q) is not None:
        return "A"  # stage A's 64 x 64 tiles (the measurements at _short_tile)
    if head_dim <= 64:
        if not causal:
            # 512: portable 316 vs A 223 (A's 128-row tiles leave 4 tiles per head);
            # 1k: A 424 vs 361; 4k: A 456, portable 409, B 397, C 381 (cuDNN 451)
            return "portable" if seqlen_q < 1024 else "A"
        # causal: stage A capped at 128 registers (two programs per SM; 2026-11-30,
        # fbfae63, `gpu_check.sh fwd64`): 300/368/399/424/437 TFLOPS at 1k/2k/4k/8k/16k
        # against portable 283/325/359/381/391, C 217/297/354/389/413, A uncapped
        # 216/269/307/331/352 (cuDNN 325/379/407/428/441). From 512 to 1k since session
        # 32 stage A on 64 x 64 tiles (SHORT_A_MIN, above); portable below (213 vs B 156
        # at 512, 836b108)
        return "portable" if seqlen_q < 1024 else "A"
    if head_dim <= 128:
        if seqlen_q < 1024:
            # 512: non-causal portable 295 vs A 266 on 128-row tiles (the 64 x 64 tiles
            # since session 32 from SHORT_A_MIN, above: 397 vs 295); causal A 226 vs
            # portable 183 (the short causal tiles since session 31, above)
            return "A" if causal else "portable"
        # causal 1k / 2k: A until session 21 (C 210 against A 309 at 1k in 642a4af, its
        # one-shot grid's programs mostly causal band); the persistent split ring in the
        # paired order (hopper_fwd_config_c) took it: `s21b` (4906dc1, 3 rounds) C paired
        # split / one-shot / A 355.2 / 341.8 / 320.3 TFLOPS at 1k, 472.6 / 444.9 / 388.1
        # at 2k (cuDNN 417.7 / 468.2)
        # C: 579/594 non-causal (A 470/484, cuDNN 587/604) and 536/580 causal (A 429/483,
        # cuDNN 515/552) at 4k/16k; non-causal 1k: C 489 vs A 422 (cuDNN 561, 642a4af)
        # causal 1k / 2k: stage A again since session 31, on the short causal tiles
        # (HD128_CAUSAL_SHORT_A_MAX, above)
        return "C"
    # hd 256: A 532/531 non-causal, 462/540 causal at 4k/16k (C 514/503, 449/518;
    # portable 478/491, 414/493); 1k causal A 346 vs portable 291 (core bench). Stage C
    # from 1k since session 35: its persistent grid's split ring without O buffers (K ring
    # 2, V ring 3; hopper_fwd_config_c) measured +16-35% over A at 1k-16k (`s33e`). Below
    # 1k not measured: A
    return "C" if seqlen_q >= 1024 else "A"


# Packed variable-length batches (ops/varlen.py) take the Gluon forward (per-sequence
# device-side TMA descriptors, hopper_fwd.hopper_varlen_forward) from this longest query
# sequence on. H200, bf16, 16k tokens, `varlengluon` at ac7393a (Gluon / portable varlen
# forward, same run): 8k-long sequences 1.07x / 1.08x (hd 64 non-causal / causal) and
# 1.37x / 1.39x (hd 128); 2k-long 0.91x / 0.73x and 0.98x / 0.74x (each program builds
# its own descriptors: a fixed cost short sequences do not amortise). Between 2k and 8k
# not measured: the portable kernel there.
# The varlen backward (hopper_bwd.hopper_varlen_backward, the same per-sequence
# descriptors in the dense two-kernel backward) takes the same threshold, and 2k at hd 128
# non-causal (hopper_varlen_bwd_preferred below): `varlenbwd` at
# 30970b9, forward+backward TFLOPS with the Gluon / portable varlen backward, 8k-long
# sequences: 372.5 / 356.7 and 330.1 / 245.3 (hd 64 non-causal / causal), 453.2 / 381.6
# and 382.4 / 312.4 (hd 128); 2k-long: 262.5 / 291.4, 146.3 / 174.8, 308.0 / 264.5,
# 150.6 / 185.8 (only hd 128 non-causal wins there).
HOPPER_VARLEN_MIN_SEQLEN = 8192
# ... and at hd 128 from this one (forward), and causal at hd 64 / 128 (backward). Session
# 25 (`s25d`, 0f228cc / a4fb0bc, two runs of `bench --suite varlen` at 2k / 4k-long
# sequences, 16k tokens, each with the Gluon varlen forward / backward forced and not):
# - forward, varlen TFLOPS Gluon / portable at 4k: hd 128 410.2 / 367.0 and 431.1 / 366.4
#   non-causal (+12% / +18%), 301.5 / 284.0 and 295.9 / 280.9 causal (+6% / +5%); hd 64
#   causal 266.1 / 317.4 and 267.0 / 313.0 (-16% / -15%), non-causal level (344.9 / 342.4,
#   341.6 / 340.6). At 2k the portable kernel led or tied everywhere (hd 128 causal
#   225.2 / 248.1 and 158.6 / 219.6).
# - backward, forward+backward TFLOPS with the Gluon forward, Gluon / portable varlen
#   backward at 4k: causal hd 64 245.9 / 207.2 and 239.4 / 206.3 (+19% / +16%), hd 128
#   271.2 / 237.9 and 279.0 / 232.6 (+14% / +20%); non-causal hd 64 level (312.4 / 312.2,
#   320.7 / 313.4). At 2k: hd 64 non-causal -8% / -10%, causal +11% / +7% (hd 64) and
#   +13% / -8% (hd 128): kept portable there (30970b9 had them losing).
# Between 4k and 8k not measured: the Gluon kernels from 4k where 4k measured them ahead.
HOPPER_VARLEN_HD128_MIN_SEQLEN = 4096
# The varlen backward causal from 2k since session 29: `s29a` (13913a2) and `s29c`
# (f349091), scripts/env_ab.py --varlen through flash_attn_varlen_func, 16k packed tokens
# of sequences of seqlen / 2 .. seqlen, three interleaved rounds, the Gluon varlen
# backward against the portable one, backward L2 flushed / not: at 2k hd 64 +22.2% /
# +22.1% (s29a), +22.6% / +22.2% (s29c), hd 128 +27.6% / +26.8% (s29c; forward+backward
# +22.2% / +21.7%); s25d had +11% / +7% and +13% / -8% there. At 1k (s29c) the backward
# gained +3.7% / +3.2% (hd 64) and +15.1% / +13.9% (hd 128) but forward+backward did not
# move (-7.9% .. +1.8%; likely host-bound: diag_fwd_bwd read ~1 ms of host time per
# dense forward+backward call, varlen not measured), so 1k stays
# portable.
HOPPER_VARLEN_BWD_CAUSAL_MIN_SEQLEN = 2048


def hopper_varlen_preferred(max_seqlen_q: int, head_dim: int | None = None) -> bool:
    """The Gluon varlen forward: from HOPPER_VARLEN_MIN_SEQLEN, at hd 128 from
    HOPPER_VARLEN_HD128_MIN_SEQLEN (``head_dim`` None: the general threshold)."""
    if head_dim == 128:
        return max_seqlen_q >= HOPPER_VARLEN_HD128_MIN_SEQLEN
    return max_seqlen_q >= HOPPER_VARLEN_MIN_SEQLEN


def hopper_varlen_bwd_preferred(head_dim: int, causal: bool, max_seqlen_q: int) -> bool:
    """The Gluon varlen backward: from HOPPER_VARLEN_MIN_SEQLEN; causal from
    HOPPER_VARLEN_BWD_CAUSAL_MIN_SEQLEN (`s29a` / `s29c`, above); at hd 128 non-causal
    from 2k, where it won both runs (Gluon / portable varlen backward, forward+backward
    TFLOPS at 2k-long sequences: 308.0 / 264.5 at 30970b9, 305.0 / 261.1 at 2b1077d; hd
    64 non-causal lost both times, and -2% to -6% in s29a). Below 2k not measured
    non-causal."""
    if head_dim == 128 and not causal and max_seqlen_q >= 2048:
        return True
    if causal and max_seqlen_q >= HOPPER_VARLEN_BWD_CAUSAL_MIN_SEQLEN:
        return True
    return hopper_varlen_preferred(max_seqlen_q)


# ----------------------------------------------------------------------------------
# Hopper (sm_90) Gluon backward, ops/hopper_bwd.py
# ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class HopperBwdConfig:
    block_m: int  # dK/dV kernel: query rows per streamed Q/dO tile (wgmma n of S^T)
    block_n: int  # dK/dV kernel: keys per program, 16 per warp (64 per warpgroup)
    num_warps: int  # dK/dV kernel warps
    num_stages: int  # dK/dV kernel: depth of the Q/dO ring
    dq_block_m: int  # dQ kernel: query rows per program, 16 per warp
    dq_block_n: int  # dQ kernel: keys per streamed K/V tile (wgmma n of S)
    dq_num_warps: int
    dq_num_stages: int  # dQ kernel: depth of the K/V ring
    # one kernel: the dK/dV kernel also computes each tile's dQ = dS K and adds it to an
    # fp32 buffer with atomics (5 GEMMs per tile pair instead of 7; block_m must be 64k,
    # the dq_* fields unused)
    fused: bool = False
    # register caps (ptxas maxnreg) of the dK/dV (or fused) and the dQ kernel: a lower
    # cap lets one more program share an SM (the 64K register file), at the price of
    # spills; None: ptxas's choice
    max_regs: int | None = None
    dq_max_regs: int | None = None
    # dK/dV kernel: load the next query tile's lse and delta one step ahead (registers:
    # 2 x block_m / 8 per thread) instead of under the step's own S^T GEMM
    prefetch_stats: bool = False
    # dK/dV kernel: split dK / dV's columns over d_split launches (each recomputes S^T
    # and dP^T with the whole head dim and accumulates head_dim / d_split columns): at
    # hd 256 one warpgroup cannot hold a whole 64-key dK and dV (256 fp32 per thread)
    d_split: int = 1
    # dK/dV kernel at 8 warps: the two warpgroups split the columns instead of the keys
    # (FA3's hd 256 layout). 16 * num_warps / 2 keys per program; S^T and dP^T are
    # computed once, each warpgroup taking half of the query columns, and P^T and dS^T
    # go through shared memory so each warpgroup accumulates its half of dK's and dV's
    # columns over all the tile's queries (d_split 1: no GEMM recomputed)
    col_split: bool = False
    # the same for the dQ kernel (8 warps over 64 query rows: S and dP each warpgroup half
    # of the keys, dS through shared memory, each warpgroup half of dQ's columns)
    dq_col_split: bool = False
    # fused only (_bwd_fused_kernel: a TMA producer warp, two consumer warpgroups of 64
    # keys, writer_warps dQ writer warps): registers of the producer and the writers
    # (setmaxnreg; the consumers get what the 64K register file leaves, at most 240)
    load_regs: int = 32
    writer_warps: int = 2
    # fused, racing mode (deterministic=False): the consumers add dQ with TMA reduce-adds
    # (cp.reduce.async.bulk.tensor, FA3's way) instead of the writer warps' atomics
    dq_tma_reduce: bool = True
    # fused only: each consumer step issues the previous iteration's dQ GEMMs right
    # behind dK and stores them under the next step's S^T GEMM (no tensor-core drain
    # between dK and dQ, and the dQ store off the GEMMs' path). The same on the
    # one-kernel backward (dq_reduce: the previous step's dQ GEMM behind S^T, under the
    # softmax) measured -17% to -29% backward at hd 64 / 128 non-causal (`s31b`, 659bb85;
    # hd 128 spilled 124 B, hd 64 none) and was withdrawn
    dq_defer: bool = False
    # two-kernel GQA (group > 1, dense): one dK/dV program per (key tile, query head)
    # instead of per KV head, writing per-query-head dK / dV partials that a sum over each
    # group reduces (the launcher: 2 x B x N x H x D elements more of memory, one rounding
    # more per partial); the programs are then MHA's, with MHA's register cap
    gqa_expand: bool = False
    # both two-kernel kernels: arm a ring slot's two barriers (mbarrier expect) before
    # the step's CTA barrier and issue the copies after it, in the prologue too
    # (_gluon_common.issue_kv_slot's EARLY): one bar.sync fewer per step (ptxas sm_90:
    # 3 instead of 4); on at hd 64 (+1-6% backward), measured flat at hd 128
    early_expect: bool = False
    # dK/dV kernel, dense calls with seqlen_q % 4 == 0: each Q / dO ring slot also gets its
    # tile's lse / delta rows by TMA (behind the same barriers), read from shared memory,
    # instead of 2 x block_m / 8 masked global loads per thread and step (ptxas sm_90, hd
    # 64: 32 LDG of the step loop's 490 instructions, with their address and mask work);
    # on at hd 64 (+3.5% to +8.1% backward, `s15c`) and, with lse2_pre, at hd 128; with
    # windows and softcaps too (bitwise the global-load path, `s15e`)
    stats_tma: bool = False
    # with stats_tma (block_m 64): the delta preprocess also writes, per 64 query rows,
    # their lse in log2 units (+inf on rows with no key) then their delta, so the dK/dV
    # step loads both with one TMA box behind its own barrier and reads lse as is (ptxas
    # sm_90, hd 64: step loop 424 -> 360 instructions, bar.sync 5 -> 3 per step: two
    # copies signalling one barrier cost one each; any seqlen_q). On at hd 64 / 128
    lse2_pre: bool = False
    # dK/dV kernel: a program with one query head (MHA, or GQA's expanded programs) takes
    # its next ring tile's head and query tile without the integer division by the
    # tiles per head (ptxas sm_90, hd 64 with stats_tma and lse2_pre: ~36 of the step's
    # 364 instructions branched around). On at hd 64 / 128 (`bwdab`: +0-2% over lse2_pre)
    group_branch: bool = False
    # the dK/dV kernel also computes each tile pair's dQ = dS K (dS^T through shared
    # memory; 5 GEMMs per tile pair instead of 7, no dQ kernel) and adds it to an fp32
    # buffer by TMA reduce-adds, racing between key tiles: deterministic=False only
    # (ops/hopper_bwd.py, DQ_REDUCE; the dq_* fields unused)
    dq_reduce: bool = False
    # dq_reduce: each step adds the previous step's dQ tile (staging store and reduce-add)
    # under its own S^T GEMM instead of at its end, off the tensor cores' path
    reduce_late: bool = False
    # dq_reduce with reduce_late: deterministic adds. Each program visits its head's
    # query tiles in a rotated order, and the adds into a query tile wait their turn in
    # a fixed order on a per-tile counter (ops/hopper_bwd.py, DQ_ORDERED): bitwise
    # repeatable dQ. Non-causal, no window, at most one key tile per SM per head
    reduce_ordered: bool = False
    # dq_reduce: deterministic adds in fixed point (ops/fixed_dq.py, DQ_FIXED). Each
    # tile's dQ is scaled by a power of two per query row, from a bound on |dQ_i| read
    # off dO, K and V before the launch, rounded to int32 and reduce-added into an int32
    # buffer: integer adds land in any order with the same sum, so the racing kernel's
    # schedule and memory give bitwise repeatable dQ. Any mask; not with reduce_ordered
    reduce_fixed: bool = False
    # dq_reduce, non-causal, no window: each program visits its head's query tiles in the
    # ordered reduce's rotated order (tile (j + rotation) mod n_m at step j,
    # _reduce_rotation) without its counters, so that at any time the programs of one
    # head add into different query tiles of the dQ buffer instead of all into the same
    # one (at 16k, ~128 programs of a head in flight together)
    dq_rotate: bool = False
    # both kernels launch their programs tile-major (ops/_gluon_common.tile_ids): tile t of
    # every head before tile t + 1 of any, or with tile_heads within blocks of that many
    # heads. Causal: the heaviest tiles first, where head-major order starts the last
    # heads' heaviest tiles near the end (dense calls; not varlen, not with the ordered
    # adds)
    tile_major: bool = False
    tile_heads: int | None = None
    # causal dK/dV programs without a window: the diagonal band's masked steps and the
    # unmasked rest in one loop instead of two (ONE_LOOP). 0: two loops; 1: one loop with
    # the causal mask on every step (a no-op off the band); 2: one loop, the mask behind
    # a runtime branch taken on band steps. With two loops the one-kernel causal build at
    # hd 128 reloads 25 spilled values (wgmma descriptors) in every unmasked step
    # (nvdisasm, session 28); one loop has none (1) or 2 (2)
    one_loop: int = 0
    # softcap: dS^T's factor 1 - t^2 folded into P^T right after the dV GEMM's operand is
    # taken, so one fp32 tile (P^T o (1 - t^2)) stays live across that GEMM instead of
    # two (P^T, 1 - t^2). Launch-specialised sm_90 builds at hd 128 (session 28): the
    # two-kernel dK/dV kernel's 6 reloads per step go to 0, the one-kernel's 26 to 1
    # (non-causal); causal 30 -> 7, and 33 -> 15 with one loop. On with a softcap at hd
    # 128 since session 29 (`s29b`: hopper_bwd_config, hopper_bwd_reduce_config)
    softcap_fold: bool = False
    # reduce_fixed: delta (+ the lse2 boxes), the bounds and the int32 sum's zero fill in
    # one launch (ops/fixed_dq.prologue) instead of three that read dO twice; its warps
    # per program: 8 since session 30 (`s30c`, one run, hd 128 causal 4k: 402 MB in 108.5
    # us, 3.7 TB/s, against 115.0 us with 4; `s30b`: bitwise equal, backward +0.1% to
    # +0.9% in the four cells of its A/B)
    fixed_prologue: bool = False
    prologue_warps: int = 8
    # dq_reduce with reduce_late: two dQ staging tiles, so each step's add needs no wait
    # and CTA barrier before its store (the other tile's reduce is waited for a step
    # earlier, behind the dS^T barrier): the hd 128 one-kernel step has 5 bar.sync, this
    # leaves 4. 16 / 32 KB more shared memory at hd 64 / 128. Opt-in: `s30b` (0721cee,
    # scripts/env_ab.py, 3 rounds) measured the backward at hd 128 -2% to -5% (causal 16k
    # +1.7% flushed, -0.9% not); bitwise equal to one tile with fixed point
    dq_stage2: bool = False
    # dq_reduce, non-causal, no window, head-major, not rotated: the launch order's last
    # partial wave of key tiles (and maybe one wave more) split over their query tiles
    # into up to this many pieces each (ops/tail_split.plan picks how many, 0 / 1: off);
    # the pieces' dK / dV partials summed in piece order by ops/tail_split.combine.
    # tail_slots: the SMs the plan fills (None: the device's count; tests set a few).
    # Opt-in: `s47a` (2566073, H100, 2 rounds sustained) measured the hd 128 non-causal
    # backward -0.6% at 4k (3 pieces) and -0.1% / -1.4% at 16k (3 / 7 pieces) against
    # the model's +1.1% / +1.5-2.1% (the power cap, docs/performance.md step 106)
    tail_split: int = 0
    tail_slots: int | None = None
    # reduce_fixed (dense, no tail_split): the int32 dQ sum dequantized by extra programs
    # of the dK/dV launch (grid rows after the key tiles': finish_programs of them work)
    # instead of fixed_dq.dequantize's launch after it. Each key-tile program counts
    # itself done in its grid row once its reduce-adds are complete; a finishing program
    # waits for its heads' rows, in head order, so the early heads' dQ is written while
    # the last wave still runs (in its idle SMs) and only the last heads' after it.
    # On for causal hd 128 (hopper_bwd_reduce_config) since session 48: `s48a` / `s48b`
    # (0a20ba5, H100, scripts/env_ab.py, 2 rounds, backward sustained / L2 flushed) causal
    # 4k +1.7% / +1.2% and +1.4% / -0.4%, 8k (blocks of 4 heads) +2.5% / +3.6%, 16k +1.5%
    # / -2.1% and +1.4% / +3.0%; non-causal 4k +0.1% / -1.7%, 16k -0.8% / -2.6%, so not
    # there (not explained; a guess: its programs end together, so the dequantize's HBM
    # traffic meets the last wave's instead of idle SMs)
    dq_finish: bool = False
    # dq_finish: how many finishing programs share the dequantize (0: one per SM). Fewer
    # spread its HBM traffic (192 MB at 16k tokens x 2048 hidden) over more of the last
    # wave, against fewer SMs writing dQ once the last heads are in. Not yet measured
    finish_programs: int = 0

    def smem_bytes(self, head_dim: int, elem_bytes: int = 2) -> tuple[int, int]:
        """(dK/dV kernel, dQ kernel): resident tiles + rings (barriers are a few bytes)."""
        dkdv = (2 * self.block_n + 2 * self.num_stages * self.block_m) * head_dim
        if self.dq_reduce:  # the dS^T tile, and the fp32 dQ staging tile (2 x 16 bits)
            dkdv += self.block_n * self.block_m + 2 * self.block_m * head_dim
            if self.dq_stage2:  # a second staging tile
                dkdv += 2 * self.block_m * head_dim
        if self.d_split > 1:  # staging tiles for the dK / dV column block's TMA stores
            dkdv += 2 * self.block_n * head_dim // self.d_split
        if self.col_split:  # the P^T and dS^T tiles both warpgroups read
            dkdv += 2 * self.block_n * self.block_m
        dq = (2 * self.dq_block_m + 2 * self.dq_num_stages * self.dq_block_n) * head_dim
        if self.dq_col_split:  # the dS tile
            dq += self.dq_block_m * self.dq_block_n
        return dkdv * elem_bytes, dq * elem_bytes


def parse_overrides(text: str | None) -> dict:
    """Config-field overrides for A/B runs: 'block_m=32,max_regs=none' ->
    {'block_m': 32, 'max_regs': None} (ints; "none" for None)."""
    out = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, sep, val = item.partition("=")
        if not sep:
            raise ValueError(f"override {item!r} is not FIELD=VALUE")
        val = val.strip()
        out[key.strip()] = None if val.lower() == "none" else int(val)
    return out


# Whether the Gluon backward (ops/hopper_bwd.py) beats the portable one, per (head dim,
# causal, seqlen_k). H200, bf16, backward TFLOPS (2.5x forward FLOPs) at 16k tokens,
# scripts/bench_hopper_bwd.py, 2026-11-29, commit 836b108 (benchmarks/results.md), Gluon
# vs portable (cuDNN) at 1k/4k/16k:
#   hd 64  non-causal  251/290/300 vs 269/320/343 (355/420/438): portable
#   hd 64  causal      200/270/303 vs 199/259/277 (251/387/429): Gluon from 1k
#   hd 128 non-causal  329/383/388 vs 150/172/175 (407/503/519): Gluon
#   hd 128 causal      240/316/359 vs 115/142/146 (303/496/514): Gluon
#   and with the swept portable tiles (cb2c6ab, `tune`, 4k): hd 64 causal 282 (Gluon 270
#   above), 1k 217 (Gluon 200); hd 128 361 / 284 (Gluon 383 / 316): portable at hd 64.
#   and with one-warpgroup programs at hd 64 (hopper_bwd_config below; 2026-11-30, bdcf4c2,
#   `gpu_check.sh bwd64sweep`), Gluon vs portable at 1k/4k/16k: non-causal 310/347/349 vs
#   293/337/341, causal 258/323/337 vs 212/278/304 (cuDNN 359/427/449, 249/371/433):
#   Gluon at hd 64 too from 1k keys (below 1k not measured: the portable tiles there were
#   swept at 256, the MiniGPT shape).
#   and below 1k (2026-11-30, session 9, fe92472 `shortbwd`, 16k tokens), Gluon vs portable
#   backward TFLOPS at 512 / 640 keys: hd 64 non-causal 312.6 / 306.5 vs 248.7 / 262.4,
#   causal 143.1 / 201.3 vs 165.2 / 184.0 (cuDNN 277.9 / 315.2, 170.8 / 197.6); hd 128
#   Gluon at both (268.6 / 355.7 vs 231.7 / 254.3; causal 241.6 / 264.0 vs 149.8 /
#   166.8). So hd 64 takes the Gluon backward from 512 keys non-causal, 640 causal
#   (between 512 and 640 causal, and below 512, not measured: portable).
#   hd 256: the Gluon backward in dK / dV column blocks (d_split = 2) measured below the
#   portable one (0e01b69, `bwd256`: 156-198 against 206-239). With the column-split dK/dV
#   kernel (col_split; 2026-12-04, session 32, 45f027f `s32b`), Gluon vs portable (cuDNN)
#   backward TFLOPS at 1k/4k/16k: non-causal 280.6/321.8/316.0 vs 206.6/231.0/233.4
#   (298.0/377.9/354.4), causal 221.4/282.8/306.9 vs 163.5/210.3/236.8
#   (252.8/325.3/376.1); at 512 keys (fd05c96, `s32c`) 244.1 vs 180.3 non-causal, 176.9
#   vs 126.3 causal (cuDNN 237.6 / 180.2): Gluon from 512 keys (below not measured).
def hopper_bwd_preferred(head_dim: int, causal: bool, seqlen_k: int) -> bool:
    if head_dim > 128:
        return seqlen_k >= 512
    return head_dim > 64 or seqlen_k >= (640 if causal else 512)


def hopper_bwd_fused_config(head_dim: int, causal: bool) -> HopperBwdConfig | None:
    """The fused Gluon backward (one kernel in FA3's roles, dQ through fp32 atomics;
    ops/hopper_bwd.py, _bwd_fused_kernel): 128 keys per program over two consumer
    warpgroups, 64-row Q/dO tiles through a ring of 2, two dQ writer warps. Measured
    (c22eef1 and aed4ef9, `gpu_check.sh fusedbwd`, against cuDNN's backward at 1k-16k):
    ordered 0.55-0.71x (hd 64) and 0.48-0.58x (hd 128), racing 0.76-0.87x and 0.63-0.72x;
    the two-kernel backward 0.77-1.15x. Opt-in only (FLASHTILE_HOPPER_BWD_FUSED=1). Resources
    (ptxas -v, sm_90, 2026-11-30): the consumers at 240 registers spill at hd 128
    (tests/test_hopper_bwd.py bounds them), none at hd 64. None above hd 128 (64 keys'
    dK and dV do not fit a warpgroup's registers there)."""
    if head_dim > 128:
        return None
    return HopperBwdConfig(64, 128, 4, 2, 0, 0, 4, 0, fused=True)


def hopper_bwd_reduce_config(head_dim: int, causal: bool, seqlen_k: int,
                             group: int = 1, ordered: bool = False,
                             fixed: bool = False,
                             softcap: bool = False) -> HopperBwdConfig | None:
    """The one-kernel backward of ``deterministic=False`` calls (HopperBwdConfig.dq_reduce:
    the dK/dV kernel also computes dQ = dS K and adds it to fp32 by TMA reduce-adds, 5
    GEMMs per tile pair, no dQ kernel): the two-kernel dK/dV tiles on 128 keys over two
    warpgroups, so that each reduce-add carries 128 keys' worth of dQ (half the L2
    traffic of 64-key programs), one program per SM; each dQ added under the next step's
    S^T GEMM (reduce_late). Resources (ptxas -v, sm_90, 2026-12-01): hd 128 255
    registers, 52 / 100 B spilled (non-causal / causal; the dS^T tile double-buffered:
    single, the loop-invariant wgmma descriptors of its fixed address spilled 208 B),
    193 KB; hd 64 184 / 206 registers, no spills, 113 KB. None above hd 128 (a 128-key
    dK and dV do not fit).
    `s23b` (ce00629, bench_hopper_bwd --ab, 5 interleaved rounds), backward TFLOPS at
    1k / 2k / 4k / 8k / 16k, two-kernel -> reduce -> reduce_late: hd 128 non-causal
    414.4 / 451.4 / 448.8 / 442.2 / 455.2 -> 387.0 / 423.7 / 456.2 / 492.4 / 509.7 ->
    400.0 / 447.5 / 475.0 / 499.9 / 508.3; causal 346.4 / 408.3 / 444.3 / 440.1 / 466.3
    -> 268.9 / 314.4 / 361.2 / 400.7 / 425.8 -> 249.3 / 298.6 / 335.5 / 365.6 / 393.4;
    hd 64 non-causal 404.1 .. 415.9 -> 289.2 .. 374.9 -> 308.5 .. 389.4 (-24% .. -6%),
    causal -27% .. -6% late. (`s23a`, ef00a84, one do_bench each: hd 128 non-causal 4k /
    16k two-kernel 437.4 / 451.6, reduce 484.0 / 512.3.)
    Causal at hd 128: the band's steps and the rest in one loop, the mask behind a branch
    (one_loop = 2; with two loops the unmasked steps reload 25 spilled values each, 8.55
    GB of local loads per backward at 16k in `s28a`'s ncu). `s28c` (ec0f30b,
    scripts/env_ab.py through the public call, 3 rounds, backward TFLOPS, L2 flushed),
    fixed point, two loops -> one_loop 1 -> 2, against the two-kernel backward's 398.6 /
    447.0 at 4k / 16k: 325.2 / 387.3 -> 402.4 / 478.0 -> 407.1 / 481.0; at hd 64 level
    (-16.8% / -4.5% against the two-kernel backward with two loops, -17.1% / -5.3% with
    one_loop 2), so two loops there.
    ``softcap``: with 1 - t^2 folded into P^T at hd 128 (softcap_fold; spec builds reload
    26 -> 1 values per step non-causal, 33 -> 15 causal); `s29b` (f349091, env_ab.py
    --softcap 30), fixed point forced, backward L2 flushed / not against no fold: +31.9%
    / +31.1% non-causal 4k, +28.2% / +27.3% 16k; causal +15.1% / +14.9% 4k, +17.4% /
    +13.9% 16k."""
    if head_dim > 128:
        return None
    base = hopper_bwd_config(head_dim, causal, seqlen_k, group)
    cfg = dataclasses.replace(base, block_n=128, num_warps=8, max_regs=None,
                              prefetch_stats=False, dq_reduce=True, reduce_late=True,
                              reduce_ordered=ordered, reduce_fixed=fixed,
                              one_loop=2 if causal and head_dim == 128 else 0,
                              softcap_fold=softcap and head_dim == 128,
                              fixed_prologue=fixed,
                              dq_finish=fixed and causal and head_dim == 128)
    lo, hi = REDUCE_TILE_MAJOR_CAUSAL
    if causal and head_dim == 128 and lo <= seqlen_k < hi and not ordered:
        cfg = dataclasses.replace(cfg, tile_major=True, tile_heads=REDUCE_TILE_HEADS)
    return cfg


# The causal one-kernel backward at hd 128 (one program per SM) launches its key tiles
# tile-major within blocks of REDUCE_TILE_HEADS heads for seqlen_k in this range
# (HopperBwdConfig.tile_major / tile_heads). A list-scheduling model (one program per SM,
# a program 2.5 steps + its query tiles) puts head-major order's last wave 6% above the
# ideal at 4k (the last heads' heaviest key tiles start near the end) and blocks of 4 / 8
# heads at it; at 16k every order within 0.3%. `s47a` (2566073, H100, scripts/env_ab.py, 2
# rounds, backward ms sustained / L2 flushed) head-major -> blocks of 4 -> blocks of 8:
# 4k 1.727 / 1.654 -> 1.697 / 1.616 (+1.8% / +2.3%) -> 1.698 / 1.618 (+1.7% / +2.2%),
# gradients bitwise equal; 16k 5.690 -> 5.793 (-1.8%) -> 5.841 (-2.6%) sustained (level
# flushed). The floor bench with blocks of 4 (same machine): causal 4k forward+backward
# 0.954x cuDNN sustained (0.942x head-major in s47a's floor run). 8k (B2 H16) in
# session 48 (`s48b`, 0a20ba5, H100, 2 rounds): head-major 3.158 ms -> blocks of 4 3.105
# ms sustained (+1.7%; +1.0% flushed), gradients bitwise equal; so up to 16k.
REDUCE_TILE_MAJOR_CAUSAL = (4096, 16384)
REDUCE_TILE_HEADS = 4


def hopper_bwd_reduce_preferred(head_dim: int, causal: bool, seqlen_k: int) -> bool:
    """Where ``deterministic=False`` calls take ``hopper_bwd_reduce_config`` by default
    (FLASHTILE_HOPPER_BWD_REDUCE=1 forces it on, =0 off): hd 128 non-causal from 4k keys,
    where `s23b` measured it +5.8% / +13.0% / +11.7% over the two-kernel backward at 4k /
    8k / 16k (-3.5% / -0.9% at 1k / 2k). Causal and hd 64 lose everywhere measured (one
    8-warp program per SM against two or three one-warpgroup ones; see
    hopper_bwd_reduce_config)."""
    return head_dim == 128 and not causal and seqlen_k >= 4096


def hopper_bwd_ordered_preferred(head_dim: int, causal: bool, seqlen_k: int) -> bool:
    """Where deterministic calls take ``hopper_bwd_reduce_config(..., ordered=True)`` by
    default: nowhere until measured (FLASHTILE_HOPPER_BWD_REDUCE_ORDERED=1 forces it on
    where ops/hopper_bwd.reduce_ordered_ok allows: non-causal, no window, at most one
    key tile per SM). `s24a` (0b15843) measured it at hd 128 non-causal below the
    two-kernel backward everywhere: -21.7% / -11.6% / -3.3% / -2.1% at 1k / 4k / 8k /
    16k, and 6-12% below the racing reduce; so nowhere."""
    return False


# Causal softcapped calls at hd 128 take the fixed-point one-kernel backward from this many
# keys (hopper_bwd_fixed_preferred)
FIXED_SOFTCAP_CAUSAL_MIN_SEQLEN = 8192
# ... and non-causal calls with a sliding window from this many
FIXED_WINDOW_MIN_SEQLEN = 8192


def hopper_bwd_fixed_preferred(head_dim: int, causal: bool, seqlen_k: int,
                               window: bool = False, softcap: bool = False) -> bool:
    """Where deterministic calls take ``hopper_bwd_reduce_config(..., fixed=True)`` (the
    one-kernel backward with fixed-point adds, ops/fixed_dq.py) by default
    (FLASHTILE_HOPPER_BWD_REDUCE_FIXED=1 forces it on, =0 off): hd 128 non-causal from 4k
    keys, where `s26a` (45aebd3, bench_hopper_bwd --ab, 5 rounds, MHA) measured it +4.4% /
    +11.9% / +10.4% over the two-kernel backward at 4k / 8k / 16k (the racing reduce in
    the same run: -3.4% / +5.5% / +9.1%), -14.0% at 1k. Causal (-28.2% / -17.0% at 4k /
    16k) and hd 64 on one warpgroup of 64 keys (-18% to -1.5% non-causal, -26% to -5%
    causal) lose, as the racing reduce does there.
    Causal too since session 28, with the band in one loop (hopper_bwd_reduce_config's
    one_loop = 2): `s28c` (ec0f30b, scripts/env_ab.py through the public call, 3 rounds)
    +2.1% / +7.6% backward over the two-kernel backward at hd 128 causal 4k / 16k
    (forward+backward +4.3% at 16k, L2 flushed); nor at hd 64 (-17% / -5%).
    With a window: non-causal from FIXED_WINDOW_MIN_SEQLEN keys since session 30, never
    causal. The one-kernel window build (three loops: band, the rest, the far edge)
    spills 240 B non-causal, reloaded on the far edge's steps only (none in the unmasked
    loop), 368 B causal (7-22 reloads on most steps); session 28 had withdrawn windows
    from here on those spills unmeasured. Measured through the public call
    (scripts/env_ab.py --window, backward L2 flushed / not, against two kernels):
    non-causal, window 1024, `s30a` (0721cee, 3 rounds) 4k +1.3% / +5.8%, 16k +6.3% /
    +6.0%; `s30c` (db99c8e, 5 rounds) 4k +0.7% / +4.0%, 8k +3.8% / +4.1%, 16k +6.1% /
    +9.3%; window 256 (3 rounds) 4k -1.5% / -0.2%, 16k +2.6% / +7.1%. Forward+backward
    at 4k L2 flushed read -7.3% / -12.4% / -7.4% in the three 4k runs against +0.7% /
    +0.1% / +1.1% unflushed (not explained: the backward alone gained there), hence 8k.
    Causal, window 1024 (`s30a`): -24% to -27% at 4k / 16k.
    With a softcap (softcap_fold on both sides since session 29, the one-kernel build's
    reloads 26 -> 1 per step): `s29b` (f349091, scripts/env_ab.py --softcap 30, 3 rounds),
    backward L2 flushed / not, the fixed-point kernel with the fold against the two
    kernels with it: non-causal 4k +10.5% / +16.2%, 16k +13.9% / +14.7%; causal 4k
    -3.5% / -2.3%, 16k +7.8% / +6.2%. So non-causal from 4k keys, causal from
    FIXED_SOFTCAP_CAUSAL_MIN_SEQLEN (8k: between the two, not measured when chosen)."""
    if head_dim != 128:
        return False
    if window:
        return not causal and seqlen_k >= FIXED_WINDOW_MIN_SEQLEN
    if softcap and causal:
        return seqlen_k >= FIXED_SOFTCAP_CAUSAL_MIN_SEQLEN
    return seqlen_k >= 4096


# From this many keys dense GQA at hd 64 runs the dK/dV kernel's group loop instead of
# expanded programs (hopper_bwd_config, gqa_expand)
GQA_LOOP_MIN_SEQLEN = 32768


# Causal two-kernel backwards at hd 64 / 128 run tile-major grids for seqlen_k in this
# range (HopperBwdConfig.tile_major): `s27c` (1007e8e, bench_hopper_bwd --ab, 5 rounds),
# backward TFLOPS against the head-major grid: hd 128 causal -21.8% / +3.7% / -0.7% at 1k
# / 4k / 16k, hd 64 -15.9% / +8.1% / +0.4%; non-causal 4k +0.8% (hd 128), -7.5% (hd 64).
# At 1k the grid's 256-512 heads x 16 tiles put one program per head in flight where the
# head-major order keeps a head's tiles together (their shared Q / dO / K / V reads hit
# L2), and at 16k the tail is short anyway (a list-scheduling simulation: +0.4%).
# Tile-major within blocks of heads whose tiles fill about a wave (tile_heads 17 / 9 / 5 /
# 3 / 2 at 1k-16k: as few heads in flight as head-major order) gained nothing: `s27d`
# (7540bd4) -4.0% / -3.2% / -0.3% / +0.0% / -0.6% at hd 128 causal 1k-16k, hd 64 -2.2% to
# +0.8%, so neither the L2 loss at 1k nor the 4k gain came from the tail the simulation
# modelled (not profiled); whole-grid tile-major order shipped for 4k <= seqlen_k < 16k.
# Withdrawn in session 28: through the public call (scripts/env_ab.py, `s28b`, 437ab1d, 5
# interleaved rounds, L2 flushed / back to back) tile-major lost on the backward in every
# causal cell it covered, hd 128 -5.7% / -5.5% at 4k and -4.8% / -2.4% at 8k, hd 64 -6.9%
# / -7.5% and -2.9% / -6.0%; the perf table at 4e10906 read hd 128 / 64 causal 4k
# forward+backward 7-8% below 7887446's (head-major) with the other cells within 1%, and
# ncu (`s28a`) read both kernels 1.5-4% slower there with the L2 hit rate at 59-60%
# against 89-90% (DRAM 1.35 against 0.39 GB per dK/dV kernel). bench_hopper_bwd --ab's
# gains (s27c / s27e) are not explained. None: every grid head-major; an override
# (tile_major=1) still runs the order
TILE_MAJOR_CAUSAL: tuple[int, int] | None = None


def _tile_major(causal: bool, seqlen_k: int, dropout: bool) -> bool:
    if TILE_MAJOR_CAUSAL is None:
        return False
    lo, hi = TILE_MAJOR_CAUSAL
    return bool(causal) and not dropout and lo <= seqlen_k < hi


def hopper_bwd_config(head_dim: int, causal: bool, seqlen_k: int,
                      group: int = 1, expand: bool = True,
                      softcap: bool = False, dropout: bool = False) -> HopperBwdConfig:
    """Gluon backward tiles for fp16/bf16 on sm_90 (head dim 64, 128 or 256). Resources from
    compiling for sm_90 on the CPU (ptxas -v; tests/test_hopper_bwd.py: no spills but
    the ones listed there, fits 227 KB). First guesses were FA3's shapes (128 keys per
    dK/dV program over two warpgroups); the sweeps below replaced them at both head dims
    with one-warpgroup programs, two or more per SM.

    GQA (``group`` > 1) at hd 64 / 128 runs MHA's dK/dV programs, one per query head
    (``gqa_expand``), unless ``expand`` is False (the varlen backward, which has no such
    build): `gqaexp` (5114cb8), backward TFLOPS at the HF Llama's attention shape (B1 H32
    KV8, causal): hd 64 at 8k / 32k 311.8 / 344.1 looping over the group (uncapped)
    against 362.6 / 373.5 expanded with MHA's 168-register cap (325.6 / 332.0 expanded
    uncapped); hd 128 at 8k 389.7 against 410.8. The HF training step: 0.95x / 0.92x
    sdpa at 8k / 32k -> 0.98x / 0.95x. Extra memory: 2 x B x N x H x D elements. From
    GQA_LOOP_MIN_SEQLEN keys hd 64 loops over the group again (capped; measured below)."""
    gqa = group > 1 and expand  # dense GQA (the varlen backward has no expanded build)
    gqa_expand = gqa
    if head_dim <= 64:
        # one warpgroup per program, so two or three programs share an SM and one's
        # softmax overlaps another's GEMMs (as the forward's capped stage A): dK/dV 64 keys
        # x 64-row Q/dO tiles, ring 2: 182/191 regs (non-causal/causal), 48 KB; dQ 64 x 64,
        # ring 3: 122 regs, 64 KB. `gpu_check.sh bwd64sweep` (bdcf4c2), backward TFLOPS at
        # 1k/4k/16k: non-causal 310/347/349, causal 258/323/337 against the two-warpgroup
        # tiles (dK/dV 128 keys x 64 rows ring 3, dQ 128 x 128) 250/288/301, 201/273/304.
        # Ring 3 for dK/dV, or a 64 x 128 dQ tile, measured within 3% of these.
        # The dK/dV kernel capped at 168 registers (20 / 52 B of spills): three programs
        # per SM instead of two. `ncubwd` (488f557) had the uncapped kernel at 46% tensor
        # pipe against the dQ kernel's 70%, stalled on latency with 8 warps per SM.
        # `bwdcap` (604b370), backward TFLOPS at 1k/4k/16k: non-causal 358.5/359.1/369.3,
        # causal 266.8/329.7/363.5 against 312.5/342.6/352.3, 253.8/330.4/336.7 uncapped;
        # lse / delta loaded a step ahead (prefetch_stats), or a dQ ring of 2 (four dQ
        # programs per SM), measured within -7% .. +3% of uncapped.
        # GQA (group = query heads per K/V head > 1): uncapped. `hfcap` (5d10687), backward
        # TFLOPS at the HF Llama's attention shape (B1 H32 D64 causal): KV8 (group 4) capped
        # 252.7 / 313.8 at 8k / 32k against 311.8 / 354.8 uncapped; KV32 (MHA) 365.0 capped
        # against 327.4. The HF training step: 0.91x / 0.89x sdpa capped, 0.95x / 0.93x not
        # Since 5114cb8 GQA runs these MHA programs too (gqa_expand), so the cap holds
        # for it; only the varlen backward's group loop stays uncapped.
        # A softcap: uncapped, 211 / 221 registers and no spills, where the tanh takes
        # the capped build to 212 / 416 B (ptxas, tanh.approx; not measured capped)
        # early_expect (one bar.sync fewer per step in both kernels): `s13ee` (823ef52),
        # backward TFLOPS at 4k / 16k non-causal 398.3 / 377.3 against 375.9 / 365.7,
        # causal 334.0 / 366.0 against 329.7 / 360.0 (+1.3% to +6.0%; at hd 128 -1.6% to
        # +1.0%, so not there)
        # stats_tma (lse / delta rows by TMA beside Q / dO): `s15c` (8223523), backward
        # TFLOPS off -> on at 4k / 16k: non-causal 362.6 / 374.8 -> 391.8 / 399.5,
        # causal 332.4 / 362.1 -> 356.7 / 374.6 (+3.5% to +8.1%); `bwdvscudnn` had this
        # dK/dV kernel at 55% tensor pipe (the dQ kernel 75%). hd 128: -1.0% to +2.6%
        # lse2_pre and group_branch (one TMA box of lse2 / delta per Q tile, no integer
        # division per step; step loop 424 -> ~330 instructions, bar.sync 5 -> 3):
        # `bwdab` (a205434, one process, 9 interleaved rounds), backward TFLOPS at 4k /
        # 16k: non-causal 391.6 / 398.3 -> 406.9 / 409.7, causal 353.8 / 376.3 -> 372.9 /
        # 396.5 (+2.9% to +5.4%; lse2_pre alone +2.7% to +3.9%)
        # GQA (expanded programs): a dQ ring of 2, `s16e` (6936644, one process, 7
        # rounds) at the HF Llama's attention (B1 H32 KV8 causal), backward TFLOPS at 8k /
        # 32k 376.1 / 399.5 -> 382.9 / 406.9 (+1.8% / +1.9%); uncapped -5.0% / -3.1%, a
        # dK/dV ring of 3 +1.6% / -0.4%
        # Dense GQA from 32k keys (GQA_LOOP_MIN_SEQLEN): the group loop again, capped
        # too, no partials to sum (2 x B x N x H x D elements fewer). `s17a` / `s17b`
        # (65c80c5 / a1de0b9, one process, 5 interleaved rounds) at the HF Llama's
        # attention (B1 H32 KV8 causal), loop against expanded, backward TFLOPS at 8k /
        # 16k / 32k / 64k: 346.9 / 392.3 (-11.6%), 399.5 / 407.7 (-2.0%), 402.5 / 392.4
        # and 420.4 / 410.0 (+2.6%, +2.5%), 417.8 / 416.3 (+0.3%); the loop uncapped
        # -5.2% at 32k (the cap had measured slower with the loop in `hfcap`, when the
        # capped build spilled: 0 B since stats_tma)
        gqa_expand = gqa and seqlen_k < GQA_LOOP_MIN_SEQLEN
        # Dropout (the forward's bit words, DROPOUT): uncapped, 222 / 251 registers and no
        # spills, where the cap spills 216 / 248 B (ptxas). `s17f` (08c7316), dK/dV kernel
        # us per call at MiniGPT's 16 x 1024 (hd 64 causal, dropout 0.2): 133.5 capped,
        # 108.2 uncapped
        capped = (group == 1 or gqa) and not softcap and not dropout
        return HopperBwdConfig(64, 64, 4, 2, 64, 64, 4, 2 if gqa else 3,
                               max_regs=168 if capped else None, gqa_expand=gqa_expand,
                               early_expect=True, stats_tma=True, lse2_pre=True,
                               group_branch=True,
                               tile_major=_tile_major(causal, seqlen_k, dropout))
    if head_dim > 128:
        # hd 256 (opt-in, FLASHTILE_HOPPER_BWD=1; 0e01b69 `bwd256`: 156-198 TFLOPS, below the
        # portable backward's swept tiles, 206-239, so not preferred): a 64-key dK and
        # dV need 256 fp32 registers per thread on one warpgroup, so two launches each
        # accumulate 128 of the columns (d_split = 2; both recompute S^T and dP^T over
        # all 256: 1.5x the dK/dV kernel's GEMM FLOPs) on 32-row Q/dO tiles: 214 / 226
        # regs (non-causal / causal), no spills, 128 KB; 64-row tiles 255 regs, 4 / 64 B
        # of spills, 192 KB. dQ 64 x 32, ring 2: 238 / 240 regs, 128 KB (ptxas, sm_90)
        # Since session 32 the dK/dV kernel is one launch of 8 warps splitting the columns
        # (col_split, FA3's hd 256 layout: S^T and dP^T computed once, each warpgroup half
        # of the query columns; P^T and dS^T through shared memory): 64 keys x 64-row
        # Q/dO tiles, ring 2, 219 / 255 regs, 0 / 100 B of spills, 208 KB (ptxas, sm_90);
        # the dQ kernel the same way (dq_col_split: 64 x 64 tiles, ring 2, 196 / 191
        # regs, no spills, 200 KB)
        return HopperBwdConfig(64, 64, 8, 2, 64, 64, 8, 2, col_split=True, dq_col_split=True)
    # hd 128: one warpgroup per program as at hd 64 (two programs per SM): dK/dV 64 keys x
    # 64-row Q/dO tiles, ring 2: 240 regs (causal 255 + 28 B of spills in the masked band
    # step), 96 KB; dQ 64 x 64, ring 2: 164 regs, 96 KB. `gpu_check.sh bwd128sweep`
    # (e8aa9d8), backward TFLOPS at 1k/4k/16k: non-causal 398/419/438, causal 327/399/424,
    # against the two-warpgroup tiles shipped before (dK/dV 128 keys x 64 rows, causal 32
    # rows; dQ 128 x 128; swept in bc5bcfc's `bwdsweep`) 331/389/394, 243/324/366.
    # 32-row Q/dO tiles measured 1-12% below these; the 64 x 64 dQ tile alone, +0-5%.
    # Non-causal, lse / delta loaded a step ahead (251 regs, no spills): `bwdcap` (604b370)
    # 423.0/443.0/449.9 against 402.7/430.9/440.5 (+2-5%); causal it spills 60 B and
    # measured 4-9% slower. 32-key dQ tiles (three dQ programs per SM): 6-10% slower
    # stats_tma with lse2_pre and group_branch (as at hd 64): `bwdab` (a205434, one
    # process, 9 interleaved rounds), backward TFLOPS at 4k / 16k: non-causal 442.7 /
    # 439.5 -> 447.3 / 451.8, causal 388.4 / 426.7 -> 410.3 / 443.5 (+1.0% to +5.6%;
    # stats_tma alone -0.6% to +5.4%)
    # A softcap: 1 - t^2 folded into P^T (softcap_fold; reloads per step 6 -> 0
    # non-causal, 23 / 6 -> 7 / 0 causal). `s29b` (f349091, scripts/env_ab.py --softcap 30
    # through the public call, 3 rounds), backward L2 flushed / not, against no fold:
    # causal 4k +6.6% / +6.4%, 16k +5.3% / +3.4%; non-causal 4k +1.5% / -1.8%, 16k +0.6%
    # / +0.4% (level)
    return HopperBwdConfig(64, 64, 4, 2, 64, 64, 4, 2, prefetch_stats=not causal,
                           gqa_expand=gqa_expand, stats_tma=True, lse2_pre=True,
                           group_branch=True,
                           tile_major=_tile_major(causal, seqlen_k, dropout),
                           softcap_fold=softcap)
