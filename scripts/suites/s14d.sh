# gpu_check.sh suite "s14d" (sourced; $out, $commit, ft() and status are set)
# Session 14: the stage A GPU tests that the time limits of s14b (263 of 356 run) and
# s14c (about 223) cut, with early_expect on in every stage A config: the fully masked
# rows, every stage against the reference, the Gluon against the portable forward, the
# varlen Gluon forward (dense and windowed) and its dispatch. 104 tests, < 3 min.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_stageA_rest 180 8 8 tests/test_hopper.py tests/test_varlen.py -k \
  "fully_masked or stages_vs or vs_portable or varlen_hopper_gpu or varlen_hopper_window_gpu or hopper_auto"
