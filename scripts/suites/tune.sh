# gpu_check.sh suite "tune" (sourced; $out, $commit, ft() and status are set)
# Sweeps of the portable kernel's tiles (scripts/tune.py). The forward at the MiniGPT /
# HF shapes (hd 64 causal, short sequences) and the backward at 256..4k (hd 64; hd 128
# at 4k), whose configs.bwd_config branches were first guesses.
python3 scripts/tune.py --head-dims 64 --seqlens 256,1024 --causal 1 \
  --csv "$out/tune_fwd.csv" 2>"$out/tune_fwd.err" | tee "$out/tune_fwd.log" || status=1
python3 scripts/tune.py --bwd --head-dims 64 --seqlens 256,1024,4096 --csv "$out/tune_bwd64.csv" \
  2>"$out/tune_bwd64.err" | tee "$out/tune_bwd64.log" || status=1
python3 scripts/tune.py --bwd --head-dims 128 --seqlens 4096 --csv "$out/tune_bwd128.csv" \
  2>"$out/tune_bwd128.err" | tee "$out/tune_bwd128.log" || status=1
