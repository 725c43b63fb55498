# gpu_check.sh suite "fusedbwd" (sourced; $out, $commit, ft() and status are set)
# The Gluon backward, two-kernel and fused (dQ through fp32 atomics, ordered or racing):
# its GPU tests (both kernels), then scripts/bench_hopper_bwd.py at 1k/4k/16k beside the
# portable backward and SDPA cuDNN, with the gradient / bitwise-repeat check per shape.
python3 -m pytest -q -m gpu -n 4 tests/test_hopper_bwd.py -p no:cacheprovider -rf \
  --tb=short >"$out/pytest_hopper_bwd.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_hopper_bwd.log" | tail -n 15
python3 scripts/bench_hopper_bwd.py --csv "$out/bench_hopper_bwd.csv" \
  >"$out/bench_hopper_bwd.log" 2>&1 || status=1
grep -E "FAILED|MISMATCH|Error|rel\|" "$out/bench_hopper_bwd.log" | head -n 30
tail -n 15 "$out/bench_hopper_bwd.log"
