# gpu_check.sh suite "s31f" (sourced; $out, $commit, ft() and status are set)
# Session 31, issue 4's 1k cells: s31d read ~370 us of host time per flashtile forward
# with grad in the HF step (sdpa ~100). At the DESIGN.md 1k shapes a causal forward's
# kernel takes ~190 us (hd 128) and do_bench counts the GPU's wait for a late launch:
# are the 1k forward cells (hd 64 / 128 causal 0.91x / 0.86x, "unstable" from run to
# run) host-bound? scripts/host_split.py: host us per call of the launchers, the
# autograd forward and backward, SDPA cuDNN's, and the backward's GPU us by events.
# Prediction: flashtile's no-grad forward 120-200 us of host time (cuDNN 40-80), the
# forward with grad 250-400, autograd.grad 500-700: the 1k forward cells partly
# host-bound, the 1k forward+backward ones fully.
timeout 200 python3 scripts/host_split.py 16,1024,16,128,1 16,1024,16,128,0 \
  16,1024,32,64,1 >"$out/host_split_1k.log" 2>&1 || status=1
grep -E "^\|" "$out/host_split_1k.log" | cut -c1-160
