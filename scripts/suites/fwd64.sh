# gpu_check.sh suite "fwd64" (sourced; $out, $commit, ft() and status are set)
# The Gluon forward at hd 64 after a stage A change (masked tiles first, the causal
# kernel capped at 128 registers so two programs share an SM): compile report, the Gluon
# forward's GPU tests, then TFLOPS of C / B / A / A with the other register choice /
# portable / cuDNN at hd 64, causal 1k..16k and non-causal 4k / 16k.
python3 scripts/compile_sm90.py --hopper >"$out/hopper_compile.log" 2>&1 || status=1
grep -E "d64" "$out/hopper_compile.log"
timeout 420 python3 -m pytest -q -m gpu -n 4 tests/test_hopper.py -p no:cacheprovider -rf \
  --tb=short --durations=5 >"$out/pytest_hopper.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_hopper.log" | tail -n 40
python3 scripts/bench_hopper.py --head-dims 64 --seqlens 1024 2048 4096 8192 16384 --causal 1 \
  --csv "$out/bench_fwd64_causal.csv" >"$out/bench_fwd64_causal.log" 2>&1 || status=1
grep -E "FAILED|MISMATCH|Error" "$out/bench_fwd64_causal.log" | head -n 20
tail -n 7 "$out/bench_fwd64_causal.log"
python3 scripts/bench_hopper.py --head-dims 64 --seqlens 4096 16384 --causal 0 \
  --csv "$out/bench_fwd64.csv" >"$out/bench_fwd64.log" 2>&1 || status=1
grep -E "FAILED|MISMATCH|Error" "$out/bench_fwd64.log" | head -n 20
tail -n 4 "$out/bench_fwd64.log"
