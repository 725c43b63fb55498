# gpu_check.sh suite "perf" (sourced; $out, $commit, ft() and status are set)
# Every backend at the 18 DESIGN.md shapes. Three timing rounds per shape, backends in
# turn (`--rounds 3`, since session 6: ratios to cuDNN moved by up to 0.1 between
# identical single-round runs); the CSV keeps each timing's spread over the rounds and
# each round's time. Since session 45 the clock log runs beside it (clocks_perf.csv: SM
# clock, power and temperature under every timing, scripts/clock_join.py). Since session
# 46 the floor pair (flashtile, cuDNN at hd 64 / 128, 4k / 16k) is timed again sustained
# (suite `floor`: calls back to back at the power cap, the measurement whose ratios agree
# best between runs); its floor verdict prints last.
source scripts/suites/lib/steps.sh
clock_log_start smi.csv
ft bench --rounds 3 --commit "$commit" --csv "$out/bench_perf.csv" --plot "$out/bench_perf.png" \
  --ratio-plot "$out/bench_ratios.png" --timing-log "$out/timings_perf.jsonl" \
  >"$out/bench_perf.log" 2>&1 || status=1
clock_log_stop
python3 scripts/clock_join.py --smi "$out/smi.csv" --timings "$out/timings_perf.jsonl" \
  --csv "$out/clocks_perf.csv" >"$out/clocks_perf.log" 2>&1 || echo "clock_join: no clock log"
tail -n 60 "$out/bench_perf.log"
# the floor pair sustained, its verdict last (a suite that ran `floor` first sets
# FLOOR_DONE=1)
[ -n "${FLOOR_DONE:-}" ] || source scripts/suites/floor.sh
