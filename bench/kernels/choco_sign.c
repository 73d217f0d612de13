/* One Choco-SGD round with the scaled sign on a circulant mixing matrix, after the row scales are known:
 *
 *     q = copysign(scale, x - xh)   (the scale of the row and layer segment of each entry)
 *     xh += q
 *     u  = fma(w_K, q[i + o_K], ... fma(w_1, q[i + o_1], u))   (the shifts in the order the simulator adds them)
 *     x  = fma(gamma, u, x)
 *
 * over columns [c0, c1) of the row-major [n, d] float32 state, a block of B columns at a time: the block's q of
 * every row is kept in qb [n, B] for the shifted adds, so x, xh and u are each read and written once. Every entry
 * gets the operations torch's eager kernels give it (one rounding for the difference, the sum and each fused
 * multiply-add), so the same bits; nothing here reorders a sum. Compiled without contraction (-ffp-contract=off):
 * the only fused multiply-adds are the fmaf calls. bench/kernels/__init__.py builds it; bench/algorithms/
 * choco_kernel.py calls it and checks it against the eager round before using it. */
#include <math.h>
#include <stdint.h>

void choco_sign_columns(float *x, float *xh, float *u, const float *scale, int64_t nseg, const int64_t *seg_end,
                        int64_t n, int64_t d, const int64_t *offsets, const float *weights, int64_t nshift,
                        float gamma, int64_t c0, int64_t c1, float *qb, int64_t B) {
    for (int64_t b0 = c0; b0 < c1; b0 += B) {
        const int64_t b1 = b0 + B < c1 ? b0 + B : c1;
        const int64_t w = b1 - b0;
        for (int64_t i = 0; i < n; i++) {
            const float *restrict xi = x + i * d;
            float *restrict hi = xh + i * d, *restrict qi = qb + i * B - b0;
            int64_t j = b0, s = 0;
            while (seg_end[s] <= j) s++;
            while (j < b1) {
                const int64_t e = seg_end[s] < b1 ? seg_end[s] : b1;
                const float sc = scale[i * nseg + s];
                for (; j < e; j++) {
                    const float q = copysignf(sc, xi[j] - hi[j]);
                    qi[j] = q;
                    hi[j] = hi[j] + q;
                }
                s++;
            }
        }
        for (int64_t i = 0; i < n; i++) {
            float *restrict xi = x + i * d + b0, *restrict ui = u + i * d + b0;
            if (nshift == 3) {  /* a ring: the three adds and the step in one sweep of the row */
                const float *restrict q0 = qb + ((i + offsets[0]) % n) * B;
                const float *restrict q1 = qb + ((i + offsets[1]) % n) * B;
                const float *restrict q2 = qb + ((i + offsets[2]) % n) * B;
                const float w0 = weights[0], w1 = weights[1], w2 = weights[2];
                for (int64_t j = 0; j < w; j++) {
                    const float acc = fmaf(w2, q2[j], fmaf(w1, q1[j], fmaf(w0, q0[j], ui[j])));
                    ui[j] = acc;
                    xi[j] = fmaf(gamma, acc, xi[j]);
                }
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
