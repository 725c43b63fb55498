# gpu_check.sh suite "s43a" (sourced; $out, $commit, ft() and status are set)
# For session 43: session 42's CPU-only changes on a GPU (f809d57: the "not Gluon" plan
# entry, per-thread launch recording; 1671e3f: sdpa._unsupported), ~150 s.
# 1. GPU tests: the plans (bitwise on / off), the public API's and MiniGPT's GPU tests
#    (portable-kernel shapes on sm_90, where the "not Gluon" entry now skips the Gluon
#    predicates), the HF model tests.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_s43a 200 8 8 tests/test_host_plans.py tests/test_minigpt.py \
  tests/test_hf.py tests/test_sdpa.py
# 2. Host us per call, plans off / on in one process, at MiniGPT's shape (portable on
#    sm_90) and the HF Llama's 2k shape. Prediction: MiniGPT forward launcher -20 to
#    -60 us with plans (the portable plan plus the skipped Gluon predicates), the HF
#    shape as in s42b (108 -> 42 us).
timeout 120 python3 scripts/host_split.py --ab 4,256,6,64,1 1,2048,32,64,1 \
  >"$out/host_split_ab.log" 2>&1 || status=1
tail -n 14 "$out/host_split_ab.log"
# 3. The hf bench at 2k (forward host-bound: 0.89x in s42c), 3 reps.
ft bench --suite hf --hf-contexts 2048 8192 --hf-reps 3 --commit "$commit" \
  --csv "$out/bench_hf.csv" >"$out/bench_hf.log" 2>&1 || status=1
grep -E "^\| (2k|8k) \| (flashtile|sdpa) " "$out/bench_hf.log"
