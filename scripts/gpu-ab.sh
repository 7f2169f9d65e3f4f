#!/usr/bin/env bash
# scripts/gpu-ab.sh — a change against a base revision, timed in one call on
# the GPU machine: both trees built side by side, the same `alloy bench`
# command alternating between the two builds, so that the ratio does not
# depend on which machine the call got or how its clocks drift.
#   scripts/gpu-ab.sh prepare REV     here: REV's tree (git archive) into
#                                     .gpu/base (keep /.gpu/ in .git/info/exclude
#                                     and name .gpu in the device call's carry)
#   scripts/gpu-ab.sh run [-n ROUNDS] [-t TEST] -- BENCH-ARGS...
#                                     there: builds the working tree in build-gpu
#                                     and .gpu/base in .gpu/base/b (alloy_cli),
#                                     runs TEST (a test binary name, on CUDA) on
#                                     the working tree's build, then ROUNDS
#                                     (default 2) rounds of `alloy bench
#                                     BENCH-ARGS` — base, then working tree.
#   scripts/gpu-ab.sh env [-n ROUNDS] [-t TEST] 'VAR=VALUE ...' ['VAR=VALUE ...' ...] -- BENCH-ARGS...
#                                     there: one build (the working tree), each
#                                     round the bench with the environment as it
#                                     is, then with each setting's VAR=VALUE ...
#                                     (the timing switches, e.g.
#                                     ALLOY_MLSTM_RB_GRAD2=2)
#   -T SECONDS (both modes): each bench command stopped after SECONDS (its
#   output so far kept), so that one slow setting cannot eat the call.
# Output: each command's table, marked `-- base round r` / `-- new round r`;
# logs under $OUT (build.log, build_base.log, ab.txt, cache.txz.*). ALLOY_CACHE_DIR is
# kept between the two builds (kernels whose source did not change compile
# once), starts from .gpu/cache.txz.* when the call carried them and comes back as
# $OUT/cache.txz.* (scripts/gpu-cache.sh). Examples, the mLSTM backward:
#   scripts/gpu-ab.sh prepare HEAD
#   (device) scripts/gpu-ab.sh run -t test_mlstm_backward -- mlstm --device cuda --only "bwd bf16 7B"
#   (device) scripts/gpu-ab.sh env 'ALLOY_MLSTM_RB_FWD1=2 ALLOY_MLSTM_RB_GRAD2=2' -- \
#                mlstm --device cuda --only "kept bf16 7B"
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
BASE=.gpu/base

case ${1:-} in
prepare)
    rev=${2:?usage: scripts/gpu-ab.sh prepare REV}
    git rev-parse --verify -q "$rev^{commit}" > /dev/null || { echo "gpu-ab.sh: no revision '$rev'" >&2; exit 2; }
    rm -rf "$BASE" && mkdir -p "$BASE" && git archive "$rev" | tar -x -C "$BASE" || exit 1
    echo "$BASE: $(git rev-parse --short "$rev") ($(du -sh "$BASE" | cut -f1)); carry .gpu in the device call"
    exit 0
    ;;
run | env) mode=$1; shift ;;
*)
    echo "usage: scripts/gpu-ab.sh prepare REV | run [-n ROUNDS] [-t TEST] -- BENCH-ARGS..." >&2
    echo "       scripts/gpu-ab.sh env [-n ROUNDS] [-t TEST] [-T SECONDS] 'VAR=VALUE ...' ... -- BENCH-ARGS..." >&2
    exit 2
    ;;
esac

rounds=2 test= limit=0
settings=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
    case $1 in
    -n) rounds=${2:?-n takes a count}; shift 2 ;;
    -t) test=${2:?-t takes a test binary}; shift 2 ;;
    -T) limit=${2:?-T takes seconds}; shift 2 ;;
    -*) echo "gpu-ab.sh $mode: unknown option '$1'" >&2; exit 2 ;;
    *) [ "$mode" = env ] || { echo "gpu-ab.sh $mode: unexpected '$1'" >&2; exit 2; }
       settings+=("$1"); shift ;;
    esac
done
[ "${1:-}" = -- ] && shift
[ $# -gt 0 ] || { echo "gpu-ab.sh $mode: no bench arguments after --" >&2; exit 2; }
if [ "$mode" = env ]; then
    [ ${#settings[@]} -gt 0 ] || { echo "gpu-ab.sh env: no 'VAR=VALUE ...' to compare with" >&2; exit 2; }
    for vars in "${settings[@]}"; do
        for v in $vars; do
            [[ $v =~ ^[A-Z_][A-Z0-9_]*=.*$ ]] || { echo "gpu-ab.sh env: '$v' is not VAR=VALUE" >&2; exit 2; }
        done
    done
else
    [ -d "$BASE" ] || { echo "gpu-ab.sh run: $BASE is missing (scripts/gpu-ab.sh prepare REV, here)" >&2; exit 2; }
fi
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export ALLOY_CACHE_DIR=${ALLOY_CACHE_DIR:-/tmp/alloy-gpu-cache}
. scripts/gpu-cache.sh
gpu_cache_seed
trap gpu_cache_keep EXIT
jobs=$(nproc)
half=$(( jobs > 1 ? jobs / 2 : 1 ))

# the two builds at once, half the cores each (env: the working tree's alone)
[ "$mode" = env ] && half=$jobs
( cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 &&
  cmake --build build-gpu -j "$half" >> "$OUT/build.log" 2>&1 ) &
if [ "$mode" = run ]; then
    ( cmake -S "$BASE" -B "$BASE/b" -DCMAKE_BUILD_TYPE=Release > "$OUT/build_base.log" 2>&1 &&
      cmake --build "$BASE/b" -j "$half" --target alloy_cli >> "$OUT/build_base.log" 2>&1 ) &
fi
wait
builds=(build-gpu/alloy)
[ "$mode" = run ] && builds+=("$BASE/b/alloy")
for b in "${builds[@]}"; do
    [ -x "$b" ] || { echo "gpu-ab.sh: the build of $b failed:" >&2; tail -20 "$OUT"/build*.log >&2; exit 1; }
done
# one bench command, stopped after `limit` seconds when -T gave one
bench() {
    if [ "$limit" -gt 0 ]; then timeout "$limit" "$@" || echo "(stopped or failed: exit $?)"
    else "$@"; fi
}
{
    if [ -n "$test" ]; then
        echo "== $test (ALLOY_DEVICE=cuda, working tree)"
        ALLOY_DEVICE=cuda "build-gpu/tests/$test" 2>&1 | tail -3
    fi
    for r in $(seq 1 "$rounds"); do
        if [ "$mode" = run ]; then
            echo "-- base round $r"
            bench "$BASE/b/alloy" bench "$@"
        else
            echo "-- environment as it is, round $r"
            bench build-gpu/alloy bench "$@"
            for vars in "${settings[@]}"; do
                echo "-- with $vars, round $r"
                # shellcheck disable=SC2086 # the VAR=VALUE words, split on purpose
                bench env $vars build-gpu/alloy bench "$@"
            done
            continue
        fi
        echo "-- new round $r"
        bench build-gpu/alloy bench "$@"
    done
} 2>&1 | tee "$OUT/ab.txt"
