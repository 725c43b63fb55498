# gpu_check.sh suite "ncufwd" (sourced; $out, $commit, ft() and status are set)
# Nsight Compute on the two forward shapes just below issue 4's 1.0x floor (2026-11-30
# perf, e86956e): hd 64 causal 4k (0.96x cuDNN; stage A capped at 128 registers, two
# programs per SM) and hd 128 non-causal 4k (0.99x; stage C ping-pong). Per shape: the
# details page (speed of light, warp states, occupancy, launch, compute and memory
# workload) and the SASS source page as CSV (per-instruction stall samples, read on the
# CPU machine afterwards). ~2 min.
for shape in "64 --causal" "128"; do
  set -- $shape
  tag="d$1${2:+_causal}"
  timeout 150 ncu --clock-control none --kernel-name regex:_fwd --launch-skip 2 \
    --launch-count 1 --section SpeedOfLight --section WarpStateStats --section Occupancy \
    --section LaunchStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section SourceCounters \
    python3 scripts/ncu_fwd.py --head-dim "$1" --seqlen 4096 ${2:-} \
    >"$out/ncufwd_$tag.txt" 2>&1 || { echo "ncu $tag failed"; status=1; }
  grep -E "^  [a-z_]+kernel|Duration|Registers Per|Achieved Occupancy|Issue Slots Busy|Warp Cycles Per Issued|Stall|stall|Pipe|Throughput" \
    "$out/ncufwd_$tag.txt" | head -n 24
  timeout 150 ncu --clock-control none --kernel-name regex:_fwd --launch-skip 2 \
    --launch-count 1 --section SourceCounters --section WarpStateStats --page source \
    --print-source sass --csv python3 scripts/ncu_fwd.py --head-dim "$1" --seqlen 4096 \
    ${2:-} >"$out/ncufwd_${tag}_sass.csv" 2>"$out/ncufwd_${tag}_sass.err" \
    || { echo "ncu source $tag failed"; tail -n 3 "$out/ncufwd_${tag}_sass.err"; }
  wc -c "$out/ncufwd_${tag}_sass.csv"
done
