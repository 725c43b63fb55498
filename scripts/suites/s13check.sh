# gpu_check.sh suite "s13check" (sourced; $out, $commit, ft() and status are set)
# Session 13, after the softcap went on by default on the Gluon kernels (tanh.approx;
# hd 64 softcapped forwards on the portable kernel) and the window defaults moved (hd 256
# windows on stage C from 8k; the varlen Gluon backward takes windows): the softcap GPU
# tests with no switch set, the covering validation grid, the HuggingFace model tests
# (Gemma-2's softcap and window, Mistral's window, Llama GQA, GPT-2), and the softcap
# bench with the hd 64 dispatch. ~7 min.
unset FLASHTILE_HOPPER_WINDOW FLASHTILE_HOPPER_SOFTCAP FLASHTILE_HOPPER_VARLEN_BWD
timeout 200 python3 -m pytest -q -m gpu -n 8 tests/test_hopper.py -k "softcap" \
  -p no:cacheprovider -rf --tb=short >"$out/pytest_softcap_default.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_softcap_default.log" | tail -n 6
timeout 300 python3 -m flashtile.cli validate --grid covering >"$out/validate_s13.log" \
  2>&1 || status=1
tr '\r' '\n' <"$out/validate_s13.log" | grep -v "it/s\]$" | tail -n 3
python3 -c "import transformers; print('transformers', transformers.__version__)" | tee -a "$out/env.txt"
timeout 200 python3 -m pytest -q -m gpu -n 4 tests/test_hf.py -p no:cacheprovider \
  -rf --tb=short >"$out/pytest_hf_s13.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_hf_s13.log" | tail -n 6
timeout 150 python3 scripts/bench_window.py --softcap 50 >"$out/bench_softcap.log" 2>&1 \
  || status=1
grep -E "TFLOPS|Error" "$out/bench_softcap.log" | cut -c1-110
