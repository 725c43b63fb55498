# gpu_check.sh suite "decodesweep" (sourced; $out, $commit, ft() and status are set)
# Decode tiles x KV splits where the decode bench is below cuDNN (scripts/decode_sweep.py:
# hd 64 MHA batch 16, hd 64 batch 1-4, hd 128 GQA batch 1 at 128k), CUDA-graph replay
# against cuDNN's, ~2-3 min. Prediction (before the run): the hd 64 batch-16 rows are
# wave quantisation (512 programs on ~3 per SM x 132 SMs = 1.3 waves): 2-4 splits, or
# a tile with other residency, recover 10-20%; hd 128 GQA batch 1 at 128k: 33 splits
# (132 programs for 132 SMs, not 128) +3%.
python3 scripts/decode_sweep.py --csv "$out/decode_sweep.csv" >"$out/decode_sweep.log" \
  2>"$out/decode_sweep.err" || status=1
sed -n '/best per shape/,$p' "$out/decode_sweep.log"
tail -n 3 "$out/decode_sweep.err"
