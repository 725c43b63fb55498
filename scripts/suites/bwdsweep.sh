# gpu_check.sh suite "bwdsweep" (sourced; $out, $commit, ft() and status are set)
# Tiles of the two-kernel Gluon backward at hd 128 (configs.hopper_bwd_config was first
# guesses; run at bc5bcfc): scripts/bench_hopper_bwd.py at 4k / 16k per --config override.
source scripts/suites/lib/bwd_sweep.sh
bwd_sweep 128 "4096 16384" "gluon-bwd ft-fwd+gluon" "" "num_stages=3" "block_m=32" \
  "dq_block_n=128" "dq_num_stages=3"
