# gpu_check.sh suite "varlenbwd" (sourced; $out, $commit, ft() and status are set)
# The varlen backward on the Gluon two-kernel backward (hopper_bwd.hopper_varlen_backward:
# device-side TMA descriptors per sequence; opt-in, FLASHTILE_HOPPER_VARLEN_BWD=1; built
# 2026-11-30 in session 8 without a GPU): its GPU tests (hd 64 / 128, causal or not, empty
# sequences on either side, key-less rows, GQA, against the reference), the rest of the
# varlen GPU tests with it on, then the varlen bench with it and without. Prediction:
# varlen forward+backward at 8k-long sequences from 0.76-0.93x of dense (fe6899f) to
# 0.90-1.0x (the dense backward's kernels, plus six / five descriptors built per
# program); at 2k below the portable varlen backward where the descriptors dominate.
FLASHTILE_HOPPER_VARLEN_BWD=1 timeout 240 python3 -m pytest -q -m gpu -n 4 tests/test_varlen.py \
  -p no:cacheprovider -rf --tb=short >"$out/pytest_varlenbwd.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_varlenbwd.log" | tail -n 12
for hv in 1 0; do
  FLASHTILE_HOPPER_VARLEN_BWD=$hv timeout 120 python3 -m flashtile.cli bench --suite varlen \
    --quick --commit "$commit" --csv "$out/bench_varlen_bwd$hv.csv" \
    >"$out/bench_varlen_bwd$hv.log" 2>&1 || status=1
  echo "== FLASHTILE_HOPPER_VARLEN_BWD=$hv"
  grep -E "^(64|128) .*fwd_bwd" "$out/bench_varlen_bwd$hv.log" | cut -c1-100
done
