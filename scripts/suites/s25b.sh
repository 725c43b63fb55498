# gpu_check.sh suite "s25b" (sourced; $out, $commit, ft() and status are set)
# Session 25: the decode tiles chosen from s25a (hd 64 small tile ring 4; short caches
# <= 1k keys: hd 128 16 x 32 w4 s4, hd 64 wide 16 x 128 w4 s3): KV-cache GPU tests, then
# the decode bench (eager, every shape). Prediction: the s25a cells move as in the
# sweep (hd 64 GQA batch 16 / 64 0.94-0.96x -> 0.96-0.99x; 1k at batch 16 / 64 0.85-0.89x
# -> 0.95-0.99x), the other cells unchanged within +-2%. ~3 min.
python3 -m pytest -q -m gpu -n 4 tests/test_kvcache.py -p no:cacheprovider \
  >"$out/pytest_kvcache.log" 2>&1 || status=1
ft bench --suite decode --quick --commit "$commit" --csv "$out/bench_decode.csv" \
  >"$out/bench_decode.log" 2>&1 || status=1
tail -n 4 "$out/pytest_kvcache.log"
tail -n 90 "$out/bench_decode.log"
