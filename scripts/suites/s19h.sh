# gpu_check.sh suite "s19h" (sourced; $out, $commit, ft() and status are set)
# After the review commit: the dropout GPU tests whose A/B loops moved into tests/sm90.py
# (training_runs, assert_within_2m6), and the Gluon forward's (its _drop_producer now
# orders tiles through _step_tile; PTX of the 16 dropout builds unchanged).
source scripts/suites/lib/steps.sh
gpu_pytest pytest_hopper_dropout 150 4 6 tests/test_hopper_dropout.py
gpu_pytest pytest_gluon_bits 100 4 4 tests/test_hopper_bwd.py -k "dropout"
