# gpu_check.sh suite "s44c" (sourced; $out, $commit, ft() and status are set)
# s43e's GPU tests again, whose 200 s limit cut them at ~70% (no failure by then) on a
# cold H100 in session 44: ~408 tests (the validation grid through the shipped schedule,
# windows at hd 128, windows / softcaps on the persistent grid with and without o_lag /
# q_early, the lag tests, Gluon against portable), 12 workers.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_s44c 420 12 8 tests/test_hopper.py \
  -k "persistent_window_softcap or persistent_lag or hopper_vs_reference or hopper_vs_portable or (window and 128)"
