# Sourced by the stage A forward A/B suites (s14fwd, s14a, s14c).
# fwd_sweep NAME TIMEOUT "BENCH_ARGS" TAIL CONFIG...: scripts/bench_hopper.py --only gluon-A
# once per --a-config override ("" = the shipped config), each under TIMEOUT seconds,
# logs and CSVs under $out as NAME_<tag>.*, tag a hash of the override; the last TAIL
# lines of each table. Sets status=1 when a run fails.
fwd_sweep() {
  local name=$1 limit=$2 args=$3 lines=$4 cfg tag
  shift 4
  for cfg in "$@"; do
    tag=$(echo "${cfg:-shipped}" | md5sum | cut -c1-6)
    # shellcheck disable=SC2086
    timeout "$limit" python3 scripts/bench_hopper.py $args --only gluon-A \
      ${cfg:+--a-config "$cfg"} --csv "$out/${name}_$tag.csv" \
      >"$out/${name}_$tag.log" 2>&1 || status=1
    echo "== ${cfg:-shipped} ($tag)"
    grep -E "MISMATCH|Error|FAILED" "$out/${name}_$tag.log" | head -3
    tail -n "$lines" "$out/${name}_$tag.log" | cut -c1-90
  done
}
