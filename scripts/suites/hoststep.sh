# gpu_check.sh suite "hoststep" (sourced; $out, $commit, ft() and status are set)
# Host cost of the MiniGPT step per attention backend (scripts/profile_step_host.py:
# wall and host ms/step, cProfile), then attention with dropout alone at the MiniGPT
# shapes (scripts/bench_dropout.py: GPU time and wall per call, vs SDPA cuDNN / flash).
for shape in 64x256 16x1024; do
  python3 scripts/profile_step_host.py --shape "$shape" >"$out/profile_step_$shape.log" 2>&1 \
    || status=1
  tail -n 4 "$out/profile_step_$shape.log"
done
python3 scripts/bench_dropout.py --tag "$commit" --csv "$out/bench_dropout.csv" \
  2>"$out/bench_dropout.err" | tee "$out/bench_dropout.log" || status=1
