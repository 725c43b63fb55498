# gpu_check.sh suite "pipebwd" (sourced; $out, $commit, ft() and status are set)
# HopperBwdConfig.pipeline, the hd 64 dK/dV step issuing the next iteration's S^T / dP^T
# before this one's softmax and dS (uncapped: 245 / 247 registers, 0 spills, two
# programs per SM). GPU tests (bitwise equal to the uncapped step, and against the
# reference), then backward TFLOPS at hd 64: shipped (capped, three programs per SM) /
# uncapped / pipelined uncapped, at the DESIGN.md shapes (4k, 16k) and the HF Llama's GQA
# shape (8k, 32k).
# Session 10's run (7bec1fb, 2-deep ring): pipelined 0.78-0.90x of uncapped against a
# predicted +5-15%. With two slots, step j + 1 issues the scores of j + 2, whose tiles
# were requested only at the end of step j: every TMA load's latency sat on the path.
# Now both uncapped variants run a 3-deep ring (64 KB, still two programs per SM).
# Prediction: pipelined +5-15% over uncapped-3; against shipped -5% .. +10%.
timeout 150 python3 -m pytest -q -m gpu tests/test_hopper_bwd.py -k "pipelined" \
  -p no:cacheprovider -rf --tb=line >"$out/pytest_pipebwd.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_pipebwd.log" | tail -n 6
for cfg in "" "max_regs=none,num_stages=3" "max_regs=none,pipeline=1,num_stages=3"; do
  tag="${cfg:-shipped}"; tag=${tag//[=,]/_}
  # shellcheck disable=SC2086
  timeout 120 python3 scripts/bench_hopper_bwd.py --head-dims 64 --seqlens 4096 16384 \
    --only gluon-bwd ${cfg:+--config "$cfg"} >"$out/pipe_mha_$tag.log" 2>&1 || status=1
  # shellcheck disable=SC2086
  timeout 120 python3 scripts/bench_hopper_bwd.py --batch 1 --nheads 32 --nheads-kv 8 \
    --head-dims 64 --seqlens 8192 32768 --causal 1 --only gluon-bwd ${cfg:+--config "$cfg"} \
    >"$out/pipe_gqa_$tag.log" 2>&1 || status=1
  echo "== $tag"
  grep -hE "MISMATCH|^B[0-9]+ S.* [01] " "$out/pipe_mha_$tag.log" "$out/pipe_gqa_$tag.log" \
    | cut -c1-48
done
