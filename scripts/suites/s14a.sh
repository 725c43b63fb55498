# gpu_check.sh suite "s14a" (sourced; $out, $commit, ft() and status are set)
# Session 14: stage A takes early_expect in every config (s14fwd at 569592b: +1.9% to
# +4.3% at hd 64 / 256, hd 64 causal 0.98x / 1.00x -> 1.03x / 1.03x cuDNN). hd 128's
# stage A (causal below 4k) took it by analogy: timed here on (shipped) against off.
# Prediction: +1-4% at hd 128 causal 1k / 2k. Then the full perf table (every backend,
# 3 rounds) with the new default, for the README. ~6.5 min.
source scripts/suites/lib/fwd_sweep.sh
fwd_sweep fwdA128 60 "--head-dims 128 --seqlens 1024 2048 4096 --causal 1" 4 "" \
  "early_expect=0"
timeout 400 python3 -m flashtile.cli bench --rounds 3 --commit "$commit" \
  --csv "$out/bench_perf.csv" --plot "$out/bench_perf.png" >"$out/bench_perf.log" 2>&1 \
  || status=1
tail -n 40 "$out/bench_perf.log"
