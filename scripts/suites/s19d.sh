# gpu_check.sh suite "s19d" (sourced; $out, $commit, ft() and status are set)
# Where flashtile's eager training call spends its host time (s19c: the eager MiniGPT
# step 22.7 ms against cuDNN's 15.7, graphed 6.84 against 6.92): host us per training
# call (flash_attn_func with dropout 0.2, then autograd.grad) against SDPA cuDNN's, and
# cProfile's top functions over 50 calls, at MiniGPT's two shapes. Prediction: flashtile
# ~300-500 us per call (two Gluon launches with TMA descriptors, one backward launch
# triple, a bits buffer), cuDNN ~100-150.
timeout 150 python3 scripts/host_split.py --dropout 0.2 64,256,6,64,1 16,1024,6,64,1 \
  >"$out/host_dropout.log" 2>&1 || status=1
grep -E "^\| " "$out/host_dropout.log"
grep -A40 "cumulative" "$out/host_dropout.log" | grep -E "^ +[0-9]" | head -n 45 | cut -c1-150
