# gpu_check.sh suite "stephost" (sourced; $out, $commit, ft() and status are set)
# Session 10, issue 7: is the MiniGPT step host-bound or GPU-bound now? host_split.py
# (c42250d) put flashtile's attention host cost at MiniGPT's shape level with SDPA's
# (85 + 215 us against 104 + 190 per layer), yet the step read 0.87x / 0.95x cuDNN.
# scripts/profile_step_host.py: wall ms/step (CUDA events) against host ms/step (Python
# per step, no sync) per backend, both shapes. Prediction: at 64 x 256 the host time per
# step is close to the wall time for both (host-bound), and flashtile's host time
# exceeds cuDNN's by less than the wall difference (the rest from the dropout backward
# kernels, 138.6 against 92 us per layer).
for shape in 64x256 16x1024; do
  timeout 100 python3 scripts/profile_step_host.py --shape "$shape" --steps 40 \
    --profile-steps 10 --top 12 >"$out/profile_step_$shape.log" 2>&1 || status=1
  tail -n 4 "$out/profile_step_$shape.log"
done
