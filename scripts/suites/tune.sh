# gpu_check.sh suite "tune" (sourced; $out, $commit, ft() and status are set)
python3 scripts/tune.py --seqlens 4096 --csv "$out/tune_fwd.csv" 2>"$out/tune_fwd.err" \
  | tee "$out/tune_fwd.log" || status=1
python3 scripts/tune.py --bwd --seqlens 4096 --causal 0 --csv "$out/tune_bwd.csv" \
  2>"$out/tune_bwd.err" | tee "$out/tune_bwd.log" || status=1
