// norm_forward: RMSNorm or LayerNorm of groups of DH consecutive elements
// (a row of x, or one head of it), statistics in A:
//   rms == 1: y = x * rstd * w,            rstd = 1 / sqrt(mean(x^2) + eps)
//   rms == 0: y = (x - mu) * rstd * w + b, rstd = 1 / sqrt(mean((x - mu)^2) + eps)
// w and b have the row's length D = G * DH (group g of a row uses w[g*DH ..]).
// The variance is summed from the deviations (a second pass over the group,
// from cache), so a constant group gives exactly 0 and y = b. One threadgroup
// of 128 threads per group (a grid-stride loop over the groups); the sums
// meet in a fixed tree, so results do not depend on the launch.
// Launch constants: long groups, long tgs (threadgroups launched), int DH,
// int G, int rms, int has_b, A eps. Template: T (data), A (accumulation),
// STATS (each group's (mu, rstd) into stats[2 g], stats[2 g + 1], A; without
// it stats is not written and norm.c binds y there).
// Launch: grid = (tgs * 128, 1, 1), threadgroup = (128, 1, 1).
//! name: alloy_nn_norm_forward
//! inputs: x w b
//! outputs: y stats
//! template: T=float32
//! template: A=float32
//! template: STATS=0
//! body:
// overlapping launches (alloy_launch_set_overlap, ALLOY_OPS_OVERLAP): the kernel before ends first, the next may start
alloy_wait_previous_kernel();
alloy_start_next_kernel();
const int tid = int(thread_position_in_threadgroup.x);
threadgroup A red[128];
for (long g = long(threadgroup_position_in_grid.x); g < groups; g += tgs) {
    const long base = g * long(DH);
    const int col0 = int(g % long(G)) * DH;
    A mu = A(0);
    if (rms == 0) {
        A s = A(0);
        for (int j = tid; j < DH; j += 128) s += A(x[base + j]);
        red[tid] = s;
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (int h = 64; h > 0; h >>= 1) {
            if (tid < h) red[tid] += red[tid + h];
            threadgroup_barrier(mem_flags::mem_threadgroup);
        }
        mu = red[0] / A(DH);
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    A s2 = A(0);
    for (int j = tid; j < DH; j += 128) {
        const A d = A(x[base + j]) - mu;
        s2 += d * d;
    }
    red[tid] = s2;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (int h = 64; h > 0; h >>= 1) {
        if (tid < h) red[tid] += red[tid + h];
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    const A rstd = A(1) / sqrt(red[0] / A(DH) + eps);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (int j = tid; j < DH; j += 128) {
        A v = (A(x[base + j]) - mu) * rstd * A(w[col0 + j]);
        if (has_b != 0) v += A(b[col0 + j]);
        y[base + j] = T(v);
    }
    if (STATS != 0 && tid == 0) {
        stats[2 * g] = mu;
        stats[2 * g + 1] = rstd;
    }
}
