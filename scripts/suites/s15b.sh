# gpu_check.sh suite "s15b" (sourced; $out, $commit, ft() and status are set)
# Stage C at hd 128 now waits for its K tile first (c_k_wait_first, 69d11d1): all of its
# GPU tests (s15a's limit cut them after ~200 passed), then the covering validation grid
# with every shipped default. ~7 min.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_stage_c 300 8 6 tests/test_hopper.py \
  -k "stage_c or c_window or softcap_vs"
validate_covering validate 260
