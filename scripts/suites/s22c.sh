# gpu_check.sh suite "s22c" (sourced; $out, $commit, ft() and status are set)
# Prepared in session 21: hd 64 causal B16 S1024 H32 forward+backward read 224 / 212 / 302
# TFLOPS in three processes of one machine start with identical kernels on its path
# (s21d), its spread over three rounds 10-16%, while cuDNN held 268-269. Is the call
# host-bound? Its GPU work is ~0.8 ms; the eager backward's host cost was measured at
# ~0.4-1.0 ms per call at smaller shapes (stop 29). Three bench processes again, then the
# host time per layer at this shape (scripts/host_split.py). Prediction: host time of the
# forward+backward call within 20% of 0.8 ms, and the slow processes the ones whose host
# reads slower (if the host is the bound); otherwise the GPU side differs between
# processes (clocks, or a kernel choice) and the per-kernel times will say which.
for i in 1 2 3; do
  timeout 60 python3 -m flashtile.cli bench --causal yes --head-dims 64 --seqlens 1024 \
    --backends flashtile sdpa-cudnn --rounds 3 --csv "$out/h64c1k_$i.csv" \
    >"$out/h64c1k_$i.log" 2>&1 || status=1
  echo "== process $i"; grep -E "^B16.*(flashtile|cudnn)" "$out/h64c1k_$i.log" | cut -c1-100
done
timeout 150 python3 scripts/host_split.py 16,1024,32,64,1 >"$out/host_h64c1k.log" 2>&1 \
  || status=1
grep -vE "^\s*$" "$out/host_h64c1k.log" | head -30
