# gpu_check.sh suite "bwdtests" (sourced; $out, $commit, ft() and status are set)
# The Gluon backward's GPU tests (both kernels, the fused one, float64 reference,
# poisoned buffers, bitwise repeat), after a change of its tiles or dispatch.
timeout 420 python3 -m pytest -q -m gpu -n 4 tests/test_hopper_bwd.py -p no:cacheprovider -rf \
  --tb=short --durations=5 >"$out/pytest_hopper_bwd.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_hopper_bwd.log" | tail -n 30
