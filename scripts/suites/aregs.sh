# gpu_check.sh suite "aregs" (sourced; $out, $commit, ft() and status are set)
# Session 12. The backward's score GEMMs with register A operands (wgmma RS):
# HopperBwdConfig.dq_a_regs (dQ kernel: Q, dO loaded once into registers) and a_regs
# (dK/dV kernel: K, V). Count: at 64 x 64 tiles an SS k16 step reads 2 + 2 KB of shared
# memory for 32 tensor-core cycles, 128 B/clock, the SM's shared-memory rate. Per step the
# hd 64 dQ kernel moves 40 KB of operands + 16 KB of TMA fills = 448 cycles of shared
# memory for 384 of GEMMs (smem-bound); RS: 40 KB = 320 cycles. hd 128 dQ: 112 KB (896
# cycles) for 768, RS 80 KB (640). dK/dV hd 64: 64 KB (512) for 512, RS 48 KB (384).
# ptxas (sm_90, CPU): dQ 122 -> 155 regs at hd 64 (3 programs per SM kept: smem-bound),
# 162 -> 218/222 at hd 128 (2 kept); dK/dV hd 64 168 capped with 112 / 224 B of spills
# (20 / 52 before), 204 / 214 uncapped (2 programs per SM).
# Predictions (backward TFLOPS against shipped, same process):
#   dq_a_regs=1, hd 64: the dQ kernel (1/3 of the backward) -10..-15% -> +3..+5%
#   dq_a_regs=1, hd 128: the dQ kernel (39%) -10..-17% -> +4..+6%
#   a_regs=1 (+dq), hd 64 capped: the spills eat the gain: -3..+5% beyond dq alone
#   a_regs=1 (+dq), hd 64 uncapped: -5..+5% (two programs per SM, 10% behind capped
#     before)
timeout 200 python3 -m pytest -q -m gpu tests/test_hopper_bwd.py -k "test_a_regs" \
  -p no:cacheprovider -rf --tb=short >"$out/pytest_aregs.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_aregs.log" | tail -n 6
for cfg in "" "dq_a_regs=1" "a_regs=1,dq_a_regs=1" "a_regs=1,dq_a_regs=1,max_regs=none"; do
  tag="${cfg:-shipped}"; tag=${tag//[=,]/_}
  # shellcheck disable=SC2086
  timeout 120 python3 scripts/bench_hopper_bwd.py --head-dims 64 --seqlens 4096 16384 \
    --only gluon-bwd ${cfg:+--config "$cfg"} >"$out/ar_mha64_$tag.log" 2>&1 || status=1
  # shellcheck disable=SC2086
  timeout 120 python3 scripts/bench_hopper_bwd.py --batch 1 --nheads 32 --nheads-kv 8 \
    --head-dims 64 --seqlens 8192 32768 --causal 1 --only gluon-bwd ${cfg:+--config "$cfg"} \
    >"$out/ar_gqa64_$tag.log" 2>&1 || status=1
  echo "== hd64 $tag"
  grep -hE "MISMATCH|^B[0-9]+ S.* [01] " "$out/ar_mha64_$tag.log" "$out/ar_gqa64_$tag.log" \
    | cut -c1-48
done
for cfg in "" "dq_a_regs=1"; do
  tag="${cfg:-shipped}"; tag=${tag//[=,]/_}
  # shellcheck disable=SC2086
  timeout 120 python3 scripts/bench_hopper_bwd.py --head-dims 128 --seqlens 4096 16384 \
    --only gluon-bwd ${cfg:+--config "$cfg"} >"$out/ar_mha128_$tag.log" 2>&1 || status=1
  echo "== hd128 $tag"
  grep -hE "MISMATCH|^B[0-9]+ S.* [01] " "$out/ar_mha128_$tag.log" | cut -c1-48
done
