# gpu_check.sh suite "bwdab" (sourced; $out, $commit, ft() and status are set)
# lse2_pre and group_branch against the shipped Gluon backward in ONE process, interleaved
# rounds (bench_hopper_bwd.py --ab). s15e ran each config in its own process and its first
# process read +12% at hd 64 4k non-causal (437 against 391.8 in s15c for the same
# build), so its per-process changes are not trustworthy. From s15e's other rows,
# prediction: hd 64 lse2_pre +1-3%, with group_branch +3-5%; hd 128 (with stats_tma)
# +0-3%. ~1.5 min.
for hd in 64 128; do
  if [ "$hd" = 64 ]; then ab="|lse2_pre=1|lse2_pre=1,group_branch=1"
  else ab="|stats_tma=1|stats_tma=1,lse2_pre=1|stats_tma=1,lse2_pre=1,group_branch=1"; fi
  timeout 150 python3 scripts/bench_hopper_bwd.py --seqlens 4096 16384 --head-dims "$hd" \
    --ab "$ab" --rounds 9 --csv "$out/bwdab_d$hd.csv" >"$out/bwdab_d$hd.log" 2>&1 || status=1
  tail -n 6 "$out/bwdab_d$hd.log" | cut -c1-130
done
