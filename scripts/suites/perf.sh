# gpu_check.sh suite "perf" (sourced; $out, $commit, ft() and status are set)
ft bench --commit "$commit" --csv "$out/bench_perf.csv" --plot "$out/bench_perf.png" \
  >"$out/bench_perf.log" 2>&1 || status=1
tail -n 60 "$out/bench_perf.log"
