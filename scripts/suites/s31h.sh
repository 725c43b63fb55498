# gpu_check.sh suite "s31h" (sourced; $out, $commit, ft() and status are set)
# Session 31, issue 4's 1k forward target (>= 1.0x cuDNN; 7db4c84: hd 64 causal 0.907x,
# hd 128 causal 0.862x). The forward at 1k is not host-bound (s31f: 124-173 us per
# launch against a 190-230 us kernel), so the kernel's per-program cost is what is left:
# a 1k causal query tile sees 1-8 key tiles, 4.5 on average, against ~2 steps of fixed
# cost per program. Candidates (scripts/bench_hopper.py, 3 interleaved rounds):
#   hd 64 causal: shipped stage A (128 rows, capped at 128 registers, two per SM) against
#     stage C on the persistent grid with the split ring and the paired order (gluon-Cs,
#     what took hd 128 causal 1k from 320 to 355 TFLOPS in s21b) and stage A on 64-row
#     one-warpgroup programs (gluon-A*: more, shorter programs).
#   hd 128 causal: shipped (gluon-Cs) against gluon-A* on 64-row, 64-key tiles.
# Prediction: hd 64 gluon-Cs +0-10% over A at 1k, A* within +-5%; hd 128 A* -5% to +5%.
timeout 200 python3 scripts/bench_hopper.py --head-dims 64 --causal 1 --seqlens 1024 2048 \
  --only gluon-A gluon-Cs gluon-A* --a-config block_m=64,num_warps=4 --rounds 3 \
  --csv "$out/fwd1k_64.csv" >"$out/fwd1k_64.log" 2>&1 || status=1
grep -E "MISMATCH|rror" "$out/fwd1k_64.log" | head -5; tail -n 6 "$out/fwd1k_64.log" | cut -c1-200
timeout 200 python3 scripts/bench_hopper.py --head-dims 128 --causal 1 --seqlens 1024 \
  --only gluon-A gluon-Cs gluon-A* --a-config block_m=64,num_warps=4,block_n=64 --rounds 3 \
  --csv "$out/fwd1k_128.csv" >"$out/fwd1k_128.log" 2>&1 || status=1
grep -E "MISMATCH|rror" "$out/fwd1k_128.log" | head -5; tail -n 5 "$out/fwd1k_128.log" | cut -c1-200
