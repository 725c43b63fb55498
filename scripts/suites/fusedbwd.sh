# gpu_check.sh suite "fusedbwd" (sourced; $out, $commit, ft() and status are set)
# The fused Gluon backward (opt-in, FLASHTILE_HOPPER_BWD_FUSED=1; FA3's roles, dQ through
# fp32 atomics): a smoke run under a timeout (a barrier bug hangs rather than fails), the
# GPU tests of the fused path (-k fused; the two-kernel ones run in bwdtests / hoppertests),
# then scripts/bench_hopper_bwd.py at
# 1k/4k/16k beside the shipped two-kernel backward, the portable one and SDPA cuDNN
# (ordered and racing adds), and Nsight Compute on the racing kernel. Since 2026-11-30
# (end of session 8, not yet run on a GPU) the racing mode adds dQ with TMA reduce-adds
# issued by the consumers (HopperBwdConfig.dq_tma_reduce; _gluon_common.tma_reduce_add).
# Prediction: racing at hd 128 from 0.63-0.72x cuDNN's backward (two writer warps'
# atomics, aed4ef9) to 0.75-0.85x, still below the two-kernel backward (the consumers'
# chain, not the adds, is what ncu showed); the ordered mode unchanged.
timeout 120 python3 - <<'PY' >"$out/fused_smoke.log" 2>&1 || { status=1; echo "fused smoke FAILED"; }
import torch
from flashtile import configs
from flashtile.ops import flash, hopper_bwd
for hd in (64, 128):
    for causal in (False, True):
        q, k, v, do = (torch.randn(2, 1000, 4, hd, device="cuda", dtype=torch.bfloat16)
                       for _ in range(4))
        out, lse = flash.attention_forward(q, k, v, causal=causal)
        ref = flash.attention_backward(do, q, k, v, out, lse, causal=causal)
        for det in (True, False):
            g = [torch.empty_like(t) for t in (q, k, v)]
            hopper_bwd.hopper_attention_backward(do, q, k, v, out, lse, None, causal, *g,
                config=configs.hopper_bwd_fused_config(hd, causal), deterministic=det)
            torch.cuda.synchronize()
            err = [((a.float() - r.float()).abs().max() / r.float().abs().max()).item()
                   for a, r in zip(g, ref)]
            print(hd, causal, det, ["%.1e" % e for e in err], flush=True)
PY
cat "$out/fused_smoke.log" | tail -n 12
if [ $status -eq 0 ]; then
  timeout 300 python3 -m pytest -q -m gpu -n 4 tests/test_hopper_bwd.py -k fused \
    -p no:cacheprovider -rf --tb=short >"$out/pytest_hopper_bwd.log" 2>&1 || status=1
  grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_hopper_bwd.log" | tail -n 15
  timeout 300 python3 scripts/bench_hopper_bwd.py --csv "$out/bench_hopper_bwd.csv" \
    >"$out/bench_hopper_bwd.log" 2>&1 || status=1
  grep -E "FAILED|MISMATCH|Error" "$out/bench_hopper_bwd.log" | head -n 30
  tail -n 16 "$out/bench_hopper_bwd.log"
fi
# Nsight Compute on the racing kernel at 4k, hd 128, non-causal (second launch): stall
# reasons, pipes and the L2 / atomics traffic
cat >"$out/fused_ncu.py" <<'PY'
import torch
from flashtile import configs
from flashtile.ops import flash, hopper_bwd
q, k, v, do = (torch.randn(4, 4096, 16, 128, device="cuda", dtype=torch.bfloat16)
               for _ in range(4))
out, lse = flash.attention_forward(q, k, v)
for _ in range(2):
    g = [torch.empty_like(t) for t in (q, k, v)]
    hopper_bwd.hopper_attention_backward(do, q, k, v, out, lse, None, False, *g,
        config=configs.hopper_bwd_fused_config(128, False), deterministic=False)
torch.cuda.synchronize()
PY
timeout 200 ncu --clock-control none --kernel-name regex:_bwd_fused --launch-skip 1 \
  --launch-count 1 --section SpeedOfLight --section WarpStateStats \
  --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  python3 "$out/fused_ncu.py" >"$out/fused_ncu.txt" 2>&1 || echo "ncu failed"
grep -E "Duration|Throughput|Stall|stall|Issue|Pipe|L2|Warp Cycles|Active" "$out/fused_ncu.txt" | head -n 40
