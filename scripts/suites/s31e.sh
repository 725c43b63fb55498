# gpu_check.sh suite "s31e" (sourced; $out, $commit, ft() and status are set)
# Session 31, issue 9: s31d measured flashtile's attention call in the HF Llama's
# training step at ~370 us of host time per forward (537 at the step's first layer,
# exposed: the GPU waits for it) and ~660 per backward, against sdpa's ~100 per forward.
# Where does it go? cProfile over 20 forward and 20 backward calls at the model's
# attention shape (B1 S8192 H32 KV8 D64 causal, transposed views).
timeout 150 python3 scripts/hf_host_calls.py --context 8192 --cprofile 20 \
  >"$out/hf_cprofile.log" 2>&1 || status=1
grep -E "us per call|tottime|^\s+[0-9]" "$out/hf_cprofile.log" | head -50 | cut -c1-200
