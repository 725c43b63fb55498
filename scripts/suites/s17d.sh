# gpu_check.sh suite "s17d" (sourced; $out, $commit, ft() and status are set)
# Issue 9's last 0.2-0.4% (the no-grad forward at 8k): s17c had flashtile's forward
# kernels level with cuDNN's (10.26 / 10.29 ms per step) and its GPU idle +0.51 ms, most
# of it after an elementwise kernel (1192 against 684 us). Prediction: a host-device
# synchronisation per layer (or per step) in one of the paths makes the GPU wait for the
# host's launches, and flashtile's launch path is the longer wait. This lists each
# backend's synchronisations per step (torch.cuda.set_sync_debug_mode) by source line,
# and the largest single gaps with the kernels around them; then the SM clock and power
# during 3 training steps at 32k per backend (s17b: the same GEMMs 5-6.5% slower in
# flashtile's step there; prediction: a lower mean SM clock under flashtile).
timeout 150 python3 scripts/profile_hf_step.py --contexts 8192 --modes fwd train --sync-debug \
  --csv "$out/hfprof8k.csv" >"$out/hfprof8k.log" 2>&1 || status=1
grep -E "^\| (attn|idle|total)|^## |^syncs|^largest|^ +[0-9]+  " "$out/hfprof8k.log" \
  | cut -c1-150 | head -n 60
timeout 200 python3 scripts/profile_hf_step.py --contexts 32768 --modes train --clock-steps 3 \
  --csv "$out/hfprof32k.csv" >"$out/hfprof32k.log" 2>&1 || status=1
grep -E "^\| (attn|gemm|idle|total)|^## |^clocks" "$out/hfprof32k.log" | cut -c1-150
