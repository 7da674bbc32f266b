/* svgchart: see svgchart.h. */
#include "svgchart.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mem.h"

/* The text being written: grows by doubling; oom sticks. */
typedef struct sb_s {
    char *p;
    size_t n, cap;
    int oom;
} sb_t;

static void sb_add(sb_t *b, const char *s, size_t n) {
    if (b->oom) {
        return;
    }
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->n + n + 1) {
            cap *= 2;
        }
        char *p = hv_realloc(b->p, cap);
        if (p == NULL) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

__attribute__((format(printf, 2, 3))) static void sb_printf(sb_t *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n < 0) {
        return;
    }
    sb_add(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* s XML-escaped (control bytes become '?'). */
static void sb_esc(sb_t *b, const char *s) {
    for (; s != NULL && *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        const char *rep = c == '&'                  ? "&amp;"
                          : c == '<'                ? "&lt;"
                          : c == '>'                ? "&gt;"
                          : c == '"'                ? "&quot;"
                          : c == '\''               ? "&#39;"
                          : (c < 0x20 || c == 0x7f) ? "?"
                                                    : NULL;
        if (rep != NULL) {
            sb_add(b, rep, strlen(rep));
        } else {
            sb_add(b, s, 1);
        }
    }
}

uint32_t hv_svg_color(uint64_t key) {
    /* Twelve colours people tell apart (darkish, so that white text and a white page show). */
    static const uint32_t pal[] = {0x1f77b4, 0xff7f0e, 0x2ca02c, 0xd62728, 0x9467bd, 0x8c564b,
                                   0xe377c2, 0x7f7f7f, 0xbcbd22, 0x17becf, 0x393b79, 0xad494a};
    return pal[key % (sizeof(pal) / sizeof(pal[0]))];
}

double hv_svg_value_at(const hv_svg_series_t *s, uint64_t t_ms) {
    double v = 0;
    for (size_t i = 0; i < s->n && s->pts[i].t_ms <= t_ms; i++) {
        v = s->pts[i].v;
    }
    return v > 0 ? v : 0;
}

double hv_svg_nice_max(double v) {
    if (!(v > 0)) {
        return 1;
    }
    double p = pow(10, floor(log10(v)));
    static const double steps[] = {1, 2, 5, 10};
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        if (steps[i] * p >= v * (1 - 1e-12)) {
            return steps[i] * p;
        }
    }
    return 10 * p;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The plot's geometry. */
typedef struct geo_s {
    double left, right, top, bottom; /* the plot area's edges, pixels */
    uint64_t t0, t1;
    double ymax;
} geo_t;

static double gx(const geo_t *g, uint64_t t) {
    t = t < g->t0 ? g->t0 : t > g->t1 ? g->t1 : t;
    return g->left + (double)(t - g->t0) * (g->right - g->left) / (double)(g->t1 - g->t0);
}

static double gy(const geo_t *g, double v) {
    v = v < 0 ? 0 : v > g->ymax ? g->ymax : v;
    return g->bottom - v * (g->bottom - g->top) / g->ymax;
}

static void fmt_value(double v, char *buf, size_t len) {
    if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(buf, len, "%.0f", v);
    } else {
        snprintf(buf, len, "%.3g", v);
    }
}

static void fmt_clock(uint64_t ms, char *buf, size_t len) {
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    if (gmtime_r(&s, &tm) == NULL) {
        snprintf(buf, len, "?");
        return;
    }
    strftime(buf, len, "%H:%M:%S", &tm);
}

static void axes(sb_t *b, const hv_svg_chart_t *c, const geo_t *g) {
    char v[32];
    sb_printf(b,
              "<rect class=\"hv-plot\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
              "fill=\"#fafafa\" stroke=\"#bbb\"/>",
              g->left, g->top, g->right - g->left, g->bottom - g->top);
    for (int i = 0; i <= 2; i++) {
        double val = g->ymax * i / 2.0, y = gy(g, val);
        fmt_value(val, v, sizeof(v));
        sb_printf(b,
                  "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                  "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"11\">%s</text>",
                  g->left, y, g->right, y, g->left - 4, y + 4, v);
    }
    sb_printf(b,
              "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" transform=\"rotate(-90 %.1f %.1f)\" "
              "text-anchor=\"middle\">",
              12.0, (g->top + g->bottom) / 2, 12.0, (g->top + g->bottom) / 2);
    sb_esc(b, c->unit);
    sb_add(b, "</text>", 7);
    char t0[16], t1[16];
    fmt_clock(g->t0, t0, sizeof(t0));
    fmt_clock(g->t1, t1, sizeof(t1));
    sb_printf(b,
              "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">%s</text>"
              "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%s UTC</text>",
              g->left, g->bottom + 14, t0, g->right, g->bottom + 14, t1);
}

static void legend(sb_t *b, const hv_svg_chart_t *c, const hv_svg_series_t *s, size_t ns,
                   const geo_t *g) {
    double x = g->right + 10;
    for (size_t i = 0; i < ns; i++) {
        double y = g->top + 4 + 16.0 * (double)i;
        if (y + 12 > c->height) {
            sb_printf(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">+%zu more</text>", x, y + 10,
                      ns - i);
            break;
        }
        sb_printf(b,
                  "<rect class=\"hv-legend\" x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" "
                  "fill=\"#%06x\"/><text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">",
                  x, y, (unsigned)s[i].color, x + 14, y + 9);
        sb_esc(b, s[i].label);
        sb_add(b, "</text>", 7);
    }
}

/* The stacked areas: over the union of the series' times, each series' band between the sum of
 * those below it and that sum plus its own value. */
static hv_err stacked(sb_t *b, const hv_svg_series_t *s, size_t ns, const geo_t *g) {
    size_t nt = 1;
    for (size_t i = 0; i < ns; i++) {
        nt += s[i].n;
    }
    uint64_t *ts = hv_calloc(nt + 1, sizeof(*ts));
    double *base = hv_calloc(nt + 1, sizeof(*base));
    if (ts == NULL || base == NULL) {
        hv_free(ts);
        hv_free(base);
        return HV_ENOMEM;
    }
    size_t k = 0;
    ts[k++] = g->t0;
    for (size_t i = 0; i < ns; i++) {
        for (size_t p = 0; p < s[i].n; p++) {
            if (s[i].pts[p].t_ms > g->t0 && s[i].pts[p].t_ms < g->t1) {
                ts[k++] = s[i].pts[p].t_ms;
            }
        }
    }
    qsort(ts, k, sizeof(*ts), cmp_u64);
    size_t u = 0;
    for (size_t i = 0; i < k; i++) {
        if (u == 0 || ts[i] != ts[u - 1]) {
            ts[u++] = ts[i];
        }
    }
    ts[u] = g->t1; /* interval i: [ts[i], ts[i+1]) */
    for (size_t i = 0; i < ns; i++) {
        int any = 0;
        for (size_t q = 0; q < u; q++) {
            any |= hv_svg_value_at(&s[i], ts[q]) > 0;
        }
        if (!any) {
            continue;
        }
        sb_printf(b, "<path class=\"hv-series\" data-label=\"");
        sb_esc(b, s[i].label);
        sb_printf(b, "\" fill=\"#%06x\" stroke=\"none\" d=\"", (unsigned)s[i].color);
        for (size_t q = 0; q < u; q++) {
            double top = base[q] + hv_svg_value_at(&s[i], ts[q]);
            sb_printf(b, "%c%.1f %.1fL%.1f %.1f", q == 0 ? 'M' : 'L', gx(g, ts[q]), gy(g, top),
                      gx(g, ts[q + 1]), gy(g, top));
        }
        for (size_t q = u; q-- > 0;) {
            sb_printf(b, "L%.1f %.1fL%.1f %.1f", gx(g, ts[q + 1]), gy(g, base[q]), gx(g, ts[q]),
                      gy(g, base[q]));
        }
        sb_add(b, "Z\"/>", 4);
        for (size_t q = 0; q < u; q++) {
            base[q] += hv_svg_value_at(&s[i], ts[q]);
        }
    }
    hv_free(ts);
    hv_free(base);
    return HV_OK;
}

/* Each series as its own step line from its first point (or the chart's start) to the end. */
static void lines(sb_t *b, const hv_svg_series_t *s, size_t ns, const geo_t *g) {
    for (size_t i = 0; i < ns; i++) {
        if (s[i].n == 0 || s[i].pts[0].t_ms >= g->t1) {
            continue;
        }
        sb_printf(b, "<path class=\"hv-series\" data-label=\"");
        sb_esc(b, s[i].label);
        sb_printf(b, "\" fill=\"none\" stroke=\"#%06x\" stroke-width=\"2\" d=\"",
                  (unsigned)s[i].color);
        uint64_t start = s[i].pts[0].t_ms < g->t0 ? g->t0 : s[i].pts[0].t_ms;
        sb_printf(b, "M%.1f %.1f", gx(g, start), gy(g, hv_svg_value_at(&s[i], start)));
        for (size_t p = 1; p < s[i].n; p++) {
            if (s[i].pts[p].t_ms <= g->t0) {
                continue;
            }
            if (s[i].pts[p].t_ms >= g->t1) {
                break;
            }
            sb_printf(b, "H%.1fV%.1f", gx(g, s[i].pts[p].t_ms), gy(g, s[i].pts[p].v));
        }
        sb_printf(b, "H%.1f\"/>", gx(g, g->t1));
    }
}

hv_err hv_svg_chart(const hv_svg_chart_t *c, const hv_svg_series_t *s, size_t ns, char **out,
                    size_t *len) {
    *out = NULL;
    *len = 0;
    if (c->width < 200 || c->height < 60 || c->t1_ms <= c->t0_ms || (ns > 0 && s == NULL)) {
        return HV_EINVAL;
    }
    geo_t g = {.left = 44,
               .right = (double)c->width - 150,
               .top = 22,
               .bottom = (double)c->height - 20,
               .t0 = c->t0_ms,
               .t1 = c->t1_ms,
               .ymax = c->y_max};
    if (!(g.ymax > 0)) {
        /* The data's top inside the time span: the highest stack (at each time any series
         * changes) or single value. */
        double top = 0;
        for (size_t i = 0; i < ns; i++) {
            for (size_t p = 0; p <= s[i].n; p++) {
                uint64_t t = p < s[i].n ? s[i].pts[p].t_ms : c->t0_ms;
                t = t < c->t0_ms ? c->t0_ms : t;
                if (t >= c->t1_ms) {
                    continue;
                }
                double v = 0;
                for (size_t k = 0; k < ns; k++) {
                    if (c->stacked || k == i) {
                        v += hv_svg_value_at(&s[k], t);
                    }
                }
                top = v > top ? v : top;
            }
        }
        g.ymax = hv_svg_nice_max(top);
    }
    sb_t b = {0};
    sb_printf(&b,
              "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"%s\" width=\"%u\" height=\"%u\" "
              "viewBox=\"0 0 %u %u\" role=\"img\" font-family=\"sans-serif\"><title>",
              c->css_class != NULL ? c->css_class : "hv-chart", c->width, c->height, c->width,
              c->height);
    sb_esc(&b, c->title);
    sb_printf(&b, "</title><text x=\"%.1f\" y=\"14\" font-size=\"12\" font-weight=\"bold\">",
              g.left);
    sb_esc(&b, c->title);
    sb_add(&b, "</text>", 7);
    axes(&b, c, &g);
    hv_err rc = HV_OK;
    if (c->stacked) {
        rc = stacked(&b, s, ns, &g);
    } else {
        lines(&b, s, ns, &g);
    }
    legend(&b, c, s, ns, &g);
    sb_add(&b, "</svg>", 6);
    if (rc != HV_OK || b.oom) {
        hv_free(b.p);
        return HV_ENOMEM;
    }
    *out = b.p;
    *len = b.n;
    return HV_OK;
}
