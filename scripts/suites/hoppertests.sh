# gpu_check.sh suite "hoppertests" (sourced; $out, $commit, ft() and status are set)
# Every GPU test of the Gluon forward (tests/test_hopper.py), after a change to the
# kernels' shared prologue / epilogue (072c1bb: _program_seq, lse row pointer, guarded
# O store), no benches. Since session 14 there are about 660 of them: s14b ran 263 of
# stage A's 356 in 170 s at -n 8, so the whole file wants most of a call (limit 540 s;
# not yet timed whole).
source scripts/suites/lib/steps.sh
gpu_pytest pytest_hoppertests 540 8 12 tests/test_hopper.py
