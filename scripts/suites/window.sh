# gpu_check.sh suite "window" (sourced; $out, $commit, ft() and status are set)
# Session 11: sliding windows on the Gluon forward (stage A with the window's left-edge
# tiles, HAS_LEFT; ops/hopper_fwd.window_config; shipped configs' registers unchanged,
# the window builds 128-227 registers, 192 B of spills in the capped hd 64 causal one).
# GPU tests: the new window cases (hd 64/128/256, causal or a left bound alone, windows
# of 0-700 keys, ragged lengths) and the full grid's window cases, which now route to
# stage A where the table runs a Gluon stage. Then scripts/bench_window.py.
# Prediction: Gluon 1.2-1.6x the portable kernel's TFLOPS on the kept pairs (dense
# causal: stage A 1.05-1.15x portable at hd 64 from 4k, more at hd 128 / 256), and
# 0.85-1.0x the same kernel's dense causal TFLOPS (the window adds a masked left edge
# per query tile: 1-2 of 8-32 tiles).
timeout 200 python3 -m pytest -q -m gpu -n 8 tests/test_hopper.py tests/test_flash.py \
  -k "window or (grid_full_gpu and win)" -p no:cacheprovider -rf --tb=short \
  >"$out/pytest_window.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_window.log" | tail -n 8
timeout 150 python3 scripts/bench_window.py >"$out/bench_window.log" 2>&1 || status=1
grep -E "TFLOPS|Error" "$out/bench_window.log" | cut -c1-110
