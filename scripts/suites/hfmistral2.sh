# gpu_check.sh suite "hfmistral2" (sourced; $out, $commit, ft() and status are set)
# Session 12: `hfmistral` read flashtile's decode at 8k as 38.3 tok/s against 49.5 at 32k,
# although both decode over the same 4096-token sliding-window cache per layer, with
# --hf-reps 2. The decode rows again with 4 reps, at 8k and 16k. Prediction: flashtile's
# decode equal at 8k and 16k (within 10%), near the 32k row's ~50 tok/s: the 8k row was
# a timing artifact, not the kernels. ~2 min.
timeout 200 python3 -m flashtile.cli bench --suite hf --hf-model mistral \
  --hf-contexts 8192 16384 --hf-backends flashtile sdpa --hf-reps 4 --hf-layers 16 \
  --commit "$commit" --csv "$out/bench_hf_mistral2.csv" >"$out/bench_hf_mistral2.log" \
  2>&1 || status=1
tail -n 8 "$out/bench_hf_mistral2.log"
