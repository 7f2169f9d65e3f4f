// norm_backward: dx of RMSNorm / LayerNorm (norm_forward's groups and
// statistics, recomputed from x), and each group's (mu, rstd) for the
// dweight/dbias reduction. With g = dy * w and x^ = (x - mu) * rstd:
//   rms == 1: dx = rstd * (g - x^ * mean(g x^))                (mu = 0)
//   rms == 0: dx = rstd * (g - mean(g) - x^ * mean(g x^))
// One threadgroup of 128 threads per group, fixed reduction trees. With
// STATS the statistics are the forward's, read from saved (A, 2 a group) and
// not written (norm.c binds dx to stats then).
// Launch constants: long groups, long tgs, int DH, int G, int rms, A eps.
// Template: T (data), A (accumulation; stats and saved are A), STATS.
// Launch: grid = (tgs * 128, 1, 1), threadgroup = (128, 1, 1).
//! name: alloy_nn_norm_backward
//! inputs: x w dy saved
//! outputs: dx stats
//! template: T=float32
//! template: A=float32
//! template: STATS=0
//! body:
// overlapping launches (alloy_launch_set_overlap, ALLOY_OPS_OVERLAP): the kernel before ends first, the next may start
alloy_wait_previous_kernel();
alloy_start_next_kernel();
const int tid = int(thread_position_in_threadgroup.x);
threadgroup A red[128];
threadgroup A red2[128];
for (long g = long(threadgroup_position_in_grid.x); g < groups; g += tgs) {
    const long base = g * long(DH);
    const int col0 = int(g % long(G)) * DH;
    A mu = A(0), rstd = A(0);
    if (STATS != 0) {
        mu = rms == 0 ? A(saved[2 * g]) : A(0); // RMSNorm's mean slot (0) is not read
        rstd = A(saved[2 * g + 1]);
    }
    if (STATS == 0 && rms == 0) {
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
    if (STATS == 0) {
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
        rstd = A(1) / sqrt(red[0] / A(DH) + eps);
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    // sum(g) and sum(g x^)
    A sg = A(0), sgx = A(0);
    for (int j = tid; j < DH; j += 128) {
        const A gj = A(dy[base + j]) * A(w[col0 + j]);
        sg += gj;
        sgx += gj * (A(x[base + j]) - mu) * rstd;
    }
    red[tid] = sg;
    red2[tid] = sgx;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (int h = 64; h > 0; h >>= 1) {
        if (tid < h) {
            red[tid] += red[tid + h];
            red2[tid] += red2[tid + h];
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    const A mg = rms == 0 ? red[0] / A(DH) : A(0), mgx = red2[0] / A(DH);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (int j = tid; j < DH; j += 128) {
        const A gj = A(dy[base + j]) * A(w[col0 + j]);
        const A xh = (A(x[base + j]) - mu) * rstd;
        dx[base + j] = T(rstd * (gj - mg - xh * mgx));
    }
    if (STATS == 0 && tid == 0) {
        stats[2 * g] = mu;
        stats[2 * g + 1] = rstd;
    }
}
