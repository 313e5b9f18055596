#!/usr/bin/env bash
# test_serve_hybrid.sh — issue 22's serving checks for the hybrid families
# (qwen3_5_moe, qwen3_next: DeltaNet layers with a recurrent state per
# sequence) against the real server, for a tiny model of each family:
#   - 64 concurrent seeded requests (prompts of 20..220 tokens) each give the
#     text they give alone (sent one after another, no prefix cache);
#   - prefix-cache hits give the text of misses: the same prompt again, one
#     sharing 100 or 129 tokens, the next turn of a chat; the hit shows in
#     usage.prompt_tokens_details.cached_tokens (128, 64, 128, 128: a hit ends
#     where a prompt call ended on a 64-boundary, so the server runs with
#     --max-batch-tokens 64 to have one at 64) and the state snapshots in
#     /metrics; then after a restart from the disk tier (--kv-disk-dir:
#     blocks and state snapshots read back);
#   - with the default --max-batch-tokens, a prompt's last boundary is still
#     kept (the cut rule stops a prompt call there): the prompt again hits;
#   - a small cache (--kv-cache-mib 1, 48 running: 58 blocks after the states) preempts, same texts
#     (24 tokens per answer: with 8, an answer crossed at most one block boundary and a loaded
#     machine once saw no preemption at all; with 24, runs saw 7 and 12).
# Requests and comparisons: hybrid_req.py. Servers are stopped by their PID.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/serve_lib.sh"
serve_test_init
R() { python3 "$here/hybrid_req.py" "$@"; }
metric() { curl -s --max-time 10 "http://127.0.0.1:$PORT/metrics" >"$tmp/metrics" || true
  awk -v n="$1" 'index($1, n "{") == 1 {print $2}' "$tmp/metrics"; }
R spec many "$tmp/many.json"
R spec prefix "$tmp/prefix.json"
R spec fresh "$tmp/fresh.json"

for fam in qwen3_5_moe qwen3_next; do
  M="$tmp/$fam"
  "$EAAS_BIN" make-model --family "$fam" --preset tiny --seed 3 --format hf --out "$M" >/dev/null || { bad "$fam: make-model"; continue; }
  common=(--model "$M" --threads 2 --max-ctx 512)

  # the reference: every request alone, no prefix cache
  start_server "$tmp/$fam-alone.log" "${common[@]}" --no-prefix-cache --max-running 64 || { bad "$fam: start"; continue; }
  R run "$PORT" seq "$tmp/many.json" "$tmp/$fam-many-alone.json"
  R run "$PORT" seq "$tmp/prefix.json" "$tmp/$fam-prefix-alone.json"
  R run "$PORT" par "$tmp/many.json" "$tmp/$fam-many-par.json"
  if R same "$tmp/$fam-many-alone.json" "$tmp/$fam-many-par.json" >"$tmp/diff" 2>&1; then
    ok "$fam: 64 concurrent seeded requests each equal alone"
  else bad "$fam: concurrent: $(cat "$tmp/diff")"; fi
  stop_server

  # prefix cache in memory, with the disk tier behind it
  start_server "$tmp/$fam-pc1.log" "${common[@]}" --max-running 64 --max-batch-tokens 64 --kv-disk-dir "$tmp/$fam-kv" || { bad "$fam: start"; continue; }
  R run "$PORT" seq "$tmp/prefix.json" "$tmp/$fam-prefix-mem.json"
  cached=$(python3 -c 'import json,sys; print(" ".join(str(r["cached"]) for r in json.load(open(sys.argv[1]))))' "$tmp/$fam-prefix-mem.json")
  snaps=$(metric eaas:state_snapshots)
  if R same "$tmp/$fam-prefix-alone.json" "$tmp/$fam-prefix-mem.json" >"$tmp/diff" 2>&1 && [ "$cached" = "0 128 64 128 128" ]; then
    ok "$fam: prefix-cache hits equal misses (cached_tokens $cached, $snaps state snapshots)"
  else bad "$fam: memory hits: cached '$cached': $(cat "$tmp/diff")"; fi
  sb=$(metric eaas:recurrent_state_bytes)
  if [ "${snaps:-0}" -gt 0 ] && [ "${sb:-0}" -gt 0 ]; then ok "$fam: /metrics: recurrent_state_bytes $sb, state_snapshots $snaps"
  else bad "$fam: /metrics: recurrent_state_bytes '$sb' state_snapshots '$snaps'"; fi
  stop_server
  nl=$(find "$tmp/$fam-kv" -name '*.lss' | wc -l)
  # a restart: the memory cache is empty, the hits come from the disk tier
  start_server "$tmp/$fam-pc2.log" "${common[@]}" --max-running 64 --max-batch-tokens 64 --kv-disk-dir "$tmp/$fam-kv" || { bad "$fam: start"; continue; }
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); json.dump([d[1]], open(sys.argv[2], "w"))' "$tmp/prefix.json" "$tmp/one.json"
  R run "$PORT" seq "$tmp/one.json" "$tmp/$fam-prefix-disk.json"
  cached=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["cached"])' "$tmp/$fam-prefix-disk.json")
  reads=$(metric eaas:kv_disk_reads_total)
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); json.dump([d[1]], open(sys.argv[2], "w"))' "$tmp/$fam-prefix-alone.json" "$tmp/want1.json"
  if R same "$tmp/want1.json" "$tmp/$fam-prefix-disk.json" >"$tmp/diff" 2>&1 && [ "$cached" = 128 ] && [ "${reads:-0}" -gt 0 ]; then
    ok "$fam: after a restart, a hit from the disk tier equals the miss ($nl state files, cached_tokens $cached, $reads files read)"
  else bad "$fam: disk hit: cached '$cached' reads '$reads' state files $nl: $(cat "$tmp/diff")"; fi
  stop_server
  # the default budget (512): a 150-token prompt runs in two calls, [0, 128) and [128, 150),
  # so that the state at its last boundary is kept and the same prompt again is a hit
  start_server "$tmp/$fam-pc3.log" "${common[@]}" || { bad "$fam: start"; continue; }
  R run "$PORT" seq "$tmp/fresh.json" "$tmp/$fam-fresh.json"
  cached=$(python3 -c 'import json,sys; print(" ".join(str(r["cached"]) for r in json.load(open(sys.argv[1]))))' "$tmp/$fam-fresh.json")
  if R same "$tmp/$fam-fresh.json" "$tmp/$fam-fresh.json" >/dev/null && [ "$cached" = "0 128" ] &&
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(d[0]["text"] != d[1]["text"])' "$tmp/$fam-fresh.json"; then
    ok "$fam: --max-batch-tokens 512: the prompt's last boundary is kept (cached_tokens $cached), hit equals miss"
  else bad "$fam: default budget: cached '$cached'"; fi
  stop_server

  # a small cache: preemption (and the prefix cache competing for blocks)
  start_server "$tmp/$fam-small.log" "${common[@]}" --max-running 48 --kv-cache-mib 1 || { bad "$fam: start"; continue; }
  R run "$PORT" par "$tmp/many.json" "$tmp/$fam-many-small.json"
  pre=$(metric eaas:num_preemptions_total)
  if R same "$tmp/$fam-many-alone.json" "$tmp/$fam-many-small.json" >"$tmp/diff" 2>&1 && [ "${pre:-0}" -gt 0 ]; then
    ok "$fam: under a small cache ($pre preemptions) each request equals alone"
  else bad "$fam: small cache: preemptions '$pre': $(cat "$tmp/diff")"; fi
  stop_server
done
serve_test_summary
