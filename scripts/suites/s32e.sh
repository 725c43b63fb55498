# gpu_check.sh suite "s32e" (sourced; $out, $commit, ft() and status are set)
# Session 32: the hd 256 rows of the perf table on the shipped code (the column-split
# backward, s32b / s32c; the forward without q_regs, which s32d measured slower), every
# backend, 3 rounds, as `perf` times them. About 80 s.
ft bench --head-dims 256 --rounds 3 --commit "$commit" --csv "$out/bench_perf256.csv" \
  >"$out/bench_perf256.log" 2>&1 || status=1
grep -E "D256|matmul" "$out/bench_perf256.log" | grep -v "run/s" | grep -E "flashtile |cudnn|matmul" \
  | cut -c1-170
