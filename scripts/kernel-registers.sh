#!/usr/bin/env bash
# scripts/kernel-registers.sh — registers and spills of every kernel specialisation a command compiles,
# on a machine without a GPU: the command runs on the CPU with ALLOY_COMPILE_CHECK=cuda (each
# specialisation is also generated for CUDA and compiled by NVRTC for sm_90), the generated PTX goes to a
# dump folder, and `ptxas -v -arch=sm_90a` reads each one. Run it at two revisions and diff the outputs
# after a restructuring: a default path can lose occupancy to a change that leaves its results alone (the
# mLSTM backward's phase 3 went from 122 registers to 159 when its code became the body of a loop that
# runs once — bench/experiments/NOTES.md).
#   scripts/kernel-registers.sh [-o DIR] COMMAND [ARG...]
#   e.g. scripts/kernel-registers.sh build/alloy bench nn --quick
# Output, one line per specialisation, sorted: kernel, its template values, registers, spill bytes, and
# ptxas's C75xx codes where it printed any (a Hopper wgmma kernel that lost its pipelining).
# Needs NVRTC (ALLOY_COMPILE_CHECK) and ptxas (CUDA toolkit, or PTXAS=path).
set -euo pipefail
dir=""
if [ "${1:-}" = "-o" ]; then dir=$2; shift 2; fi
[ $# -gt 0 ] || { echo "usage: $0 [-o DIR] COMMAND [ARG...]" >&2; exit 2; }
PTXAS=${PTXAS:-$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)}
[ -x "$PTXAS" ] || { echo "kernel-registers: no ptxas (set PTXAS)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dir=${dir:-$tmp/dump}
mkdir -p "$dir"
# a cache of its own, so that every specialisation compiles (and is dumped) in this run
ALLOY_DEVICE=cpu ALLOY_COMPILE_CHECK=cuda ALLOY_COMPILE_CHECK_DUMP="$dir" ALLOY_CACHE_DIR="$tmp/cache" \
    "$@" > "$tmp/log" 2>&1 || { echo "kernel-registers: the command failed:" >&2; tail -5 "$tmp/log" >&2; exit 1; }
for ptx in "$dir"/*.ptx; do
    [ -e "$ptx" ] || { echo "kernel-registers: nothing was compiled (no NVRTC?)" >&2; exit 1; }
    cu=${ptx%.ptx}.cu
    name=$(basename "$ptx" .ptx)
    # the template values as the kernel's prologue declares them (types: using T = ..., values: constexpr)
    # (a kernel without templates has none: no match is not a failure)
    tpl=$({ grep -o '^  using [A-Za-z0-9_]* \[\[maybe_unused\]\] = [^;]*\|^  \[\[maybe_unused\]\] constexpr [a-z]* [A-Za-z0-9_]* = [^;]*' "$cu" 2>/dev/null || true; } |
        sed 's/^  using \([A-Za-z0-9_]*\) \[\[maybe_unused\]\] = /\1=/; s/^  \[\[maybe_unused\]\] constexpr [a-z]* \([A-Za-z0-9_]*\) = /\1=/' |
        tr '\n' ' ')
    info=$("$PTXAS" -v -arch=sm_90a "$ptx" -o "$tmp/x.cubin" 2>&1 || true)
    regs=$(echo "$info" | grep -o 'Used [0-9]* registers' | grep -o '[0-9]*' | head -1)
    spill=$(echo "$info" | grep -o '[0-9]* bytes spill stores' | grep -o '^[0-9]*' | head -1)
    # ptxas's C75xx messages: wgmma serialised, or warpgroup waits / arrives it injected
    c75=$(echo "$info" | grep -o '(C75[0-9]*)' | tr -d '()' | sort -u | tr '\n' ' ' || true)
    printf '%s %s: %s registers, %s bytes spilled%s\n' "${name%-*}" "$tpl" "${regs:-?}" "${spill:-?}" \
        "${c75:+, ptxas ${c75% }}"
done | sort
