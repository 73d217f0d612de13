/* One Choco-SGD round with the scaled sign on a circulant mixing matrix:
 *
 *     q = copysign(scale, x - xh)   (the scale of the row and layer segment of each entry)
 *     xh += q
 *     u  = fma(w_K, q[i + o_K], ... fma(w_1, q[i + o_1], u))   (the shifts in the order the simulator adds them)
 *     x  = fma(gamma, u, x)
 *
 * Two ways through the row-major [n, d] float32 state. choco_sign_ring takes a ring's rows in order: row i's q,
 * then row i - 1's u and x from the q of rows i - 2, i - 1 and i, so three rows of q stay in the core's cache
 * and x is read again from there; the rows are split among OpenMP threads, each of which first makes the q of
 * its range's first and last rows for its neighbours. It can make the row scales too (lanes > 0), each row's just
 * before its q, adding |x - xh| in the order torch's CPU sum adds a contiguous row (choco_abs_sum).
 * choco_sign_columns takes any circulant a block of B columns at a time, keeping the block's q of every row in
 * qb [n, B]; choco_sign_columns_parallel splits the blocks among OpenMP threads. Either way x, xh and u are each
 * read and written once. Every entry gets the operations torch's eager kernels give it (one rounding for the
 * difference, the sum and each fused multiply-add), so the same bits; nothing here reorders a sum. Compiled without
 * contraction (-ffp-contract=off): the only fused multiply-adds are the fmaf calls. Built with -fopenmp where the
 * compiler can: the library then needs libgomp.so.1, which is the runtime torch's CPU wheel has already loaded,
 * so these threads are torch's own (its workers wait spinning after each operation; threads of another pool
 * would compete with them for the cores). bench/kernels/__init__.py builds it; bench/algorithms/choco_kernel.py
 * calls it and checks it against the eager round before using it. */
#include <math.h>
#include <stdint.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* the threads of the enclosing parallel region and this one's number (one thread, 0, without OpenMP) */
static int64_t parties_here(void) {
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

static int64_t party_here(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

#define MAX_LANES 16

static int64_t ceil_log2(int64_t x) {
    return x <= 2 ? 1 : 64 - __builtin_clzll((uint64_t)(x - 1));
}

/* The partial sums of |a - b| over `size` groups of four vectors of V lanes (V = 1: single entries), in the order of
 * torch's cascade sum for four interleaved rows: level 0 adds 2^p groups, and each full count of 2^p moves a level's
 * sums up into the next (p = max(4, ceil(log2 size) / 4)); out[k] the k-th interleaved row's lanes. */
static void cascade(const float *a, const float *b, int64_t size, int64_t V, float out[4][MAX_LANES]) {
    float acc[4][4][MAX_LANES] = {{{0.0f}}};
    const int64_t p = ceil_log2(size) / 4 > 4 ? ceil_log2(size) / 4 : 4;
    const int64_t step = (int64_t)1 << p, mask = step - 1;
    int64_t i = 0;
    while (i + step <= size) {
        for (int64_t j = 0; j < step; j++, i++)
            for (int k = 0; k < 4; k++)
                for (int64_t l = 0; l < V; l++) acc[0][k][l] += fabsf(a[(i * 4 + k) * V + l] - b[(i * 4 + k) * V + l]);
        for (int j = 1; j < 4; j++) {
            for (int k = 0; k < 4; k++)
                for (int64_t l = 0; l < V; l++) {
                    acc[j][k][l] += acc[j - 1][k][l];
                    acc[j - 1][k][l] = 0.0f;
                }
            if ((i & (mask << (j * p))) != 0) break;
        }
    }
    for (; i < size; i++)
        for (int k = 0; k < 4; k++)
            for (int64_t l = 0; l < V; l++) acc[0][k][l] += fabsf(a[(i * 4 + k) * V + l] - b[(i * 4 + k) * V + l]);
    for (int j = 1; j < 4; j++)
        for (int k = 0; k < 4; k++)
            for (int64_t l = 0; l < V; l++) acc[0][k][l] += acc[j][k][l];
    for (int k = 0; k < 4; k++)
        for (int64_t l = 0; l < V; l++) out[k][l] = acc[0][k][l];
}

/* ||a - b||_1 of n contiguous entries added as torch's sum adds |a - b| along a contiguous row whose float vector has
 * V lanes: the vector path from n >= V (partial vectors, then the tail entries, then the lanes), else the scalar
 * path. bench/algorithms/choco_kernel.py finds V by comparing with torch before it uses this. */
float choco_abs_sum(const float *a, const float *b, int64_t n, int64_t V) {
    float part[4][MAX_LANES];
    if (V > 1 && n >= V) {
        const int64_t vectors = n / V, groups = vectors / 4;
        cascade(a, b, groups, V, part);
        for (int64_t g = groups * 4; g < vectors; g++)
            for (int64_t l = 0; l < V; l++) part[0][l] += fabsf(a[g * V + l] - b[g * V + l]);
        for (int k = 1; k < 4; k++)
            for (int64_t l = 0; l < V; l++) part[0][l] += part[k][l];
        float total = 0.0f;
        for (int64_t j = vectors * V; j < n; j++) total += fabsf(a[j] - b[j]);
        for (int64_t l = 0; l < V; l++) total += part[0][l];
        return total;
    }
    const int64_t groups = n / 4;
    cascade(a, b, groups, 1, part);
    for (int64_t j = groups * 4; j < n; j++) part[0][0] += fabsf(a[j] - b[j]);
    for (int k = 1; k < 4; k++) part[0][0] += part[k][0];
    return part[0][0];
}

/* The sign's scales of one row, as sign.l1_norm has them: each segment's ||x - xh||_1 over blocks of `block`
 * columns, the blocks' sums added in order, over the segment's width. */
static void row_scales(const float *xi, const float *hi, int64_t nseg, const int64_t *seg_end, int64_t V,
                       int64_t block, float *scale) {
    int64_t a = 0;
    for (int64_t s = 0; s < nseg; a = seg_end[s], s++) {
        float total = 0.0f;
        for (int64_t b0 = a; b0 < seg_end[s]; b0 += block) {
            const int64_t w = seg_end[s] - b0 < block ? seg_end[s] - b0 : block;
            const float part = choco_abs_sum(xi + b0, hi + b0, w, V);
            total = b0 == a ? part : total + part;
        }
        scale[s] = total / (float)(seg_end[s] - a);
    }
}

/* q = copysign(scale, x - xh) into qi and xh += q over the columns [j0, j1) of one row (qi, xi and hi indexed by
 * column), each column with its segment's scale */
static void span_q(const float *restrict xi, float *restrict hi, float *restrict qi, const float *scale,
                   const int64_t *seg_end, int64_t j0, int64_t j1) {
    int64_t j = j0, s = 0;
    while (seg_end[s] <= j) s++;
    for (; j < j1; s++) {
        const float sc = scale[s];
        for (const int64_t e = seg_end[s] < j1 ? seg_end[s] : j1; j < e; j++) {
            const float q = copysignf(sc, xi[j] - hi[j]);
            qi[j] = q;
            hi[j] = hi[j] + q;
        }
    }
}

/* u = fma(w2, q2, fma(w1, q1, fma(w0, q0, u))) and x = fma(gamma, u, x) over w entries: three shifted adds in
 * the simulator's order and the step, in one sweep */
static void three_adds_and_step(float *restrict xi, float *restrict ui, const float *restrict q0,
                                const float *restrict q1, const float *restrict q2, const float *weights, float gamma,
                                int64_t w) {
    const float w0 = weights[0], w1 = weights[1], w2 = weights[2];
    for (int64_t j = 0; j < w; j++) {
        const float acc = fmaf(w2, q2[j], fmaf(w1, q1[j], fmaf(w0, q0[j], ui[j])));
        ui[j] = acc;
        xi[j] = fmaf(gamma, acc, xi[j]);
    }
}

/* u += the ring's three shifts of q (rel[k]: the k-th shift reads the q of row i - 1, i or i + 1), x += gamma u */
static void row_update(float *xi, float *ui, const float *before, const float *own, const float *after,
                       const int64_t *rel, const float *weights, float gamma, int64_t d) {
    const float *r[3];
    for (int k = 0; k < 3; k++) r[k] = rel[k] < 0 ? before : (rel[k] > 0 ? after : own);
    three_adds_and_step(xi, ui, r[0], r[1], r[2], weights, gamma, d);
}

/* The round on a ring of n >= 2 * parties rows: party t takes rows [n t / P, n (t + 1) / P). edge [2 P, d] holds
 * each party's first and last q, roll [P, 3, d] each party's last three. */
void choco_sign_ring(float *x, float *xh, float *u, float *scale, int64_t nseg, const int64_t *seg_end,
                     int64_t n, int64_t d, const int64_t *rel, const float *weights, float gamma, int64_t parties,
                     float *edge, float *roll, int64_t lanes, int64_t block) {
    #pragma omp parallel num_threads(parties)
    {
        const int64_t P = parties_here(), t = party_here();
        const int64_t lo = n * t / P, hi = n * (t + 1) / P;
        float *first = edge + 2 * t * d, *last = edge + (2 * t + 1) * d, *own = roll + 3 * t * d;
        if (lanes > 0) {  /* the scales here, a row at a time, each row's x and xh then read again from the cache */
            row_scales(x + lo * d, xh + lo * d, nseg, seg_end, lanes, block, scale + lo * nseg);
            row_scales(x + (hi - 1) * d, xh + (hi - 1) * d, nseg, seg_end, lanes, block, scale + (hi - 1) * nseg);
        }
        span_q(x + lo * d, xh + lo * d, first, scale + lo * nseg, seg_end, 0, d);
        span_q(x + (hi - 1) * d, xh + (hi - 1) * d, last, scale + (hi - 1) * nseg, seg_end, 0, d);
        #pragma omp barrier
        const float *before = edge + (2 * ((t + P - 1) % P) + 1) * d, *after = edge + 2 * ((t + 1) % P) * d;
        const float *q_prev = before, *q_row = first;  /* the q of rows i - 2 and i - 1 */
        for (int64_t i = lo + 1; i < hi - 1; i++) {
            float *q_next = own + (i % 3) * d;
            if (lanes > 0) row_scales(x + i * d, xh + i * d, nseg, seg_end, lanes, block, scale + i * nseg);
            span_q(x + i * d, xh + i * d, q_next, scale + i * nseg, seg_end, 0, d);
            row_update(x + (i - 1) * d, u + (i - 1) * d, q_prev, q_row, q_next, rel, weights, gamma, d);
            q_prev = q_row;
            q_row = q_next;
        }
        row_update(x + (hi - 2) * d, u + (hi - 2) * d, q_prev, q_row, last, rel, weights, gamma, d);
        row_update(x + (hi - 1) * d, u + (hi - 1) * d, q_row, last, after, rel, weights, gamma, d);
    }
}

static void choco_sign_columns(float *x, float *xh, float *u, const float *scale, int64_t nseg,
                               const int64_t *seg_end, int64_t n, int64_t d, const int64_t *offsets,
                               const float *weights, int64_t nshift, float gamma, int64_t c0, int64_t c1, float *qb,
                               int64_t B) {
    for (int64_t b0 = c0; b0 < c1; b0 += B) {
        const int64_t b1 = b0 + B < c1 ? b0 + B : c1;
        const int64_t w = b1 - b0;
        for (int64_t i = 0; i < n; i++)
            span_q(x + i * d, xh + i * d, qb + i * B - b0, scale + i * nseg, seg_end, b0, b1);
        for (int64_t i = 0; i < n; i++) {
            float *restrict xi = x + i * d + b0, *restrict ui = u + i * d + b0;
            if (nshift == 3) {  /* three shifts: the adds and the step in one sweep of the row */
                three_adds_and_step(xi, ui, qb + ((i + offsets[0]) % n) * B, qb + ((i + offsets[1]) % n) * B,
                                    qb + ((i + offsets[2]) % n) * B, weights, gamma, w);
                continue;
            }
            for (int64_t k = 0; k < nshift; k++) {
                const float *restrict qr = qb + ((i + offsets[k]) % n) * B;
                const float wk = weights[k];
                for (int64_t j = 0; j < w; j++) ui[j] = fmaf(wk, qr[j], ui[j]);
            }
            for (int64_t j = 0; j < w; j++) xi[j] = fmaf(gamma, ui[j], xi[j]);
        }
    }
}

/* choco_sign_columns over all d columns, the blocks split among `parties` OpenMP threads in contiguous ranges, each
 * with its own q block (qb [parties, n, B]) */
void choco_sign_columns_parallel(float *x, float *xh, float *u, const float *scale, int64_t nseg,
                                 const int64_t *seg_end, int64_t n, int64_t d, const int64_t *offsets,
                                 const float *weights, int64_t nshift, float gamma, float *qb, int64_t B,
                                 int64_t parties) {
    const int64_t nblocks = (d + B - 1) / B;
    #pragma omp parallel num_threads(parties)
    {
        const int64_t P = parties_here(), t = party_here();
        const int64_t lo = nblocks * t / P, hi = nblocks * (t + 1) / P;
        if (lo < hi)
            choco_sign_columns(x, xh, u, scale, nseg, seg_end, n, d, offsets, weights, nshift, gamma, lo * B,
                               hi * B < d ? hi * B : d, qb + t * n * B, B);
    }
}
