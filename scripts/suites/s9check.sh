# gpu_check.sh suite "s9check" (sourced; $out, $commit, ft() and status are set)
# What session 9 changed after its last GPU call (CPU-checked only): `tma_desc` builds
# TensorDescriptors without re-validating (every Gluon launch goes through it), and the
# varlen backward's auto rule takes the Gluon kernels from 2k at hd 128 non-causal. The
# Gluon forward / backward / varlen GPU tests (one pytest pool), then the short dense
# forward+backward's kernel time against its wall time (scripts/diag_fwd_bwd.py; ac48923
# read 1586 us for 551 us of kernels at B25 S640 H16 D128 causal) and the varlen bench.
# Session 10 adds the host profile (own time per call, cProfile) of the first shape.
# Prediction: tests pass; the 640-token forward+backward 5-15% faster (host), kernels
# unchanged; varlen hd 128 non-causal 2k forward+backward ~+16% (305 vs 261 TFLOPS).
timeout 330 python3 -m pytest -q -m gpu -n 8 tests/test_hopper.py tests/test_hopper_bwd.py \
  tests/test_varlen.py -k "not grid_full" -p no:cacheprovider -rf --tb=short \
  >"$out/pytest_s9check.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_s9check.log" | tail -n 12
timeout 100 python3 scripts/diag_fwd_bwd.py 25,640,16,128,1 16,1024,16,128,1 \
  >"$out/diag_s9check.log" 2>&1 || status=1
grep -E "^(B[0-9]+ S|host )" "$out/diag_s9check.log"
grep -A 26 -- "-- cProfile" "$out/diag_s9check.log" | head -n 28 | cut -c1-150
timeout 120 python3 -m flashtile.cli bench --suite varlen --quick --commit "$commit" \
  --csv "$out/bench_varlen_s9check.csv" >"$out/bench_varlen_s9check.log" 2>&1 || status=1
grep -E "^(64|128) .*fwd_bwd" "$out/bench_varlen_s9check.log" | cut -c1-100
