# gpu_check.sh suite "s20b" (sourced; $out, $commit, ft() and status are set)
# Where a one-shot stage C program's time goes (scripts/trace_stage_c.py: each consumer
# warpgroup stamps the global timer at its start, Q ready, the prologue done, the loops
# done and its end). s20a found the persistent grid level with the one-shot one at hd 128
# non-causal, so the ~2 steps of fixed cost per program that a fit over 1k-16k gives are
# not the CTA launch, the Q load or the O store's wait.
# Prediction: the prologue (Q wait + first S GEMM and softmax, both warpgroups at once)
# and the tail (last PV, epilogue) together ~1.5-2 steps; the gap between programs on an
# SM under 1 us; the loop's rate per step the same at 1k and 16k.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_stage_c 240 4 4 tests/test_hopper.py -k "stage_c and not persistent"
timeout 150 python3 scripts/trace_stage_c.py --seqlens 1024 2048 4096 16384 --causal both \
  --csv "$out/trace_c.csv" >"$out/trace_c.log" 2>&1 || status=1
grep -A12 "^per program" "$out/trace_c.log"
grep -E "Error|error" "$out/trace_c.log" | head -5
