# gpu_check.sh suite "verify" (sourced; $out, $commit, ft() and status are set)
# Correctness only, in one pytest process pool: the gpu tests of every feature beyond the
# foundation's grid (Gluon forward A/B/C and backward, varlen and KV cache with and
# without the cached launch, GPT-2, MiniGPT, HF integration, ring of one). The benches
# live in their own suites. A Gluon barrier bug hangs rather than fails: the timeout
# turns that into a failure with the log so far.
timeout 540 python3 -m pytest -q -m "gpu and not slow" -n 12 tests/test_hopper.py \
  tests/test_hopper_bwd.py tests/test_varlen.py tests/test_kvcache.py tests/test_gpt2.py \
  tests/test_norm.py tests/test_minigpt.py tests/test_hf.py tests/test_ring.py \
  -p no:cacheprovider -rf --tb=short --durations=15 >"$out/pytest_verify.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed|Timeout" "$out/pytest_verify.log" | tail -n 40
