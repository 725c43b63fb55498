# gpu_check.sh suite "hfbwd" (sourced; $out, $commit, ft() and status are set)
# Gluon backward tiles at the HF Llama's attention shape: B1, H32, KV8 (GQA 4:1), D64,
# causal, 8k / 32k. The hd 64 tiles were chosen on MHA shapes; with GQA the register cap
# measured 12-19% slower (`hfcap`), so the choice may differ here too. Candidates:
# shipped (uncapped under GQA), a ring of 3, the two-warpgroup 128-key dK/dV tile (Q/dO
# streamed once per 128 keys instead of per 64), lse / delta a step ahead, the cap.
for cfg in "" "num_stages=3" "block_n=128,num_warps=8,num_stages=3" "prefetch_stats=1" \
           "max_regs=168"; do
  tag=$(echo "${cfg:-shipped}" | md5sum | cut -c1-6)
  python3 scripts/bench_hopper_bwd.py --batch 1 --nheads 32 --nheads-kv 8 --head-dims 64 \
    --seqlens 8192 32768 --causal 1 --only gluon-bwd ${cfg:+--config "$cfg"} \
    --csv "$out/hfbwd_$tag.csv" >"$out/hfbwd_$tag.log" 2>&1 || status=1
  echo "== ${cfg:-shipped} ($tag)"; grep -E "MISMATCH|FAILED" "$out/hfbwd_$tag.log" | head -3
  grep -E "^B1 S" "$out/hfbwd_$tag.log" | tail -n 2 | cut -c1-60
done
