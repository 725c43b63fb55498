# gpu_check.sh suite "s31l" (sourced; $out, $commit, ft() and status are set)
# Session 31: the short causal hd 128 tile (stage A 64 x 64) below 1k as well (s31k: 290.5
# against 231.1 TFLOPS at 512). GPU tests of every hd 128 causal forward path under the
# new table (the shipped dispatch against the fp64 reference: plain, windows, softcaps,
# fully masked rows, the short-tile cases from 1 to 2047 queries), then the public call at
# 512 / 1k (forward and forward+backward against cuDNN, 3 rounds).
# Prediction: all pass; forward at 512 ~0.85-0.9x cuDNN (0.69x with the 128-row tiles).
source scripts/suites/lib/steps.sh
gpu_pytest pytest_short_all 170 4 6 tests/test_hopper.py \
  -k "(d128 and causal) and (short_causal or hopper_vs_reference or window_vs or softcap_vs or fully_masked)"
timeout 80 python3 -m flashtile.cli bench --seqlens 512 1024 --head-dims 128 --causal yes \
  --backends flashtile sdpa-cudnn --rounds 3 --commit "$commit" --csv "$out/short512.csv" \
  >"$out/short512.log" 2>&1 || status=1
grep -E "^B[0-9]+ S" "$out/short512.log" | cut -c1-120
