# gpu_check.sh suite "exp2emu" (sourced; $out, $commit, ft() and status are set)
# Stage A with a quarter (or more) of the softmax's exponentials on the FMA pipe
# (HopperFwdConfig.exp2_emu, _gluon_common.exp2_fma; FA4's trick). ncu at 75f7b8b (hd 64
# causal 4k, stage A capped): MUFU.EX2 26.5% of the warp stall samples, tensor pipe 45%.
# sm_90 ptxas: emu 1 keeps 128 registers at hd 64 (causal: the same 72 B of spills as
# without; non-causal none), emu 2 needs 132 non-causal (one program per SM then).
# GPU tests of the emulated variants, then forward TFLOPS of stage A at emu 0 / 1 / 2 / 4
# beside cuDNN at hd 64. Prediction: emu 1 +3-8% at hd 64 (causal and not) at 4k / 16k,
# which would lift hd 64 causal from 0.96-0.99x cuDNN to about 1.0-1.05x; emu 2 and 4
# lose (the FMA pipe becomes the bottleneck; non-causal also loses its second program).
timeout 200 python3 -m pytest -q -m gpu -n 4 tests/test_hopper.py -k exp2_emu \
  -p no:cacheprovider -rf --tb=short >"$out/pytest_exp2emu.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_exp2emu.log" | tail -n 12
for emu in 0 1 2 4; do
  timeout 150 python3 scripts/bench_hopper.py --head-dims 64 --seqlens 1024 4096 16384 \
    --only gluon-A --a-config exp2_emu=$emu --csv "$out/exp2emu_$emu.csv" \
    >"$out/exp2emu_$emu.log" 2>&1 || status=1
  echo "== exp2_emu=$emu"
  grep -E "gluon-A |sdpa-cudnn" "$out/exp2emu_$emu.log" | grep -E "TFLOPS" | cut -c1-90
done
