# gpu_check.sh suite "window" (sourced; $out, $commit, ft() and status are set)
# Sliding windows on the Gluon forward (stage A with the window's left-edge tiles,
# HAS_LEFT; ops/hopper_fwd.window_config), opt-in through FLASHTILE_HOPPER_WINDOW=1
# until this suite has passed whole. Shipped configs' registers are unchanged; the
# window builds take 128-227 registers, with 192 B of spills in the capped hd 64 causal
# one.
# Session 11 (62c84d1): bench_window.py 1.07-1.27x the portable kernel (prediction
# 1.2-1.6x); 247 of the 259 GPU tests passed before the suite's 200 s pytest limit cut
# the rest. Hence this limit, and validate with the window path on. ~8 min on 1 GPU.
export FLASHTILE_HOPPER_WINDOW=1
timeout 420 python3 -m pytest -q -m gpu -n 8 tests/test_hopper.py tests/test_flash.py \
  -k "window or (grid_full_gpu and win)" -p no:cacheprovider -rf --tb=short \
  >"$out/pytest_window.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_window.log" | tail -n 8
timeout 330 python3 -m flashtile.cli validate --grid covering >"$out/validate_window.log" \
  2>&1 || status=1
tr '\r' '\n' <"$out/validate_window.log" | grep -v "it/s\]$" | tail -n 3
timeout 150 python3 scripts/bench_window.py >"$out/bench_window.log" 2>&1 || status=1
grep -E "TFLOPS|Error" "$out/bench_window.log" | cut -c1-110
unset FLASHTILE_HOPPER_WINDOW
