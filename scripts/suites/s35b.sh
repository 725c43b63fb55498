# gpu_check.sh suite "s35b" (sourced; $out, $commit, ft() and status are set)
# Session 35: where does s35a's 'unspecified launch failure' come from (env_ab --varlen,
# hd 256, one 16k-long sequence, H8, non-causal; 8k passed)? Each call in a fresh process
# with CUDA_LAUNCH_BLOCKING=1, repeated with L2 flushes: the varlen forward on stage C's
# one-shot grid (ring 2, forced) and on stage A (what varlen runs, _varlen_config), the
# backward, two 8k sequences.
d() {  # LABEL ENV... -- ARGS
  local label=$1; shift
  echo "== $label"
  timeout 60 env CUDA_LAUNCH_BLOCKING=1 "$@" 2>&1 | grep -E "^(OK|FAILED)|rror" | head -3 | cut -c1-200
}
source scripts/suites/lib/steps.sh
P="python3 scripts/diag_varlen256.py"
d "one-shot C varlen 16k fwd" FLASHTILE_HOPPER_SCHEDULE=C $P --lens 16384 --repeat 60
d "stage A varlen 16k fwd" $P --lens 16384 --repeat 60
d "stage A varlen 16k + bwd" $P --lens 16384 --bwd
# The shipped hd 256 split ring without the turn waits (s35a: +4-7% non-causal, +0-2%
# causal on an H100): its GPU tests with FLASHTILE_HOPPER_C_PINGPONG=0
FLASHTILE_HOPPER_C_PINGPONG=0 gpu_pytest pytest_nopp256 100 4 4 tests/test_hopper.py \
  -k "hd256_stage_c or no_o_stage_hd256"
