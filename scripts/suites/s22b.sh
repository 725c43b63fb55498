# gpu_check.sh suite "s22b" (sourced; $out, $commit, ft() and status are set)
# Prepared in session 21: why the paired split ring gained 5-8% causal at 1k-8k (s21a /
# s21b) when -3% to +3% was predicted. The causal timeline of the one-shot grid against
# the persistent split ring in the paired order (and K 2 / V 3), hd 128 at 1k / 4k / 16k,
# with trace_stage_c.py's balance columns (SM time idle in the span, the drain past the
# median SM's end). Prediction: the one-shot grid's idle share is the difference (5-8
# points above the paired grid's at 1k-4k, level at 16k), its step rate the same.
timeout 200 python3 scripts/trace_stage_c.py --seqlens 1024 4096 16384 --causal 1 \
  --persistent both --cp-epilogue split k2v3 --paired --csv "$out/trace_causal.csv" \
  >"$out/trace_causal.log" 2>&1 || status=1
grep -A10 "^per program" "$out/trace_causal.log"
grep -E "Error|error" "$out/trace_causal.log" | head -5
