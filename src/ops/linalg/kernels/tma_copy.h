// tma_copy.h — the copy engine (TMA) from a kernel body on CUDA: mbarriers
// (init, the producer's expect_tx arrival, plain arrivals, parity waits) and
// 3-D box copies through tensor maps (alloy_launch_set_tensor_map), global to
// shared completing on an mbarrier and shared to global in bulk groups.
// Included from a kernel's header section; empty off CUDA.
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
#endif
