# gpu_check.sh suite "tune256" (sourced; $out, $commit, ft() and status are set)
# The portable backward at hd 256 (the path every hd 256 backward takes: 0.28-0.36x cuDNN
# forward+backward at af2ffb4) ran its first-guess tiles, BwdConfig(32, 64, 8, 1), until 0e01b69:
# the dK/dV kernel spills 616 B, and the dQ kernel, on 32-row tiles over 8 warps, runs
# mma.sync instead of wgmma (ptxas / PTX, compiled on the CPU 2026-11-30). Sweep of
# scripts/tune.py's hd 256 candidates (6 dK/dV x 3 dQ tiles since 0e01b69), 1k / 4k / 16k, both masks.
python3 scripts/tune.py --bwd --head-dims 256 --seqlens 1024,4096,16384 \
  --csv "$out/tune_bwd256.csv" 2>"$out/tune_bwd256.err" | tee "$out/tune_bwd256.log" || status=1
