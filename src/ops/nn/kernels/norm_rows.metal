// norm_rows: RMSNorm or LayerNorm of groups of n = DH consecutive elements
// (a row of x, or one head of it) by WG SIMD groups (32 lanes each; WG = 1
// for groups up to 32 * NC * V elements) per group, the group held in
// registers between the statistics and the normalisation (x is read once).
// Lane q = (sg % WG) * 32 + lane of the group's SIMD groups holds chunks i =
// 0 .. NC-1 of V = 16 / sizeof(T) elements at columns (i * 32 * WG + q) * V
// (NC * 32 * WG * V >= n); with VEC (n % V == 0; x, y, w, b 16-byte
// aligned) each chunk is one 16-byte load or store, else V guarded scalar
// accesses. Statistics in A: simd_sum, then (WG > 1) the WG SIMD groups' sums
// added in order through threadgroup memory (double-buffered by the parity
// of the row round, so one barrier per statistic); the variance from the
// deviations, so a constant group gives 0:
//   rms == 1: y = x * rstd * w,            rstd = 1 / sqrt(mean(x^2) + eps)
//   rms == 0: y = (x - mu) * rstd * w + b, rstd = 1 / sqrt(mean((x - mu)^2) + eps)
// Threadgroup p (8 SIMD groups, RW = 8 / WG groups at a time) serves head h =
// p % G of the rows r = sg / WG + RW * (p / G) + RW * PT * k (PT threadgroups
// per head), so each lane keeps its weight (and bias) columns in registers
// across rows.
// Launch constants: long R (rows), long PT, int DH, int G, int rms, int has_b,
// A eps. Template: T (data), A (accumulation), NC (chunks per lane), WG (SIMD
// groups per group: 1, 2, 4 or 8), VEC (16-byte accesses).
// Launch: grid = (PT * G * 256, 1, 1), threadgroup = (256, 1, 1).
//! name: alloy_nn_norm_rows
//! inputs: x w b
//! outputs: y
//! template: T=float32
//! template: A=float32
//! template: VEC=1
//! template: NC=1
//! template: WG=1
//! header:
// 16 bytes at p (16-byte aligned) as 16 / sizeof(T) values of A, and back:
// one vector load or store whatever T is (bit operations, no per-element loads).
template <class T, class A> inline void nn_ld16(const T *p, A *o) {
    const uint4 u = *(const uint4 *)p;
    if constexpr (sizeof(T) == 8) {
        o[0] = A(as_type<double>(ulong(u.x) | (ulong(u.y) << 32)));
        o[1] = A(as_type<double>(ulong(u.z) | (ulong(u.w) << 32)));
    } else if constexpr (sizeof(T) == 4) {
        for (int e = 0; e < 4; e++) o[e] = A(as_type<float>(u[e]));
    } else {
        for (int e = 0; e < 8; e++) o[e] = A(as_type<T>(ushort(u[e >> 1] >> ((e & 1) * 16))));
    }
}
template <class T, class A> inline void nn_st16(T *p, const A *v) {
    uint4 u;
    if constexpr (sizeof(T) == 8) {
        const ulong a = as_type<ulong>(double(v[0])), b = as_type<ulong>(double(v[1]));
        u = uint4(uint(a), uint(a >> 32), uint(b), uint(b >> 32));
    } else if constexpr (sizeof(T) == 4) {
        for (int e = 0; e < 4; e++) u[e] = as_type<uint>(float(v[e]));
    } else {
        for (int e = 0; e < 4; e++)
            u[e] = uint(as_type<ushort>(T(v[2 * e]))) | (uint(as_type<ushort>(T(v[2 * e + 1]))) << 16);
    }
    *(uint4 *)p = u;
}
//! body:
constexpr int V = 16 / int(sizeof(T));
constexpr int NE = NC * V;
constexpr int RW = 8 / WG;
const int lane = int(thread_index_in_simdgroup), sg = int(simdgroup_index_in_threadgroup);
const int q = (sg % WG) * 32 + lane, sr = sg / WG;
const long p = long(threadgroup_position_in_grid.x);
const int h = int(p % long(G));
threadgroup A tred[2][2][8];
// this lane's weight and bias columns (0 past the group)
A wv[NE], bv[NE];
for (int i = 0; i < NC; i++) {
    const int col = (i * 32 * WG + q) * V;
    for (int e = 0; e < V; e++) wv[i * V + e] = bv[i * V + e] = A(0);
    if (VEC != 0 && col < DH) {
        nn_ld16(&w[h * DH + col], &wv[i * V]);
        if (has_b != 0) nn_ld16(&b[h * DH + col], &bv[i * V]);
    } else if (VEC == 0) {
        for (int e = 0; e < V; e++)
            if (col + e < DH) {
                wv[i * V + e] = A(w[h * DH + col + e]);
                if (has_b != 0) bv[i * V + e] = A(b[h * DH + col + e]);
            }
    }
}
int par = 0;
for (long r0 = (p / long(G)) * RW; r0 < R; r0 += PT * RW) {
    const long r = r0 + long(sr);
    const bool ok = r < R;
    const long base = (r * long(G) + long(h)) * long(DH);
    A v[NE];
    for (int i = 0; i < NC; i++) {
        const int col = (i * 32 * WG + q) * V;
        if (VEC != 0 && ok && col < DH) {
            nn_ld16(&x[base + col], &v[i * V]);
        } else {
            for (int e = 0; e < V; e++) v[i * V + e] = (VEC == 0 && ok && col + e < DH) ? A(x[base + col + e]) : A(0);
        }
    }
    A mu = A(0);
    if (rms == 0) {
        A s = A(0);
        for (int k = 0; k < NE; k++) s += v[k];
        A tot = simd_sum(s);
        if (WG > 1) {
            if (lane == 0) tred[par][0][sg] = tot;
            threadgroup_barrier(mem_flags::mem_threadgroup);
            tot = A(0);
            for (int k = 0; k < WG; k++) tot += tred[par][0][sr * WG + k];
        }
        mu = tot / A(DH); // a division: an exact sum n c gives mu = c exactly
    }
    A s2 = A(0);
    for (int i = 0; i < NC; i++)
        for (int e = 0; e < V; e++)
            if ((i * 32 * WG + q) * V + e < DH) {
                const A d = v[i * V + e] - mu;
                s2 += d * d;
            }
    A tot2 = simd_sum(s2);
    if (WG > 1) {
        if (lane == 0) tred[par][1][sg] = tot2;
        threadgroup_barrier(mem_flags::mem_threadgroup);
        tot2 = A(0);
        for (int k = 0; k < WG; k++) tot2 += tred[par][1][sr * WG + k];
    }
    par ^= 1;
    const A rstd = A(1) / sqrt(tot2 / A(DH) + eps);
    if (ok)
        for (int i = 0; i < NC; i++) {
            const int col = (i * 32 * WG + q) * V;
            A o[V];
            for (int e = 0; e < V; e++) o[e] = (v[i * V + e] - mu) * rstd * wv[i * V + e] + bv[i * V + e];
            if (VEC != 0) {
                if (col < DH) nn_st16(&y[base + col], o);
            } else {
                for (int e = 0; e < V; e++)
                    if (col + e < DH) y[base + col + e] = T(o[e]);
            }
        }
}
