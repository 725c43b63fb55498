# gpu_check.sh suite "s43b" (sourced; $out, $commit, ft() and status are set)
# For session 43: the persistent stage C's per-item fixed cost at hd 128 (~4.9 us per
# item against 1.77 us per key step, trace_stage_c.py, s21a). Opt-in, docs/performance.md
# step 102: HopperFwdConfig.o_lag (the O store's wait moved to the next item's epilogue),
# q_early (the next Q loaded before the last PV), boundary_step (non-causal: Q / O tiles
# taking turns, the next item's first S GEMM and softmax under the last PV). GPU tests
# against the reference, then the forward A/B through the public call (5 rounds).
source scripts/suites/lib/steps.sh
gpu_pytest pytest_s43b 180 8 4 tests/test_hopper.py -k "persistent_lag"
ov=FLASHTILE_HOPPER_FWD_OVERRIDES
env_ab fwd_lag_nc 150 --ab "|$ov=o_lag=1,q_early=1|$ov=boundary_step=1" --measures fwd \
  --head-dims 128 --seqlens 1024 4096 8192 --causal 0 --rounds 5
env_ab fwd_lag_c 100 --ab "|$ov=o_lag=1|$ov=o_lag=1,q_early=1" --measures fwd \
  --head-dims 128 --seqlens 4096 8192 --causal 1 --rounds 5
# 16k runs the one-shot grid (the split ring's step was 1-2% slower there, s21a / s22a);
# with the boundary step the split ring may win there too (prediction: level to +1%)
split16=persistent=1,num_stages=2,v_stages=3
env_ab fwd_lag_16k 80 --ab "|$ov=$split16|$ov=$split16,boundary_step=1" --measures fwd \
  --head-dims 128 --seqlens 16384 --causal 0 --rounds 5
