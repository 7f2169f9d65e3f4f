#!/usr/bin/env bash
# scripts/run.sh — the README's main command: builds alloy (Release, in
# build/) and runs every example kernel in examples/ on the best device
# (ALLOY_DEVICE chooses what "auto" means), each checked against a
# double-precision reference, with a table of times, rates and errors.
# Exits non-zero if the build fails or any kernel is wrong.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
build/bench/bench_examples
