# gpu_check.sh suite "s17b" (sourced; $out, $commit, ft() and status are set)
# 1. Why test_dropout_bits_drop_the_same[True] failed on the H200 in s17a (dq not
#    bitwise): scripts/diag_bits.py, per config, what differs and where.
# 2. The HF step profile again, with the GPU's idle time per step and cuDNN's backward
#    kernels (bprop, dot_do_o, convert_dq, reduce_head) classed as backward. s17a: the
#    kernels alone put flashtile 0.87 / 0.99 ms per step ahead at 8k / 32k, while the
#    bench's wall time had it 1.5 / 5.7 ms behind (one backend after the other).
# 3. The GQA group loop (no partial sums) against expanded programs at 16k / 32k / 64k
#    (s17a: -11.6% at 8k, +2.6% at 32k). Prediction: about level at 16k, +2-4% at 64k.
# 4. The HF bench with interleaved rounds (bench/hf.py since session 17), 5 rounds, then
#    32k again with the group loop (FLASHTILE_HOPPER_BWD_OVERRIDES=gqa_expand=0).
#    Prediction: the training step >= 1.00x sdpa at 8k and 32k once interleaved (the
#    kernels are ahead), the forward 0.99-1.00x at 8k; the group loop +0.5-1% at 32k.
timeout 60 python3 scripts/diag_bits.py >"$out/diag_bits.log" 2>&1 || status=1
cut -c1-230 "$out/diag_bits.log" | tail -n 8
timeout 200 python3 scripts/profile_hf_step.py --contexts 8192 32768 --csv "$out/hfprof.csv" \
  >"$out/hfprof.log" 2>&1 || status=1
grep -E "^\| (attn|gemm|reduce|copy|other|idle|total)|^## " "$out/hfprof.log" | cut -c1-100
timeout 150 python3 scripts/bench_hopper_bwd.py --seqlens 16384 32768 65536 --head-dims 64 \
  --causal 1 --batch 1 --nheads 32 --nheads-kv 8 --rounds 5 --ab "|gqa_expand=0" \
  --csv "$out/gqaloop_ab.csv" >"$out/gqaloop_ab.log" 2>&1 || status=1
tail -n 4 "$out/gqaloop_ab.log" | cut -c1-160
ft bench --suite hf --hf-backends flashtile sdpa --hf-reps 5 --commit "$commit" \
  --csv "$out/bench_hf.csv" >"$out/bench_hf.log" 2>&1 || status=1
grep -E "^\|" "$out/bench_hf.log" | cut -c1-160
FLASHTILE_HOPPER_BWD_OVERRIDES=gqa_expand=0 ft bench --suite hf --hf-contexts 32768 \
  --hf-backends flashtile sdpa --hf-reps 5 --commit "$commit" --csv "$out/bench_hf_loop.csv" \
  >"$out/bench_hf_loop.log" 2>&1 || status=1
grep -E "^\|" "$out/bench_hf_loop.log" | cut -c1-160
