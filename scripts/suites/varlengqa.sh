# gpu_check.sh suite "varlengqa" (sourced; $out, $commit, ft() and status are set)
# Session 11: the varlen Gluon backward with GQA (B4 packed causal sequences of 8192,
# 6000, 3000, 7000 tokens, H32 KV8): the shipped group loop (uncapped) against one
# dK/dV program per query head (gqa_expand, fixed in 5dae6a9 and GPU-tested in
# s11check), uncapped and (hd 64) under MHA's 168-register cap.
# Predictions from the dense runs (step 28: +4% uncapped, +16% capped at 8k hd 64; +5%
# at hd 128): hd 64 expand uncapped 0 to +5%, capped +10-16%; hd 128 expand +3-6%.
timeout 200 python3 scripts/bench_varlen_gqa.py --head-dims 64 \
  --configs "" "gqa_expand=1" "gqa_expand=1,max_regs=168" >"$out/varlengqa_64.log" 2>&1 \
  || status=1
timeout 150 python3 scripts/bench_varlen_gqa.py --head-dims 128 --configs "" "gqa_expand=1" \
  >"$out/varlengqa_128.log" 2>&1 || status=1
grep -hE "^hd|Error|error" "$out/varlengqa_64.log" "$out/varlengqa_128.log" | tail -n 12
