#!/bin/bash
# test_inspect_errors.sh — `eaas inspect` on bad model files exits 1 with one
# line that names the file and what is wrong; on a good file it exits 0 and
# describes it (text and --json). Needs EAAS_BIN and EA_SRC (set by CTest).
set -u
BIN=${EAAS_BIN:?EAAS_BIN not set}
SRC=${EA_SRC:?EA_SRC not set}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   $1" >&2; }
bad() { fail=$((fail + 1)); echo "FAIL $1: $2" >&2; }

# expect_error NAME PATH NEEDLE...: exit 1, exactly one stderr line, containing PATH and every NEEDLE
expect_error() {
    local name=$1 path=$2
    shift 2
    "$BIN" inspect "$path" >"$T/out" 2>"$T/err"
    local rc=$? lines
    lines=$(wc -l <"$T/err")
    if [ $rc -ne 1 ]; then bad "$name" "exit $rc, want 1"; return; fi
    if [ "$lines" -ne 1 ]; then bad "$name" "$lines stderr lines: $(cat "$T/err")"; return; fi
    if ! grep -qF -- "$path" "$T/err"; then bad "$name" "message does not name $path: $(cat "$T/err")"; return; fi
    for n in "$@"; do
        if ! grep -qF -- "$n" "$T/err"; then bad "$name" "message lacks '$n': $(cat "$T/err")"; return; fi
    done
    ok "$name"
}

CORPUS=$SRC/tests/fuzz/corpus/fuzz_gguf

# GGUF: bad magic, a string length past the end, truncated
cp "$CORPUS/bad_magic" "$T/magic.gguf"
expect_error bad_magic "$T/magic.gguf" "bad magic" "offset 0"
cp "$CORPUS/bad_strlen" "$T/strlen.gguf"
expect_error string_past_end "$T/strlen.gguf" "general.architecture" "offset 56"
head -c 1000 "$CORPUS/valid_qwen3moe_tiny" >"$T/trunc.gguf"
expect_error truncated_gguf "$T/trunc.gguf" "file ends at 1000"
# version 7
{ printf 'GGUF\007\000\000\000'; head -c 16 /dev/zero; } >"$T/version.gguf"
expect_error bad_version "$T/version.gguf" "version 7" "offset 4"

# HF: a model.safetensors shorter than its length field; a header length past the end
mkdir -p "$T/hf"
printf '{"model_type":"qwen3_moe","vocab_size":16,"hidden_size":8,"num_hidden_layers":1,"num_attention_heads":2,"head_dim":4,"moe_intermediate_size":4,"num_experts":2,"num_experts_per_tok":1}' >"$T/hf/config.json"
printf 'abc' >"$T/hf/model.safetensors"
expect_error truncated_safetensors "$T/hf" "model.safetensors" "8-byte"
printf '\377\000\000\000\000\000\000\000{}' >"$T/hf/model.safetensors"
expect_error header_past_end "$T/hf" "model.safetensors" "header length 255"
# a valid header without the tensors the config needs
printf '\020\000\000\000\000\000\000\000{}              ' >"$T/hf/model.safetensors"
expect_error missing_tensor "$T/hf" "model.embed_tokens.weight" "missing"
# unsupported architecture
printf '{"model_type":"llama","hidden_size":8}' >"$T/hf/config.json"
expect_error unsupported_arch "$T/hf" "model_type 'llama'"
expect_error no_such_path "$T/nothing.gguf" "no such"

# a good file: exit 0, text and JSON
if "$BIN" inspect "$CORPUS/valid_qwen3moe_tiny" >"$T/out" 2>"$T/err" && grep -q "architecture *qwen3_moe" "$T/out" &&
    grep -q "layout *ok" "$T/out"; then
    ok good_text
else
    bad good_text "$(cat "$T/out" "$T/err")"
fi
if "$BIN" inspect --json "$CORPUS/valid_qwen3moe_tiny" >"$T/out" 2>"$T/err" &&
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["architecture"]=="qwen3_moe" and d["experts"]==2 and d["experts_per_token"]==1 and d["params_total"]==d["params_in_tensors"] and d["layout_problems"]==[], d' "$T/out"; then
    ok good_json
else
    bad good_json "$(cat "$T/out" "$T/err")"
fi
"$BIN" inspect --help >"$T/out" 2>&1 && grep -q "usage: eaas inspect" "$T/out" && ok help || bad help "$(cat "$T/out")"
"$BIN" inspect >/dev/null 2>&1
rc=$?
[ $rc -eq 2 ] && ok no_args || bad no_args "exit $rc, want 2"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
