# gpu_check.sh suite "s44d" (sourced; $out, $commit, ft() and status are set)
# For session 44, after af1efec (hd 128 non-causal windows and softcaps run o_lag /
# q_early by config, not by override): the shipped window / softcap tests through the
# public call (152, hd 64 / 128 / 256 cases whose names hold 128), 12 workers.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_s44d 120 12 6 tests/test_hopper.py \
  -k "(window or softcap) and 128 and not persistent_window and not compiles"
