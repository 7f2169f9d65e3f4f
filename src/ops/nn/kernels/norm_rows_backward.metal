// norm_rows_backward: the backward of norm_rows in one pass over x and dy:
// dx of each group, and partial sums of dweight and dbias. Same layout as
// norm_rows (WG SIMD groups per group of n = DH elements, the group of x and
// dy in registers, lane q = (sg % WG) * 32 + lane holding chunks (i * 32 * WG
// + q) * V, 16-byte accesses with VEC, sums across the WG SIMD groups in
// order through threadgroup memory). With g = dy * w and x^ = (x - mu) * rstd:
//   RMS == 1: dx = rstd * (g - x^ * mean(g x^))                (mu = 0)
//   RMS == 0: dx = rstd * (g - mean(g) - x^ * mean(g x^))
// Threadgroup p serves head h = p % G of the rows r = sg / WG + RW * (p / G)
// + RW * PT * k (RW = 8 / WG); each lane sums dy * x^ and dy of its columns
// over its rows in registers. When 16 KB of threadgroup memory hold a
// group's sums (COMBINE), the RW row sets add theirs there in order and
// write partial row u = p / G; else each row set writes its own partial row
// u = (p / G) * RW + sg / WG:  part[u * 2D + h * DH + j] = sum dy x^,  part[u * 2D + D + h * DH
// + j] = sum dy (column_sum then adds the rows in order: deterministic).
// Launch constants: long R (rows), long PT, int DH, int G, A eps. Template: T
// (data), A (accumulation; part is A), NC (chunks per lane), WG (SIMD groups
// per group: 1, 2, 4 or 8), VEC (16-byte accesses), RMS (a template, so
// RMSNorm's kernel holds no dbias sums in registers).
// Launch: grid = (PT * G * 256, 1, 1), threadgroup = (256, 1, 1).
//! name: alloy_nn_norm_rows_backward
//! inputs: x w dy
//! outputs: dx part
//! template: T=float32
//! template: A=float32
//! template: VEC=1
//! template: NC=1
//! template: WG=1
//! template: RMS=0
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
const int tid = int(thread_index_in_threadgroup);
const long p = long(threadgroup_position_in_grid.x);
const int h = int(p % long(G));
const long D = long(G) * long(DH);
// the row sets' column sums meet in threadgroup memory when it holds them (16 KB)
constexpr bool COMBINE = WG * NE * int(sizeof(A)) <= 256;
threadgroup A red[COMBINE ? 2 * 32 * WG * NE : 1];
threadgroup A tred[2][4][8];
A aw[NE], ab[NE];
for (int k = 0; k < NE; k++) aw[k] = ab[k] = A(0);
int par = 0;
for (long r0 = (p / long(G)) * RW; r0 < R; r0 += PT * RW) {
    const long r = r0 + long(sr);
    const bool ok = r < R;
    const long base = (r * long(G) + long(h)) * long(DH);
    // w is reread per row (from cache) rather than held: fewer registers, more warps
    A v[NE], d[NE], wv[NE];
    for (int i = 0; i < NC; i++) {
        const int col = (i * 32 * WG + q) * V;
        if (VEC != 0 && ok && col < DH) {
            nn_ld16(&x[base + col], &v[i * V]);
            nn_ld16(&dy[base + col], &d[i * V]);
            nn_ld16(&w[h * DH + col], &wv[i * V]);
        } else {
            for (int e = 0; e < V; e++) {
                const bool in = VEC == 0 && ok && col + e < DH;
                v[i * V + e] = in ? A(x[base + col + e]) : A(0);
                d[i * V + e] = in ? A(dy[base + col + e]) : A(0);
                wv[i * V + e] = in ? A(w[h * DH + col + e]) : A(0);
            }
        }
    }
    A mu = A(0);
    if (RMS == 0) {
        A s = A(0);
        for (int k = 0; k < NE; k++) s += v[k];
        A tot = simd_sum(s);
        if (WG > 1) {
            if (lane == 0) tred[par][0][sg] = tot;
            threadgroup_barrier(mem_flags::mem_threadgroup);
            tot = A(0);
            for (int k = 0; k < WG; k++) tot += tred[par][0][sr * WG + k];
        }
        mu = tot / A(DH);
    }
    A s2 = A(0);
    for (int i = 0; i < NC; i++)
        for (int e = 0; e < V; e++)
            if ((i * 32 * WG + q) * V + e < DH) {
                const A dv = v[i * V + e] - mu;
                s2 += dv * dv;
            }
    A tot2 = simd_sum(s2);
    if (WG > 1) {
        if (lane == 0) tred[par][1][sg] = tot2;
        threadgroup_barrier(mem_flags::mem_threadgroup);
        tot2 = A(0);
        for (int k = 0; k < WG; k++) tot2 += tred[par][1][sr * WG + k];
    }
    const A rstd = A(1) / sqrt(tot2 / A(DH) + eps);
    // x^ replaces x; sums of g and g x^ (d and w are 0 past the group)
    A sg1 = A(0), sgx = A(0);
    for (int i = 0; i < NC; i++)
        for (int e = 0; e < V; e++) {
            const int k = i * V + e;
            v[k] = (i * 32 * WG + q) * V + e < DH ? (v[k] - mu) * rstd : A(0);
            const A gk = d[k] * wv[k];
            sg1 += gk;
            sgx += gk * v[k];
        }
    A tg = A(0);
    if (RMS == 0) {
        const A t = simd_sum(sg1);
        tg = t;
    }
    A tgx = simd_sum(sgx);
    if (WG > 1) {
        if (lane == 0) {
            tred[par][2][sg] = tg;
            tred[par][3][sg] = tgx;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        tg = A(0);
        tgx = A(0);
        for (int k = 0; k < WG; k++) {
            tg += tred[par][2][sr * WG + k];
            tgx += tred[par][3][sr * WG + k];
        }
    }
    par ^= 1;
    const A mg = tg / A(DH), mgx = tgx / A(DH);
    if (ok) {
        for (int i = 0; i < NC; i++) {
            const int col = (i * 32 * WG + q) * V;
            A o[V];
            for (int e = 0; e < V; e++) {
                const int k = i * V + e;
                o[e] = rstd * (d[k] * wv[k] - mg - v[k] * mgx);
                aw[k] += d[k] * v[k];
                if (RMS == 0) ab[k] += d[k];
            }
            if (VEC != 0) {
                if (col < DH) nn_st16(&dx[base + col], o);
            } else {
                for (int e = 0; e < V; e++)
                    if (col + e < DH) dx[base + col + e] = T(o[e]);
            }
        }
    }
}
if (COMBINE) {
    // the RW row sets' column sums, added in order of sr
    for (int k = 0; k < RW; k++) {
        if (sr == k)
            for (int i = 0; i < NC; i++)
                for (int e = 0; e < V; e++) {
                    const int col = (i * 32 * WG + q) * V + e;
                    red[col] = (k == 0 ? A(0) : red[col]) + aw[i * V + e];
                    red[NE * 32 * WG + col] =
                        (k == 0 ? A(0) : red[NE * 32 * WG + col]) + (RMS == 0 ? ab[i * V + e] : A(0));
                }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    const long u = p / long(G);
    for (int j = tid; j < DH; j += 256) {
        part[u * 2 * D + long(h * DH + j)] = red[j];
        part[u * 2 * D + D + long(h * DH + j)] = red[NE * 32 * WG + j];
    }
} else {
    const long u = (p / long(G)) * RW + long(sr);
    for (int i = 0; i < NC; i++)
        for (int e = 0; e < V; e++) {
            const int col = (i * 32 * WG + q) * V + e;
            if (col < DH) {
                part[u * 2 * D + long(h * DH + col)] = aw[i * V + e];
                part[u * 2 * D + D + long(h * DH + col)] = RMS == 0 ? ab[i * V + e] : A(0);
            }
        }
}
