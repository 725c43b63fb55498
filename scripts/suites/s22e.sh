# gpu_check.sh suite "s22e" (sourced; $out, $commit, ft() and status are set)
# Session 22: s22d's GPU tests again, whole (s22d's 200 s limit stopped them at ~178 of
# 233, none failed), on 12 workers; then suite s22c (hd 64 causal 1k forward+backward in
# three processes and its host time per layer).
source scripts/suites/lib/steps.sh
gpu_pytest pytest_s22e 280 12 6 tests/test_hopper.py tests/test_varlen.py -k \
  "persistent_window_softcap or hopper_vs_portable or (stages_vs_reference and stageC) \
or k_wait_first or free_running or varlen"
source scripts/suites/s22c.sh
