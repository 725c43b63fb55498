# gpu_check.sh suite "varlenwin" (sourced; $out, $commit, ft() and status are set)
# Session 12 (built after the device time ran out; CPU-checked): sliding windows on the
# Gluon varlen backward (hopper_varlen_backward(..., left=): VARLEN and HAS_LEFT together
# in both kernels; ptxas dK/dV 168 / 255 registers with 72-152 B of spills, dQ 126-173, no
# spills). Tests: the new test_varlen_hopper_bwd_window_gpu (hd 64 / 128, causal or not,
# windows 0 / 100 / 1000, empty and ragged sequences, GQA 16:4) and every varlen window
# and Gluon varlen test beside it. ~3 min.
timeout 300 python3 -m pytest -q -m gpu -n 8 tests/test_varlen.py -k "window or hopper" \
  -p no:cacheprovider -rf --tb=short >"$out/pytest_varlenwin.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_varlenwin.log" | tail -n 8
# Then bench_window.py, which now times stage C's window beside stage A's where the window
# runs A (hd 64, hd 256). Predictions: stage C over stage A +5-20% at hd 64 w1024 (a masked
# left-edge tile in every 10; C runs its softmax under the other warpgroup's GEMMs, as at
# Mistral's shape, +21-32%), 0-10% at hd 64 w4096, -5..+10% at hd 256 (dense C measured
# within 5% of A there). If C wins, window_config takes it at that head dim.
timeout 200 python3 scripts/bench_window.py >"$out/bench_window.log" 2>&1 || status=1
grep -E "TFLOPS|Error" "$out/bench_window.log" | cut -c1-110
