/* tput: see tput.h. */
#include "tput.h"

#include <math.h>

void hv_tput_default(hv_tput_model_t *m) {
    *m = (hv_tput_model_t){
        .kind = HV_TPUT_DEFAULT, .a = 1.0 - HV_TPUT_SERIAL, .b = HV_TPUT_SERIAL, .c = 0.0};
}

static int usable(const hv_tput_sample_t *s) {
    return s->size > 0 && s->size <= HV_TPUT_MAX_SIZE && s->work > 0 && s->seconds > 0 &&
           isfinite(s->work) && isfinite(s->seconds);
}

void hv_tput_note(hv_tput_sample_t *s, size_t cap, size_t *n, uint32_t size, double work,
                  double seconds) {
    hv_tput_sample_t add = {.size = size, .work = work, .seconds = seconds};
    if (s == NULL || n == NULL || cap == 0 || !usable(&add)) {
        return;
    }
    size_t at = *n, least = 0;
    for (size_t i = 0; i < *n; i++) {
        if (s[i].size == size) {
            at = i;
            break;
        }
        if (s[i].seconds < s[least].seconds) {
            least = i;
        }
    }
    if (at == *n) {
        if (*n < cap) {
            (*n)++;
        } else {
            at = least;
        }
        s[at] = (hv_tput_sample_t){.size = size};
    }
    if (s[at].seconds > HV_TPUT_KEEP_S) {
        s[at].work /= 2;
        s[at].seconds /= 2;
    }
    s[at].work += work;
    s[at].seconds += seconds;
}

/* One size's samples added up: time per unit of work and its weight (seconds observed). */
typedef struct point_s {
    double n, t, w;
} point_t;

/* The sizes with enough time observed, at most cap of them (the first ones met), into p. */
static size_t gather(const hv_tput_sample_t *s, size_t n, point_t *p, size_t cap) {
    size_t k = 0;
    for (size_t i = 0; i < n && k < cap; i++) {
        if (!usable(&s[i])) {
            continue;
        }
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++) {
            seen = usable(&s[j]) && s[j].size == s[i].size;
        }
        if (seen) {
            continue;
        }
        double work = 0, secs = 0;
        for (size_t j = i; j < n; j++) {
            if (usable(&s[j]) && s[j].size == s[i].size) {
                work += s[j].work;
                secs += s[j].seconds;
            }
        }
        if (secs >= HV_TPUT_MIN_S) {
            p[k++] = (point_t){.n = s[i].size, .t = secs / work, .w = secs};
        }
    }
    return k;
}

/* The three terms of T(n): 1/n, 1, n. */
static double term(int q, double n) { return q == 0 ? 1.0 / n : q == 1 ? 1.0 : n; }

/* Weighted least squares of T over the terms in mask (bit q: term q). 1 with coef[3] (terms not in
 * the mask are 0) and the residual when the system is solvable and every coefficient is >= 0. */
static int lsq(const point_t *p, size_t np, unsigned mask, double coef[3], double *resid) {
    int idx[3], k = 0;
    for (int q = 0; q < 3; q++) {
        if (mask & (1u << q)) {
            idx[k++] = q;
        }
    }
    if ((size_t)k > np) {
        return 0;
    }
    double m[3][4] = {{0}};
    for (size_t i = 0; i < np; i++) {
        for (int r = 0; r < k; r++) {
            double fr = term(idx[r], p[i].n);
            for (int c = 0; c < k; c++) {
                m[r][c] += p[i].w * fr * term(idx[c], p[i].n);
            }
            m[r][k] += p[i].w * fr * p[i].t;
        }
    }
    for (int col = 0; col < k; col++) { /* Gauss-Jordan with partial pivoting */
        int piv = col;
        for (int r = col + 1; r < k; r++) {
            piv = fabs(m[r][col]) > fabs(m[piv][col]) ? r : piv;
        }
        double scale = 0;
        for (int c = 0; c < k; c++) {
            scale = fmax(scale, fabs(m[piv][c]));
        }
        if (scale == 0 || fabs(m[piv][col]) < 1e-12 * scale) {
            return 0;
        }
        for (int c = 0; c <= k; c++) {
            double t = m[col][c];
            m[col][c] = m[piv][c];
            m[piv][c] = t;
        }
        for (int r = 0; r < k; r++) {
            if (r != col) {
                double f = m[r][col] / m[col][col];
                for (int c = col; c <= k; c++) {
                    m[r][c] -= f * m[col][c];
                }
            }
        }
    }
    /* a coefficient this close to 0 is rounding: it reads as 0 */
    double tol = 0;
    for (size_t i = 0; i < np; i++) {
        tol = fmax(tol, 1e-9 * p[i].t * p[i].n);
    }
    coef[0] = coef[1] = coef[2] = 0;
    for (int r = 0; r < k; r++) {
        double v = m[r][k] / m[r][r];
        if (!(v >= -tol)) {
            return 0;
        }
        coef[idx[r]] = v > 0 ? v : 0;
    }
    double res = 0;
    for (size_t i = 0; i < np; i++) {
        double d = p[i].t - (coef[0] / p[i].n + coef[1] + coef[2] * p[i].n);
        res += p[i].w * d * d;
    }
    *resid = res;
    return coef[0] + coef[1] + coef[2] > 0;
}

hv_err hv_tput_fit(const hv_tput_sample_t *s, size_t n, hv_tput_model_t *m) {
    if (m == NULL || (s == NULL && n > 0)) {
        return HV_EINVAL;
    }
    point_t p[64];
    size_t np = gather(s, n, p, sizeof(p) / sizeof(p[0]));
    hv_tput_default(m);
    m->sizes = (uint32_t)np;
    for (size_t i = 0; i < np; i++) {
        m->largest = p[i].n > m->largest ? (uint32_t)p[i].n : m->largest;
    }
    if (np == 0) {
        return HV_OK;
    }
    if (np == 1) {
        double k = p[0].t / (m->a / p[0].n + m->b);
        m->kind = HV_TPUT_ONE;
        m->a *= k;
        m->b *= k;
        return HV_OK;
    }
    /* Two sizes: Amdahl through both, else linear, else flat. Three or more: every subset. */
    static const unsigned two[] = {0x3, 0x1, 0x2};
    static const unsigned more[] = {0x7, 0x3, 0x5, 0x1, 0x2, 0x6};
    const unsigned *masks = np == 2 ? two : more;
    size_t nm = np == 2 ? sizeof(two) / sizeof(two[0]) : sizeof(more) / sizeof(more[0]);
    double total = 0;
    for (size_t i = 0; i < np; i++) {
        total += p[i].w * p[i].t * p[i].t;
    }
    double best = INFINITY, coef[3] = {0, 0, 0};
    for (size_t i = 0; i < nm; i++) {
        double c[3], r;
        /* a tie (within rounding) goes to the earlier, more general mask */
        if (lsq(p, np, masks[i], c, &r) && r < best - 1e-12 * total) {
            best = r;
            coef[0] = c[0], coef[1] = c[1], coef[2] = c[2];
        }
    }
    if (best == INFINITY) { /* cannot happen: the flat fit always solves; keep the default */
        return HV_OK;
    }
    m->kind = np == 2 ? HV_TPUT_TWO : HV_TPUT_FIT;
    m->a = coef[0], m->b = coef[1], m->c = coef[2];
    return HV_OK;
}

double hv_tput_rate(const hv_tput_model_t *m, uint32_t n) {
    if (n == 0) {
        return 0;
    }
    double t = m->a / n + m->b + m->c * n;
    return t > 0 ? 1.0 / t : 0;
}

double hv_tput_speedup(const hv_tput_model_t *m, uint32_t n) {
    double one = hv_tput_rate(m, 1);
    return one > 0 ? hv_tput_rate(m, n) / one : (double)n;
}

double hv_tput_gain(const hv_tput_model_t *m, uint32_t n) {
    return hv_tput_speedup(m, n + 1) - hv_tput_speedup(m, n);
}
