# gpu_check.sh suite "s23c" (sourced; $out, $commit, ft() and status are set)
# Session 23. 1. s22e's GPU tests of session 22's default (hd 128 non-causal split ring K 2
#    / V 3 below 16k) again, with test names in the log: s23b's run of them reached ~90%
#    in its 250 s with one failure whose name the cut log lost. 2. The covering validation
#    grid on this tree's defaults (not run since K 2 / V 3 shipped).
source scripts/suites/lib/steps.sh
gpu_pytest pytest_s23c 300 12 12 tests/test_hopper.py tests/test_varlen.py -vv -k \
  "persistent_window_softcap or hopper_vs_portable or (stages_vs_reference and stageC) \
or k_wait_first or free_running or varlen"
grep -E " FAILED " "$out/pytest_s23c.log" | head -5
validate_covering validate 200
