# gpu_check.sh suite "afinal" (sourced; $out, $commit, ft() and status are set)
# Stage A's GPU tests (reference grid, stages, fully masked rows) and the stage A
# before/after bench (suite a1k).
timeout 150 python3 -m pytest -q -m gpu -n 6 tests/test_hopper.py -k "vs_reference or stages or masked" \
  -p no:cacheprovider -rf --tb=short >"$out/pytest_hopper_a.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_hopper_a.log" | tail -n 20
source scripts/suites/a1k.sh
