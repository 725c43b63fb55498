# gpu_check.sh suite "varlengluon" (sourced; $out, $commit, ft() and status are set)
# The varlen forward on the Gluon kernels (hopper_fwd.hopper_varlen_forward: device-side
# TMA descriptors per sequence; opt-in, FLASHTILE_HOPPER_VARLEN=1): every varlen GPU test
# with it on (its own: each stage A/B/C and the shipped schedule, empty sequences,
# key-less rows, GQA, the portable backward from its out / lse), then the varlen bench
# with it and without. Prediction at 072c1bb: varlen forward from 0.79-1.01x of dense
# to 0.95-1.05x; measured 0.54-0.95x, below the portable kernel. Since then programs past
# their sequence's end return before building descriptors (prediction: the 2k rows
# recover most of the gap to the portable kernel, the 8k rows +0-5%).
FLASHTILE_HOPPER_VARLEN=1 timeout 330 python3 -m pytest -q -m gpu -n 4 tests/test_varlen.py -p no:cacheprovider -rf \
  --tb=short >"$out/pytest_varlengluon.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_varlengluon.log" | tail -n 12
for hv in 1 0; do
  FLASHTILE_HOPPER_VARLEN=$hv ft bench --suite varlen --quick --commit "$commit" \
    --csv "$out/bench_varlen_h$hv.csv" >"$out/bench_varlen_h$hv.log" 2>&1 || status=1
  echo "== FLASHTILE_HOPPER_VARLEN=$hv"; grep -E "^(64|128) " "$out/bench_varlen_h$hv.log" | cut -c1-110
done
