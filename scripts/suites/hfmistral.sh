# gpu_check.sh suite "hfmistral" (sourced; $out, $commit, ft() and status are set)
# Session 12: the hf bench on a Mistral-shaped ~1.1B model (bench --hf-model mistral:
# head dim 128, GQA 4:1, a 4096-token sliding window in every layer), flashtile (stage C
# windows forward, the two-kernel Gluon backward with the window) against "sdpa" (HF
# builds a 4D boolean mask for the window, so SDPA runs its masked kernel over every
# (query, key) tile). ~2-3 min.
# Predictions: forward 1.1-1.4x sdpa at 8k and 1.5-3x at 32k (SDPA computes all tiles of
# the causal triangle, 8x the window's pairs at 32k); train step 1.1-1.3x / 1.5-2.5x.
python3 -c "import transformers; print('transformers', transformers.__version__)" | tee -a "$out/env.txt"
timeout 260 python3 -m flashtile.cli bench --suite hf --hf-model mistral \
  --hf-contexts 8192 32768 --hf-backends flashtile sdpa --hf-reps 2 --commit "$commit" \
  --csv "$out/bench_hf_mistral.csv" >"$out/bench_hf_mistral.log" 2>&1 || status=1
tail -n 12 "$out/bench_hf_mistral.log"
