// async_copy.h — 16-byte copies from device memory into threadgroup memory
// that stay in flight without holding registers (CUDA's cp.async, Ampere and
// later), in commit groups a thread waits for: the chunkwise kernels' tiles
// (mlstm_tiles.h, mlstm_walk.h, mlstm_chunkwise*.metal). The CUDA primitives
// are CUDA-only; the waits and the commit are no-ops elsewhere.
#if defined(ALLOY_BACKEND_CUDA)
/* shared-memory address of a threadgroup pointer (what ldmatrix and cp.async take) */
METAL_FUNC uint mc_smem(const threadgroup void *p) {
    uint r;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
    return r;
}
/* 16 bytes global -> shared, bytes past `valid` zero-filled */
METAL_FUNC void mc_cp16(uint dst, const device void *src, uint valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid) : "memory");
}
METAL_FUNC void mc_cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
#endif
/* this thread's copies have landed */
METAL_FUNC void mc_wait_copies() {
#if defined(ALLOY_BACKEND_CUDA)
    asm volatile("cp.async.wait_group 0;" ::: "memory");
#endif
}
/* this thread's copies but its last N commit groups have landed */
template <int N>
METAL_FUNC void mc_wait_copies_but() {
#if defined(ALLOY_BACKEND_CUDA)
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}
/* commits the copies issued since the last commit as one group */
METAL_FUNC void mc_copies_commit() {
#if defined(ALLOY_BACKEND_CUDA)
    mc_cp_commit();
#endif
}
