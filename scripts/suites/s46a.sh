# gpu_check.sh suite "s46a" (sourced; $out, $commit, ft() and status are set)
# Is `flashtile bench --pairs` steadier than the round medians? Session 45's s45b read the
# same kernels 3-7% apart between two runs minutes apart (hd 128 non-causal 16k forward
# 0.951x / 1.074x cuDNN), the H100 timing at its 700 W cap with the SM clock moving in
# ~100 ms steps. --pairs times flashtile and cuDNN in adjacent short timings (order
# alternating) and keeps the median per-pair ratio. The floor pair (flashtile, cuDNN),
# hd 64 / 128, 4k / 16k, causal and not, 3 rounds and 16 pairs, run twice back to back
# (A, B), the clock log beside. Prediction: per cell the paired ratios of A and B agree
# within 2%, the round-median ratios within 3-7% as in s45b.
source scripts/suites/lib/steps.sh
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
  --format=csv,noheader,nounits -lms 25 >"$out/smi.csv" 2>"$out/smi.err" &
smi=$!
for run in A B; do
  ft bench --rounds 3 --pairs 16 --commit "$commit" --head-dims 64 128 --seqlens 4k 16k \
    --backends flashtile sdpa-cudnn \
    --csv "$out/bench_pairs_$run.csv" --timing-log "$out/timings_pairs_$run.jsonl" \
    >"$out/bench_pairs_$run.log" 2>&1 || status=1
done
kill "$smi" 2>/dev/null; wait "$smi" 2>/dev/null
tail -n 12 "$out/bench_pairs_B.log"
python3 scripts/pairs_compare.py "$out/bench_pairs_A.csv" "$out/bench_pairs_B.csv" || status=1
