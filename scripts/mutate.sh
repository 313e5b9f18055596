#!/bin/bash
# mutate.sh — a mutation run: plant each small bug of tests/mutants.txt in a
# scratch copy of the tree, build, run the tests named to catch it, restore.
#
#   scripts/mutate.sh [-j N] [-t SECONDS] [-k] [ID_SUBSTRING...]
#
#   -j N        build jobs (default 2)
#   -t SECONDS  ctest timeout per test of a mutant (default 300)
#   -k          keep the scratch worktree (it is reused by the next run with -k)
#   ID_SUBSTRING  run only the mutants whose id contains one of these
#
# The scratch tree is a detached `git worktree` of HEAD under /tmp (uncommitted
# source changes are not in it; this list is read from the checkout), configured once in Release and rebuilt incrementally;
# .cache and tools/node/node_modules of this checkout are linked into it so the
# golden tests find their references. Before the mutants, the named tests are run
# once on the unmutated tree: a test that fails there makes its mutants
# "baseline-failed" (their result would mean nothing).
#
# One line per mutant:
#   killed                 a named test failed (or timed out)
#   survived               every named test passed (also: no test by that name)
#   build-failed           the mutant does not compile: invalid, not counted
#   mutant-not-applicable  the `from` text is not in the file exactly once
#   baseline-failed        a named test fails without the mutant
# then `mutation score: K killed / N (P%)` with N = killed + survived.
#
# tests/mutants.txt: records separated by blank lines, `#` lines are comments.
#   id:    short name
#   file:  path from the repository root
#   from:  text that occurs exactly once in the file (a whole line or part of one)
#   to:    its replacement
#   tests: ctest names (exact, space-separated) that must catch it
# Not part of CI: CPU-heavy (see docs/testing.md).
set -u
JOBS=2
TMO=300
KEEP=0
while getopts "j:t:k" o; do
    case $o in
    j) JOBS=$OPTARG ;;
    t) TMO=$OPTARG ;;
    k) KEEP=1 ;;
    *) sed -n '2,12p' "$0" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
FILTER=("$@")

SRC=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel) || exit 2
LIST=$SRC/tests/mutants.txt
WT=/tmp/eaas-mutate-$(id -u)
[ -f "$LIST" ] || { echo "no $LIST" >&2; exit 2; }

# ---- the list: parallel arrays, one entry per record
ids=() files=() froms=() tos=() tests=()
flush() {
    [ -n "${r_id:-}" ] || return 0
    ids+=("$r_id") files+=("$r_file") froms+=("$r_from") tos+=("$r_to") tests+=("$r_tests")
    r_id=""
}
r_id="" r_file="" r_from="" r_to="" r_tests=""
while IFS= read -r line || [ -n "$line" ]; do
    case $line in
    '#'*) ;;
    '') flush ;;
    id:*) r_id=${line#id: } ;;
    file:*) r_file=${line#file: } ;;
    from:*) r_from=${line#from: } ;;
    to:*) r_to=${line#to: } ;;
    tests:*) r_tests=${line#tests: } ;;
    *) echo "mutants.txt: unknown line: $line" >&2; exit 2 ;;
    esac
done <"$LIST"
flush

selected() {
    [ ${#FILTER[@]} -eq 0 ] && return 0
    local f
    for f in "${FILTER[@]}"; do [[ $1 == *"$f"* ]] && return 0; done
    return 1
}

# ---- the scratch tree
cleanup() {
    [ -d "$WT" ] && git -C "$WT" checkout -q -- . 2>/dev/null
    if [ "$KEEP" = 0 ] && [ -d "$WT" ]; then
        git -C "$SRC" worktree remove --force "$WT" >/dev/null 2>&1 || rm -rf "$WT"
        git -C "$SRC" worktree prune
    fi
}
trap cleanup EXIT
if [ -d "$WT/.git" ] || [ -f "$WT/.git" ]; then
    git -C "$WT" checkout -q -- . && git -C "$WT" checkout -q --detach "$(git -C "$SRC" rev-parse HEAD)" || exit 2
else
    rm -rf "$WT"
    git -C "$SRC" worktree prune
    git -C "$SRC" worktree add -q --detach "$WT" HEAD || exit 2
fi
[ -e "$SRC/.cache" ] && ln -sfn "$SRC/.cache" "$WT/.cache"
[ -d "$SRC/tools/node/node_modules" ] && ln -sfn "$SRC/tools/node/node_modules" "$WT/tools/node/node_modules"
echo "scratch tree $WT at $(git -C "$WT" rev-parse --short HEAD)" >&2
cmake -S "$WT" -B "$WT/build" -DCMAKE_BUILD_TYPE=Release >/dev/null || exit 2
targets=$(cmake --build "$WT/build" --target help | sed -n 's/^\.\.\. \([A-Za-z0-9_]*\).*/\1/p')
# build eaas (script tests and model builders use it) and the named test programs
# (a fuzz target's corpus test X_corpus runs the program X)
build_for() {
    local t want=(eaas)
    for t in $1; do grep -qx "${t%_corpus}" <<<"$targets" && want+=("${t%_corpus}"); done
    cmake --build "$WT/build" -j "$JOBS" --target "${want[@]}" >"$WT/build/mutate-build.log" 2>&1
}
# 0 if every named test passes; 1 if one fails; 2 if none of the names is a test
run_tests() {
    local t re="" n
    for t in $1; do re="$re${re:+|}^$t\$"; done
    n=$(cd "$WT/build" && ctest -N -R "$re" | sed -n 's/^Total Tests: //p')
    [ "${n:-0}" -gt 0 ] || return 2
    (cd "$WT/build" && ctest -R "$re" --timeout "$TMO" >"$WT/build/mutate-test.log" 2>&1)
    [ $? -eq 0 ] && return 0 || return 1
}

# ---- baseline: every named test passes without a mutant
all_tests=$(for i in "${!ids[@]}"; do selected "${ids[$i]}" && echo "${tests[$i]}"; done | tr ' ' '\n' | sort -u | tr '\n' ' ')
build_for "$all_tests" || { echo "the unmutated tree does not build (see $WT/build/mutate-build.log)" >&2; exit 2; }
declare -A bad_base
for t in $all_tests; do
    run_tests "$t"
    case $? in
    1) bad_base[$t]=1; echo "baseline: $t FAILS without a mutant" >&2 ;;
    2) echo "baseline: no test named $t" >&2 ;;
    esac
done

# ---- the mutants
killed=0 survived=0 invalid=0 na=0 basefail=0
for i in "${!ids[@]}"; do
    id=${ids[$i]} f=${files[$i]} t=${tests[$i]}
    selected "$id" || continue
    res="" why=""
    for x in $t; do [ -n "${bad_base[$x]:-}" ] && res=baseline-failed && why="$x fails without the mutant"; done
    if [ -z "$res" ]; then
        if ! FROM=${froms[$i]} TO=${tos[$i]} python3 - "$WT/$f" <<'EOF'
import os, sys
p = sys.argv[1]
try:
    s = open(p, encoding="utf-8").read()
except OSError:
    sys.exit(1)
a, b = os.environ["FROM"], os.environ["TO"]
if not a or s.count(a) != 1:
    sys.exit(1)
open(p, "w", encoding="utf-8").write(s.replace(a, b))
EOF
        then
            res=mutant-not-applicable why="'from' is not in $f exactly once"
        elif ! build_for "$t"; then
            res=build-failed why="$(grep -m1 -E 'error' "$WT/build/mutate-build.log")"
        else
            t0=$(date +%s)
            run_tests "$t"
            case $? in
            0) res=survived ;;
            1) res=killed why="by $(sed -n 's/^[[:space:]]*[0-9]* - \([^ ]*\) (\(.*\))$/\1 (\2)/p' "$WT/build/mutate-test.log" | paste -sd ' ')" ;;
            2) res=survived why="no test named: $t" ;;
            esac
            why="$why ($(($(date +%s) - t0)) s)"
        fi
        git -C "$WT" checkout -q -- "$f"
    fi
    case $res in
    killed) killed=$((killed + 1)) ;;
    survived) survived=$((survived + 1)) ;;
    build-failed) invalid=$((invalid + 1)) ;;
    mutant-not-applicable) na=$((na + 1)) ;;
    baseline-failed) basefail=$((basefail + 1)) ;;
    esac
    printf '%-22s %-28s %-32s [%s] %s\n' "$res" "$id" "$f" "$t" "$why"
done
n=$((killed + survived))
pct=$(awk -v k=$killed -v n=$n 'BEGIN { printf "%.0f", n ? 100 * k / n : 0 }')
echo "mutation score: $killed killed / $n ($pct%)  [invalid (build failed): $invalid, not applicable: $na, baseline failed: $basefail]"
