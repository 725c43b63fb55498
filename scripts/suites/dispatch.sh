# gpu_check.sh suite "dispatch" (sourced; $out, $commit, ft() and status are set)
# After a change of the sm_90 dispatch tables (configs.hopper_fwd_schedule,
# configs.hopper_bwd_preferred): validation of what flash_attn_func now runs, forward
# and forward+backward TFLOPS beside SDPA cuDNN / flash at the DESIGN.md shapes, and the
# ladder's headline rungs (v1, portable, production at 4k / 16k) so its speed-ups stay
# true for the new top rung. Single processes only (it may share the host with another
# stream). About 5 minutes.
ft validate --grid covering --csv "$out/validate.csv" >"$out/validate.log" 2>&1 || status=1
tail -n 4 "$out/validate.log"
ft bench --backends flashtile sdpa-cudnn sdpa-flash --commit "$commit" \
  --csv "$out/bench_dispatch.csv" --plot "$out/bench_dispatch.png" \
  >"$out/bench_dispatch.log" 2>&1 || status=1
tail -n 45 "$out/bench_dispatch.log"
ft ladder --rungs v1_naive portable production --seqlens 4k 16k --commit "$commit" \
  --csv "$out/ladder_headline.csv" --figures "$out/ladder_headline_figs" \
  >"$out/ladder_headline.log" 2>&1 || status=1
grep -E "^headline|^ceilings" "$out/ladder_headline.log"
