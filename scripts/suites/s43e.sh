# gpu_check.sh suite "s43e" (sourced; $out, $commit, ft() and status are set)
# For session 43: hd 128 non-causal forwards on the persistent split ring at every length
# (16k included) with o_lag / q_early, as shipped. The Gluon forward's GPU tests that
# reach it (236: the validation grid through the shipped schedule, windows at hd 128,
# windows and softcaps on the persistent grid, Gluon against portable), then issue 4's
# floor cells (hd 64 / 128 from 4k) against cuDNN alone,
# 3 rounds (the s43 perf run read a 0.2 ms round-to-round spread at hd 128 non-causal 4k).
source scripts/suites/lib/steps.sh
gpu_pytest pytest_s43e 200 8 6 tests/test_hopper.py \
  -k "persistent_window_softcap or persistent_lag or hopper_vs_reference or hopper_vs_portable or (window and 128)"
timeout 75 python3 -m flashtile.cli bench --head-dims 64 128 --seqlens 4096 16384 \
  --backends flashtile sdpa-cudnn --rounds 3 --commit "$commit" --csv "$out/bench_floor.csv" \
  >"$out/bench_floor.log" 2>&1 || status=1
grep -E "^B[0-9]+ S" "$out/bench_floor.log" | cut -c1-110
