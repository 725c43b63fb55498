# gpu_check.sh suite "perf" (sourced; $out, $commit, ft() and status are set)
# Every backend at the 18 DESIGN.md shapes. Three timing rounds per shape, backends in
# turn (`--rounds 3`, since session 6: ratios to cuDNN moved by up to 0.1 between
# identical single-round runs); the CSV keeps each timing's spread over the rounds.
ft bench --rounds 3 --commit "$commit" --csv "$out/bench_perf.csv" --plot "$out/bench_perf.png" \
  --ratio-plot "$out/bench_ratios.png" \
  >"$out/bench_perf.log" 2>&1 || status=1
tail -n 60 "$out/bench_perf.log"
