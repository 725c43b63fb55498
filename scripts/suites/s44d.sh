# gpu_check.sh suite "s44d" (sourced; $out, $commit, ft() and status are set)
# For session 44: o_lag alone on hd 128's causal paired split ring (K 3 / V 2), the one
# flag causal calls might take. s43b-s43d's env_ab read it -0.4% / -2.2% at 4k / 8k; s44a's
# timeline read the call 0.484 -> 0.472 ms at 4k (+2.5%) and level at 8k. Five interleaved
# rounds through the public call. Prediction: within +-1% (no gain worth a flag).
source scripts/suites/lib/steps.sh
env_ab fwd_olag_causal 120 --ab "|FLASHTILE_HOPPER_FWD_OVERRIDES=o_lag=1" --measures fwd \
  --head-dims 128 --seqlens 4096 8192 --causal 1 --rounds 5
# then the shipped window / softcap tests through the public call (af1efec: hd 128
# non-causal windows and softcaps now run o_lag / q_early by config, not by override)
gpu_pytest pytest_s44d 130 12 6 tests/test_hopper.py \
  -k "(window or softcap) and 128 and not persistent_window and not compiles"
