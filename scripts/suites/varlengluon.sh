# gpu_check.sh suite "varlengluon" (sourced; $out, $commit, ft() and status are set)
# The varlen forward on the Gluon kernels (hopper_fwd.hopper_varlen_forward: device-side
# TMA descriptors per sequence), on by default from configs.HOPPER_VARLEN_MIN_SEQLEN
# (8k-long sequences; FLASHTILE_HOPPER_VARLEN=1 / =0 force it on / off): its GPU tests
# (each stage A/B/C and the shipped schedule with it forced on, empty sequences, key-less
# rows, GQA, the portable backward from its out / lse; the automatic choice), then the
# varlen bench as shipped (VARLEN_BENCH_MODES="auto 1 0" adds the forced runs).
timeout 150 python3 -m pytest -q -m gpu -n 4 tests/test_varlen.py -k hopper -p no:cacheprovider \
  -rf --tb=short >"$out/pytest_varlengluon.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_varlengluon.log" | tail -n 12
for hv in ${VARLEN_BENCH_MODES:-auto}; do
  if [ "$hv" = auto ]; then
    (unset FLASHTILE_HOPPER_VARLEN; timeout 90 python3 -m flashtile.cli bench --suite varlen \
      --quick --commit "$commit" --csv "$out/bench_varlen_$hv.csv") \
      >"$out/bench_varlen_$hv.log" 2>&1 || status=1
  else
    FLASHTILE_HOPPER_VARLEN=$hv timeout 90 python3 -m flashtile.cli bench --suite varlen \
      --quick --commit "$commit" --csv "$out/bench_varlen_$hv.csv" \
      >"$out/bench_varlen_$hv.log" 2>&1 || status=1
  fi
  echo "== FLASHTILE_HOPPER_VARLEN=$hv"; grep -E "^(64|128) " "$out/bench_varlen_$hv.log" | cut -c1-130
done
