# gpu_check.sh suite "core" (sourced; $out, $commit, ft() and status are set)
python3 -m pytest -q -m gpu -n 12 tests/test_flash.py tests/test_api.py tests/test_sdpa.py tests/test_bench.py tests/test_ladder.py -p no:cacheprovider --durations=10 \
  >"$out/pytest_gpu.log" 2>&1 || status=1
tail -n 15 "$out/pytest_gpu.log"
ft validate --grid covering --csv "$out/validate.csv" >"$out/validate.log" 2>&1 || status=1
tail -n 16 "$out/validate.log"
ft bench --no-bwd --backends flashtile sdpa-flash sdpa-cudnn --commit "$commit" \
  --csv "$out/bench_core.csv" >"$out/bench_core.log" 2>&1 || status=1
tail -n 40 "$out/bench_core.log"
