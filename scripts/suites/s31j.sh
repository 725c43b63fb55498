# gpu_check.sh suite "s31j" (sourced; $out, $commit, ft() and status are set)
# Session 31: hd 128 causal calls of 1k-2k queries on stage A's 64 x 64 tiles
# (configs.HD128_CAUSAL_SHORT_A_MAX; s31i: 373.0 / 362.3 against stage C's 351.6 / 353.2
# TFLOPS at 1k). 1. GPU tests: the new dispatch against the fp64 reference (plain,
# windowed, softcapped, GQA, fp16), the stages' tests at hd 128; the covering grid at hd
# 128. 2. Through the public call (`flashtile bench`, 3 rounds): hd 128 causal 1k,
# forward and forward+backward, the new table against FLASHTILE_HOPPER_SCHEDULE=C (the
# old one at 1k). Prediction: forward +3-6% (0.86x -> 0.89-0.91x cuDNN), forward+backward
# +1-2%.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_short_causal 200 4 6 tests/test_hopper.py -k "short_causal or (stages_vs_reference and 128)"
validate_covering_tail covering_128 200 1 128
for v in new C; do
  env $([ "$v" = C ] && echo FLASHTILE_HOPPER_SCHEDULE=C) timeout 120 python3 -m flashtile.cli \
    bench --seqlens 1024 --head-dims 128 --causal yes --backends flashtile sdpa-cudnn \
    --rounds 3 --commit "$commit" --csv "$out/short_${v}.csv" >"$out/short_${v}.log" 2>&1 \
    || status=1
  echo "== $v"; grep -E "^\| 128" "$out/short_${v}.log" | cut -c1-160
done
