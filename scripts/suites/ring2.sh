# gpu_check.sh suite "ring2" (sourced; $out, $commit, ft() and status are set)
# Ring attention on 2 GPUs (nvidia-h200-x2), issue 10: torchrun --nproc-per-node 2, NCCL.
#   --ring-check  forward and forward+backward of the zig-zag ring (S = 16k, bf16, D = 128,
#                 causal and not) against flash_attn_func on the whole sequence on one GPU,
#                 each rank its shard, DESIGN.md's rule; PASS/FAIL per case (non-zero exit)
#   weak scaling  8k 16k 32k tokens per GPU (S = 16k .. 64k)
#   strong        S = 128k and 1M (64k/GPU and 512k/GPU)
#   1-GPU kernel timed up to 128k (above: its 128k TFLOPS stand in, marked "(at 128k)");
#   fwd+bwd and torch context_parallel up to 256k; 1M forward only.
#
# Estimate (H = 2048 / D = 16, D = 128, W = 2; FLOPs 4 H S^2 D, halved for causal; forward
# at 400 TFLOPS per GPU, backward 2.5x the work at 300; one ring call on the 2 GPUs):
#   S      full fwd / fwd+bwd    causal fwd / fwd+bwd    this suite's share
#   16k    0.003 s / 0.012 s     0.001 s / 0.006 s         ~1 s
#   32k    0.011 s / 0.048 s     0.006 s / 0.024 s         ~5 s
#   64k    0.044 s / 0.19 s      0.022 s / 0.095 s        ~18 s
#   128k   0.18 s  / 0.76 s      0.088 s / 0.38 s         ~32 s
#   256k   0.70 s  / 3.0 s       0.35 s  / 1.5 s          ~45 s  (no 1-GPU run)
#   1M     11.3 s  / (49 s)      5.6 s   / (24 s)         ~68 s  (forward only)
# Each measurement (ring, ring without sends, sends alone, 1-GPU, torch-CP at ~1.5x the
# ring's time) is 1 warm-up call + as many calls as fit in --ring-budget-s 2 (at least 1,
# at most 10): ~170 s of kernels (~175 s if the backward ran at half the rate above: the
# budget, not the FLOPs, bounds the long cases), plus ~1 min of start-up, compilation and
# the check (fp64 references at 16k, one head at a time): about 4 minutes. --ring-deadline-s 240
# starts no new length after 4 minutes of bench (1M would be the one left out), and the
# timeout is the last guard for the 7-minute limit.
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "$ngpu" -lt 2 ]; then
  echo "ring2 needs 2 GPUs, found $ngpu (use the nvidia-h200-x2 machine)"
  status=1
else
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  timeout -k 20 330 python3 -m torch.distributed.run --standalone --nproc-per-node 2 \
    -m flashtile.cli bench --suite ring --ring-check --ring-check-seqlen 16k \
    --ring-local-seqlens 8k 16k 32k --ring-seqlens 128k 1024k \
    --ring-single-max 128k --ring-bwd-max 256k --ring-cp-max 256k \
    --ring-budget-s 2 --ring-deadline-s 200 --commit "$commit" --csv "$out/bench_ring2.csv" \
    >"$out/bench_ring2.log" 2>&1 || status=1
  grep -E '^ring check|^ +(max|rank)' "$out/bench_ring2.log"
  tail -n 40 "$out/bench_ring2.log"
fi
