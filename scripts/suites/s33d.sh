# gpu_check.sh suite "s33d" (sourced; $out, $commit, ft() and status are set)
# Session 33. The fixed-point one-kernel backward visits its head's query tiles in the
# same order in every program (0, 1, ..., n_m - 1), so at 16k (B1, 128 key tiles per head,
# ~128 programs of one head in flight) all of them reduce-add into the same query tile's
# dQ rows at about the same time; at 4k (B4, 32 key tiles per head) ~32 do. The ratio to
# cuDNN falls from 4k to 16k non-causal (hd 128 0.957x -> 0.923x at 1b99241).
# HopperBwdConfig.dq_rotate (opt-in): the ordered reduce's rotated order (tile (j + rot)
# mod n_m at step j, rotations spread over the tiles) without its counters. ptxas sm_90:
# hd 128 255 registers, 4 B spilled (0 unrotated); hd 64 (128 keys, 8 warps) 182, none.
# 1. GPU tests: dq bitwise equal to the unrotated fixed-point kernel's, dk / dv against
#    the fp64 reference, repeatable; racing adds rotated against the reference.
# 2. env_ab (public call, 3 interleaved rounds): hd 128 non-causal 4k / 16k, shipped
#    (fixed point) against dq_rotate=1.
# 3. hd 64 non-causal 4k / 16k: the shipped two kernels, the fixed-point one-kernel
#    (FLASHTILE_HOPPER_BWD_REDUCE_FIXED=1; level with two kernels at 16k in s26a), and
#    it rotated.
# Prediction: if the same-tile adds contend, rotated +2-6% on the backward at 16k and
# +0-2% at 4k; if they do not, level (+-1%). Either way dq bitwise equal.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_rotate 200 4 8 tests/test_hopper_bwd_reduce.py -k "dq_rotate"
env_ab rotate128 150 --ab "|FLASHTILE_HOPPER_BWD_OVERRIDES=dq_rotate=1" --head-dims 128 \
  --seqlens 4096 16384 --causal 0 --rounds 3
F=FLASHTILE_HOPPER_BWD_REDUCE_FIXED=1
env_ab rotate64 200 --ab "|$F|$F;FLASHTILE_HOPPER_BWD_OVERRIDES=dq_rotate=1" \
  --head-dims 64 --seqlens 4096 16384 --causal 0 --rounds 3
