# gpu_check.sh suite "s31g" (sourced; $out, $commit, ft() and status are set)
# Session 31: s31f read 740 us of host time per autograd.grad at B16 S1024 H16 D128
# causal against 272 for the backward launcher alone (and 147 / 173 for the forward with
# and without grad). cProfile of both paths (scripts/host_split.py --cprofile).
# Prediction: the autograd engine and FlashAttnFunction.backward's own code take <= 100
# us; the rest is a difference of path inside attention_backward (arguments the autograd
# path passes: window_size=(None, 0), deterministic, rng_state).
timeout 150 python3 scripts/host_split.py --cprofile 16,1024,16,128,1 \
  >"$out/host_cprofile.log" 2>&1 || status=1
grep -E "^==|function calls|^\s+[0-9]+\s" "$out/host_cprofile.log" | head -120 | cut -c1-170
