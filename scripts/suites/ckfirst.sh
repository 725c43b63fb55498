# gpu_check.sh suite "ckfirst" (sourced; $out, $commit, ft() and status are set)
# Prepared in session 14, not yet run: stage C with each consumer step waiting for its K
# tile before its tensor-core turn (HopperFwdConfig.c_k_wait_first, opt-in). The GEMMs
# issue when both hold, either way, but Triton's barrier pass then puts 3 warpgroup
# bar.sync (128 threads) per consumer step instead of 4 (ptxas sm_90, hd 64 / 128 / 256,
# causal or not; registers and spills unchanged). Stage C runs hd 128 non-causal from 1k
# and causal from 4k (issue 4's floor: 0.98x / 0.99x cuDNN at 4k in s14a's perf) and hd
# 256 windows from 8k.
# Prediction: +1-3% at hd 128 (stage A gained 2-4% from one CTA-wide bar.sync fewer; these
# are warpgroup-wide and the ping-pong hides part of each wait). Its GPU tests first. ~4 min.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_ckfirst 120 8 6 tests/test_hopper.py -k k_wait_first
source scripts/suites/lib/fwd_sweep.sh
FWD_SWEEP_STAGE=C fwd_sweep ckfirst 90 "--head-dims 128 256 --seqlens 4096 16384" 9 "" \
  "c_k_wait_first=1"
