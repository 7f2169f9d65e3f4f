// ivf_topk_l2: for each query of a batch, the K rows of an inverted list that
// are nearest in squared L2 distance, ascending, fp32 (the scan step of an
// IVF-Flat search).
// Q (b,d), X (m,d) row-major, ids (m,) int32 (the rows' global ids)
//   -> out_vals (b,K) float32 (squared distances), out_ids (b,K) int32.
// Template K: 1 <= K <= 32 (default 8); the output shapes must be (b,K).
// One threadgroup per query. Thread t scans rows t, t+tpb, ... and keeps its
// own K best sorted by (distance, row), slots starting at (+INFINITY, none).
// The tpb*K candidates go to threadgroup memory; after one barrier every
// thread places its own candidates: the rank of a candidate is its position
// in its own list plus, for every other thread's sorted list, a binary search
// for how many candidates precede it (ties broken by row, then by slot, so
// the ranks are a permutation and each of the K output slots is written
// exactly once). Fewer than K rows (or rows at infinite or NaN distance)
// leave +INFINITY / -1 in the remaining slots.
// Launch: grid = (b*tpb, 1, 1) THREADS, threadgroup = (tpb, 1, 1), with
// tpb*K <= 1024 (the candidate pool). A launch that breaks this gets NaN
// distances and id -2 in every slot instead of silently wrong results.
//! name: ivf_topk_l2
//! inputs: Q X ids
//! outputs: out_vals out_ids
//! template: K=8
//! body:
static_assert(K >= 1 && K <= 32, "ivf_topk_l2: K must be between 1 and 32");
constexpr uint POOL = 1024;          // size of the candidate pool below
constexpr uint NONE = 0xFFFFFFFFu;   // row of an empty slot
threadgroup float pool_val[1024];
threadgroup uint pool_row[1024];

uint b = uint(Q_shape[0]);
uint d = uint(Q_shape[1]);
uint m = uint(X_shape[0]);
uint query = threadgroup_position_in_grid.x;
uint tid = thread_position_in_threadgroup.x;
uint tpb = threads_per_threadgroup.x;
if (query >= b) return;   // the whole group leaves together, before any barrier
size_t out_base = size_t(query) * K;
if (tpb * uint(K) > POOL) {
    for (uint s = tid; s < uint(K); s += tpb) {
        out_vals[out_base + s] = NAN;
        out_ids[out_base + s] = -2;
    }
    return;
}

// 1. This thread's K best rows, sorted ascending by (distance, row).
float best_val[K];
uint best_row[K];
for (int s = 0; s < K; ++s) {
    best_val[s] = INFINITY;
    best_row[s] = NONE;
}
size_t q_base = size_t(query) * d;
for (uint row = tid; row < m; row += tpb) {
    size_t x_base = size_t(row) * d;
    float dist = 0.0f;
    for (uint j = 0; j < d; ++j) {
        float diff = X[x_base + j] - Q[q_base + j];
        dist = metal::fma(diff, diff, dist);
    }
    // Rows arrive in increasing order, so an equal distance goes after the
    // ones already kept; NaN and +inf never enter.
    if (dist < best_val[K - 1]) {
        int s = K - 1;
        while (s > 0 && dist < best_val[s - 1]) {
            best_val[s] = best_val[s - 1];
            best_row[s] = best_row[s - 1];
            --s;
        }
        best_val[s] = dist;
        best_row[s] = row;
    }
}

// 2. Publish the candidates.
for (int s = 0; s < K; ++s) {
    pool_val[tid * K + s] = best_val[s];
    pool_row[tid * K + s] = best_row[s];
}
threadgroup_barrier(mem_flags::mem_threadgroup);

// 3. Parallel merge by rank; candidate (v, r, slot j) precedes (v', r', j')
//    iff v < v', or v == v' and (r < r', or r == r' and j < j').
for (int s = 0; s < K; ++s) {
    float v = best_val[s];
    uint r = best_row[s];
    uint j = tid * K + s;
    uint rank = uint(s);
    for (uint u = 0; u < tpb && rank < uint(K); ++u) {
        if (u == tid) continue;
        uint lo = 0, hi = uint(K);
        while (lo < hi) {
            uint mid = (lo + hi) / 2;
            uint jj = u * K + mid;
            float cv = pool_val[jj];
            uint cr = pool_row[jj];
            bool before = cv < v || (cv == v && (cr < r || (cr == r && jj < j)));
            if (before) lo = mid + 1;
            else hi = mid;
        }
        rank += lo;
    }
    if (rank >= uint(K)) break;   // later slots of this list rank even higher
    out_vals[out_base + rank] = v;
    out_ids[out_base + rank] = r == NONE ? -1 : int(ids[r]);
}
