# gpu_check.sh suite "decodecheck" (sourced; $out, $commit, ft() and status are set)
# After a decode tile / split-heuristic change: the KV-cache GPU tests, then the decode
# bench (the `decode` suite without its varlen part and its second launch path), ~3 min.
timeout 200 python3 -m pytest -q -m gpu -n 4 tests/test_kvcache.py -p no:cacheprovider -rf \
  --tb=short >"$out/pytest_kvcache.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_kvcache.log" | tail -n 10
ft bench --suite decode --quick --commit "$commit" --csv "$out/bench_decode.csv" \
  >"$out/bench_decode.log" 2>&1 || status=1
grep -E "^D(64|128) " "$out/bench_decode.log" | cut -c1-100
sed -n '/^split-KV/,/^128k/p' "$out/bench_decode.log"
grep -A 6 "^batch 1 decode" "$out/bench_decode.log" | cut -c1-200
