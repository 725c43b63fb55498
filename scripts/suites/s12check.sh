# gpu_check.sh suite "s12check" (sourced; $out, $commit, ft() and status are set)
# Session 12, after sliding windows went on by default on the Gluon kernels
# (hopper_fwd.window_mode: unset = on): the covering validation grid with the defaults
# (no switch set), then the HuggingFace model tests (Mistral's sliding window, Gemma-2's,
# Llama GQA, GPT-2) on the GPU. ~6 min.
unset FLASHTILE_HOPPER_WINDOW
timeout 340 python3 -m flashtile.cli validate --grid covering >"$out/validate_s12.log" \
  2>&1 || status=1
tr '\r' '\n' <"$out/validate_s12.log" | grep -v "it/s\]$" | tail -n 3
python3 -c "import transformers; print('transformers', transformers.__version__)" | tee -a "$out/env.txt"
timeout 200 python3 -m pytest -q -m gpu -n 4 tests/test_hf.py -p no:cacheprovider \
  -rf --tb=short >"$out/pytest_hf_s12.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_hf_s12.log" | tail -n 6
