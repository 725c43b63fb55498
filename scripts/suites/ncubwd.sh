# gpu_check.sh suite "ncubwd" (sourced; $out, $commit, ft() and status are set)
# Nsight Compute counters for flashtile's backward (preprocess, dK/dV and dQ kernels as
# dispatched) at hd 64 / 128, seqlen 4k, causal and not (16k tokens): SpeedOfLight,
# ComputeWorkloadAnalysis (pipes), WarpStateStats (stall reasons), Occupancy; clocks
# left alone. The forward and one warm-up backward are outside the profiled range.
files=()
for hd in 64 128; do
  for causal in "" "--causal"; do
    f="ncu_bwd${hd}${causal:+_causal}.csv"
    timeout 150 ncu --clock-control none --profile-from-start off --csv --page raw \
      --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
      --section Occupancy --section LaunchStats \
      python3 scripts/ncu_ladder.py run --backward --seqlen 4096 --head-dim "$hd" $causal \
      >"$out/$f" 2>"$out/${f%.csv}.err" || { echo "ncu $f failed"; tail -n 3 "$out/${f%.csv}.err"; status=1; }
    files+=("$f")
  done
done
python3 scripts/ncu_ladder.py summarize "$out" --files "${files[@]}" | tee "$out/ncu_bwd.md" || status=1
