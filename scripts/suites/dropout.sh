# gpu_check.sh suite "dropout" (sourced; $out, $commit, ft() and status are set)
# After a change of the dropout RNG (ops/_common.dropout_keep): the op's small-shape GPU
# tests (smoke: dropout replay against the reference, bitwise repeat, statistics), then
# the MiniGPT training-step bench (dropout 0.2) beside SDPA cuDNN, then the HF forward
# at 2k with the cached launch on and off (5 timed reps: the `hf` suite's 2 are noisy).
source scripts/suites/smoke.sh
ft train --bench --bench-backends flashtile,sdpa-cudnn --bench-shapes 64x256,16x1024 \
  --bench-profile --csv "$out/train_bench.csv" >"$out/train_bench.log" 2>&1 || status=1
head -n 9 "$out/train_bench.log"
for fl in 1 0; do
  FLASHTILE_FAST_LAUNCH=$fl ft bench --suite hf --hf-contexts 2048 --hf-reps 5 \
    --hf-backends flashtile sdpa --commit "$commit" --csv "$out/bench_hf_fl$fl.csv" \
    >"$out/bench_hf_fl$fl.log" 2>&1 || status=1
  echo "FLASHTILE_FAST_LAUNCH=$fl"; grep -E "^\| 2k" "$out/bench_hf_fl$fl.log"
done
