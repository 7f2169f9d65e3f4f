#!/usr/bin/env bash
# scripts/test.sh — builds and runs every test. The README's test command and
# what CI runs (.ci/run). Stages (each can be skipped with ALLOY_SKIP_<NAME>=1):
#   main      Release build + ctest (ALLOY_DEVICE picks the device, default cpu)
#   asan      AddressSanitizer + UBSan build + ctest
#   tsan      ThreadSanitizer build + the concurrency and thread-pool tests
#   aarch64   the test suite (less the CLI, concurrency and _cpudebug tests, at
#             ALLOY_TEST_SMALL: see scripts/test-aarch64.sh) cross-built for
#             AArch64, run under qemu-user (needs gcc-aarch64-linux-gnu and
#             qemu-user; skipped with a message when they are missing, unless
#             CI=true)
#   python    the Python package: a venv under build/python-venv, numpy, pytest
#             and scikit-build-core from PyPI, `pip install .`, then pytest over
#             python/tests (PYTHON picks the interpreter, default python3)
#   fuzz      the libFuzzer targets (scripts/fuzz.sh), ALLOY_FUZZ_SECONDS each
#             (default 20); skipped with a message without clang's fuzzer runtime
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
summary=()

stage() { # name, build dir, cmake args..., then -- ctest args (STAGE_TARGETS: build only these)
    local name=$1 dir=$2; shift 2
    local cm=() ct=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do cm+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    ct=("$@")
    echo "=== $name: configure and build ($dir)"
    cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${cm[@]}" >/dev/null
    # shellcheck disable=SC2086 # STAGE_TARGETS: a list of targets, or empty for all
    cmake --build "$dir" -j "$JOBS" ${STAGE_TARGETS:+--target $STAGE_TARGETS}
    echo "=== $name: test"
    ctest --test-dir "$dir" --output-on-failure -j "$JOBS" "${ct[@]}"
    summary+=("$name: ok")
}

var_set() { local v="ALLOY_SKIP_$1"; [ "${!v:-0}" = "1" ]; }

var_set MAIN || stage main build
# intercept_tls_get_addr=0: LeakSanitizer can crash at exit scanning the
# thread-local threadgroup memory of dlopen'd kernels (a sanitizer runtime bug).
# The sanitizer stages reuse the main stage's kernel cache (tests/CMakeLists.txt
# says why).
shared_cache=-DALLOY_TEST_CACHE_DIR=$PWD/build/test-cache
# The catalog's _cpudebug twins (linear algebra, mLSTM, nn) are left out
# there: checked memory is a mode of the kernels, which are built without
# sanitizers, the main stage runs them, and their host code is the plain
# tests' (which ASan runs); the runtime's own _cpudebug twins stay.
var_set ASAN || ASAN_OPTIONS=detect_leaks=1:intercept_tls_get_addr=0 stage asan build-asan -DALLOY_SANITIZE=address,undefined -DALLOY_BUILD_BENCH=OFF "$shared_cache" -- -E '^test_(linalg_.*|mlstm.*|nn|nn_conv)_cpudebug$'

var_set TSAN || STAGE_TARGETS="test_concurrency test_cpu_sched test_cpu_pool" stage tsan build-tsan -DALLOY_SANITIZE=thread -DALLOY_BUILD_BENCH=OFF "$shared_cache" -- -R '^test_(concurrency|cpu_sched|cpu_pool)$'

if ! var_set AARCH64; then
    if command -v aarch64-linux-gnu-gcc >/dev/null && command -v qemu-aarch64 >/dev/null; then
        scripts/test-aarch64.sh
        summary+=("aarch64: ok")
    elif [ "${CI:-}" = "true" ]; then
        echo "aarch64 toolchain or qemu-aarch64 missing in CI" >&2; exit 1
    else
        echo "=== aarch64: SKIPPED (install gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user)"
        summary+=("aarch64: skipped (no cross toolchain)")
    fi
fi
if ! var_set PYTHON; then
    echo "=== python: venv, pip install ., pytest"
    venv=build/python-venv
    [ -x "$venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$venv"
    "$venv/bin/python" -m pip install -q numpy pytest scikit-build-core ml_dtypes
    # No build isolation: the venv already has scikit-build-core, and the
    # build directory (build-wheel/) is reused between runs.
    "$venv/bin/python" -m pip install -q --no-build-isolation .
    set +e
    # The kernel cache the C tests filled: the same catalog kernels, compiled
    # by the same compiler with the same flags, need not be compiled again.
    ALLOY_CACHE_DIR=${ALLOY_CACHE_DIR:-$PWD/build/test-cache} \
        "$venv/bin/python" -m pytest python/tests -q -p no:cacheprovider
    rc=$?
    set -e
    if [ "$rc" -eq 5 ]; then echo "python: pytest collected no tests" >&2; exit 1; fi
    [ "$rc" -eq 0 ] || exit "$rc"
    summary+=("python: ok")
fi
if ! var_set FUZZ; then
    mkdir -p build
    ALLOY_FUZZ_SECONDS=${ALLOY_FUZZ_SECONDS:-20} scripts/fuzz.sh | tee build/fuzz.log
    if grep -q '^=== fuzz: SKIPPED' build/fuzz.log; then summary+=("fuzz: skipped (no libFuzzer)")
    else summary+=("fuzz: ok"); fi
fi
printf '%s\n' "=== summary" "${summary[@]}"
