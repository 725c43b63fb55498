# gpu_check.sh suite "s13check" (sourced; $out, $commit, ft() and status are set)
# Session 13, after the softcap went on by default on the Gluon kernels (tanh.approx;
# hd 64 softcapped forwards on the portable kernel) and the window defaults moved (hd 256
# windows on stage C from 8k; the varlen Gluon backward takes windows): the softcap GPU
# tests with no switch set, the covering validation grid, the HuggingFace model tests
# (Gemma-2's softcap and window, Mistral's window, Llama GQA, GPT-2), and the softcap
# bench with the hd 64 dispatch. ~7 min.
source scripts/suites/lib/steps.sh
unset FLASHTILE_HOPPER_WINDOW FLASHTILE_HOPPER_SOFTCAP FLASHTILE_HOPPER_VARLEN_BWD
gpu_pytest pytest_softcap_default 200 8 6 tests/test_hopper.py -k "softcap"
validate_covering validate_s13 300
python3 -c "import transformers; print('transformers', transformers.__version__)" | tee -a "$out/env.txt"
gpu_pytest pytest_hf_s13 200 4 6 tests/test_hf.py
timeout 150 python3 scripts/bench_window.py --softcap 50 >"$out/bench_softcap.log" 2>&1 \
  || status=1
grep -E "TFLOPS|Error" "$out/bench_softcap.log" | cut -c1-110
