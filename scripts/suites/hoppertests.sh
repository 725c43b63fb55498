# gpu_check.sh suite "hoppertests" (sourced; $out, $commit, ft() and status are set)
# Every GPU test of the Gluon forward (tests/test_hopper.py), after a change to the
# kernels' shared prologue / epilogue (072c1bb: _program_seq, lse row pointer, guarded
# O store), no benches.
timeout 300 python3 -m pytest -q -m gpu -n 4 tests/test_hopper.py -p no:cacheprovider -rf \
  --tb=short >"$out/pytest_hoppertests.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_hoppertests.log" | tail -n 12
