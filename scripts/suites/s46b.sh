# gpu_check.sh suite "s46b" (sourced; $out, $commit, ft() and status are set)
# For session 46: the backward's GEMM count against its energy at the 700 W cap. The
# two-kernel backward runs 7 GEMMs per tile pair, the one-kernel one with fixed-point dQ
# 5 (cuDNN 5). At hd 64 the one-kernel build measured 1.5-18% behind by do_bench (`s26a`),
# timings that after an idle pause may run at clocks the kernel cannot hold (session 45,
# step 104). Here both, through the public call (env_ab: FLASHTILE_HOPPER_BWD_REDUCE_FIXED
# =0 two kernels, =1 one kernel; the default is 1 at hd 128 from 4k, 0 at hd 64), the
# backward alone, by do_bench (flushed), back to back, and sustained for 2 s with NVML's
# energy counter, 3 interleaved rounds, hd 64 / 128, 4k / 16k, causal and not.
# Prediction: the one-kernel backward spends 10-20% fewer mJ per call at both head dims
# (5/7 of the GEMMs, the same bytes); where it trails by do_bench (hd 64), the sustained
# timing narrows the gap by half the energy saving or more.
source scripts/suites/lib/steps.sh
env_ab envab_s46b_fixed 420 --ab "FLASHTILE_HOPPER_BWD_REDUCE_FIXED=0|FLASHTILE_HOPPER_BWD_REDUCE_FIXED=1" \
  --head-dims 64 128 --seqlens 4096 16384 --causal 0 1 --measures bwd --rounds 3 --sustained 2
