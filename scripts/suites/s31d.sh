# gpu_check.sh suite "s31d" (sourced; $out, $commit, ft() and status are set)
# Session 31, issue 9: where flashtile's extra GPU idle time in the HF Llama's training
# step comes from (s31a: 6.26 against 5.14 ms per step at 8k, most of it one ~650 us gap
# per step before a flashtile forward kernel). scripts/hf_host_calls.py (new): host us
# per attention call, per layer, flashtile and sdpa, forward and (flashtile) backward;
# then the profiler's host-device synchronisations per step.
# Prediction: flashtile's forward call takes 100-200 us of host time at every layer
# (sdpa 30-60), and the first layer's call starts ~1 ms into the step, when the GPU has
# run out of queued work; no synchronisation inside flashtile's calls.
timeout 200 python3 scripts/hf_host_calls.py --context 8192 --steps 3 \
  >"$out/hf_host_calls.log" 2>&1 || status=1
grep -vE "^\s*$" "$out/hf_host_calls.log" | tail -n 12 | cut -c1-240
timeout 150 python3 scripts/profile_hf_step.py --contexts 8192 --modes train --steps 2 \
  --sync-debug --csv "$out/hfprof_sync.csv" >"$out/hfprof_sync.log" 2>&1 || status=1
grep -iE -A8 "synchron" "$out/hfprof_sync.log" | head -40 | cut -c1-200
