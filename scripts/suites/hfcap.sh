# gpu_check.sh suite "hfcap" (sourced; $out, $commit, ft() and status are set)
# The HF training step got slower at af2ffb4 (0.95x / 0.93x sdpa at 8k / 32k at e8aa9d8,
# 0.91x / 0.88x after), where the only hd 64 change was the dK/dV kernel's 168-register
# cap. A/B at the model's attention shape (B1, H32, KV8 (GQA 4:1), D64, causal) and at the
# same shape without GQA, then the HF bench with and without the cap
# (FLASHTILE_HOPPER_BWD_OVERRIDES=max_regs=none).
for kv in 8 32; do
  for cfg in "" "max_regs=none"; do
    tag="kv${kv}_${cfg:-shipped}"; tag=${tag//=/_}
    seqlens="8192 32768"; [ "$kv" = 32 ] && seqlens="8192"
    # shellcheck disable=SC2086
    python3 scripts/bench_hopper_bwd.py --batch 1 --nheads 32 --nheads-kv "$kv" --head-dims 64 \
      --seqlens $seqlens --causal 1 --only gluon-bwd ${cfg:+--config "$cfg"} \
      --csv "$out/hfshape_$tag.csv" >"$out/hfshape_$tag.log" 2>&1 || status=1
    echo "== $tag"; grep -E "MISMATCH|FAILED" "$out/hfshape_$tag.log" | head -3
    grep -E "^B1 S" "$out/hfshape_$tag.log" | tail -n 2 | cut -c1-60
  done
done
ft bench --suite hf --hf-contexts 8192 32768 --hf-reps 2 --hf-backends flashtile sdpa \
  --commit "$commit" --csv "$out/bench_hf.csv" >"$out/bench_hf.log" 2>&1 || status=1
grep "^|" "$out/bench_hf.log"
FLASHTILE_HOPPER_BWD_OVERRIDES=max_regs=none ft bench --suite hf --hf-contexts 8192 32768 \
  --hf-reps 2 --hf-backends flashtile --commit "$commit" --csv "$out/bench_hf_nocap.csv" \
  >"$out/bench_hf_nocap.log" 2>&1 || status=1
echo "== without the cap"; grep "^|" "$out/bench_hf_nocap.log"
