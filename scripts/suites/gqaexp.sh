# gpu_check.sh suite "gqaexp" (sourced; $out, $commit, ft() and status are set)
# Session 10, issue 9: the Gluon dK/dV kernel with one program per query head under GQA
# (HopperBwdConfig.gqa_expand; per-head dK / dV partials summed over each group), the
# programs then MHA's, with MHA's 168-register cap at hd 64. hfcap (5d10687) read the HF
# Llama's attention backward (B1 H32 KV8 D64 causal) at 311.8 / 354.8 TFLOPS (8k / 32k,
# shipped, uncapped) against 365.0 for the same shape without GQA (capped).
# Predictions: expand + cap at hd 64: +10-17% at 8k (toward the MHA number; the sums
# cost ~2%), 0-7% at 32k; expand uncapped ~+5% at 8k; hd 128 (H32 KV8) 0-10% at 8k. The
# HF training step with it: 0.95x sdpa -> 0.97-0.98x at 8k. GPU tests of the mode first.
timeout 150 python3 -m pytest -q -m gpu tests/test_hopper_bwd.py -k gqa_expand -p no:cacheprovider \
  -rf --tb=short >"$out/pytest_gqaexp.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_gqaexp.log" | tail -n 6
for spec in "64:8192 32768:" "64:8192 32768:gqa_expand=1" "64:8192 32768:gqa_expand=1,max_regs=168" \
            "128:8192:" "128:8192:gqa_expand=1"; do
  hd=${spec%%:*}; rest=${spec#*:}; seqlens=${rest%%:*}; cfg=${rest#*:}
  tag="d${hd}_${cfg:-shipped}"; tag=${tag//[=,]/_}
  # shellcheck disable=SC2086
  timeout 120 python3 scripts/bench_hopper_bwd.py --batch 1 --nheads 32 --nheads-kv 8 \
    --head-dims "$hd" --seqlens $seqlens --causal 1 --only gluon-bwd ${cfg:+--config "$cfg"} \
    --csv "$out/gqaexp_$tag.csv" >"$out/gqaexp_$tag.log" 2>&1 || status=1
  echo "== $tag"; grep -E "MISMATCH|FAILED|Error" "$out/gqaexp_$tag.log" | head -3
  grep -E "^B1 S" "$out/gqaexp_$tag.log" | tail -n 2 | cut -c1-70
done
timeout 200 python3 -m flashtile.cli bench --suite hf --hf-contexts 8192 32768 --hf-reps 2 \
  --hf-backends flashtile sdpa --commit "$commit" --csv "$out/bench_hf.csv" \
  >"$out/bench_hf.log" 2>&1 || status=1
grep "^|" "$out/bench_hf.log"
FLASHTILE_HOPPER_BWD_OVERRIDES=gqa_expand=1,max_regs=168 timeout 150 python3 -m flashtile.cli \
  bench --suite hf --hf-contexts 8192 32768 --hf-reps 2 --hf-backends flashtile \
  --commit "$commit" --csv "$out/bench_hf_expand.csv" >"$out/bench_hf_expand.log" 2>&1 || status=1
echo "== HF with gqa_expand=1,max_regs=168"; grep "^|" "$out/bench_hf_expand.log"
