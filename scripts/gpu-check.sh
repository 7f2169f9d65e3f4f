#!/usr/bin/env bash
# scripts/gpu-check.sh — everything the GPU machine is for, in one call:
# build, the whole test suite on CUDA, the benchmarks, compute-sanitizer
# (memcheck, racecheck) over the kernel tests, and a summary table at the end.
# Logs go under $OUT (the device tool brings that folder back).
#   ALLOY_GPU_STEPS="build test bench sanitize" selects steps (default: all).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
STEPS=${ALLOY_GPU_STEPS:-build test bench sanitize}
JOBS=${JOBS:-$(nproc)}
export ALLOY_CACHE_DIR=${ALLOY_CACHE_DIR:-/tmp/alloy-gpu-cache}
summary=()
note() { summary+=("$(printf '| %-28s | %s |' "$1" "$2")"); }
has() { [[ " $STEPS " == *" $1 "* ]]; }

# At most 8 files come back from $OUT: info.txt, build.log, tests-cuda.log,
# the two bench outputs, the peer's, and one log per sanitizer tool.
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/info.txt" 2>&1
note "device" "$(head -1 "$OUT/info.txt")"

if has build; then
    if cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 &&
       cmake --build build-gpu -j "$JOBS" >> "$OUT/build.log" 2>&1; then
        note "build" "ok"
    else
        note "build" "FAILED (build.log)"; tail -30 "$OUT/build.log"
    fi
    build-gpu/alloy info >> "$OUT/info.txt" 2>&1; cat "$OUT/info.txt"
fi

if has test; then
    ALLOY_DEVICE=cuda ctest --test-dir build-gpu -j 4 --timeout 600 --output-on-failure \
        > "$OUT/tests-cuda.log" 2>&1
    note "tests (ALLOY_DEVICE=cuda)" "$(grep -E 'tests passed|tests failed' "$OUT/tests-cuda.log" | tail -1)"
    grep -E "^\s+[0-9]+ - " "$OUT/tests-cuda.log" | head -40
fi

if has bench; then
    for name in bench_cuda_runtime bench_examples; do
        b=build-gpu/bench/$name
        [ -x "$b" ] || continue
        if ALLOY_DEVICE=cuda "$b" > "$OUT/$name.txt" 2>&1; then note "$name" "ok ($name.txt)"
        else note "$name" "FAILED ($name.txt)"; fi
        cat "$OUT/$name.txt"
    done
    # The peer of the example GEMM, in the same call: cuBLAS SGEMM via PyTorch.
    if python3 bench/peer_cublas.py > "$OUT/peer_cublas.txt" 2>&1; then
        cat "$OUT/peer_cublas.txt"
        g=$(awk '/^GEMM_MS/ {print $2}' "$OUT/bench_cuda_runtime.txt")
        c=$(awk '/^CUBLAS_MS/ {print $2}' "$OUT/peer_cublas.txt")
        [ -n "$g" ] && [ -n "$c" ] &&
            note "gemm_av / cuBLAS SGEMM 4096^3" "$(awk -v g="$g" -v c="$c" 'BEGIN {printf "%.3f (alloy %.2f ms, cuBLAS %.2f ms)", c / g, g, c}')"
    else
        note "cuBLAS peer" "unavailable (peer_cublas.txt)"
    fi
fi

if has sanitize; then
    for tool in memcheck racecheck; do
        fails=0; ran=0
        for t in build-gpu/tests/test_seed_* build-gpu/tests/test_msl_* build-gpu/tests/test_cuda_kernels \
                 build-gpu/tests/test_kernel_api; do
            [ -x "$t" ] || continue
            [[ "$t" == *loader* ]] && continue # parses files only: no GPU work to check
            ran=$((ran + 1))
            if ! ALLOY_DEVICE=cuda compute-sanitizer --tool "$tool" --error-exitcode 86 \
                    --target-processes all "$t" >> "$OUT/sanitizer-$tool.log" 2>&1; then
                fails=$((fails + 1)); echo "$tool: $(basename "$t") FAILED" >> "$OUT/sanitizer-$tool.log"
            fi
        done
        note "compute-sanitizer $tool" "$((ran - fails))/$ran clean"
    done
fi

echo
echo "| step | result |"
echo "|---|---|"
printf '%s\n' "${summary[@]}"
