# gpu_check.sh suite "s30b" (sourced; $out, $commit, ft() and status are set)
# Written in session 29 after its device time ran out, for the next session (run after
# s30a; split from it for the 10-minute call limit).
source scripts/suites/lib/steps.sh
O=FLASHTILE_HOPPER_BWD_OVERRIDES
# 1. The prologue's warps (HopperBwdConfig.prologue_warps, 4 shipped): 402 MB in 112.6 us
#    (3.6 TB/s) in s29d, against the copy's ~4.26. Prediction: 8 warps 100-112 us,
#    backward level to +0.7% at hd 128 causal 4k (the per-kernel profile says which).
env_ab prologue_warps_ab 100 --ab "|$O=prologue_warps=8" \
  --head-dims 128 --seqlens 4096 --causal 1 0 --rounds 5
FLASHTILE_HOPPER_BWD_OVERRIDES=prologue_warps=8 timeout 60 python3 scripts/diag_fwd_bwd.py \
  4,4096,16,128,1 >"$out/diag_prologue8.log" 2>&1 || status=1
grep -E "_prologue_kernel" "$out/diag_prologue8.log" | head -2
# 2. HopperBwdConfig.dq_stage2 (opt-in): two dQ staging tiles, so a step's dQ add needs
#    no wait and CTA barrier before its store; the wait for the add before it moves in
#    front of the dS^T barrier. The one-kernel step's bar.sync count at hd 128 goes from
#    5 to 4 (nvdisasm of the spec builds, causal and not; 0 / 4 B of spills), 32 KB more
#    shared memory (230448 B of 232448). GPU tests (fixed point bitwise equal to one tile;
#    racing within the bound), then the A/B through the public call at hd 128, 4k / 16k,
#    causal and not. Prediction: backward +1-4% (early_expect, one bar.sync fewer per
#    step at hd 64, measured +1.3-6%).
gpu_pytest pytest_stage2 200 4 6 tests/test_hopper_bwd_reduce.py -k "stage2"
env_ab stage2_ab 200 --ab "|$O=dq_stage2=1" \
  --head-dims 128 --seqlens 4096 16384 --causal 0 1 --rounds 3
# 3. The prologue's bitwise test after the review commit 7e7d4b6 (shared delta_rows /
#    lse2_box): it ran on the interpreter only since; it runs on CUDA without -m gpu.
cuda_pytest pytest_prologue 120 4 tests/test_fixed_dq.py -k prologue
