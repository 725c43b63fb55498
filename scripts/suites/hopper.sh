# gpu_check.sh suite "hopper" (sourced; $out, $commit, ft() and status are set)
# The Gluon sm_90 forward (ops/hopper_fwd.py): its GPU tests, then forward TFLOPS of
# stage C (opt-in ping-pong) / stage B / stage A / the portable kernel / SDPA cuDNN at
# the DESIGN.md shapes (seqlen 4k and 16k, the ones the targets name: keeps the suite
# under 7 minutes with the fifth column). Logs under $out; short table last.
python3 scripts/compile_sm90.py --hopper >"$out/hopper_compile.log" 2>&1 || status=1
tail -n 20 "$out/hopper_compile.log"
timeout 420 python3 -m pytest -q -m gpu -n 4 tests/test_hopper.py -p no:cacheprovider -rf --tb=short \
  --durations=5 >"$out/pytest_hopper.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_hopper.log" | tail -n 40
python3 scripts/bench_hopper.py --head-dims 64 128 256 --seqlens 4096 16384 --csv "$out/bench_hopper.csv" >"$out/bench_hopper.log" 2>&1 \
  || status=1
grep -E "FAILED|MISMATCH|Error" "$out/bench_hopper.log" | head -n 20
tail -n 14 "$out/bench_hopper.log"
# The Gluon sm_90 backward (ops/hopper_bwd.py, opt-in FLASHTILE_HOPPER_BWD=1; the tests
# opt in themselves): GPU tests, then backward and fwd+bwd TFLOPS vs portable and cuDNN.
python3 -m pytest -q -m gpu -n 4 tests/test_hopper_bwd.py -p no:cacheprovider -rf --tb=short \
  --durations=5 >"$out/pytest_hopper_bwd.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_hopper_bwd.log" | tail -n 40
python3 scripts/bench_hopper_bwd.py --csv "$out/bench_hopper_bwd.csv" >"$out/bench_hopper_bwd.log" 2>&1 \
  || status=1
grep -E "FAILED|MISMATCH|Error" "$out/bench_hopper_bwd.log" | head -n 20
tail -n 14 "$out/bench_hopper_bwd.log"
