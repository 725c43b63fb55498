# gpu_check.sh suite "s29c" (sourced; $out, $commit, ft() and status are set)
# Session 29, after s29a.
# 1. The varlen backward threshold: s29a measured the Gluon varlen backward +22% over the
#    portable one at hd 64 causal 2k (11 sequences of 200-2048 tokens), so hd 64 causal
#    takes it from 2k now (configs.HOPPER_VARLEN_BWD_CAUSAL_HD64_MIN_SEQLEN). The dispatch
#    GPU test, the hd 64 varlen GPU tests, then an A/B through flash_attn_varlen_func at
#    1k / 2k-long sequences, hd 64 and 128 causal: the default, the Gluon varlen backward
#    forced off (=0, portable) and on (=1). Prediction: hd 64 2k default = forced on,
#    +15-22% over off; 1k (not measured before) within +-10% either way; hd 128 causal 2k
#    (kept portable: s25d +13% / -8%) unclear.
# 2. Where the fixed-point backward's time goes besides its main kernel:
#    scripts/diag_fwd_bwd.py (torch profiler per kernel) at hd 128 4k causal / non-causal
#    and 16k non-causal: the preprocess, the int32 zero fill, bounds, mults, dequantize.
#    Prediction: the four small kernels ~0.14 ms together (ncu, session 28), 7-9% of the
#    4k backward.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_varlen_dispatch 200 4 6 tests/test_varlen.py -k "hopper or 64"
V=FLASHTILE_HOPPER_VARLEN_BWD
timeout 200 python3 scripts/env_ab.py --varlen --ab "|$V=0|$V=1" \
  --head-dims 64 128 --seqlens 1024 2048 --causal 1 --rounds 3 \
  --csv "$out/varlen_thr_ab.csv" >"$out/varlen_thr_ab.log" 2>&1 || status=1
grep -vE "^\s*$" "$out/varlen_thr_ab.log" | cut -c1-200
timeout 150 python3 scripts/diag_fwd_bwd.py 4,4096,16,128,1 4,4096,16,128,0 1,16384,16,128,0 \
  >"$out/diag_fixed.log" 2>&1 || status=1
grep -vE "^\s*$" "$out/diag_fixed.log" | grep -v "cProfile\|ncalls\|{built-in\|\.py:" \
  | cut -c1-160 | head -60
