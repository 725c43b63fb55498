# gpu_check.sh suite "bwdvscudnn" (sourced; $out, $commit, ft() and status are set)
# Why cuDNN's backward rises from 4k to 16k non-causal and flashtile's does not (s14a,
# 36b9475: backward TFLOPS 400 -> 444 at hd 64 and 474 -> 550 at hd 128 for cuDNN,
# 364 -> 359 and 430 -> 426 for flashtile). ncu (clocks left alone) on one backward of
# each, hd 64 / 128, 4k / 16k, non-causal: per kernel the duration, the launch shape
# (grid, block, registers, shared memory), occupancy, the busiest pipes and the top stall
# reasons. Prediction: cuDNN runs fewer, longer-lived CTAs (a grid near the SM count, or
# bigger key tiles) whose fixed cost the 16k loops amortise, and flashtile's dK/dV kernel
# sits at the same tensor-pipe share at both lengths. ~3-4 min.
files=()
for hd in 64 128; do
  for seqlen in 4096 16384; do
    for backend in flashtile sdpa-cudnn; do
      f="ncu_bwd_${backend}_d${hd}_s${seqlen}.csv"
      timeout 100 ncu --clock-control none --profile-from-start off --csv --page raw \
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
        --section Occupancy --section LaunchStats \
        python3 scripts/ncu_ladder.py run --backward --backend "$backend" --seqlen "$seqlen" \
        --head-dim "$hd" >"$out/$f" 2>"$out/${f%.csv}.err" \
        || { echo "ncu $f failed"; tail -n 3 "$out/${f%.csv}.err"; status=1; }
      files+=("$f")
    done
  done
done
python3 scripts/ncu_ladder.py summarize "$out" --files "${files[@]}" \
  | tee "$out/ncu_bwd_vs_cudnn.md" | cut -c1-200 || status=1
