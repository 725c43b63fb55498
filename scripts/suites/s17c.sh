# gpu_check.sh suite "s17c" (sourced; $out, $commit, ft() and status are set)
# 1. GPU tests: the GQA backward, expanded and looping (the loop now ships for dense GQA
#    at hd 64 from 32k keys, capped at 168 registers, dQ ring 2), against the reference;
#    the dropout-bits tests on CUDA (small explicit tiles within 2^-8 now, s17b).
# 2. The HF Llama's no-grad forward and training step per kernel class at 8k, with the
#    GPU's idle time by the kernel each gap follows (s17b: flashtile idle +0.76 ms per
#    step at 8k; its forward kernels +0.29 ms).
# 3. The HF bench, 7 interleaved rounds at 8k / 32k. Prediction: train 1.00-1.01x at
#    both, forward 0.99-1.00x at 8k and ~1.03x at 32k.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_gqa 200 8 4 tests/test_hopper_bwd.py -k "gqa_expand"
timeout 120 python3 -m pytest -q tests/test_flash.py -k "dropout_bits" -p no:cacheprovider \
  >"$out/pytest_bits_cuda.log" 2>&1 || status=1
tail -n 1 "$out/pytest_bits_cuda.log"
timeout 150 python3 scripts/profile_hf_step.py --contexts 8192 --modes fwd train \
  --csv "$out/hfprof.csv" >"$out/hfprof.log" 2>&1 || status=1
grep -E "^\| (attn|gemm|reduce|copy|other|idle|total)|^## |^idle|^ +[0-9]+  " \
  "$out/hfprof.log" | cut -c1-110
ft bench --suite hf --hf-contexts 8192 32768 --hf-backends flashtile sdpa --hf-reps 7 \
  --commit "$commit" --csv "$out/bench_hf.csv" >"$out/bench_hf.log" 2>&1 || status=1
grep -E "^\|" "$out/bench_hf.log" | cut -c1-160
