# gpu_check.sh suite "s30g" (sourced; $out, $commit, ft() and status are set)
# Session 30: s30f read flashtile's forward+backward at hd 64 non-causal 16k as 18.06 ms
# (do_bench) and 18.08 ms wall per call back to back, where its kernels sum to 15.9 ms
# under the profiler (cuDNN: 17.19 / 17.39 against 17.13); 4k: 4.49 wall vs 4.09 ms of
# kernels (cuDNN +0.03). GPU idle between kernels per call, the largest gaps and the
# CUDA runtime calls (syncs, copies, allocations) of both libraries. Prediction: a host
# synchronisation inside flashtile's call, so the GPU waits for the host's next launches.
for shape in 1,16384,32,64,0 4,4096,32,64,0 4,4096,16,128,0; do
  log="$out/diag_${shape//,/_}.log"
  DIAG_BACKENDS=flashtile,sdpa-cudnn timeout 150 python3 scripts/diag_fwd_bwd.py $shape \
    >"$log" 2>&1 || status=1
  awk '/causal=/ || /us in kernels/ || /^host/ {print; next} /GPU idle/ {g=1} /^host/ {g=0}
       /-- cProfile/ {g=0} g' "$log" | cut -c1-130 | head -70
done
