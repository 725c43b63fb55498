# gpu_check.sh suite "s36a" (sourced; $out, $commit, ft() and status are set)
# Session 36.
# 1. The hd 256 split ring without the turn waits (s35a on an H100: +4-7% forward
#    non-causal, level causal): its GPU tests with FLASHTILE_HOPPER_C_PINGPONG=0 (s35b's
#    step, which did not run: the suite did not source steps.sh).
# 2. The turn waits through the public call, forward alone, interleaved in one process
#    (env_ab --measures fwd): hd 128 (stage C shipped from 1k non-causal, 4k causal) and
#    hd 256. Predictions: hd 256 +3-8% non-causal, level causal (s35a); hd 128 -3..+3%
#    (a 128-key tile's softmax is half of hd 256's GEMM share, so the turns hide more).
# 3. hd 64 on stage C's persistent split ring (never measured there; A ships), with and
#    without the turn waits, beside stage A and cuDNN. Prediction: below A by 5-15% (at
#    hd 64 the exp2 work equals the GEMMs', so the turns matter and the ring does not).
# 4. s35a's varlen failure: env_ab --varlen at hd 256 8k / 16k exactly as s35a ran it
#    (the one-shot C, now forced by FLASHTILE_HOPPER_SCHEDULE=C, against stage A), then,
#    if it fails, the 16k non-causal shape alone with CUDA_LAUNCH_BLOCKING=1; and
#    diag_varlen256.py on the one-shot C with the backward (s35b ran it forward only).
source scripts/suites/lib/steps.sh
FLASHTILE_HOPPER_C_PINGPONG=0 gpu_pytest pytest_nopp256 150 4 4 tests/test_hopper.py \
  -k "hd256_stage_c or no_o_stage_hd256"
env_ab fwd_turns 240 --ab "|FLASHTILE_HOPPER_C_PINGPONG=0" --measures fwd \
  --head-dims 128 256 --seqlens 1024 4096 16384 --causal 0 1 --rounds 3
bench_fwd fwd64_c 120 "hd 64: A, C split ring (K3 V3), with turn waits" --head-dims 64 \
  --seqlens 4096 16384 --only gluon-A gluon-Cs "gluon-Cs*" sdpa-cudnn --rounds 3 \
  --cs-config v_stages=3
FLASHTILE_HOPPER_C_PINGPONG=0 bench_fwd fwd64_c_nopp 120 "hd 64: A, C split ring, no turn waits" \
  --head-dims 64 --seqlens 4096 16384 --only gluon-A gluon-Cs "gluon-Cs*" sdpa-cudnn \
  --rounds 3 --cs-config v_stages=3
echo "== varlen hd 256 as s35a (C forced | A)"
if ! env_ab varlen256 150 --varlen --ab "FLASHTILE_HOPPER_SCHEDULE=C|FLASHTILE_HOPPER_SCHEDULE=A" \
  --head-dims 256 --seqlens 8192 16384 --causal 0 1 --rounds 3 | tail -n 12; then :; fi
if grep -q "rror" "$out/varlen256.log"; then
  echo "== again, 16k non-causal, CUDA_LAUNCH_BLOCKING=1"
  CUDA_LAUNCH_BLOCKING=1 env_ab varlen256_blocking 150 --varlen \
    --ab "FLASHTILE_HOPPER_SCHEDULE=C|FLASHTILE_HOPPER_SCHEDULE=A" --head-dims 256 \
    --seqlens 16384 --causal 0 --rounds 3 | tail -n 12
fi
echo "== one-shot C varlen 16k + bwd"
timeout 90 env CUDA_LAUNCH_BLOCKING=1 FLASHTILE_HOPPER_SCHEDULE=C python3 \
  scripts/diag_varlen256.py --lens 16384 --bwd --repeat 40 2>&1 | grep -E "^(OK|FAILED)|rror" \
  | head -3 | cut -c1-200
