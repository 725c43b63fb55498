# gpu_check.sh suite "s42b" (sourced; $out, $commit, ft() and status are set)
# For session 42: launch plans of the Gluon path (ops/_launch.make_plan, flash.USE_PLANS):
# a repeated call signature replays the launches its first call made, skipping the sm_90
# dispatch, the configs and the cached launch's key. scripts/host_gluon.py (CPU, stub
# launches): HF Llama 2k forward 130 -> 66 us, backward 356 -> 197 us of Python.
# 1. GPU tests: plans on / off bitwise equal (test_host_plans), the tests whose spies
#    count Gluon calls across repeated calls (plans off there), the HF model tests.
#    (Its first run lacked the `source` line below, so this step did not run; session 42
#    ran the selection by hand on the warm machine.)
source scripts/suites/lib/steps.sh
gpu_pytest pytest_s42b 200 4 6 tests/test_host_plans.py tests/test_hf.py \
  tests/test_hopper_bwd.py tests/test_hopper_bwd_reduce.py \
  -k "plans or hf or deterministic or window_dispatch or public_api"
# 2. Host us per call, plans off / on in one process (host_split.py --ab, median of 4
#    rounds). Prediction: forward (grad) -150 to -250 us, autograd.grad -200 to -400 us
#    at the HF shape (this host runs Python ~3x slower than the CPU box).
timeout 120 python3 scripts/host_split.py --ab 1,2048,32,64,1 16,1024,16,128,0 \
  >"$out/host_split_ab.log" 2>&1 || status=1
tail -n 20 "$out/host_split_ab.log"
# 3. The HF bench at 2k / 8k, plans off then on (separate processes; FLASHTILE_LAUNCH_PLANS).
#    Prediction: 2k forward 0.86x -> 0.95-1.05x sdpa, training step 0.75x -> 0.85-0.95x;
#    8k within noise (the host already runs ahead of the GPU there).
for plans in 0 1; do
  FLASHTILE_LAUNCH_PLANS=$plans ft bench --suite hf --hf-contexts 2048 8192 --hf-reps 3 \
    --commit "$commit" --csv "$out/bench_hf_plans$plans.csv" \
    >"$out/bench_hf_plans$plans.log" 2>&1 || status=1
  echo "== FLASHTILE_LAUNCH_PLANS=$plans"
  grep -E "^\| (2k|8k) \| (flashtile|sdpa) " "$out/bench_hf_plans$plans.log"
done
