# gpu_check.sh suite "ncu" (sourced; $out, $commit, ft() and status are set)
# Nsight Compute counters for every ladder rung at one shape (hd 64, seqlen 4k,
# non-causal, 16k tokens): SpeedOfLight + compute/memory workload sections, clocks
# left alone (--clock-control none). One warm-up call per rung is outside the
# profiled range. About a minute; the table feeds docs/ladder.md.
for rung in $(python3 -c "from flashtile.ladder import rung_names; print(' '.join(rung_names()))"); do
  timeout 120 ncu --clock-control none --profile-from-start off --csv --page raw \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    python3 scripts/ncu_ladder.py run --rung "$rung" --seqlen 4096 --head-dim 64 \
    >"$out/ncu_$rung.csv" 2>"$out/ncu_$rung.err" || { echo "ncu $rung failed"; tail -n 3 "$out/ncu_$rung.err"; status=1; }
done
python3 scripts/ncu_ladder.py summarize "$out" | tee "$out/ncu_ladder.md" || status=1
