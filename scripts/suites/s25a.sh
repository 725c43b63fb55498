# gpu_check.sh suite "s25a" (sourced; $out, $commit, ft() and status are set)
# Session 25: decode tiles x splits at the cells of `decode` (97ab595) below cuDNN where
# SDPA reads at bandwidth (issue 5: >= 1.0x there): hd 64 GQA 8:1 batch 16 / 64
# (0.94-0.96x eager), and 1k contexts at batch 16 / 64 (0.85-0.89x). CUDA-graph replay,
# ~2 min. Prediction (before the run): hd 64 GQA at batch 16 / 64 runs 256 programs two
# per SM on 128 of 132 SMs; a tile of other residency or 2-4 splits recovers 3-6%. At 1k,
# hd 128's 16 x 128 tile (136 KB, one program per SM) fills and drains its 3-stage ring
# every 8 tiles; the 16 x 64 w4 tile two per SM recovers 8-15%.
python3 scripts/decode_sweep.py --csv "$out/decode_sweep.csv" --splits 0,1,2,3,4 \
  --shapes "64,8,16,8192;64,8,16,32768;64,8,64,8192;64,8,64,131072;128,1,16,1024;128,1,64,1024;128,8,64,1024;64,1,64,1024" \
  >"$out/decode_sweep.log" 2>"$out/decode_sweep.err" || status=1
sed -n '/best per shape/,$p' "$out/decode_sweep.log"
tail -n 3 "$out/decode_sweep.err"
