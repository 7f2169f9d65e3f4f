// column_sum: the second stage of a deterministic row reduction: out[i] =
// sum over p = 0 .. P-1, in order, of part[p*M + i]; columns i < M1 go to a[i],
// the rest to b[i - M1] (the norms' dweight/dbias, the convolution's dw/db).
// P may be 0 (no rows: zeros). One thread per column.
// Launch constants: long P, long M, long M1. Template: T (outputs), A (part).
// Launch: grid = (ceil(M/128)*128, 1, 1), threadgroup = (128, 1, 1).
//! name: alloy_nn_column_sum
//! inputs: part
//! outputs: a b
//! template: T=float32
//! template: A=float32
//! body:
const long i = long(thread_position_in_grid.x);
if (i < M) {
    A s = A(0);
    for (long p = 0; p < P; p++) s += part[p * M + i];
    if (i < M1) a[i] = T(s);
    else b[i - M1] = T(s);
}
