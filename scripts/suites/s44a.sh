# gpu_check.sh suite "s44a" (sourced; $out, $commit, ft() and status are set)
# For session 44: why HopperFwdConfig.q_early cost 4-8% on the causal paired split ring
# (hd 128, K 3 / V 2) while it gained 1-3% non-causal (s43b). The persistent grid's
# timeline per work item (scripts/trace_stage_c.py --paired) at causal 4k / 8k, without
# and with the flags; then non-causal for reference. Prediction: with q_early the causal
# items' tail (last PV to end) or the next item's Q wait grows where the shorter item's
# warpgroup runs its empty turns.
source scripts/suites/lib/steps.sh
for ov in "" "o_lag=1" "o_lag=1,q_early=1"; do
  echo "== overrides '$ov'"
  timeout 90 python3 scripts/trace_stage_c.py --causal 1 --persistent 1 --cp-epilogue split \
    --paired --seqlens 4096 8192 --overrides "$ov" --csv "$out/trace_c_${ov//[,=]/_}.csv" \
    >"$out/trace_c_${ov//[,=]/_}.log" 2>&1 || status=1
  grep -E "^hd .*: [0-9.]+ \|" "$out/trace_c_${ov//[,=]/_}.log"
done
