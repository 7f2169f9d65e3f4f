// norm_param_partials: the first stage of the deterministic dweight/dbias
// reduction of the norms' backward. Thread (col, p) sums, over the rows
// p*RB .. min(R, (p+1)*RB)-1 in order, dy * x^ and dy of column col
// (x^ = (x - mu) * rstd with its group's statistics from norm_backward or the
// forward; RMSNorm's mean slot is not read, mu = 0):
//   part[p*2D + col] = sum dy x^,  part[p*2D + D + col] = sum dy.
// Consecutive threads read consecutive columns (coalesced rows).
// Launch constants: long R, long RB, long P, int D, int DH, int rms.
// Template: T (data), A (accumulation; stats and part are A).
// Launch: grid = (ceil(D/128)*128, P, 1), threadgroup = (128, 1, 1).
//! name: alloy_nn_norm_param_partials
//! inputs: x dy stats
//! outputs: part
//! template: T=float32
//! template: A=float32
//! body:
// overlapping launches (alloy_launch_set_overlap, ALLOY_OPS_OVERLAP): the kernel before ends first, the next may start
alloy_wait_previous_kernel();
alloy_start_next_kernel();
const long col = long(thread_position_in_grid.x), p = long(thread_position_in_grid.y);
if (col < long(D) && p < P) {
    const long G = long(D / DH), head = col / long(DH);
    const long r1 = min(R, (p + 1) * RB);
    A sw = A(0), sb = A(0);
    for (long r = p * RB; r < r1; r++) {
        const long gi = r * G + head;
        const A d = A(dy[r * long(D) + col]);
        const A mu = rms != 0 ? A(0) : stats[2 * gi];
        sw += d * (A(x[r * long(D) + col]) - mu) * stats[2 * gi + 1];
        sb += d;
    }
    part[p * 2 * long(D) + col] = sw;
    part[p * 2 * long(D) + long(D) + col] = sb;
}
