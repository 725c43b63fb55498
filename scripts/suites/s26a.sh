# gpu_check.sh suite "s26a" (sourced; $out, $commit, ft() and status are set)
# Prepared in session 26 without device time (CPU-checked: sm_90 builds, the bound and
# dequantisation kernels under the interpreter, the scheme simulated on the CPU).
# HopperBwdConfig.reduce_fixed: the one-kernel backward with fixed-point adds for the
# default (deterministic) calls. fixed_dq.bounds reads dO, K and V once (|dO_i|^2 per
# row, atomic maxima per program head), fixed_dq.mults turns them into one power of two
# per query row (B_i 2^e_i <= 2^30, B_i = 2 scale |dO_i| max|V| max|K|); each step loads
# its rows' 2^e_i under the dQ GEMM, scales its dQ share, rounds it to int32 (cvt.rni) and
# TMA reduce-adds it into an int32 buffer: integer adds in any order give the same sum.
# dequantize divides and casts. Same buffer size and traffic as the racing fp32 adds.
# ptxas at hd 128: 255 registers, 88 / 144 B spilled (racing 52 / 100), 0 with gqa_expand.
# 1. GPU tests: the bound / dequantisation kernels, the launcher against the reference
#    (NaN-filled buffers, 16k keys, GQA both ways, causal) and bitwise over 3 runs, the
#    public API with windows / softcaps / wide logits, a NaN in dO.
# 2. A/B against the racing reduce and the two-kernel backward, 5 interleaved rounds, hd
#    128 non-causal 1k-16k and causal 4k / 16k.
#    Prediction: fixed within 0-4% of racing everywhere (the bound pass reads 192 MiB at
#    16k tokens: ~50 us, 1.5% of a 4k backward, 0.4% at 16k; 32 cvt and a 2-value load per
#    thread per step; 36 B more spills), so +2-5% / +9-12% / +8-11% over the two-kernel
#    backward at 4k / 8k / 16k non-causal; causal below the two-kernel backward, as
#    racing is.
# 3. hd 64, where the 8-warp reduce programs lost 6-24% (one per SM, in lock step): the
#    same kernel on one warpgroup of 64 keys (block_n=64, num_warps=4: 182 registers, 83
#    KB, two programs per SM), racing and fixed, against the two-kernel backward.
#    Prediction: level with the two-kernel backward (+-5%) non-causal, the cross-program
#    overlap back; twice the reduce traffic per FLOP (~2.5 TB/s at 400 TFLOPS) may cap it.
# 4. forward+backward beside cuDNN with FLASHTILE_HOPPER_BWD_REDUCE_FIXED=1 (deterministic
#    calls), hd 128 non-causal: prediction 0.90-0.92x at 4k, 0.93-0.95x at 16k (0.89x /
#    0.84x deterministic at 29acd62, racing 0.92x / 0.95x), peak memory as flashtile-nd's.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_s26a 200 4 8 tests/test_hopper_bwd_reduce.py tests/test_fixed_dq.py \
  -k "fixed or bounds or dequantize or one_warpgroup"
R="dq_reduce=1,reduce_late=1,block_n=128,num_warps=8,prefetch_stats=0,max_regs=none"
timeout 150 python3 scripts/bench_hopper_bwd.py --ab "|$R|$R,reduce_fixed=1" --rounds 5 \
  --head-dims 128 --seqlens 1024 4096 8192 16384 --causal 0 \
  --csv "$out/fixed_ab.csv" >"$out/fixed_ab.log" 2>&1 || status=1
grep -A8 "^Gluon backward TFLOPS" "$out/fixed_ab.log" | cut -c1-140
timeout 90 python3 scripts/bench_hopper_bwd.py --ab "|$R|$R,reduce_fixed=1" --rounds 5 \
  --head-dims 128 --seqlens 4096 16384 --causal 1 \
  --csv "$out/fixed_ab_causal.csv" >"$out/fixed_ab_causal.log" 2>&1 || status=1
grep -A6 "^Gluon backward TFLOPS" "$out/fixed_ab_causal.log" | cut -c1-140
grep -E "Error|Traceback" "$out"/fixed_ab*.log | head -5
R64="dq_reduce=1,reduce_late=1,block_n=64,num_warps=4,prefetch_stats=0,max_regs=none"
timeout 150 python3 scripts/bench_hopper_bwd.py --ab "|$R|$R64|$R64,reduce_fixed=1" \
  --rounds 5 --head-dims 64 --seqlens 1024 4096 16384 --causal 0 1 \
  --csv "$out/fixed_ab64.csv" >"$out/fixed_ab64.log" 2>&1 || status=1
grep -A10 "^Gluon backward TFLOPS" "$out/fixed_ab64.log" | cut -c1-140
FLASHTILE_HOPPER_BWD_REDUCE_FIXED=1 timeout 150 python3 -m flashtile.cli bench --rounds 3 \
  --causal no --head-dims 128 --seqlens 4096 16384 --backends flashtile flashtile-nd sdpa-cudnn \
  --commit "$commit" --csv "$out/bench_fixed.csv" >"$out/bench_fixed.log" 2>&1 || status=1
tail -n 12 "$out/bench_fixed.log"
