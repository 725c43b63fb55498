# gpu_check.sh suite "s34a" (sourced; $out, $commit, ft() and status are set)
# Session 34. flash-attn's packed entry points (flashtile.flash_attn_qkvpacked_func,
# _kvpacked_func and the varlen pair, ops/packed.py) hand the kernels views of one
# packed tensor: token strides of 3 (or 2) x nheads x headdim, no copy. On the CPU they
# are bitwise the unpacked calls; here the whole file runs on CUDA against the fp64
# reference, the gpu-marked cases at sizes where sm_90 takes the Gluon kernels (TMA
# descriptors over the packed strides; the fixed-point backward at hd 128 4k; the varlen
# Gluon kernels at an 8k-long sequence). Prediction: all pass (the descriptors take any
# 16-byte aligned strides).
source scripts/suites/lib/steps.sh
cuda_pytest pytest_packed 240 6 tests/test_packed.py -n 4
# The examples at their GPU sizes (quickstart 2 x 2048 at hd 64; varlen 16 sequences up to
# 4096; paged decode with 3000-token prompts; the HF example's 4-layer Mistral-style model
# at 1024 tokens in bf16), each checking itself against fp64. Prediction: all pass.
cuda_pytest pytest_examples 300 6 tests/test_examples.py
