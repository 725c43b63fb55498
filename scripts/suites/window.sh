# gpu_check.sh suite "window" (sourced; $out, $commit, ft() and status are set)
# Sliding windows on the Gluon forward (stage A with the window's left-edge tiles,
# HAS_LEFT; ops/hopper_fwd.window_config), opt-in through FLASHTILE_HOPPER_WINDOW=1
# until this suite has passed whole. Shipped configs' registers are unchanged; the
# window builds take 128-227 registers, with 192 B of spills in the capped hd 64 causal
# one.
# Session 11 (62c84d1): bench_window.py 1.07-1.27x the portable kernel (prediction
# 1.2-1.6x); 247 of the 259 GPU tests passed before the suite's 200 s pytest limit cut
# the rest. Hence this limit; validate with the window path on is suite windowval.
# Built after that run (CPU-checked: shipped PTX unchanged, tile classes brute-forced):
# the window on the two-kernel Gluon backward at hd 64 / 128 (dK/dV drops the query
# tiles past the window's far edge and masks the edge; dQ visits key tiles from the
# window's left edge), under the same switch: its GPU tests in suite windowbwd, its
# fwd+bwd rows in this bench. Prediction: fwd+bwd 1.2-1.5x the portable backward's path
# at hd 64 / 128. And the window on the Gluon varlen forward (test_varlen window cases).
export FLASHTILE_HOPPER_WINDOW=1
timeout 380 python3 -m pytest -q -m gpu -n 8 tests/test_hopper.py tests/test_flash.py \
  tests/test_varlen.py \
  -k "window or (grid_full_gpu and win)" -p no:cacheprovider -rf --tb=short \
  >"$out/pytest_window.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_window.log" | tail -n 8
timeout 180 python3 scripts/bench_window.py >"$out/bench_window.log" 2>&1 || status=1
grep -E "TFLOPS|Error" "$out/bench_window.log" | cut -c1-110
unset FLASHTILE_HOPPER_WINDOW
