# scripts/gpu-cache.sh — sourced by the GPU machine's scripts (gpu-ab.sh,
# gpu-bench-training.sh): the kernel cache travels between calls, since each
# call may get a fresh machine that would compile every kernel again with
# NVRTC (minutes of the session's device time for the mLSTM and nn kernels).
#   gpu_cache_seed   an empty ALLOY_CACHE_DIR starts from .gpu/cache.txz.* when
#                    the call carried them (carry ".gpu")
#   gpu_cache_keep   ALLOY_CACHE_DIR into $OUT/cache.txz.aa, .ab, ... (xz, in
#                    pieces of 15 MiB: a file back from the machine may hold at
#                    most 16); copy them to .gpu/ for the next call
gpu_cache_seed() {
    mkdir -p "$ALLOY_CACHE_DIR"
    if compgen -G ".gpu/cache.txz.*" > /dev/null && [ -z "$(ls -A "$ALLOY_CACHE_DIR")" ]; then
        cat .gpu/cache.txz.* | tar xJf - -C "$ALLOY_CACHE_DIR" || echo "gpu-cache: .gpu/cache.txz.* did not unpack" >&2
    fi
}
gpu_cache_keep() {
    rm -f "$OUT"/cache.txz.*
    tar cf - -C "$ALLOY_CACHE_DIR" . 2>/dev/null | xz -T0 -6 | split -b 15m - "$OUT/cache.txz." ||
        echo "gpu-cache: the cache was not saved" >&2
}
