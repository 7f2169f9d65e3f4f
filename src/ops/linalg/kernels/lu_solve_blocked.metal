// lu_solve_blocked: A X = B for many right-hand sides at once from LAPACK's
// LU factorization of A (getrs, not transposed), blocked: the GPU path of
// alloy_inv (B = I) and of solves with many right-hand sides.
//   LU (batch, n, n), ipiv (batch, n) int32 (1-based; an entry outside
//   [1, n] acts as no interchange), B (batch, n, nrhs), X (batch, n, nrhs);
//   X may be the same buffer as B (a threadgroup reads its columns whole
//   before it writes them). With IDENT, B is the identity (not read; any
//   array may be bound) and X = A^-1 (nrhs = n).
// Launch constants: int n, int nrhs, int tiles (threadgroups per matrix =
// ceil(nrhs / 32)), long batch. Template: T (float or double), IDENT.
// Dynamic threadgroup memory: 2 * n * 33 * sizeof(T) + 2 * n * 4 bytes.
// Launch: grid = (batch * tiles * NT, 1, 1) threads, threadgroup = (NT, 1, 1)
// with NT a multiple of 32 (at least 32): threadgroup g solves matrix
// g / tiles for its columns (g % tiles) * 32 .. + 31.
//
// The threadgroup's 32 columns of P B live in threadgroup memory (n x 33).
// Forward, L Y = P B by panels of 32 columns of L from the top, each panel
// copied to threadgroup memory: one thread per column solves the panel's
// unit lower triangle (blocks of 8 rows in registers), then the rows below
// take Y2 -= L21 Y1 (16 x 32 tiles, one per simdgroup at a time, 4 x 4
// elements per thread). Backward, U X = Y by panels of 32 columns of U
// from the bottom: the panel's upper triangle solved the same way (divided
// by U's diagonal, as lu_solve), then the rows above take X0 -= U01 X1.
//! name: alloy_lu_solve_blocked
//! inputs: LU ipiv B
//! outputs: X
//! template: T=float32
//! template: IDENT=false
//! header:
// The unit lower triangle of the panel: x(r) -= sum_{q<r} L(r, q) x(q),
// x(r) = X[r * ldx + c], L(r, q) = pan[(k0 + r) * ldp + q], r < pb.
template <class Tp, class PP, class XP>
inline void alloy_lusb_lower(PP pan, int ldp, XP X, int ldx, int k0, int pb, int c) {
  for (int r0 = 0; r0 < pb; r0 += 8) {
    Tp x[8];
#pragma unroll
    for (int t = 0; t < 8; t++) x[t] = r0 + t < pb ? Tp(X[long(r0 + t) * ldx + c]) : Tp(0);
    for (int q = 0; q < r0; q++) {
      const Tp xq = X[long(q) * ldx + c];
#pragma unroll
      for (int t = 0; t < 8; t++)
        if (r0 + t < pb) x[t] = fma(-Tp(pan[long(k0 + r0 + t) * ldp + q]), xq, x[t]);
    }
#pragma unroll
    for (int s = 0; s < 8; s++)
#pragma unroll
      for (int t = s + 1; t < 8; t++)
        if (r0 + t < pb) x[t] = fma(-Tp(pan[long(k0 + r0 + t) * ldp + r0 + s]), x[s], x[t]);
#pragma unroll
    for (int t = 0; t < 8; t++)
      if (r0 + t < pb) X[long(r0 + t) * ldx + c] = x[t];
  }
}

// The upper triangle of the panel: x(r) = (x(r) - sum_{q>r} U(r, q) x(q)) /
// U(r, r), r from pb - 1 down, U(r, q) = pan[(k0 + r) * ldp + q].
template <class Tp, class PP, class XP>
inline void alloy_lusb_upper(PP pan, int ldp, XP X, int ldx, int k0, int pb, int c) {
  for (int r1 = pb; r1 > 0; r1 -= 8) {
    const int r0 = r1 - 8; // rows r0 .. r1 - 1 (those >= 0)
    Tp x[8];
#pragma unroll
    for (int t = 0; t < 8; t++) x[t] = r0 + t >= 0 ? Tp(X[long(r0 + t) * ldx + c]) : Tp(0);
    for (int q = r1; q < pb; q++) {
      const Tp xq = X[long(q) * ldx + c];
#pragma unroll
      for (int t = 0; t < 8; t++)
        if (r0 + t >= 0) x[t] = fma(-Tp(pan[long(k0 + r0 + t) * ldp + q]), xq, x[t]);
    }
#pragma unroll
    for (int s = 7; s >= 0; s--) {
      if (r0 + s < 0) continue;
      x[s] = x[s] / Tp(pan[long(k0 + r0 + s) * ldp + r0 + s]);
#pragma unroll
      for (int t = 0; t < s; t++)
        if (r0 + t >= 0) x[t] = fma(-Tp(pan[long(k0 + r0 + t) * ldp + r0 + s]), x[s], x[t]);
    }
#pragma unroll
    for (int t = 0; t < 8; t++)
      if (r0 + t >= 0) X[long(r0 + t) * ldx + c] = x[t];
  }
}

// X(i, j) -= sum_{l<pb} pan(i, l) Y(l, j) for ib <= i < ie, 0 <= j < 32:
// pan(i, l) = pan[i * ldp + l], Y(l, j) = Y[l * ldx + j].
template <class Tp, class XP, class PP>
inline void alloy_lusb_update(XP X, XP Y, int ldx, PP pan, int ldp, int ib, int ie, int pb, int tid, int nt) {
  const int warp = tid >> 5, lane = tid & 31, nwarps = nt >> 5;
  const int ty = lane >> 3, tx = lane & 7;
  for (int i0 = ib + 16 * warp; i0 < ie; i0 += 16 * nwarps) {
    const int ia = i0 + 4 * ty;
    int ri[4];
#pragma unroll
    for (int u = 0; u < 4; u++) ri[u] = ia + u < ie ? ia + u : ie - 1;
    Tp acc[4][4];
#pragma unroll
    for (int u = 0; u < 4; u++)
#pragma unroll
      for (int v = 0; v < 4; v++) acc[u][v] = X[long(ri[u]) * ldx + tx + 8 * v];
    for (int l = 0; l < pb; l++) {
      Tp a[4], b[4];
#pragma unroll
      for (int u = 0; u < 4; u++) {
        a[u] = pan[long(ri[u]) * ldp + l];
        b[u] = Y[long(l) * ldx + tx + 8 * u];
      }
#pragma unroll
      for (int u = 0; u < 4; u++)
#pragma unroll
        for (int v = 0; v < 4; v++) acc[u][v] = fma(-a[u], b[v], acc[u][v]);
    }
#pragma unroll
    for (int u = 0; u < 4; u++)
      if (ia + u < ie)
#pragma unroll
        for (int v = 0; v < 4; v++) X[long(ia + u) * ldx + tx + 8 * v] = acc[u][v];
  }
}
//! body:
const int tid = int(thread_index_in_threadgroup);
const int nt = int(threads_per_threadgroup.x);
const long g = long(threadgroup_position_in_grid.x);
const long mat = g / tiles;
const int c0 = int(g % tiles) * 32;
const int cw = min(32, nrhs - c0);
const long fbase = mat * long(n) * long(n);
const long xbase = mat * long(n) * long(nrhs);
threadgroup T *Xs = (threadgroup T *)alloy_threadgroup_memory;
threadgroup T *Ps = Xs + long(n) * 33;
threadgroup int *pr = (threadgroup int *)(Ps + long(n) * 33);
threadgroup int *pv = pr + n;
if (mat < batch) {
    // pr[r]: the row of B that row r of P B comes from (LAPACK's swaps in
    // order, by one thread, from a copy of ipiv the whole group loads)
    for (int k = tid; k < n; k += nt) pv[k] = ipiv[mat * n + k];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (tid == 0) {
        for (int r = 0; r < n; r++) pr[r] = r;
        for (int k = 0; k < n; k++) {
            int p = pv[k] - 1;
            if (p < 0 || p >= n) p = k;
            const int t = pr[k];
            pr[k] = pr[p];
            pr[p] = t;
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (int e = tid; e < n * 32; e += nt) {
        const int i = e >> 5, c = e & 31;
        T v = T(0);
        if (c < cw) {
            if (IDENT) v = pr[i] == c0 + c ? T(1) : T(0);
            else v = B[xbase + long(pr[i]) * nrhs + c0 + c];
        }
        Xs[long(i) * 33 + c] = v;
    }
    // L Y = P B
    for (int k0 = 0; k0 < n; k0 += 32) {
        const int pb = min(32, n - k0);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (int e = tid; e < (n - k0) * 32; e += nt) {
            const int i = k0 + (e >> 5), l = e & 31;
            if (l < pb) Ps[long(i) * 33 + l] = LU[fbase + long(i) * n + k0 + l];
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (tid < 32) alloy_lusb_lower<T>(Ps, 33, Xs + long(k0) * 33, 33, k0, pb, tid);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        alloy_lusb_update<T>(Xs, Xs + long(k0) * 33, 33, Ps, 33, k0 + pb, n, pb, tid, nt);
    }
    // U X = Y
    for (int k0 = n > 0 ? (n - 1) / 32 * 32 : -1; k0 >= 0; k0 -= 32) {
        const int pb = min(32, n - k0);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (int e = tid; e < (k0 + pb) * 32; e += nt) {
            const int i = e >> 5, l = e & 31;
            if (l < pb) Ps[long(i) * 33 + l] = LU[fbase + long(i) * n + k0 + l];
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (tid < 32) alloy_lusb_upper<T>(Ps, 33, Xs + long(k0) * 33, 33, k0, pb, tid);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        alloy_lusb_update<T>(Xs, Xs + long(k0) * 33, 33, Ps, 33, 0, k0, pb, tid, nt);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (int e = tid; e < n * 32; e += nt) {
        const int i = e >> 5, c = e & 31;
        if (c < cw) X[xbase + long(i) * nrhs + c0 + c] = Xs[long(i) * 33 + c];
    }
}
