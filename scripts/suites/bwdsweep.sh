# gpu_check.sh suite "bwdsweep" (sourced; $out, $commit, ft() and status are set)
# Tiles of the two-kernel Gluon backward at hd 128 (configs.hopper_bwd_config was first
# guesses): scripts/bench_hopper_bwd.py at 4k / 16k per --config override, one line each.
for cfg in "" "num_stages=3" "block_m=32" "dq_block_n=128" "dq_num_stages=3"; do
  tag=${cfg:-shipped}
  python3 scripts/bench_hopper_bwd.py --head-dims 128 --seqlens 4096 16384 \
    --only gluon-bwd ft-fwd+gluon ${cfg:+--config "$cfg"} --csv "$out/bwdsweep_${tag//[=,]/_}.csv" \
    >"$out/bwdsweep_${tag//[=,]/_}.log" 2>&1 || echo "config $tag failed (see log)"
  echo "== $tag"
  tail -n 4 "$out/bwdsweep_${tag//[=,]/_}.log" | cut -c1-56
done
