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
