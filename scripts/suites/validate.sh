# gpu_check.sh suite "validate" (sourced; $out, $commit, ft() and status are set)
# What flash_attn_func runs after a dispatch change, validated (forward and backward
# against the float64 reference over the covering grid), and the ladder's headline
# rungs (v1, portable, production at 4k / 16k). The dispatch suite without its bench.
ft validate --grid covering --csv "$out/validate.csv" >"$out/validate.log" 2>&1 || status=1
tail -n 4 "$out/validate.log"
ft ladder --rungs v1_naive portable production --seqlens 4k 16k --commit "$commit" \
  --csv "$out/ladder_headline.csv" --figures "$out/ladder_headline_figs" \
  >"$out/ladder_headline.log" 2>&1 || status=1
grep -E "^headline|^ceilings" "$out/ladder_headline.log"
