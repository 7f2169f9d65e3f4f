// softcap_math.h — what softcap.metal and softcap_backward.metal share: the
// 16-byte chunk loads and stores, and for 16-bit data (FT) tanh and its
// derivative from one exponential and one approximate division. Included
// after chunk.h (the kernels include both).

// 16 bytes at p (16-byte aligned) as 16 / sizeof(T) values of A, and back:
// one vector load or store whatever T is (chunk.h's chunk, all of it).
template <class T, class A> inline void nn_ld16(const T *p, A *o) {
    const uint4 u = *(const uint4 *)p;
    for (int e = 0; e < 16 / int(sizeof(T)); e++) o[e] = nn_chunk_elem<T, A>(u, e);
}
template <class T, class A> inline void nn_st16(T *p, const A *v) { nn_chunk_store<T, A, 1>(p, 0, 16 / int(sizeof(T)), v); }

// The fast forms, float only, for results rounded to 16 bits. With z = x / cap,
// a = |z|, r = 1 / (e^(2a) + 1):
//   tanh z = sign(z) (1 - 2 r),  1 - tanh^2 z = 4 r (1 - r)       (a >= 1/16)
//   tanh z = z (1 - z^2 / 3),    1 - tanh^2 z = 1 - z^2 + 2 z^4 / 3  (a < 1/16)
// e^(2a) = 2^(|x| k) by fast::exp2 (k = 2 log2(e) / cap rounded once: 2^-20
// relative for the a that matter — past a = 9, r is below 2^-25) and r by
// fast::divide (2 ulp; 0 once e^(2a) passes 2^126, where tanh is 1 in
// float), so r is good to about 2^-20 relative: tanh to 2^-20 absolute,
// which above a = 1/16 (tanh > 0.062) is 2^-16 relative, and the derivative
// to 2^-19 relative (no cancellation: 4 r (1 - r)). Below 1/16 the series'
// first omitted terms are 2 z^5 / 15 and 17 z^6 / 45: under 2^-19 and 2^-25
// relative. Against a 16-bit result's rounding (2^-11 float16, 2^-8
// bfloat16) that is well inside half an ulp. CUDA's tanhf takes about 17
// instructions; these about 14 (two MUFU), with the per-cap constants
// computed once (nn_softcap_fast_consts). NaN stays NaN (the comparison
// fails, the exponential branch carries it); +-inf give +-cap and 0.
struct nn_softcap_fast_consts {
    float cap, k, c3, c2, lim;   // cap, 2 log2(e) / cap, 1 / (3 cap^2), 1 / cap^2, cap / 16
};
inline nn_softcap_fast_consts nn_softcap_fast_setup(float cap, float rc) {
    nn_softcap_fast_consts c;
    c.cap = cap;
    c.k = rc * 2.88539008177792681f;
    c.c2 = rc * rc;
    c.c3 = c.c2 * (1.0f / 3.0f);
    c.lim = cap * 0.0625f;
    return c;
}
// cap tanh(x / cap)
inline float nn_softcap_fast(float x, thread const nn_softcap_fast_consts &c) {
    const float r = fast::divide(1.0f, fast::exp2(abs(x) * c.k) + 1.0f);
    const float big = copysign(fma(-2.0f * c.cap, r, c.cap), x);   // cap (1 - 2 r), x's sign
    const float small = x * fma(x * x, -c.c3, 1.0f);           // cap z (1 - z^2 / 3)
    return abs(x) < c.lim ? small : big;
}
// 1 - tanh^2(x / cap)
inline float nn_softcap_grad_fast(float x, thread const nn_softcap_fast_consts &c) {
    const float r = fast::divide(1.0f, fast::exp2(abs(x) * c.k) + 1.0f), q = 4.0f * r;
    const float z2 = x * x * c.c2;
    const float big = fma(-q, r, q);                             // 4 r (1 - r)
    const float small = fma(z2, fma(z2, 2.0f / 3.0f, -1.0f), 1.0f);
    return abs(x) < c.lim ? small : big;
}
