# gpu_check.sh suite "s42c" (sourced; $out, $commit, ft() and status are set)
# For session 42, after s42b (launch plans, 7ae0dfa): the plans' GPU test again (s42b's
# first run asserted a Gluon forward at hd 64 non-causal 1k, which runs the portable
# kernel), then where the HF Llama's 2k step still loses to sdpa with plans on (s42b:
# forward 0.86x, training step 0.91x): the torch profiler's kernel classes and idle time
# per step (profile_hf_step.py), and host us per attention call (hf_host_calls.py).
# Prediction: the forward's gap is idle GPU time (host), not kernels: flashtile's idle
# per forward >= 2 ms above sdpa's.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_s42c 150 4 6 tests/test_host_plans.py
timeout 200 python3 scripts/profile_hf_step.py --contexts 2048 --modes fwd train --steps 2 \
  --csv "$out/profile_hf_2k.csv" >"$out/profile_hf_2k.log" 2>&1 || status=1
grep -vE "^\s*$" "$out/profile_hf_2k.log" | cut -c1-160 | tail -n 60
timeout 120 python3 scripts/hf_host_calls.py --context 2048 >"$out/hf_host_calls_2k.log" 2>&1 \
  || status=1
tail -n 14 "$out/hf_host_calls_2k.log"
# The whole hf bench (2k / 8k / 32k, 3 reps) with plans on: issue 9's table at a8cb8ab.
ft bench --suite hf --hf-reps 3 --commit "$commit" --csv "$out/bench_hf.csv" \
  >"$out/bench_hf.log" 2>&1 || status=1
tail -n 14 "$out/bench_hf.log"
