# gpu_check.sh suite "s25e" (sourced; $out, $commit, ft() and status are set)
# Session 25: the varlen thresholds from s25d (Gluon forward at hd 128 from 4k; Gluon
# backward causal from 4k): the dispatch GPU test, then `bench --suite varlen` at 2k / 4k /
# 8k with the defaults. Prediction: the 4k varlen/dense ratios move as in s25d (hd 128
# forward 1.10x -> ~1.25x non-causal, 0.97x -> ~1.03x causal; causal forward+backward
# +15%), the 2k and 8k rows unchanged within the bench's noise (+-10% on 2k fwd_bwd).
python3 -m pytest -q -m gpu tests/test_varlen.py -k "hopper_auto" -p no:cacheprovider \
  >"$out/pytest_varlen_auto.log" 2>&1 || status=1
tail -n 3 "$out/pytest_varlen_auto.log"
ft bench --suite varlen --quick --commit "$commit" --varlen-max-lens 2048 4096 8192 \
  --csv "$out/bench_varlen.csv" >"$out/bench_varlen.log" 2>&1 || status=1
grep -E "^(D |---|64 |128 )" "$out/bench_varlen.log"
