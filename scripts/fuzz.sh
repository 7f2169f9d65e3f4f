#!/usr/bin/env bash
# scripts/fuzz.sh — builds the libFuzzer targets (fuzz/) with clang,
# AddressSanitizer and UBSan, and runs each for ALLOY_FUZZ_SECONDS (default
# 30) from a seed corpus: the example bodies, and .npy files written here.
# Exits 0 with a SKIPPED line when clang's fuzzer runtime is missing
# (Debian: clang and libclang-rt-14-dev). scripts/test.sh runs it as a stage.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${ALLOY_FUZZ_SECONDS:-30}
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' > "$probe/p.c"
if ! command -v clang >/dev/null || ! clang -fsanitize=fuzzer "$probe/p.c" -o "$probe/p" 2>/dev/null; then
    echo "=== fuzz: SKIPPED (clang with libFuzzer not found: install clang libclang-rt-14-dev)"
    exit 0
fi
dir=build-fuzz
CC=clang CXX=clang++ cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DALLOY_BUILD_FUZZERS=ON \
    -DALLOY_SANITIZE=address,undefined -DALLOY_BUILD_TESTS=OFF -DALLOY_BUILD_BENCH=OFF >/dev/null
cmake --build "$dir" -j "${JOBS:-$(nproc)}" --target fuzz_body fuzz_npy
corpus=$dir/corpus
mkdir -p "$corpus/body" "$corpus/npy"
for f in examples/*.metal; do # seeds: rank byte, then the file's body
    { printf '\001'; sed -n '/^\/\/! body:/,$p' "$f" | tail -n +2; } > "$corpus/body/$(basename "$f")"
done
python3 - "$corpus/npy" <<'PY' 2>/dev/null || printf '\x93NUMPY\x01\x00v\x00{"descr": "<f4", "fortran_order": False, "shape": (2,), }          \n\x00\x00\x80?\x00\x00\x00@' > "$corpus/npy/seed.npy"
import sys, struct
def npy(descr, shape, data, fortran=False):
    h = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)
    h += " " * (63 - (10 + len(h)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + data
d = sys.argv[1]
open(d + "/f4.npy", "wb").write(npy("<f4", "(3,)", struct.pack("<3f", 1, 2, 3)))
open(d + "/i8.npy", "wb").write(npy("<i8", "(2, 2)", struct.pack("<4q", 1, -2, 3, 4), True))
open(d + "/b1.npy", "wb").write(npy("|b1", "()", b"\x01"))
PY
export ASAN_OPTIONS=detect_leaks=1:intercept_tls_get_addr=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
for t in body npy; do
    echo "=== fuzz: fuzz_$t for ${secs}s"
    "$dir/fuzz/fuzz_$t" -max_total_time="$secs" -max_len=65536 -timeout=10 \
        -artifact_prefix="$dir/crash-$t-" "$corpus/$t" 2>&1 | tail -n 3
done
echo "=== fuzz: ok"
