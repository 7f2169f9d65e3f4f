# scripts/gpu-cache.sh — sourced by the GPU machine's scripts (gpu-ab.sh,
# gpu-bench-training.sh): the kernel cache travels between calls, since each
# call may get a fresh machine that would compile every kernel again with
# NVRTC (minutes of the session's device time for the mLSTM and nn kernels).
#   gpu_cache_seed   an empty ALLOY_CACHE_DIR starts from .gpu/cache.tgz when the
#                    call carried it (carry ".gpu")
#   gpu_cache_keep   ALLOY_CACHE_DIR into $OUT/cache.tgz, which comes back with
#                    the call's files; copy it to .gpu/cache.tgz for the next
gpu_cache_seed() {
    mkdir -p "$ALLOY_CACHE_DIR"
    if [ -f .gpu/cache.tgz ] && [ -z "$(ls -A "$ALLOY_CACHE_DIR")" ]; then
        tar xzf .gpu/cache.tgz -C "$ALLOY_CACHE_DIR" || echo "gpu-cache: .gpu/cache.tgz did not unpack" >&2
    fi
}
gpu_cache_keep() {
    tar czf "$OUT/cache.tgz" -C "$ALLOY_CACHE_DIR" . 2>/dev/null || echo "gpu-cache: the cache was not saved" >&2
}
