#!/usr/bin/env bash
# test_make_model.sh — `eaas make-model` writes every family in both formats,
# deterministically, and the GGUF files are what llama.cpp's converter would
# make of the HF files (checked by tests/golden/gguf_check.mjs with the
# independent @huggingface/gguf parser, value by value).
#
# For each family (tiny preset):
#   * HF bf16 and GGUF bf16 written twice with one seed: identical sha256 of
#     every file; another seed changes the weights;
#   * gguf_check.mjs: metadata keys/types/values, tensor names/order/shapes/
#     types/offsets, every value equal to the HF tensor after the converter's
#     transforms;
#   * `eaas inspect` loads both outputs and reports the same parameter count;
# plus: q8_0 GGUF against an f32 HF of the same seed, f16, legacy MLA layout,
# sharded HF (index + shards hold the same values), refusals (q8_0 in HF,
# unknown family), the tiny presets' routing and --top-k, and the bench
# preset's exact shape and counts (dry run).
# Env: EAAS_BIN, EA_SRC, EA_CACHE (set by CTest). Prints "N passed, N failed".
set -u
BIN=${EAAS_BIN:?EAAS_BIN not set}
SRC=${EA_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
export EA_CACHE=${EA_CACHE:-$SRC/.cache}
export EA_SRC=$SRC
T=$(mktemp -d /tmp/ea_make_model.XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
expect() { if "$@" >/dev/null 2>&1; then ok; else bad "$*"; fi; }
expect_not() { if "$@" >/dev/null 2>&1; then bad "should fail: $*"; else ok; fi; }
tree_sum() { (cd "$1" && sha256sum $(ls | sort)) ; }
check_gguf() { (cd "$SRC" && node tests/golden/gguf_check.mjs "$@") > "$T/check.log" 2>&1 || { cat "$T/check.log" >&2; return 1; }; }
params() { "$BIN" inspect "$1" 2>/dev/null | awk '/^parameters/{print $2}'; }

have_node=1
command -v node >/dev/null && [ -d "$SRC/tools/node/node_modules/@huggingface/gguf" ] || {
  have_node=0; bad "node or @huggingface/gguf missing (cd tools/node && npm install @huggingface/gguf@0.4.6)"; }

for f in qwen3_moe qwen2_moe mixtral olmoe deepseek_v2 deepseek_v3; do
  for run in a b; do
    expect "$BIN" make-model --family $f --preset tiny --seed 5 --format hf --dtype bf16 --out "$T/$f-hf-$run"
    expect "$BIN" make-model --family $f --preset tiny --seed 5 --format gguf --dtype bf16 --out "$T/$f-$run.gguf"
  done
  [ "$(tree_sum "$T/$f-hf-a")" = "$(tree_sum "$T/$f-hf-b")" ] && ok || bad "$f: HF not deterministic"
  [ "$(sha256sum < "$T/$f-a.gguf")" = "$(sha256sum < "$T/$f-b.gguf")" ] && ok || bad "$f: GGUF not deterministic"
  expect "$BIN" make-model --family $f --preset tiny --seed 6 --format hf --out "$T/$f-hf-s6"
  [ "$(sha256sum < "$T/$f-hf-a/model.safetensors")" != "$(sha256sum < "$T/$f-hf-s6/model.safetensors")" ] && ok ||
    bad "$f: seed does not change the weights"
  for file in config.json generation_config.json tokenizer.json tokenizer_config.json model.safetensors; do
    [ -s "$T/$f-hf-a/$file" ] && ok || bad "$f: $file missing"
  done
  [ $have_node = 1 ] && { check_gguf "$T/$f-a.gguf" "$T/$f-hf-a" && ok || bad "$f: gguf_check"; }
  # the project's loader opens both and counts the same parameters
  p_hf=$(params "$T/$f-hf-a"); p_gg=$(params "$T/$f-a.gguf")
  [ -n "$p_hf" ] && [ "$p_hf" = "$p_gg" ] && ok || bad "$f: eaas inspect: hf '$p_hf' gguf '$p_gg'"
  rm -rf "$T/$f-hf-b" "$T/$f-b.gguf" "$T/$f-hf-s6"
done

# mixtral/olmoe carry their own chat template, the others the package's
for f in mixtral olmoe; do
  grep -q '\[INST\]\|<|user|>' "$T/$f-hf-a/tokenizer_config.json" && ok || bad "$f: own chat template missing"
done
grep -q 'im_start' "$T/qwen2_moe-hf-a/tokenizer_config.json" && ok || bad "qwen2_moe: qwen3 template missing"

# q8_0 GGUF against the f32 HF of the same seed (F32 tensors exact, Q8_0 as ggml quantises)
for f in qwen3_moe mixtral deepseek_v3; do
  expect "$BIN" make-model --family $f --seed 9 --format hf --dtype f32 --out "$T/$f-f32"
  expect "$BIN" make-model --family $f --seed 9 --format gguf --dtype q8_0 --out "$T/$f-q8.gguf"
  [ $have_node = 1 ] && { check_gguf "$T/$f-q8.gguf" "$T/$f-f32" && ok || bad "$f: q8_0 gguf_check"; }
  expect "$BIN" inspect "$T/$f-q8.gguf"
done
# f16 in both formats
expect "$BIN" make-model --family qwen2_moe --seed 4 --format hf --dtype f16 --out "$T/q2-f16"
expect "$BIN" make-model --family qwen2_moe --seed 4 --format gguf --dtype f16 --out "$T/q2-f16.gguf"
[ $have_node = 1 ] && { check_gguf "$T/q2-f16.gguf" "$T/q2-f16" && ok || bad "qwen2_moe f16 gguf_check"; }
grep -q '"torch_dtype": "float16"' "$T/q2-f16/config.json" && ok || bad "f16 torch_dtype"
# the older DeepSeek GGUF layout (one attn_kv_b)
for f in deepseek_v2 deepseek_v3; do
  expect "$BIN" make-model --family $f --seed 5 --format gguf --legacy-mla --out "$T/$f-legacy.gguf"
  [ $have_node = 1 ] && { check_gguf "$T/$f-legacy.gguf" "$T/$f-hf-a" --legacy-mla && ok || bad "$f legacy gguf_check"; }
  expect "$BIN" inspect "$T/$f-legacy.gguf"
done

# sharded HF: index + 3 shards, same values as the GGUF of the same seed
expect "$BIN" make-model --family qwen3_moe --seed 5 --format hf --shards 3 --out "$T/q3-sharded"
[ -f "$T/q3-sharded/model.safetensors.index.json" ] && ok || bad "index missing"
[ "$(ls "$T/q3-sharded" | grep -c '^model-0000[1-3]-of-00003.safetensors$')" = 3 ] && ok || bad "3 shards expected"
[ $have_node = 1 ] && { check_gguf "$T/qwen3_moe-a.gguf" "$T/q3-sharded" && ok || bad "sharded HF vs GGUF values"; }
[ "$(params "$T/q3-sharded")" = "$(params "$T/qwen3_moe-hf-a")" ] && ok || bad "inspect of sharded HF"

# the hybrids' GGUF (qwen3next / qwen35moe): deterministic, loadable, the same parameters as HF, the
# converter's names and types (values: test_hybrid_gguf compares logits; gguf_check.mjs does not
# re-derive these families yet)
for f in qwen3_next qwen3_5_moe; do
  expect "$BIN" make-model --family $f --preset tiny --seed 5 --format hf --dtype bf16 --out "$T/$f-hf-a"
  for run in a b; do expect "$BIN" make-model --family $f --preset tiny --seed 5 --format gguf --dtype bf16 --out "$T/$f-$run.gguf"; done
  [ "$(sha256sum < "$T/$f-a.gguf")" = "$(sha256sum < "$T/$f-b.gguf")" ] && ok || bad "$f: GGUF not deterministic"
  p_hf=$(params "$T/$f-hf-a"); p_gg=$(params "$T/$f-a.gguf")
  [ -n "$p_hf" ] && [ "$p_hf" = "$p_gg" ] && ok || bad "$f: eaas inspect: hf '$p_hf' gguf '$p_gg'"
  g=$("$BIN" make-model --family $f --preset tiny --dry-run --format gguf --dtype q8_0)
  for want in 'blk.0.ssm_conv1d.weight F32 \[4, 128\]' 'blk.0.ssm_a F32 \[4\]' 'blk.0.ssm_dt.bias F32 \[4\]' \
              'blk.0.ssm_norm.weight F32 \[16\]' 'blk.0.attn_qkv.weight Q8_0 \[64, 128\]' 'blk.0.attn_gate.weight Q8_0 \[64, 64\]' \
              'blk.0.ssm_out.weight Q8_0 \[64, 64\]' 'blk.0.post_attention_norm.weight F32 \[64\]' \
              'blk.3.attn_q.weight Q8_0 \[64, 128\]' 'blk.0.ffn_gate_exps.weight Q8_0 \[64, 32, 16\]' \
              'blk.0.ffn_gate_inp_shexp.weight F32 \[64\]'; do
    echo "$g" | grep -q "^tensor $want\$" && ok || bad "$f gguf: no tensor $want"
  done
  if [ $f = qwen3_next ]; then echo "$g" | grep -q '^tensor blk.0.ssm_ba.weight Q8_0 \[64, 8\]$' && ok || bad "$f: ssm_ba"
  else echo "$g" | grep -q '^tensor blk.0.ssm_beta.weight Q8_0 \[64, 4\]$' && ok || bad "$f: ssm_beta"; fi
  rm -rf "$T/$f-hf-a" "$T/$f-a.gguf" "$T/$f-b.gguf"
done

# refusals
expect_not "$BIN" make-model --family qwen3_moe --format hf --dtype q8_0 --out "$T/nope"
expect_not "$BIN" make-model --family llama --out "$T/nope"
expect_not "$BIN" make-model --family qwen3_moe --preset huge --out "$T/nope"
expect_not "$BIN" make-model --family qwen3_moe --format gguf --shards 2 --out "$T/nope.gguf"
expect "$BIN" make-model --help

# the bench preset: the forward-pass issue's shape and counts, exactly
out=$("$BIN" make-model --family qwen3_moe --preset bench --dry-run --format hf)
echo "$out" | grep -q '^params: total 2187644928 (2.19 B), active per token 446615552 (446.6 M' && ok ||
  bad "qwen3_moe bench counts: $(echo "$out" | grep params)"
echo "$out" | grep -q '^shape: 24 layers, hidden 1024, heads 16/4, experts 64 top-8, vocab 151936' && ok || bad "bench shape"
echo "$out" | grep -q '^tensor model.layers.23.mlp.experts.63.down_proj.weight BF16 \[1024, 384\]$' && ok || bad "bench expert shape"
echo "$out" | grep -q '^tensor model.layers.0.self_attn.k_norm.weight BF16 \[64\]$' && ok || bad "bench q/k norm"
echo "$out" | grep -q '^tensor lm_head.weight BF16 \[151936, 1024\]$' && ok || bad "bench untied lm_head"
[ "$(echo "$out" | grep -c '^tensor ')" = 4827 ] && ok || bad "bench tensor count"
cfg=$("$BIN" make-model --family qwen3_moe --preset bench --dry-run --format gguf)
echo "$cfg" | grep -q '^tensor blk.0.ffn_gate_exps.weight BF16 \[1024, 384, 64\]$' && ok || bad "bench stacked experts"
echo "$cfg" | grep -q '^tensor blk.0.ffn_gate_inp.weight F32 \[1024, 64\]$' && ok || bad "bench router in F32"
# the tiny presets route as the real families (k >= 4, Mixtral 2) over enough experts
# for several per EP rank; --top-k overrides (a Mixtral summing 4), within reach
for fk in qwen3_moe:16:8 qwen2_moe:16:4 mixtral:8:2 olmoe:16:8 deepseek_v2:32:6 deepseek_v3:32:8; do
  IFS=: read -r f e k <<<"$fk"
  "$BIN" make-model --family $f --dry-run | grep -q "experts $e top-$k," && ok || bad "$f tiny: not $e experts top-$k"
done
"$BIN" make-model --family mixtral --top-k 4 --dry-run | grep -q 'experts 8 top-4,' && ok || bad "mixtral --top-k 4"
expect_not "$BIN" make-model --family deepseek_v3 --top-k 17 --dry-run
expect_not "$BIN" make-model --family mixtral --top-k 9 --dry-run
for f in qwen2_moe mixtral olmoe deepseek_v2 deepseek_v3; do
  tot=$("$BIN" make-model --family $f --preset bench --dry-run | awk '/^params:/{print $3}')
  [ -n "$tot" ] && [ "$tot" -gt 2000000000 ] && [ "$tot" -lt 2400000000 ] && ok || bad "$f bench total $tot not ~2 B"
done

echo "$pass passed, $fail failed"
[ $fail = 0 ]
