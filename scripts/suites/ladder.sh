# gpu_check.sh suite "ladder" (sourced; $out, $commit, ft() and status are set)
ft ladder --commit "$commit" --csv "$out/ladder.csv" --figures "$out" \
  >"$out/ladder.log" 2>&1 || status=1
tail -n 60 "$out/ladder.log"
