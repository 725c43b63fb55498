# gpu_check.sh suite "s43e" (sourced; $out, $commit, ft() and status are set)
# For session 43: hd 128 non-causal forwards on the persistent split ring at every length
# (16k included) with o_lag / q_early, as shipped. The Gluon forward's GPU tests that
# reach it (windows, softcaps, the public call, the persistent grid, the stages against
# the reference), then the model tests that call it.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_s43e 300 8 6 tests/test_hopper.py -k "persistent or window or softcap or public or vs_reference or varlen"
