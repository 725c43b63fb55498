# gpu_check.sh suite "dropoutab" (sourced; $out, $commit, ft() and status are set)
# A/B of dropout RNG variants: each source tree under .variants/NAME/src (git-ignored,
# carried: `carry: [".variants"]`) runs scripts/bench_dropout.py (attention alone at the
# MiniGPT shapes, GPU and wall time, vs SDPA cuDNN / flash) and the MiniGPT step bench;
# then this checkout's dropout GPU tests and the portable backward sweep under dropout.
for dir in .variants/*/; do
  t=$(basename "$dir")
  PYTHONPATH="$PWD/$dir/src" python3 scripts/bench_dropout.py --tag "$t" \
    --backends "flashtile$([ "$t" = main ] && echo ,cudnn,flash)" --csv "$out/dropout_$t.csv" \
    2>"$out/dropout_$t.err" | tee "$out/dropout_$t.log" || status=1
  PYTHONPATH="$PWD/$dir/src" python3 -m flashtile.cli train --bench \
    --bench-backends "flashtile$([ "$t" = main ] && echo ,sdpa-cudnn)" \
    --bench-shapes 64x256,16x1024 --csv "$out/train_bench_$t.csv" >"$out/train_bench_$t.log" 2>&1 \
    || status=1
  echo "== step bench, tree $t"; head -n 9 "$out/train_bench_$t.log"
done
python3 -m pytest -q -n 4 tests/test_flash.py -k "dropout" -p no:cacheprovider -rf --tb=short \
  >"$out/pytest_dropout.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_dropout.log" | tail -n 10
python3 scripts/tune.py --bwd --dropout 0.2 --head-dims 64 --seqlens 256,1024 --causal 1 \
  --csv "$out/tune_bwd_dropout.csv" 2>"$out/tune_bwd_dropout.err" \
  | tee "$out/tune_bwd_dropout.log" || status=1
