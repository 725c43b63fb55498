# gpu_check.sh suite "bwd256tiles" (sourced; $out, $commit, ft() and status are set)
# The portable backward's hd 256 tiles chosen by `tune256` (0e01b69): every GPU grid case
# whose padded head dim is 256 (d192, d256: forward and backward against the float64
# reference), then the forward+backward bench at hd 256 against cuDNN.
timeout 300 python3 -m pytest -q -m gpu -n 4 tests/test_flash.py -k "d192 or d256" \
  -p no:cacheprovider -rf --tb=short >"$out/pytest_bwd256tiles.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_bwd256tiles.log" | tail -n 10
python3 scripts/bench_hopper_bwd.py --head-dims 256 --seqlens 1024 4096 16384 \
  --only portable-bwd ft-fwd+port --csv "$out/bwd256tiles.csv" \
  >"$out/bwd256tiles.log" 2>&1 || status=1
grep -E "MISMATCH|FAILED" "$out/bwd256tiles.log" | head -5
tail -n 8 "$out/bwd256tiles.log" | cut -c1-150
