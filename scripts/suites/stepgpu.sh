# gpu_check.sh suite "stepgpu" (sourced; $out, $commit, ft() and status are set)
# Session 11, issue 7: is the MiniGPT step host-bound, or do the kernels set its pace?
# Per backend, the wall time per step beside the GPU's kernel time per step (torch
# profiler), with the kernels that take the most of it.
# Prediction: kernels 40-70% of the wall for both backends (host-bound); flashtile's
# kernel time above cuDNN's by its dropout backward (~50 us per layer, step 13: 23 + 54
# us against cuDNN's 19 + 4), i.e. ~0.3-0.5 ms per step at 64 x 256.
for shape in 64x256 16x1024; do
  timeout 150 python3 scripts/profile_step_host.py --gpu-time --shape "$shape" --steps 20 \
    --top 14 >"$out/stepgpu_$shape.log" 2>&1 || status=1
  grep -E "^== |^\| [a-z]" "$out/stepgpu_$shape.log"
done
