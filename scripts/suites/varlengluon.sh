# gpu_check.sh suite "varlengluon" (sourced; $out, $commit, ft() and status are set)
# The varlen forward on the Gluon kernels (hopper_fwd.hopper_varlen_forward: device-side
# TMA descriptors per sequence; built 2026-11-30, CPU cross-compiled only): its own GPU
# tests (each stage A/B/C and the shipped schedule, empty sequences, key-less rows, GQA,
# the portable backward from its out / lse), every varlen GPU test, then the varlen bench
# with it and without (FLASHTILE_HOPPER_VARLEN=0). Prediction: varlen forward from
# 0.79-1.01x of dense (portable kernel against the dense Gluon one, 0e01b69) to
# 0.95-1.05x, the padded-vs-varlen speed-up unchanged or larger.
timeout 330 python3 -m pytest -q -m gpu -n 4 tests/test_varlen.py -p no:cacheprovider -rf \
  --tb=short >"$out/pytest_varlengluon.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_varlengluon.log" | tail -n 12
for hv in 1 0; do
  FLASHTILE_HOPPER_VARLEN=$hv ft bench --suite varlen --quick --commit "$commit" \
    --csv "$out/bench_varlen_h$hv.csv" >"$out/bench_varlen_h$hv.log" 2>&1 || status=1
  echo "== FLASHTILE_HOPPER_VARLEN=$hv"; grep -E "^(64|128) " "$out/bench_varlen_h$hv.log" | cut -c1-110
done
