# gpu_check.sh suite "s32d" (sourced; $out, $commit, ft() and status are set)
# Session 32: the hd 256 forward (stage A, 128 x 64 tiles, 8 warps, one program per SM)
# with Q in registers (HopperFwdConfig.q_regs, now the shipped hd 256 tiles): the S GEMM
# reads only K from shared memory. By the count in configs._stage_a_tiles the step's
# shared-memory traffic (256 KB) equals the tensor cores' peak work in cycles, so the S
# GEMM is bound by shared memory; Q from registers takes a quarter of it off.
# Prediction: forward +8-15% at hd 256 (545-565 -> 590-640 TFLOPS non-causal at 4k / 16k),
# causal alike from 4k, less at 1k; ptxas 254-255 regs, no spills.
# Then the hd 256 rows of the perf table (all backends, 3 rounds), with the column-split
# backward (s32b / s32c) and this forward.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_fwd256 300 4 8 tests/test_hopper.py \
  -k "256 and (test_hopper_vs_reference or test_hopper_window_vs or test_hopper_softcap or test_stages_vs)"
FLASHTILE_HOPPER_VARLEN=1 gpu_pytest pytest_varlen256 150 4 4 tests/test_varlen.py \
  -k "256 and (hopper or gluon)"
for tag in qregs smem; do
  timeout 100 python3 scripts/bench_hopper.py --head-dims 256 --only gluon-A sdpa-cudnn \
    --rounds 3 $([ $tag = smem ] && echo --a-config q_regs=0) --csv "$out/fwd256_$tag.csv" \
    >"$out/fwd256_$tag.log" 2>&1 || status=1
  echo "== hd 256 stage A, $tag"
  grep -E "MISMATCH|rror" "$out/fwd256_$tag.log" | head -3
  grep -E "^B[0-9]+ S" "$out/fwd256_$tag.log" | grep -vE "config|diff|ms " | cut -c1-110
done
ft bench --head-dims 256 --rounds 3 --commit "$commit" --csv "$out/bench_perf256.csv" \
  >"$out/bench_perf256.log" 2>&1 || status=1
grep -E "D256|matmul" "$out/bench_perf256.log" | grep -v "run/s" | cut -c1-170
