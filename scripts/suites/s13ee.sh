# gpu_check.sh suite "s13ee" (sourced; $out, $commit, ft() and status are set)
# Session 13: HopperBwdConfig.early_expect. The ring refill of both backward kernels arms
# the slot's two barriers (mbarrier expect) before the step's CTA barrier and issues the
# TMA copies after it (the prologue too). Triton's barrier pass then puts 3 bar.sync in
# each step loop instead of 4 (ptxas sm_90, every hd 64 / 128 build; instructions per
# step 493 -> 490 dK/dV, 262 -> 253 dQ at hd 64; registers unchanged but hd 128
# non-causal dK/dV 251 -> 253, hd 64 causal dK/dV spills 52 -> 36 B).
# Prediction: backward +1-3% (ncu had the dQ kernel's top stall at its barrier: 0.9 /
# 1.9 per issue at hd 64 / 128); if it holds, early_expect becomes the default.
# A/B in separate processes (shipped, then early_expect=1), then the backward GPU tests
# with it forced on.
source scripts/suites/lib/steps.sh
source scripts/suites/lib/bwd_sweep.sh
bwd_sweep 64 "4096 16384" "gluon-bwd" "" "early_expect=1"
bwd_sweep 128 "4096 16384" "gluon-bwd" "" "early_expect=1"
FLASHTILE_HOPPER_BWD_OVERRIDES=early_expect=1 gpu_pytest pytest_ee 180 8 6 \
  tests/test_hopper_bwd.py -k "test_hopper_bwd_vs_reference or window_vs"
