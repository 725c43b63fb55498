# gpu_check.sh suite "s46a" (sourced; $out, $commit, ft() and status are set)
# Is `flashtile bench --pairs` steadier than the round medians? Session 45's s45b read the
# same kernels 3-7% apart between two runs minutes apart (hd 128 non-causal 16k forward
# 0.951x / 1.074x cuDNN), the H100 timing at its 700 W cap with the SM clock moving in
# ~100 ms steps. --pairs times flashtile and cuDNN in adjacent short timings (order
# alternating) and keeps the median per-pair ratio; --sustained 2 runs each call back to
# back for 2 s and reads NVML's energy counter around it (ms and mJ per call, W). The
# floor pair (flashtile, cuDNN), hd 64 / 128, 4k / 16k, causal and not, 3 rounds, 16
# pairs, 2 s sustained, run twice back to back (A, B; ~170 s each), the clock log beside.
# Prediction: per cell the paired and sustained ratios of A and B agree within 2% (the
# round medians: median 1.6%, max 6.3% in s45b); at the 700 W cap the sustained power
# reads 650-700 W for both backends, and where flashtile's forward+backward trails cuDNN
# by time, its energy per call trails by about as much.
source scripts/suites/lib/steps.sh
# the bench's own GPU tests first (a real run with --pairs, energy.sustained on a matmul)
gpu_pytest pytest_s46a_bench 180 1 4 tests/test_bench.py
clock_log_start smi.csv
for run in A B; do
  ft bench --rounds 3 --pairs 16 --sustained 2 --commit "$commit" --head-dims 64 128 --seqlens 4k 16k \
    --backends flashtile sdpa-cudnn \
    --csv "$out/bench_pairs_$run.csv" --timing-log "$out/timings_pairs_$run.jsonl" \
    >"$out/bench_pairs_$run.log" 2>&1 || status=1
done
clock_log_stop
tail -n 12 "$out/bench_pairs_B.log"
python3 scripts/pairs_compare.py "$out/bench_pairs_A.csv" "$out/bench_pairs_B.csv" || status=1
