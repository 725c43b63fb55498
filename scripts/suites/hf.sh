# gpu_check.sh suite "hf" (sourced; $out, $commit, ft() and status are set)
# issue 9: flashtile as a transformers attn_implementation: bf16 model tests (logits,
# padded batches, KV-cache decode, training gradients), then the ~1B Llama benchmark
# (forward, train step, decode tokens/s vs sdpa / flash_attention_2 at 2k, 8k, 32k)
python3 -c "import transformers; print('transformers', transformers.__version__)" | tee -a "$out/env.txt"
python3 -m pytest -q -m gpu -n 4 tests/test_hf.py -p no:cacheprovider --durations=10 \
  >"$out/pytest_hf.log" 2>&1 || status=1
tail -n 15 "$out/pytest_hf.log"
ft bench --suite hf --hf-reps 2 --commit "$commit" --csv "$out/bench_hf.csv" \
  >"$out/bench_hf.log" 2>&1 || status=1
tail -n 30 "$out/bench_hf.log"
