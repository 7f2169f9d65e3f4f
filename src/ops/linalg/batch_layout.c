/* batch_layout.c — leading dimensions of batched matrix operations: NumPy
 * broadcasting, and collapsing them into one strided batch per launch (see
 * batch_layout.h). */
#include "batch_layout.h"

#include <string.h>

#include "core/error.h"

void alloy_batch_contiguous_strides(int nb, const int64_t *shape, int64_t inner, int64_t *strides) {
    int64_t s = inner;
    for (int d = nb - 1; d >= 0; d--) {
        strides[d] = shape[d] == 1 ? 0 : s;
        s *= shape[d];
    }
}

alloy_status alloy_batch_broadcast(const char *fn, const char *xname, int nx, const int64_t *xs,
                                   const int64_t *xst, const char *yname, int ny, const int64_t *ys,
                                   const int64_t *yst, int *nb, int64_t *shape, int64_t *sx, int64_t *sy) {
    const int n = nx > ny ? nx : ny;
    for (int d = 0; d < n; d++) {
        const int dx = d - (n - nx), dy = d - (n - ny);
        const int64_t ex = dx >= 0 ? xs[dx] : 1, ey = dy >= 0 ? ys[dy] : 1;
        if (ex != ey && ex != 1 && ey != 1)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "%s: the leading dimensions of %s and %s do not broadcast: %s has %lld where "
                               "%s has %lld (batch dimension %d)",
                               fn, xname, yname, xname, (long long)ex, yname, (long long)ey, d);
        shape[d] = ex > ey ? ex : ey;
        sx[d] = (dx >= 0 && ex == shape[d] && ex != 1) ? xst[dx] : 0;
        sy[d] = (dy >= 0 && ey == shape[d] && ey != 1) ? yst[dy] : 0;
    }
    *nb = n;
    return ALLOY_OK;
}

void alloy_batch_layout_init(alloy_batch_layout *l, int nb, const int64_t *shape, int nops,
                             const int64_t strides[][ALLOY_MAX_NDIM]) {
    memset(l, 0, sizeof *l);
    l->nb = nb;
    l->nops = nops;
    for (int d = 0; d < nb; d++) {
        l->shape[d] = shape[d];
        for (int k = 0; k < nops; k++) l->stride[k][d] = shape[d] == 1 ? 0 : strides[k][d];
    }
    /* the smallest `first` such that every dimension d in [first, nb) of
     * extent > 1 steps by (stride of the next such dimension) * its extent */
    int first = nb > 0 ? nb - 1 : 0;
    while (first > 0) {
        const int d = first - 1;
        int ok = 1;
        if (shape[d] != 1) {
            int e = d + 1;
            while (e < nb && shape[e] == 1) e++;
            for (int k = 0; k < nops && ok && e < nb; k++) ok = l->stride[k][d] == l->stride[k][e] * shape[e];
        }
        if (!ok) break;
        first = d;
    }
    l->first = first;
    l->inner = 1;
    l->outer = 1;
    for (int d = 0; d < nb; d++) *(d >= first ? &l->inner : &l->outer) *= shape[d];
    for (int k = 0; k < nops; k++) {
        l->inner_stride[k] = 0;
        for (int d = nb - 1; d >= first; d--)
            if (shape[d] != 1) {
                l->inner_stride[k] = l->stride[k][d];
                break;
            }
    }
}

void alloy_batch_layout_offsets(const alloy_batch_layout *l, int64_t o, int64_t *offsets) {
    for (int k = 0; k < l->nops; k++) offsets[k] = 0;
    for (int d = l->first - 1; d >= 0; d--) {
        const int64_t i = o % l->shape[d];
        o /= l->shape[d];
        for (int k = 0; k < l->nops; k++) offsets[k] += i * l->stride[k][d];
    }
}

alloy_status alloy_batch_layout_launch_per_matrix(const alloy_batch_layout *l, alloy_kernel *k, alloy_array *a,
                                                  alloy_launch *ln, uint32_t nt, alloy_stream *stream) {
    const int64_t per_launch = ((int64_t)1 << 30) / nt;
    alloy_array *ins[1] = {a};
    alloy_status st = ALLOY_OK;
    for (int64_t ob = 0; ob < l->outer && st == ALLOY_OK; ob++) {
        int64_t off[ALLOY_BATCH_MAX_OPS];
        alloy_batch_layout_offsets(l, ob, off);
        for (int64_t start = 0; start < l->inner && st == ALLOY_OK; start += per_launch) {
            const int64_t cnt = l->inner - start < per_launch ? l->inner - start : per_launch;
            st = alloy_launch_set_constant_int(ln, "a_off", ALLOY_INT64, off[0] + start * l->inner_stride[0]);
            if (st == ALLOY_OK) st = alloy_launch_set_constant_int(ln, "z_off", ALLOY_INT64, off[1] + start);
            if (st == ALLOY_OK) st = alloy_launch_set_grid(ln, (uint32_t)(cnt * nt), 1, 1);
            alloy_array *res[5] = {NULL, NULL, NULL, NULL, NULL};
            if (st == ALLOY_OK) st = alloy_kernel_apply(k, 1, ins, ln, stream, res);
            for (int i = 0; i < 5; i++) alloy_array_free(res[i]);
        }
    }
    return st;
}
