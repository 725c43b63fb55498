# gpu_check.sh suite "models" (sourced; $out, $commit, ft() and status are set)
# GPT-2 on flashtile (issue 6), under 7 minutes: every test of tests/test_gpt2.py and
# tests/test_norm.py on cuda (the gpu ones at 124M, the CPU ones at tiny shapes on the
# GPU), `flashtile generate --selftest`, gpt2-check at 124M (random weights saved by
# transformers and read by our loader) and XL (built in memory) in fp32 and bf16, then
# the generation throughput bench (124M and XL vs HF generate()). Short table last.
python3 -m pytest -q tests/test_gpt2.py tests/test_norm.py -p no:cacheprovider -rf \
  --tb=short --durations=8 >"$out/pytest_models.log" 2>&1 || status=1
ft generate --selftest >"$out/generate_selftest.log" 2>&1 || status=1
ft gpt2-check --config gpt2 >"$out/gpt2_check_124m.log" 2>&1 || status=1
ft gpt2-check --config gpt2-xl --in-memory >"$out/gpt2_check_xl.log" 2>&1 || status=1
ft bench --suite gpt2 --commit "$commit" --csv "$out/bench_gpt2.csv" \
  >"$out/bench_gpt2.log" 2>&1 || status=1

grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_models.log" | tail -n 20
tail -n 5 "$out/generate_selftest.log"
for size in 124m xl; do
  echo "gpt2-check $size:"
  grep -E "^weights:|-> (PASS|FAIL)|^note:|Error|error" "$out/gpt2_check_$size.log" | cut -c1-220
  tail -n 4 "$out/gpt2_check_$size.log"
done
tail -n 22 "$out/bench_gpt2.log"
