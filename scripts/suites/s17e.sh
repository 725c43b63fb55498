# gpu_check.sh suite "s17e" (sourced; $out, $commit, ft() and status are set)
# 1. The attention kernels' SM clock and power, per backend, at the DESIGN.md shapes
#    (scripts/clocks_attn.py; s17d: 1655 against 1776 MHz in the HF training step at 32k).
#    Prediction: flashtile's backward (7 GEMMs per tile pair against cuDNN's 5) runs at a
#    lower clock than cuDNN's at hd 128, and its TFLOPS per GHz is closer to cuDNN's than
#    its TFLOPS; the forwards (the same GEMM count) at about the same clock.
# 2. Issue 9: the HF bench at 8k / 32k with 15 interleaved rounds (two 5-7 round runs read
#    the step 1.001-1.003x and the 8k forward 0.996-0.998x sdpa). Prediction: the same
#    within +-0.3%.
timeout 200 python3 scripts/clocks_attn.py --seconds 1.5 --csv "$out/clocks_attn.csv" \
  >"$out/clocks_attn.log" 2>&1 || status=1
grep -E "^\|" "$out/clocks_attn.log"
ft bench --suite hf --hf-contexts 8192 32768 --hf-backends flashtile sdpa --hf-reps 15 \
  --commit "$commit" --csv "$out/bench_hf.csv" >"$out/bench_hf.log" 2>&1 || status=1
grep -E "^\|" "$out/bench_hf.log" | cut -c1-160
