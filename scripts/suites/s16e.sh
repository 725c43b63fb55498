# gpu_check.sh suite "s16e" (sourced; $out, $commit, ft() and status are set)
# 1. Dropout bits, per kernel: bench_dropout.py --kernels splits flashtile's training
#    call into its kernels (bits2 could not: the bits kernel sat in the "bwd" column).
#    The bits kernel now skips blocks a causal mask hides whole (~31% at 64 x 256).
#    Prediction, 64 x 256: the bits kernel ~25-35 us per call, the backward kernels with
#    bits ~110-130 us together against ~138 drawn (SASS: their step loops 35-50% shorter).
# 2. The HF Llama's attention backward (B1 H32 KV8 hd 64 causal, 8k / 32k), A/B in one
#    process: the shipped (expanded GQA programs, capped at 168 registers) against
#    uncapped, a dK/dV ring of 3, a dQ ring of 2. Issue 9's training step reads 0.99x;
#    prediction: within +-3%, a win there ships for GQA. ~4 min.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_bits 120 2 4 tests/test_flash.py -k "graph_capture"
dropout_bits_ab dropout_k --kernels --backends flashtile,cudnn
graph_step_bits 120
timeout 150 python3 scripts/bench_hopper_bwd.py --seqlens 8192 32768 --head-dims 64 \
  --causal 1 --batch 1 --nheads 32 --nheads-kv 8 --rounds 7 \
  --ab "|max_regs=none|num_stages=3|dq_num_stages=2" --csv "$out/gqa_ab.csv" \
  >"$out/gqa_ab.log" 2>&1 || status=1
tail -n 4 "$out/gqa_ab.log" | cut -c1-140
