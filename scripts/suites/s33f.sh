# gpu_check.sh suite "s33f" (sourced; $out, $commit, ft() and status are set)
# Session 33, CPU-checked only (the interpreter tests; sm_90 builds by hand). Issue 5's
# batch-1 GQA decode (B1, 32 heads, GQA 8:1, hd 128) runs a split kernel and a combine
# kernel: per layer in a graph of 8, 14.2 / 25.3 / 69.6 us at 8k / 32k / 128k against
# cuDNN's 13.1 / 24.7 / 69.1 (b4e1522); the combine takes ~3.0 us plus a kernel
# boundary. The fused combine (FLASHTILE_DECODE_FUSED_COMBINE=1: the last split program
# of a query tile merges) lost by ~8 us in session 7 (0e01b69), when its merge looped one
# split per step: 2 x 32 dependent L2 loads. Session 10 fixed the same chain in the
# combine kernel (COMBINE_CHUNK) but not in the fused merge. Now the merge loads every
# split's max at once and the partial outputs 4 splits per step (kvcache.MERGE_ELEMS).
# 1. The KV-cache GPU tests with the fused combine on (real races, repeats, CUDA graphs).
# 2. scripts/decode_kernels.py: kernels, one call and per layer in a graph of 8, shipped
#    (combine kernel) against the fused merge and cuDNN, GQA 8:1 at 8k / 32k / 128k.
# Prediction: per layer 11.5-13 / 22.5-24 / 67-69 us (the combine kernel and a boundary
# gone, ~1 us of merge on the tail of each tile's last program); if it holds, batch-1 GQA
# moves ahead of cuDNN and toward the 3.2 TB/s at 32k (21 us).
source scripts/suites/lib/steps.sh
FLASHTILE_DECODE_FUSED_COMBINE=1 gpu_pytest pytest_fused 240 4 8 tests/test_kvcache.py
timeout 200 env PYTHONPATH=src python3 scripts/decode_kernels.py --groups 8 \
  --ctx 8192,32768,131072 --variants "flashtile,ft fused-combine,sdpa-cudnn" \
  >"$out/decode_fused.log" 2>&1 || status=1
grep -E "^\||graph failed|rror" "$out/decode_fused.log" | cut -c1-150
