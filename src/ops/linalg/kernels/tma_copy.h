// tma_copy.h — the copy engine (TMA) from a kernel body on CUDA: mbarriers
// (init, the producer's expect_tx arrival, plain arrivals, parity waits) and
// 3-D box copies through tensor maps (alloy_launch_set_tensor_map), global to
// shared completing on an mbarrier and shared to global in bulk groups, and
// 1-D bulk copies of contiguous bytes the same two ways (no tensor map; the
// mLSTM step's rows, mlstm_step.metal's BULK). Shared addresses are 32-bit
// (cvta.to.shared). Included from a kernel's header section; empty off CUDA.
#if defined(ALLOY_BACKEND_CUDA)
METAL_FUNC void tma_bar_init(uint bar, uint count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}
/* waits until the phase of the given parity has completed */
METAL_FUNC void tma_bar_wait(uint bar, uint parity) {
    /* the label is local to the braces' scope, so every inlined copy may reuse it */
    asm volatile("{\n.reg .pred done;\nTMA_WAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra TMA_WAIT;\n}\n" :: "r"(bar), "r"(parity) : "memory");
}
METAL_FUNC void tma_bar_arrive(uint bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(bar) : "memory");
}
/* the producer's arrival, announcing the bytes the copies will complete */
METAL_FUNC void tma_bar_expect(uint bar, uint bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar), "r"(bytes) : "memory");
}
METAL_FUNC void tma_load3(uint dst, const alloy_tensor_map &map, int x, int y, int z, uint bar) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n"
                 :: "r"(dst), "l"(&map), "r"(x), "r"(y), "r"(z), "r"(bar) : "memory");
}
METAL_FUNC void tma_store3(const alloy_tensor_map &map, int x, int y, int z, uint src) {
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];\n"
                 :: "l"(&map), "r"(x), "r"(y), "r"(z), "r"(src) : "memory");
}
/* bytes (a multiple of 16; src, dst 16-byte aligned) global -> shared, completing on bar */
METAL_FUNC void tma_bulk_load(uint dst, const device void *src, uint bytes, uint bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                 :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}
/* bytes shared -> global in this thread's current bulk group */
METAL_FUNC void tma_bulk_store(device void *dst, uint src, uint bytes) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n"
                 :: "l"(dst), "r"(src), "r"(bytes) : "memory");
}
METAL_FUNC void tma_bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
/* this thread's bulk groups but the last N have read their shared source */
template <int N> METAL_FUNC void tma_bulk_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;\n" :: "n"(N) : "memory");
}
/* this thread's bulk groups have completed (their writes done) */
METAL_FUNC void tma_bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
/* this thread's writes to shared memory visible to the copy engine (before a barrier and the store) */
METAL_FUNC void tma_fence_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
/* the mbarriers just initialised visible to the copy engine (before a barrier and the first copy) */
METAL_FUNC void tma_fence_bar_init() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
#endif
