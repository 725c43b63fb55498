# gpu_check.sh suite "gqaship" (sourced; $out, $commit, ft() and status are set)
# Session 10: gqa_expand shipped for dense GQA at hd 64 / 128 (configs.hopper_bwd_config;
# measured in `gqaexp` at 5114cb8 through overrides). The Gluon backward's GPU tests with
# it the default (their GQA cases now take the expanded programs), then the short
# backward bench at the HF shape as shipped. Prediction: tests pass; B1 H32 KV8 D64
# causal 8k / 32k ~362 / ~373 TFLOPS as measured with the overrides.
timeout 300 python3 -m pytest -q -m gpu -n 8 tests/test_hopper_bwd.py -p no:cacheprovider -rf \
  --tb=short >"$out/pytest_gqaship.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_gqaship.log" | tail -n 8
timeout 100 python3 scripts/bench_hopper_bwd.py --batch 1 --nheads 32 --nheads-kv 8 \
  --head-dims 64 --seqlens 8192 32768 --causal 1 --only gluon-bwd \
  >"$out/gqaship_bench.log" 2>&1 || status=1
grep -E "MISMATCH|^B1 S" "$out/gqaship_bench.log" | tail -n 3 | cut -c1-70
