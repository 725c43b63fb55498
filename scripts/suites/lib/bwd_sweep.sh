# Sourced by the backward-tile sweep suites (bwdsweep, bwd64sweep, bwd128sweep).
# bwd_sweep HEAD_DIM "SEQLENS" "COLUMNS" CONFIG...: scripts/bench_hopper_bwd.py once per
# --config override ("" = the shipped tiles), the given --only columns, logs and CSVs
# under $out as bwd<HEAD_DIM>_<tag>.*, tag a hash of the override; the table per config.
bwd_sweep() {
  local hd=$1 seqlens=$2 columns=$3 cfg tag
  shift 3
  for cfg in "$@"; do
    tag=$(echo "${cfg:-shipped}" | md5sum | cut -c1-6)
    # shellcheck disable=SC2086
    python3 scripts/bench_hopper_bwd.py --head-dims "$hd" --seqlens $seqlens \
      --only $columns ${cfg:+--config "$cfg"} --csv "$out/bwd${hd}_$tag.csv" \
      >"$out/bwd${hd}_$tag.log" 2>&1 || echo "config $tag failed (see log)"
    echo "== ${cfg:-shipped} ($tag)"
    grep -E "MISMATCH|FAILED" "$out/bwd${hd}_$tag.log" | head -3
    tail -n 7 "$out/bwd${hd}_$tag.log" | cut -c1-80
  done
}
