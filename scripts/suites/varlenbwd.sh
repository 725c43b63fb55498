# gpu_check.sh suite "varlenbwd" (sourced; $out, $commit, ft() and status are set)
# The varlen backward on the Gluon two-kernel backward (hopper_bwd.hopper_varlen_backward:
# device-side TMA descriptors per sequence; the default from 8k-long sequences since
# session 9, FLASHTILE_HOPPER_VARLEN_BWD=1 / 0 forces it on / off): the Gluon varlen GPU
# tests (forward per schedule, backward at hd 64 / 128 with empty sequences on either
# side, key-less rows and GQA, the auto threshold both ways), then the varlen bench with
# the default dispatch and with the Gluon backward forced on and off.
# (30970b9: the whole tests/test_varlen.py GPU set ran past a 240 s timeout; only the
# Gluon ones run here, the rest are in `decode`.)
timeout 300 python3 -m pytest -q -m gpu -n 4 tests/test_varlen.py -k "hopper" \
  -p no:cacheprovider -rf --tb=short >"$out/pytest_varlenbwd.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_varlenbwd.log" | tail -n 12
for hv in auto 1 0; do
  if [ "$hv" = auto ]; then unset FLASHTILE_HOPPER_VARLEN_BWD; else export FLASHTILE_HOPPER_VARLEN_BWD=$hv; fi
  timeout 120 python3 -m flashtile.cli bench --suite varlen \
    --quick --commit "$commit" --csv "$out/bench_varlen_bwd$hv.csv" \
    >"$out/bench_varlen_bwd$hv.log" 2>&1 || status=1
  echo "== FLASHTILE_HOPPER_VARLEN_BWD=$hv"
  grep -E "^(64|128) .*fwd_bwd" "$out/bench_varlen_bwd$hv.log" | cut -c1-100
done
unset FLASHTILE_HOPPER_VARLEN_BWD
