# gpu_check.sh suite "decodek" (sourced; $out, $commit, ft() and status are set)
# Session 10, issue 5: where batch-1 decode's ~15 us at zero bytes goes
# (scripts/decode_kernels.py): per-kernel GPU time (profiler) after a dirty and after a
# clean L2 flush, one call replayed from a CUDA graph, and L layers' calls in one graph
# per layer; flashtile with the combine launched by PDL off / on, combine chunk 16 / 32.
# Runs: a6549c9 (split 11.5 + combine 3.5 us at 8k GQA, cuDNN 10.0 + 3.8); 96c0b31 (clean
# flush: split 9.9 at 8k, cuDNN 8.7; the combine launched with PDL lost 3 us per layer,
# removed; combine chunk 32 kept). Third run: split-kernel tiles at B1 GQA 8:1 hd 128
# (16x64 w4 s3 two per SM, 16x128 w4 s2, 16x64 w8 s4 against the shipped 16x128 w8 s3).
# Prediction: within +-10% of the shipped tile at 32k-128k (bandwidth-bound there); at 8k
# the two-per-SM 16x64 tile may take 1-2 us off the split kernel (more bytes in flight
# per SM earlier), the others not. KV-cache GPU tests with combine chunk 32.
timeout 200 python3 -m pytest -q -m gpu -n 8 tests/test_kvcache.py -p no:cacheprovider -rf \
  --tb=short >"$out/pytest_decodek.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_decodek.log" | tail -n 8
timeout 300 python3 scripts/decode_kernels.py >"$out/decode_kernels.log" 2>&1 || status=1
grep -E "^g[0-9]|^\|" "$out/decode_kernels.log" | cut -c1-200
