# gpu_check.sh suite "s31c" (sourced; $out, $commit, ft() and status are set)
# Session 31: the one-kernel backward (fixed point) at hd 64 on 64-key programs of one
# warpgroup (block_n=64, num_warps=4): sm_90 ptxas 182 registers, no spills, 83 KB of
# shared memory, so two programs per SM that overlap each other's softmax and GEMMs, where
# the 128-key two-warpgroup tile (186 registers, 116 KB) runs one in lock step (s31b:
# -6.5% to -14% forward+backward against the two kernels at 4k, -4.1% to -4.5% at 16k).
# The two-kernel default runs three 64-key programs per SM (168-register cap) but 7 GEMMs
# per tile pair and streams K / V once more; hd 64 non-causal is the cell furthest from
# issue 4's floor (0.914-0.929x), where s30 put the loss on energy per gradient.
# 1. GPU tests of the 64-key one-kernel (fixed and racing) against the fp64 reference.
# 2. A/B, hd 64 causal and not, 4k / 16k: two kernels | fixed 128 keys | fixed 64 keys.
#    Prediction: 64 keys +5-10% over 128 keys; against the two kernels -5% to +5%.
source scripts/suites/lib/steps.sh
O=FLASHTILE_HOPPER_BWD_OVERRIDES
F=FLASHTILE_HOPPER_BWD_REDUCE_FIXED
gpu_pytest pytest_reduce64 200 4 6 tests/test_hopper_bwd_reduce.py -k "reduce_64_keys"
env_ab reduce64_ab 240 --ab "|$F=1|$F=1;$O=block_n=64,num_warps=4" --head-dims 64 \
  --seqlens 4096 16384 --causal 0 1 --rounds 3
