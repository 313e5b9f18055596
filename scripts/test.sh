#!/usr/bin/env bash
# test.sh — sets up (Debian packages, pinned npm data) and runs the tests.
#   scripts/test.sh              build in build/ with -Werror, run every CI test label
#   scripts/test.sh --sanitize   build in build-asan/ with ASan+UBSan, run label 'unit'
# Long soak and benchmark runs are not here: see bench/ and docs/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
if [ "${1:-}" = "--sanitize" ]; then
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DEA_SANITIZE=ON -DEA_WERROR=ON -DCMAKE_C_COMPILER=clang >/dev/null
  cmake --build build-asan -j"$(nproc)"
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  (cd build-asan && ctest -L unit --output-on-failure -j2)
else
  cmake -S . -B build -DEA_WERROR=ON >/dev/null
  cmake --build build -j"$(nproc)"
  (cd build && ctest -LE 'slow' --output-on-failure -j2)
fi
