# gpu_check.sh suite "decode" (sourced; $out, $commit, ft() and status are set)
# issue 5: varlen + KV-cache GPU tests, then the varlen and decode benchmarks (< 7 min)
python3 -m pytest -q -m gpu -n 4 tests/test_varlen.py tests/test_kvcache.py \
  -p no:cacheprovider --durations=10 >"$out/pytest_decode.log" 2>&1 || status=1
# the cached-launch fast path (ops/kvcache.FAST_LAUNCH, on by default since 836b108's
# A/B): the tests and the bench once more with Triton's own launch path, so both stay
# correct and the gain stays measured
FLASHTILE_FAST_LAUNCH=0 python3 -m pytest -q -m gpu -n 4 tests/test_kvcache.py \
  -p no:cacheprovider >"$out/pytest_decode_tritonlaunch.log" 2>&1 || status=1
FLASHTILE_FAST_LAUNCH=0 ft bench --suite decode --quick --commit "$commit" \
  --csv "$out/bench_decode_tritonlaunch.csv" >"$out/bench_decode_tritonlaunch.log" 2>&1 || status=1
ft bench --suite varlen --quick --commit "$commit" --csv "$out/bench_varlen.csv" \
  >"$out/bench_varlen.log" 2>&1 || status=1
ft bench --suite decode --quick --commit "$commit" --csv "$out/bench_decode.csv" \
  --plot "$out/decode_paged_memory.png" >"$out/bench_decode.log" 2>&1 || status=1
tail -n 12 "$out/pytest_decode.log"
tail -n 3 "$out/pytest_decode_tritonlaunch.log"
tail -n 16 "$out/bench_varlen.log"
tail -n 90 "$out/bench_decode.log"
