# gpu_check.sh suite "s23d" (sourced; $out, $commit, ft() and status are set)
# Session 23, the last of its device time. 1. The three s22e tests that s23c's 12 workers
#    ran out of GPU memory in (CUDA OOM before any assertion), on 2 workers; the covering
#    grid's last 4 cases (s23c reached 33 of 37, none failed). 2. forward+backward beside
#    cuDNN in one process, flashtile (deterministic, the default) and flashtile-nd
#    (deterministic=False: the one-kernel dq_reduce backward at hd 128 non-causal from 4k),
#    3 rounds. Prediction (s23b's backward +5.8% / +11.7% at 4k / 16k, the backward ~3/4 of
#    a forward+backward): flashtile-nd forward+backward +4% / +8% over flashtile at hd 128
#    non-causal 4k / 16k, i.e. ~0.95-0.97x cuDNN (s21c: 0.93x / 0.85x); equal elsewhere.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_s23d 120 2 6 tests/test_varlen.py -k \
  "(test_varlen_gpu and causal and softcap and heads1 and (64 or 256)) or test_varlen_hopper_auto"
validate_covering_tail validate_tail 100 34
timeout 200 python3 -m flashtile.cli bench --rounds 3 --head-dims 128 64 --seqlens 4096 16384 \
  --backends flashtile flashtile-nd sdpa-cudnn --commit "$commit" --csv "$out/bench_nd.csv" \
  >"$out/bench_nd.log" 2>&1 || status=1
tail -n 30 "$out/bench_nd.log"
