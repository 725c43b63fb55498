# gpu_check.sh suite "shortbwd" (sourced; $out, $commit, ft() and status are set)
# The backward at short sequences, where the dispatch table (configs.hopper_bwd_preferred:
# the Gluon backward at hd 128 at every length, at hd 64 from 1k keys) was measured only
# at 1k and up. The varlen bench's dense comparison (equal sequences of the mean length,
# 640 tokens) read 94-125 TFLOPS forward+backward at hd 128 causal (30970b9, 2b1077d),
# against 150-187 for the varlen batch of the same tokens on the portable kernels; its
# forward alone read 242. Gluon vs portable backward vs cuDNN at 512-2k, 16k tokens.
# Prediction: the portable backward wins at hd 128 causal below 1k.
timeout 200 python3 scripts/bench_hopper_bwd.py --seqlens 512 640 1024 2048 \
  --head-dims 64 128 --causal 0 1 --only gluon-bwd portable-bwd cudnn-fwd cudnn-fwd+bwd \
  --csv "$out/shortbwd.csv" >"$out/shortbwd.log" 2>&1 || status=1
grep -E "FAILED|MISMATCH|Error" "$out/shortbwd.log" | head -n 10
tail -n 18 "$out/shortbwd.log"
