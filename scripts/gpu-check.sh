#!/usr/bin/env bash
# scripts/gpu-check.sh — everything the GPU machine is for, in one call:
# build, the whole test suite on CUDA, the benchmarks, compute-sanitizer
# (memcheck, racecheck) over the kernel tests and `alloy bench mlstm|nn --quick --once`,
# and a summary table at the end.
# Logs go under $OUT (the device tool brings that folder back).
#   ALLOY_GPU_STEPS="build test bench python sanitize" selects steps (default: all).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
STEPS=${ALLOY_GPU_STEPS:-build test bench python sanitize}
JOBS=${JOBS:-$(nproc)}
export ALLOY_CACHE_DIR=${ALLOY_CACHE_DIR:-/tmp/alloy-gpu-cache}
# the kernel cache travels between calls (carry ".gpu"; scripts/gpu-cache.sh), and
# the tests use the same one (their own default is <build>/test-cache, new each machine)
. scripts/gpu-cache.sh
gpu_cache_seed
cache_opt=-DALLOY_TEST_CACHE_DIR=$ALLOY_CACHE_DIR
summary=()
note() { summary+=("$(printf '| %-28s | %s |' "$1" "$2")"); }
has() { [[ " $STEPS " == *" $1 "* ]]; }

# At most 8 files come back from $OUT (the first 8 by name): info.txt, build.log, tests-cuda.log,
# bench_cuda_runtime.txt (with the cuBLAS peer), bench_examples.txt, bench_catalog.txt
# (alloy bench: matmul and linalg, then torch.linalg's rows), python.log, bench_python.txt,
# sanitizer.log, xlstm_train_*; with ALLOY_GPU_KEEP_CACHE=1 the kernel cache too, as
# cache.txz.* (copy them to .gpu/ for the next call). Where there are more than 8,
# the logs go into one file, logs.tar.xz, at the end (tar xJf it here).
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/info.txt" 2>&1
note "device" "$(head -1 "$OUT/info.txt")"

if has build; then
    if cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release "$cache_opt" > "$OUT/build.log" 2>&1 &&
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
    # The floor under the launch overhead: bare cuLaunchKernel, same method.
    build-gpu/bench/bench_cuda_launch_floor 2>&1 | tee -a "$OUT/bench_cuda_runtime.txt"
    # Generated code against the same kernels written by hand (NVRTC), one run.
    build-gpu/bench/bench_cuda_parity 2>&1 | tee -a "$OUT/bench_cuda_runtime.txt"
    w=$(awk '/^PARITY_WORST/ {print $2}' "$OUT/bench_cuda_runtime.txt")
    note "alloy / hand-written (worst)" "${w:-FAILED} (target <= 1.03)"
    # The catalog's table (alloy bench): cuBLAS loaded from the CUDA toolkit.
    [ -z "${ALLOY_CUBLAS:-}" ] && ALLOY_CUBLAS=$(ls /usr/local/cuda/lib64/libcublas.so* 2>/dev/null | head -1) &&
        export ALLOY_CUBLAS
    # matmul and linalg here; the mLSTM and fused-op rows (minutes each) run
    # through scripts/gpu-bench-training.sh, one step per call.
    if build-gpu/alloy bench matmul linalg --device cuda > "$OUT/bench_catalog.txt" 2>&1; then note "alloy bench" "ok (bench_catalog.txt)"
    else note "alloy bench" "FAILED (bench_catalog.txt)"; fi
    cat "$OUT/bench_catalog.txt"
    # The peer of `alloy bench linalg` on CUDA: torch.linalg on the same rows, with the
    # ratio to alloy's times read from the table above (appended to the same file).
    if python3 bench/bench_linalg_torch.py --alloy "$OUT/bench_catalog.txt" > "$OUT/peer.tmp" 2>&1; then
        note "torch.linalg peer" "ok (bench_catalog.txt)"
    else
        note "torch.linalg peer" "FAILED or unavailable (bench_catalog.txt)"
    fi
    { echo; echo "== torch.linalg (bench/bench_linalg_torch.py)"; cat "$OUT/peer.tmp"; } | tee -a "$OUT/bench_catalog.txt"
    # torch.bmm, the batched GEMM rows' named peer, with the ratio to the table above
    if python3 bench/bench_matmul_torch.py --alloy "$OUT/bench_catalog.txt" > "$OUT/peer.tmp" 2>&1; then
        note "torch.bmm peer" "ok (bench_catalog.txt)"
    else
        note "torch.bmm peer" "FAILED or unavailable (bench_catalog.txt)"
    fi
    { echo; echo "== torch.bmm (bench/bench_matmul_torch.py)"; cat "$OUT/peer.tmp"; } | tee -a "$OUT/bench_catalog.txt"
    rm -f "$OUT/peer.tmp"
    # The peer of the example GEMM, in the same call: cuBLAS SGEMM via PyTorch.
    if python3 bench/peer_cublas.py > "$OUT/peer.tmp" 2>&1; then
        cat "$OUT/peer.tmp" | tee -a "$OUT/bench_cuda_runtime.txt"
        g=$(awk '/^GEMM_MS/ {print $2}' "$OUT/bench_cuda_runtime.txt")
        c=$(awk '/^CUBLAS_MS/ {print $2}' "$OUT/peer.tmp")
        [ -n "$g" ] && [ -n "$c" ] &&
            note "gemm_av / cuBLAS SGEMM 4096^3" "$(awk -v g="$g" -v c="$c" 'BEGIN {printf "%.3f (alloy %.2f ms, cuBLAS %.2f ms)", c / g, g, c}')"
    else
        note "cuBLAS peer" "unavailable"; cat "$OUT/peer.tmp"
    fi
    rm -f "$OUT/peer.tmp"
fi

if has python; then
    # The extension built by CMake with the machine's python3 (the one with
    # PyTorch and CuPy); pytest may come as wheels in .whl (no network there).
    if ! python3 -c 'import pytest' 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
        python3 -m pip install -q --no-index --no-deps --target /tmp/alloy-site .whl/*.whl
        export PYTHONPATH=/tmp/alloy-site${PYTHONPATH:+:$PYTHONPATH}
    fi
    if cmake -S . -B build-gpu -DALLOY_BUILD_PYTHON=ON -DPython_EXECUTABLE="$(command -v python3)" "$cache_opt" \
            > "$OUT/python.log" 2>&1 && cmake --build build-gpu -j "$JOBS" >> "$OUT/python.log" 2>&1; then
        PYTHONPATH=$PWD/build-gpu/python${PYTHONPATH:+:$PYTHONPATH} ALLOY_TEST_DEVICE=cuda \
            python3 -m pytest python/tests -q -rs -p no:cacheprovider >> "$OUT/python.log" 2>&1
        note "python tests (ALLOY_TEST_DEVICE=cuda)" "$(tail -1 "$OUT/python.log")"
        # The README's ported MLX script, unchanged, on the GPU.
        ex=$(PYTHONPATH=$PWD/build-gpu/python${PYTHONPATH:+:$PYTHONPATH} ALLOY_DEVICE=cuda \
             python3 python/examples/exp_elementwise.py 2>&1 | tail -1)
        echo "exp_elementwise.py on cuda: $ex" >> "$OUT/python.log"
        note "README example on cuda" "$ex"
        # The xLSTM training check (alloy's PyTorch operators against PyTorch
        # in float64), where PyTorch sees the GPU.
        if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
            for dt in float32 bfloat16; do
                PYTHONPATH=$PWD/build-gpu/python${PYTHONPATH:+:$PYTHONPATH} \
                    python3 python/examples/xlstm_train.py --device cuda --dtype "$dt" > "$OUT/xlstm_train_$dt.txt" 2>&1
                note "xlstm_train.py on cuda, $dt" "$(tail -1 "$OUT/xlstm_train_$dt.txt")"
            done
        fi
        PYTHONPATH=$PWD/build-gpu/python${PYTHONPATH:+:$PYTHONPATH} \
            python3 bench/bench_python_overhead.py > "$OUT/bench_python.txt" 2>&1
        note "bench_python_overhead" "see bench_python.txt"
        cat "$OUT/bench_python.txt"
    else
        note "python build" "FAILED (python.log)"; tail -20 "$OUT/python.log"
    fi
fi

if has sanitize; then
    for tool in memcheck racecheck; do
        fails=0; ran=0
        for t in build-gpu/tests/test_seed_* build-gpu/tests/test_msl_* build-gpu/tests/test_cuda_kernels \
                 build-gpu/tests/test_kernel_api build-gpu/tests/test_tensor_map build-gpu/tests/test_linalg_*; do
            [ -x "$t" ] || continue
            [[ "$t" == *loader* ]] && continue # parses files only: no GPU work to check
            ran=$((ran + 1))
            if ! ALLOY_DEVICE=cuda compute-sanitizer --tool "$tool" --error-exitcode 86 \
                    --target-processes all "$t" >> "$OUT/sanitizer.log" 2>&1; then
                fails=$((fails + 1)); echo "$tool: $(basename "$t") FAILED" >> "$OUT/sanitizer.log"
            fi
        done
        # the mLSTM and fused-op kernels through `alloy bench --once` (their test
        # programs take too long under racecheck): every path at the small shapes,
        # the chunkwise forward's fused path too
        for run in "mlstm" "nn" "mlstm ALLOY_MLSTM_PATH=fused"; do
            op=${run%% *}; envs=(); [ "$run" != "$op" ] && envs=("${run#* }")
            ran=$((ran + 1))
            if ! env ${envs[@]+"${envs[@]}"} compute-sanitizer --tool "$tool" --error-exitcode 86 \
                    build-gpu/alloy bench "$op" --device cuda --quick --once >> "$OUT/sanitizer.log" 2>&1; then
                fails=$((fails + 1)); echo "$tool: alloy bench $run FAILED" >> "$OUT/sanitizer.log"
            fi
        done
        note "compute-sanitizer $tool" "$((ran - fails))/$ran clean"
    done
fi

[ "${ALLOY_GPU_KEEP_CACHE:-0}" = 1 ] && gpu_cache_keep
rm -f "$OUT/peer.tmp"
logs=$(cd "$OUT" && ls | grep -v '^cache\.txz\.')
if [ "$(ls "$OUT" | wc -l)" -gt 8 ]; then
    # shellcheck disable=SC2086 # file names without spaces, one word each
    (cd "$OUT" && tar cJf logs.tar.xz $logs && rm -f $logs)
fi

echo
echo "| step | result |"
echo "|---|---|"
printf '%s\n' "${summary[@]}"
