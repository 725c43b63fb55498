# gpu_check.sh suite "pipebwd" (sourced; $out, $commit, ft() and status are set)
# Built at the end of session 10 (CPU-compiled only): HopperBwdConfig.pipeline, the hd 64
# dK/dV step issuing the next iteration's S^T / dP^T before this one's softmax and dS
# (ptxas, sm_90: 245 / 248 registers, 0 spills uncapped; 788-900 B of spills under the
# 168 cap, so it runs at two programs per SM). GPU tests (bitwise equal to the uncapped
# step, and against the reference), then backward TFLOPS at hd 64: shipped (capped, three
# programs per SM) / uncapped / pipelined uncapped, at the DESIGN.md shapes (4k, 16k) and
# the HF Llama's GQA shape (8k, 32k). Predictions: pipelined +5-15% over uncapped (the
# score GEMMs overlap the softmax inside a program); against the shipped capped kernel
# -5% .. +10%.
timeout 150 python3 -m pytest -q -m gpu tests/test_hopper_bwd.py -k "pipelined" \
  -p no:cacheprovider -rf --tb=short >"$out/pytest_pipebwd.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_pipebwd.log" | tail -n 6
for cfg in "" "max_regs=none" "max_regs=none,pipeline=1"; do
  tag="${cfg:-shipped}"; tag=${tag//[=,]/_}
  # shellcheck disable=SC2086
  timeout 120 python3 scripts/bench_hopper_bwd.py --head-dims 64 --seqlens 4096 16384 \
    --only gluon-bwd ${cfg:+--config "$cfg"} >"$out/pipe_mha_$tag.log" 2>&1 || status=1
  # shellcheck disable=SC2086
  timeout 120 python3 scripts/bench_hopper_bwd.py --batch 1 --nheads 32 --nheads-kv 8 \
    --head-dims 64 --seqlens 8192 32768 --causal 1 --only gluon-bwd ${cfg:+--config "$cfg"} \
    >"$out/pipe_gqa_$tag.log" 2>&1 || status=1
  echo "== $tag"
  grep -hE "MISMATCH|^B[0-9]+ S" "$out/pipe_mha_$tag.log" "$out/pipe_gqa_$tag.log" | cut -c1-60
done
