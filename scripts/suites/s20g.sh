# gpu_check.sh suite "s20g" (sourced; $out, $commit, ft() and status are set)
# s20e's stage C GPU tests again on the warm machine (s20e's run stopped at its time
# limit after 58%, with no failure).
source scripts/suites/lib/steps.sh
gpu_pytest pytest_stage_c 250 8 6 tests/test_hopper.py \
  -k "stage_c or c_window or softcap_vs or hopper_vs_reference"
