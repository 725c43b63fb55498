# gpu_check.sh suite "stepshort" (sourced; $out, $commit, ft() and status are set)
# The MiniGPT training step (train --bench, dropout 0.2) with the one-launch
# short-sequence backward off and on, ABAB on one GPU with the host to itself (the
# `bwdshort` run shared its host with another stream): the step is host-bound, so the
# question is whether two fewer launches per layer outweigh the kernel's longer GPU time
# (+29 us per layer at 64 x 256 with dropout, 2b1077d). ~3 min.
for sh in 0 1 0 1; do
  FLASHTILE_BWD_SHORT=$sh timeout 120 python3 -m flashtile.cli train --bench \
    --bench-backends flashtile,sdpa-cudnn --bench-shapes 64x256,16x1024 \
    --csv "$out/train_bench_short$sh.csv" >>"$out/train_bench_short$sh.log" 2>&1 || status=1
  echo "FLASHTILE_BWD_SHORT=$sh"; grep -E "x (256|1024) " "$out/train_bench_short$sh.log" | tail -n 4
done
