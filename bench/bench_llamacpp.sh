#!/usr/bin/env bash
# bench_llamacpp.sh — eaas beside llama.cpp built from source for this machine,
# on the same GGUF files, alternated, with this machine's memory bandwidth
# measured in the same run (issue 24). Not part of CI.
#
#   bash bench/bench_llamacpp.sh [--threads 2] [--rounds 3] [--decode 32] [--prefill 512] [--depth D]
#                                [--prebuilt] [--out FILE.jsonl] M1.gguf [M2.gguf ...]
#
# llama.cpp: the source is $LLAMACPP_SRC if set, else the llama.cpp release
# that the node-llama-cpp npm package ships as a git bundle (cloned once into
# .cache/llamacpp/src). It is built once per CPU (CPU name + flags + commit) in
# .cache/llamacpp/build-<hash>: CMake, Release, -DGGML_NATIVE=ON, target
# llama-bench. eaas: bench_forward from $EA_BUILD (default build/).
#
# Each round: bench_membw (1 thread and all threads; reported beside the
# round), then for every model
# eaas and llama.cpp one after the other (eaas first in odd rounds, llama.cpp
# first in even ones): decode at batch 1 (eaas: N steps after a 16-token
# prompt; llama-bench: -p 0 -n N, tok/s of the N tokens) and prefill of P
# tokens (eaas: best of 2; llama-bench: -n 0 -p P -r 2, mean). eaas's
# bw_frac is against the bandwidth bench_forward reads itself just before its
# decode (the seconds of that decode, not the round's start). Every
# measurement is one JSON line; at the end, per model and case, one
# {"bench":"vs_llamacpp",...} line with the per-round ratios and the medians.
# --depth D adds the case "decode_depth": decode at batch 1 after D positions,
# both with an f16 KV cache (llama.cpp's default; eaas --kv-cache-dtype f16):
# eaas bench_forward --decode-ctx D, llama-bench -p 0 -n N -d D.
# --prebuilt adds node-llama-cpp's prebuilt binaries as a labelled extra line
# per model (bench_llamacpp.mjs; the package is ~0.7 GB).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${EA_BUILD:-$here/build}
cache=$here/.cache/llamacpp
T=2 R=3 N=32 P=512 D=0 prebuilt=0 out=""
models=()
while [ $# -gt 0 ]; do
  case $1 in
    --threads) T=$2; shift 2 ;;
    --rounds) R=$2; shift 2 ;;
    --decode) N=$2; shift 2 ;;
    --prefill) P=$2; shift 2 ;;
    --depth) D=$2; shift 2 ;;
    --prebuilt) prebuilt=1; shift ;;
    --out) out=$2; shift 2 ;;
    -*) echo "bench_llamacpp.sh: unknown flag $1" >&2; exit 2 ;;
    *) models+=("$(realpath "$1")"); shift ;;
  esac
done
[ ${#models[@]} -gt 0 ] || { sed -n 2,8p "$0" >&2; exit 2; }
[ -x "$build/bench/bench_forward" ] || { echo "bench_llamacpp.sh: build eaas first ($build/bench/bench_forward)" >&2; exit 1; }
out=${out:-$(mktemp /tmp/bench_llamacpp.XXXXXX.jsonl)}
: >"$out"
emit() { echo "$1" | tee -a "$out"; }

# ---- llama.cpp, built for this CPU
src=${LLAMACPP_SRC:-$cache/src}
if [ ! -f "$src/CMakeLists.txt" ]; then
  mkdir -p "$cache/pkg"
  (cd "$cache/pkg" && npm pack --silent node-llama-cpp@3.22.1 >/dev/null &&
    tar xzf node-llama-cpp-3.22.1.tgz package/llama/gitRelease.bundle)
  git clone -q "$cache/pkg/package/llama/gitRelease.bundle" "$src"
fi
commit=$(git -C "$src" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
sig=$( (grep -m1 'model name' /proc/cpuinfo; grep -m1 '^flags' /proc/cpuinfo; echo "$commit") | sha1sum | cut -c1-12)
bdir=${LLAMACPP_BUILD:-$cache/build-$sig}   # LLAMACPP_BUILD: an existing native build (its bin/llama-bench)
LB=$bdir/bin/llama-bench
if [ ! -x "$LB" ]; then
  echo "building llama-bench (llama.cpp $commit, -DGGML_NATIVE=ON) in $bdir ..." >&2
  cmake -S "$src" -B "$bdir" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF >"$bdir.cmake.log" 2>&1 ||
    { cat "$bdir.cmake.log" >&2; exit 1; }
  cmake --build "$bdir" -j"$(nproc)" --target llama-bench >"$bdir.build.log" 2>&1 ||
    { tail -30 "$bdir.build.log" >&2; exit 1; }
fi

cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
isa=$(grep -m1 '^flags' /proc/cpuinfo | grep -oE 'avx512f|avx512_vnni|avx512_bf16|amx_tile|avx2' | sort -u | tr '\n' ' ' | sed 's/ $//')
emit "{\"bench\":\"machine\",\"cpu\":\"$cpu\",\"isa\":\"$isa\",\"nproc\":$(nproc),\"threads\":$T,\"llamacpp_commit\":\"$commit\",\"llamacpp_build\":\"$bdir\"}"

# llama-bench's JSONL -> our line (tok/s is its mean over repetitions)
llama() { # ROUND MODEL CASE ARGS...
  local rd=$1 m=$2 case=$3; shift 3
  "$LB" -m "$m" -t "$T" -o jsonl "$@" 2>/dev/null | python3 -c '
import json, sys
rd, m, case = sys.argv[1], sys.argv[2], sys.argv[3]
for line in sys.stdin:
    d = json.loads(line)
    print(json.dumps({"bench": "llamacpp", "engine": "llama.cpp-native", "round": int(rd), "model": m, "case": case,
                      "threads": d["n_threads"], "tok_s": round(d["avg_ts"], 2), "stddev": round(d["stddev_ts"], 2),
                      "type_k": d.get("type_k"), "model_type": d.get("model_type")}))' "$rd" "$m" "$case"
}
eaas() { # ROUND MODEL [DEPTH]: decode and prefill, or (DEPTH) decode after DEPTH positions with an f16 cache
  local args=(--prefill "$P" --reps 2) case_of=''
  if [ -n "${3:-}" ]; then args=(--prefill 0 --decode-ctx "$3" --kv-cache-dtype f16); case_of=decode_depth; fi
  "$build/bench/bench_forward" --model "$2" --threads "$T" --batches 1 --steps "$N" --rounds 1 \
    "${args[@]}" 2>/dev/null | python3 -c '
import json, sys
rd, m, case_of = sys.argv[1], sys.argv[2], sys.argv[3]
for line in sys.stdin:
    d = json.loads(line)
    if d["bench"] not in ("decode", "prefill"): continue
    d.update({"bench": "eaas", "engine": "eaas", "round": int(rd), "model": m, "case": case_of or d["bench"]})
    print(json.dumps(d))' "$1" "$2" "$case_of"
}

for rd in $(seq 1 "$R"); do
  bw=$("$build/bench/bench_membw" 2>/dev/null | tee -a "$out" | python3 -c '
import json, sys
print(max((json.loads(l) for l in sys.stdin), key=lambda d: d["threads"])["gbps"])')
  emit "{\"bench\":\"round\",\"round\":$rd,\"membw_gbps\":$bw}"
  for m in "${models[@]}"; do
    one_eaas() { eaas "$rd" "$m" | while read -r l; do emit "$l"; done; }
    one_llama() {
      llama "$rd" "$m" decode -p 0 -n "$N" -r 1 | while read -r l; do emit "$l"; done
      llama "$rd" "$m" prefill -p "$P" -n 0 -r 2 | while read -r l; do emit "$l"; done
    }
    if [ $((rd % 2)) -eq 1 ]; then one_eaas; one_llama; else one_llama; one_eaas; fi
    if [ "$D" -gt 0 ]; then
      depth_eaas() { eaas "$rd" "$m" "$D" | while read -r l; do emit "$l"; done; }
      depth_llama() { llama "$rd" "$m" decode_depth -p 0 -n "$N" -d "$D" -r 1 | while read -r l; do emit "$l"; done; }
      if [ $((rd % 2)) -eq 1 ]; then depth_eaas; depth_llama; else depth_llama; depth_eaas; fi
    fi
  done
done
if [ "$prebuilt" = 1 ]; then
  for m in "${models[@]}"; do
    bash "$here/bench/bench_llamacpp_prebuilt.sh" "$m" --threads "$T" --decode "$((N + 1))" --reps 2 |
      while read -r l; do emit "$l"; done
  done
fi

# ---- per model and case: the ratio in every round, and the medians
python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def med(v): return round(statistics.median(v), 2) if v else None
for m in sorted({r["model"] for r in rows if "model" in r}):
    for case in ("decode", "prefill", "decode_depth"):
        e = {r["round"]: r["tok_s"] for r in rows if r["bench"] == "eaas" and r["model"] == m and r["case"] == case}
        l = {r["round"]: r["tok_s"] for r in rows if r["bench"] == "llamacpp" and r["model"] == m and r["case"] == case}
        fr = [r["bw_frac"] for r in rows if r["bench"] == "eaas" and r["model"] == m and r["case"] == case and "bw_frac" in r]
        both = sorted(set(e) & set(l))
        if not both: continue
        ratio = [round(e[k] / l[k], 2) for k in both if l[k] > 0]
        print(json.dumps({"bench": "vs_llamacpp", "model": m.rsplit("/", 1)[-1], "case": case,
                          "eaas_tok_s": [e[k] for k in both], "llamacpp_tok_s": [l[k] for k in both],
                          "ratio_per_round": ratio, "eaas_median": med(list(e.values())),
                          "llamacpp_median": med(list(l.values())), "ratio_median": med(ratio),
                          "ratio_min": min(ratio) if ratio else None,
                          **({"eaas_bw_frac": fr} if fr else {})}))
PY
echo "all lines: $out" >&2
