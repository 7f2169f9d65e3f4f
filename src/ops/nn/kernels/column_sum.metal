// column_sum: the second stage of a deterministic row reduction: out[i] =
// the sum over p = 0 .. P-1 of part[p*M + i]; columns i < M1 go to a[i], the
// rest to b[i - M1] (the norms' dweight/dbias, the convolution's dw/db).
// A threadgroup of 32 x 8 threads serves 32 columns: thread (x, k) sums the
// blocks p = k, k + 8, ... (four running sums, so four loads are in flight),
// then thread (x, 0) adds the 8 sums in order of k. The order is fixed by P
// alone, so the result does not depend on scheduling. P may be 0 (zeros).
// Launch constants: long P, long M, long M1. Template: T (outputs), A (part).
// Launch: grid = (ceil(M/32)*32, 8, 1), threadgroup = (32, 8, 1).
//! name: alloy_nn_column_sum
//! inputs: part
//! outputs: a b
//! template: T=float32
//! template: A=float32
//! body:
const long i = long(thread_position_in_grid.x);
const int lx = int(thread_position_in_threadgroup.x), k = int(thread_position_in_threadgroup.y);
threadgroup A red[8][32];
A s0 = A(0), s1 = A(0), s2 = A(0), s3 = A(0);
if (i < M) {
    long p = long(k);
    for (; p + 24 < P; p += 32) {
        s0 += part[p * M + i];
        s1 += part[(p + 8) * M + i];
        s2 += part[(p + 16) * M + i];
        s3 += part[(p + 24) * M + i];
    }
    for (; p < P; p += 8) s0 += part[p * M + i];
}
red[k][lx] = (s0 + s1) + (s2 + s3);
threadgroup_barrier(mem_flags::mem_threadgroup);
if (k == 0 && i < M) {
    A s = red[0][lx];
    for (int kk = 1; kk < 8; kk++) s += red[kk][lx];
    if (i < M1) a[i] = T(s);
    else b[i - M1] = T(s);
}
