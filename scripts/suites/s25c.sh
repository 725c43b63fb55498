# gpu_check.sh suite "s25c" (sourced; $out, $commit, ft() and status are set)
# Session 25: the decode bench with CUDA-graph columns (flashtile and the best SDPA
# backend replayed from graphs beside the eager numbers). s25b's eager table moved by up
# to 35% on cells whose kernels did not change (D128 GQA8:1 B1 128k 0.98x -> 0.64x), so
# eager says little about kernels there. Prediction: graph ratios within +-3% of s25a's
# sweep on the cells it measured (hd 64 GQA batch 64 0.97-0.99x, 1k cells 0.96-0.99x), and
# >= 0.97x on every cell >= 256 MiB. ~90 s.
ft bench --suite decode --quick --commit "$commit" --csv "$out/bench_decode.csv" \
  >"$out/bench_decode.log" 2>&1 || status=1
tail -n 90 "$out/bench_decode.log"
