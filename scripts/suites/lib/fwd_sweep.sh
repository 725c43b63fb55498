# Sourced by the Gluon forward A/B suites (s14fwd, s14a, s14c, ckfirst).
# fwd_sweep NAME TIMEOUT "BENCH_ARGS" TAIL CONFIG...: scripts/bench_hopper.py once per
# config override ("" = the shipped config) of the gluon-$FWD_SWEEP_STAGE column (stage
# A by default: --only gluon-A --a-config; FWD_SWEEP_STAGE=C: --only gluon-C --c-config),
# each under TIMEOUT seconds, logs and CSVs under $out as NAME_<tag>.*, tag a hash of the
# override; the last TAIL lines of each table. Sets status=1 when a run fails.
fwd_sweep() {
  local name=$1 limit=$2 args=$3 lines=$4 cfg tag stage=${FWD_SWEEP_STAGE:-A}
  local flag="--$(echo "$stage" | tr 'A-Z' 'a-z')-config"
  shift 4
  for cfg in "$@"; do
    tag=$(echo "${cfg:-shipped}" | md5sum | cut -c1-6)
    # shellcheck disable=SC2086
    timeout "$limit" python3 scripts/bench_hopper.py $args --only "gluon-$stage" \
      ${cfg:+$flag "$cfg"} --csv "$out/${name}_$tag.csv" \
      >"$out/${name}_$tag.log" 2>&1 || status=1
    echo "== ${cfg:-shipped} ($tag)"
    grep -E "MISMATCH|Error|FAILED" "$out/${name}_$tag.log" | head -3
    tail -n "$lines" "$out/${name}_$tag.log" | cut -c1-90
  done
}
