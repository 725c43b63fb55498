# gpu_check.sh suite "s44b" (sourced; $out, $commit, ft() and status are set)
# (FLASHTILE_HOPPER_CP_LAG_CAPS existed from a27fbbf to be4c11b; removed after this run:
# every call of the config runs the flags since, A/B through FLASHTILE_HOPPER_FWD_OVERRIDES.)
# For session 44: should windowed / softcapped hd 128 non-causal calls keep o_lag and
# q_early on the persistent split ring (configs.CP_LAG_CAPS)? Forward through the public
# call, flags cut (=0, shipped) against kept (=1), window 1024 and softcap 30, 4k / 16k,
# 3 interleaved rounds. Prediction: as without either (s43b-s43d): +0.1-1.5% at 4k,
# ~+1-2% at 16k (a window's items are shorter, so the per-item boundary the flags hide
# weighs more: up to +2-3% with window 1024 at 16k).
source scripts/suites/lib/steps.sh
lagcaps="FLASHTILE_HOPPER_CP_LAG_CAPS=0|FLASHTILE_HOPPER_CP_LAG_CAPS=1"
env_ab ab_lagcaps_win 150 --ab "$lagcaps" --measures fwd --head-dims 128 \
  --seqlens 4096 16384 --causal 0 --window 1024 --rounds 3
env_ab ab_lagcaps_cap 150 --ab "$lagcaps" --measures fwd --head-dims 128 \
  --seqlens 4096 16384 --causal 0 --softcap 30 --rounds 3
