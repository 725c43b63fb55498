# gpu_check.sh suite "s31b" (sourced; $out, $commit, ft() and status are set)
# Session 31: HopperBwdConfig.dq_defer on the one-kernel backward (dq_reduce): each step
# issues the previous step's dQ = dS K right behind its own S^T, so the tensor cores run
# it under the softmax instead of after dK with nothing behind it (ncu s31a: the hd 128
# non-causal one-kernel at 57% tensor pipe against cuDNN's 66%, 2.57 vs 2.28 ms at 4k,
# 9.99 vs 8.91 at 16k). sm_90 ptxas: hd 128 255 registers with 124 B spilled (28 LDL + 21
# STL per step, the dQ accumulator live across the softmax); hd 64 198 registers, none.
# 1. GPU tests: bitwise equal to reduce_late with fixed point, racing against fp64.
# 2. A/B at hd 128 non-causal (the fixed-point default there) and at hd 64 non-causal (the
#    two-kernel default, the fixed one-kernel forced, and forced with dq_defer).
#    Prediction: hd 128 -5% to +3% (the spills against the overlap); hd 64 one-kernel +5-10%
#    over its late form, still short of the two kernels' three programs per SM.
source scripts/suites/lib/steps.sh
O=FLASHTILE_HOPPER_BWD_OVERRIDES
F=FLASHTILE_HOPPER_BWD_REDUCE_FIXED
gpu_pytest pytest_dq_defer 200 4 6 tests/test_hopper_bwd_reduce.py -k "dq_defer"
env_ab defer128_ab 150 --ab "|$O=dq_defer=1" --head-dims 128 --seqlens 4096 16384 \
  --causal 0 --rounds 3
env_ab defer64_ab 150 --ab "|$F=1|$F=1;$O=dq_defer=1" --head-dims 64 \
  --seqlens 4096 16384 --causal 0 --rounds 3
