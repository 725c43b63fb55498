# gpu_check.sh suite "cwindow" (sourced; $out, $commit, ft() and status are set)
# Session 12: sliding windows on stage C (hopper_fwd.window_config now returns the
# schedule's stage C config where it runs C: hd 128 non-causal from 1k, causal from 4k).
# Each consumer warpgroup masks its own left-edge tiles; the producer loads from the
# first warpgroup's left edge; the second releases the tiles left of its own. ptxas
# (sm_90, CPU): 168 registers per consumer thread, no spills, as the shipped stage C; the
# shipped stage C kernels' PTX instructions are unchanged (one more u32 parameter).
# Tests: every window test (stage A and now C where scheduled, the full grid's window
# cases, varlen) plus test_hopper_c_window_vs_reference (stage C forced at hd 64 / 128 /
# 256, 88 cases). Bench: bench_window.py, with stage A's window beside C's.
# Predictions (forward TFLOPS, Mistral's shape, hd 128 H32 KV8 causal w4096, 16k / 32k):
#   stage C 520-560 against stage A's 441-465 (+12-20%; dense causal C 586 vs A ~483)
#   forward + backward +3-5% (the forward is ~1/4 of its time)
#   hd 64 / hd 256 rows unchanged (stage A there)
timeout 360 python3 -m pytest -q -m gpu -n 8 tests/test_hopper.py tests/test_flash.py \
  tests/test_varlen.py \
  -k "window or (grid_full_gpu and win)" -p no:cacheprovider -rf --tb=short \
  >"$out/pytest_cwindow.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_cwindow.log" | tail -n 8
timeout 170 python3 scripts/bench_window.py >"$out/bench_cwindow.log" 2>&1 || status=1
grep -E "TFLOPS|Error" "$out/bench_cwindow.log" | cut -c1-110
