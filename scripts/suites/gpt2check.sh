# gpu_check.sh suite "gpt2check" (sourced; $out, $commit, ft() and status are set)
# The GPT-2 logit-level check alone (the `models` suite's middle part, about 90 s):
# 124M through a saved checkpoint and our loader, XL built in memory, fp32 and bf16.
ft gpt2-check --config gpt2 >"$out/gpt2_check_124m.log" 2>&1 || status=1
ft gpt2-check --config gpt2-xl --in-memory >"$out/gpt2_check_xl.log" 2>&1 || status=1
for size in 124m xl; do
  echo "gpt2-check $size:"
  grep -E "^weights:|-> (PASS|FAIL)|global rule|Error|error" "$out/gpt2_check_$size.log" | cut -c1-260
  tail -n 4 "$out/gpt2_check_$size.log"
done
