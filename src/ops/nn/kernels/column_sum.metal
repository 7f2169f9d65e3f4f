// column_sum: the second stage of a deterministic row reduction: out[i] =
// the sum over p = 0 .. P-1 of part[p*M + i]; columns i < M1 go to a[i], the
// rest to b[i - M1] (the norms' dweight/dbias, the convolution's dw/db).
// A threadgroup of 32 x KS threads serves 32 columns: thread (x, k) sums the
// blocks p = k, k + KS, ... in eight running sums, so that its loads (eight
// for KS >= P / 8) are in flight at once, then the KS sums are added by a
// tree over k in threadgroup memory. The partial sums, a few MiB, were just
// written and sit in L2: the kernel is latency-bound, and common.c takes KS
// as the smallest power of two with 8 KS >= P, at most 32 (H200, LayerNorm
// backward over rows of 1024, P = 256: 32 x 8 threads with four sums took
// 6.4 us of its 111; where P is small, a larger KS only adds tree levels).
// The order is fixed by P alone, so the result does not depend on
// scheduling. P may be 0 (zeros).
// Launch constants: long P, long M, long M1. Template: T (outputs), A (part),
// KS (1, 2, 4, ..., 32).
// Launch: grid = (ceil(M/32)*32, KS, 1), threadgroup = (32, KS, 1).
//! name: alloy_nn_column_sum
//! inputs: part
//! outputs: a b
//! template: T=float32
//! template: A=float32
//! template: KS=32
//! body:
// overlapping launches (alloy_launch_set_overlap, ALLOY_OPS_OVERLAP): the kernel before ends first, the next may start
alloy_wait_previous_kernel();
alloy_start_next_kernel();
const long i = long(thread_position_in_grid.x);
const int lx = int(thread_position_in_threadgroup.x), k = int(thread_position_in_threadgroup.y);
threadgroup A red[KS][32];
A s[8];
for (int j = 0; j < 8; j++) s[j] = A(0);
if (i < M) {
    long p = long(k);
    for (; p + 7 * KS < P; p += 8 * KS)
        for (int j = 0; j < 8; j++) s[j] += part[(p + j * KS) * M + i];
    for (int j = 0; j < 8; j++) // the last blocks (fewer than 8 KS), each sum at most one
        if (p + j * KS < P) s[j] += part[(p + j * KS) * M + i];
}
red[k][lx] = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
for (int half = KS / 2; half > 0; half /= 2) {
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (k < half) red[k][lx] += red[k + half][lx];
}
if (k == 0 && i < M) {
    if (i < M1) a[i] = T(red[0][lx]);
    else b[i - M1] = T(red[0][lx]);
}
