# gpu_check.sh suite "s33b" (sourced; $out, $commit, ft() and status are set)
# Written at the end of session 32 for the next session; CPU-checked only (bash -n).
# Where the hd 256 forward (stage A, 128 x 64 tiles, 8 warps in lock step, 192 KB, one
# program per SM; 0.84-0.97x cuDNN) loses to cuDNN's kernel: Nsight Compute on both at
# hd 256 non-causal 4k (B4 H8). Session 32 found that shared-memory bandwidth does not
# bound it: Q from registers (q_regs) measured -1% to -3% (s32d). Wanted: tensor-pipe
# share, issue-slot use, the top stall reasons, shared-memory wavefronts and bank
# conflicts, cycles per step (the kernel's duration over 64 steps per program).
# Prediction: flashtile's tensor pipe ~60-65% against cuDNN's ~75%, with the stalls on
# the wgmma waits (the softmax and the O rescale between two GEMMs that nothing else
# overlaps: one program per SM, both warpgroups in lock step), not on shared memory.
for be in flashtile cudnn; do
  regex=$([ $be = cudnn ] && echo "regex:fprop|sdpa|cudnn" || echo "regex:_fwd")
  timeout 150 ncu --clock-control none --kernel-name "$regex" --launch-skip 2 \
    --launch-count 1 --section SpeedOfLight --section WarpStateStats --section Occupancy \
    --section LaunchStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section MemoryWorkloadAnalysis_Tables \
    python3 scripts/ncu_fwd.py --head-dim 256 --seqlen 4096 --backend $be \
    >"$out/ncu256_$be.txt" 2>&1 || { echo "ncu $be failed"; status=1; }
  echo "== $be"
  grep -E "^  [A-Za-z_].*\(|Duration|Registers Per|Shared Memory Config|Achieved Occupancy|Issue Slots Busy|Warp Cycles Per Issued|Stall|Pipe|Bank|Wavefront|Throughput" \
    "$out/ncu256_$be.txt" | head -n 30 | cut -c1-150
done
