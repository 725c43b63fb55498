# gpu_check.sh suite "floor" (sourced; $out, $commit, ft() and status are set)
# Issue 4's floor pair alone (flashtile, cuDNN at hd 64 / 128, 4k / 16k, causal and not),
# timed sustained (`--sustained 1.5`: calls back to back at the power cap, ms and mJ per
# call; 1 round), ~100 s. Session 46 (s46a) measured sustained ratios agreeing between two
# runs within 0.2% median / 0.7% max (at 2 s), against the round medians' 1.5% / 4.3%; the
# floor verdict (bench/report.py floor_lines) prints last. `perf` runs this after its
# full table.
source scripts/suites/lib/steps.sh
ft bench --rounds 1 --sustained 1.5 --commit "$commit" --head-dims 64 128 --seqlens 4k 16k \
  --backends flashtile sdpa-cudnn --csv "$out/bench_floor.csv" \
  >"$out/bench_floor.log" 2>&1 || status=1
tail -n 5 "$out/bench_floor.log"
