# gpu_check.sh suite "windowbwd" (sourced; $out, $commit, ft() and status are set)
# The sliding window on the two-kernel Gluon backward (hd 64 / 128, FLASHTILE_HOPPER_WINDOW=1;
# built in session 11 after the device time ran out, CPU-checked only): its 96 GPU tests
# against the float64 reference (MHA / MQA, causal or a left bound alone, windows of 0-700
# keys, ragged lengths). ~3-5 min.
export FLASHTILE_HOPPER_WINDOW=1
timeout 400 python3 -m pytest -q -m gpu -n 8 tests/test_hopper_bwd.py -k "window" \
  -p no:cacheprovider -rf --tb=short >"$out/pytest_windowbwd.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_windowbwd.log" | tail -n 8
unset FLASHTILE_HOPPER_WINDOW
