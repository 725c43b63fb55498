# gpu_check.sh suite "s43b" (sourced; $out, $commit, ft() and status are set)
# For session 43: the persistent stage C's per-item fixed cost at hd 128 (4.4 us per item
# against 1.74 us per key step, trace_stage_c.py). HopperFwdConfig.o_lag (the O store's
# wait moved to the next item's epilogue) and q_early (the next Q loaded before the last
# PV), opt-in. GPU tests against the reference, then the forward A/B through the public
# call. Prediction: +0.5-1.5% at 4k, +1-3% at 1k, ~+0.5% at 8k (the split ring runs from
# 1k to 8k; 16k is the one-shot grid, untouched), causal and not.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_s43b 150 8 4 tests/test_hopper.py -k "persistent_lag"
ov=FLASHTILE_HOPPER_FWD_OVERRIDES
env_ab fwd_lag 200 --ab "|$ov=o_lag=1|$ov=q_early=1|$ov=o_lag=1,q_early=1" --measures fwd \
  --head-dims 128 --seqlens 1024 4096 8192 --causal 0 1 --rounds 5
