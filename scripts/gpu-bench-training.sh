#!/usr/bin/env bash
# scripts/gpu-bench-training.sh — issue 11's training benchmarks on the GPU
# machine, one step per call so that each fits the machine's time per command:
#   build      cmake Release build in build-gpu (kept between calls)
#   mlstm      alloy bench mlstm: the training rows (bwd, fwd+bwd) and the
#              forward rows they compare with (7B f32/bf16, B=1 S=65536,
#              varlen, dense 64k) -> $OUT/mlstm.txt
#   tfla       bench/bench_mlstm_tfla.py against $OUT/mlstm.txt (mlstm_kernels
#              and einops installed from .whl/ when present) -> $OUT/tfla.txt
#   nn         alloy bench nn -> $OUT/nn.txt
#   profile    ncu kernel durations: the chunkwise split path's phases and the
#              step's kernels -> $OUT/profile.txt (not in the default steps)
#   nn-torch   bench/bench_nn_torch.py against $OUT/nn.txt -> $OUT/nn_torch.txt
#              (NN_TORCH_ONLY=TEXT passes --only TEXT: torch.compile compiles
#              every row, so f32 and bf16 may need a call each)
# Usage: scripts/gpu-bench-training.sh STEP... (default: build mlstm tfla nn nn-torch).
# Each alloy/python command runs under `timeout` (STEP_TIMEOUT seconds, default
# 540) and what it printed stays in its file; $OUT keeps the files (default
# ./gpu-out; with the kernel cache as cache.txz.*, scripts/gpu-cache.sh: copy them
# to .gpu/ and carry .gpu next time). mlstm.txt is appended to, not overwritten, so the mlstm step may
# be split with MLSTM_ONLY="TEXT;TEXT" (the --only texts, one call each).
# BENCH_DEVICE=cpu runs the same steps on the CPU at the --quick sizes (a check
# of this script without a GPU).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
STEPS=("$@")
[ ${#STEPS[@]} -eq 0 ] && STEPS=(build mlstm tfla nn nn-torch)
T=${STEP_TIMEOUT:-540}
export ALLOY_CACHE_DIR=${ALLOY_CACHE_DIR:-/tmp/alloy-gpu-cache}
. scripts/gpu-cache.sh
gpu_cache_seed
trap gpu_cache_keep EXIT
ALLOY=build-gpu/alloy
DEV=${BENCH_DEVICE:-cuda}
Q=(); PYDEV=()
[ "$DEV" = cpu ] && Q=(--quick) && PYDEV=(--device cpu)

run() { # FILE COMMAND...: the command's output appended to FILE and shown
    local file=$1; shift
    echo "== $*" | tee -a "$file"
    timeout "$T" "$@" 2>&1 | tee -a "$file"
    local rc=${PIPESTATUS[0]}
    [ "$rc" -eq 124 ] && echo "== timed out after $T s" | tee -a "$file"
    return 0
}

for step in "${STEPS[@]}"; do
    case $step in
    build)
        if cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 &&
            cmake --build build-gpu -j "$(nproc)" --target alloy_cli >> "$OUT/build.log" 2>&1; then
            echo "build: ok"
        else
            echo "build: FAILED"; tail -30 "$OUT/build.log"
        fi
        ;;
    mlstm)
        default="bwd f32 7B;bwd bf16 7B;chunkwise f32 7B;chunkwise bf16 7B;varlen;dense 64k"
        [ "$DEV" = cpu ] && default="small"
        IFS=';' read -r -a onlys <<< "${MLSTM_ONLY:-$default}"
        for o in "${onlys[@]}"; do
            run "$OUT/mlstm.txt" "$ALLOY" bench mlstm --device "$DEV" "${Q[@]}" --only "$o"
        done
        ;;
    tfla)
        if ! python3 -c 'import mlstm_kernels' 2>/dev/null && ls .whl/mlstm_kernels-*.whl >/dev/null 2>&1; then
            python3 -m pip install -q --no-index --no-deps --target /tmp/alloy-peers .whl/mlstm_kernels-*.whl \
                .whl/einops-*.whl
            export PYTHONPATH=/tmp/alloy-peers${PYTHONPATH:+:$PYTHONPATH}
        fi
        run "$OUT/tfla.txt" python3 bench/bench_mlstm_tfla.py --alloy "$OUT/mlstm.txt" "${PYDEV[@]}"
        ;;
    nn)
        run "$OUT/nn.txt" "$ALLOY" bench nn --device "$DEV" "${Q[@]}"
        ;;
    nn-torch)
        run "$OUT/nn_torch.txt" python3 bench/bench_nn_torch.py --alloy "$OUT/nn.txt" "${PYDEV[@]}" "${Q[@]}" \
            ${NN_TORCH_ONLY:+--only "$NN_TORCH_ONLY"}
        ;;
    profile)
        # kernel durations under ncu (clocks locked by ncu: compare rows with each
        # other, not with the bench's times): the chunkwise split path's two
        # phases at the 7B shape (S 8000: one window), and the step's two kernels
        # at B = 1, 16, 256, 1024 — the step's target is this GPU time
        {
            echo "== chunkwise bf16 7B S=8000: the first launches (phase 1: grid nseq*NH*KT*VT groups, phase 2: slots*NH)"
            timeout "$T" ncu -k regex:alloy --launch-count 6 --section SpeedOfLight --section LaunchStats \
                --section Occupancy "$ALLOY" bench mlstm --device cuda --once --only "chunkwise bf16 7B S=8000" 2>&1 |
                grep -E "alloy_kernel|Duration|Registers Per|Achieved Occ|Memory Throughput|Compute \(SM\)"
            echo "== step bf16 7B: mlstm_step, mlstm_step_nm per B (B = 1, 16, 256, 1024)"
            timeout "$T" ncu -k regex:alloy --section SpeedOfLight "$ALLOY" bench mlstm --device cuda --once \
                --only "step bf16 7B" 2>&1 | grep -E "alloy_kernel|Duration"
        } | tee -a "$OUT/profile.txt"
        ;;
    *)
        echo "gpu-bench-training.sh: unknown step '$step' (build, mlstm, tfla, nn, nn-torch, profile)" >&2
        exit 2
        ;;
    esac
done
