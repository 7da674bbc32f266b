/*
 * spot_trace: turns a real spot trace (the JSON of ../shared/data/spot-traces: {"metadata":
 * {"gap_seconds": G}, "data": [N, N, ...]}, the instances available or still running at each
 * tick) into a spot-sim trace (autoscaler/spotsim.h: lines `TIME_S TYPE EVENT [ARG]`), scaled in
 * time, for tests/perf/bench_spot.sh --trace.
 *
 *   spot_trace FILE [--type spot] [--nodes W] [--trace-nodes M] [--scale K] [--notice S]
 *              [--no-notice F] [--start TICK|full] [--ticks N]
 *
 * The trace's counts are scaled to the cluster's W spot nodes (round(N x W / M), M the trace's
 * largest count unless --trace-nodes says); tick i (from --start) lands at (i - start) x G / K
 * seconds (--start full: from the first tick at which the W nodes could all be had). The first tick sets the capacity; a rise is capacity the autoscaler may buy (`capacity
 * N` at the tick); a drop of d is d preemptions whose kills land at the tick, each announced
 * --notice / K seconds before (a spot-sim `preempt`, the cloud's notice; no earlier than the
 * start), except a share --no-notice of them (every 1/F-th preemption, deterministically) which
 * come without one (`kill`), then the lower capacity (`reclaim`: an instance beyond it that the
 * preemptions did not take, one still booting when the notices went out, is taken then too). The schedule goes to stdout; a summary to
 * stderr. A bad file: "FILE:LINE: ..." naming the value, exit 1; bad arguments exit 2.
 *
 * --bound T (a job that takes T s on W on-demand nodes, in scaled seconds) adds to the summary
 * what no policy can beat on this window, its work being W x T node-seconds that scale linearly
 * with the nodes, with no boot, round or redone step: the least wall time on the trace's spot
 * capacity alone, and, to finish within --slack (default 0.15) over T, the share of the work
 * that must run on on-demand nodes (--price-ratio, spot over on-demand, default 0.25) and the
 * least cost per useful step that leaves against on demand. Against issue 28's goal (at most
 * 15% slower, at least 60% cheaper) it says whether the window allows it at all.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TEXT (64u << 20)

typedef struct trace_s {
    double gap_s;
    long *n;
    size_t len, cap;
} trace_t;

static const char *g_path;

static size_t line_of(const char *text, const char *at) {
    size_t line = 1;
    for (const char *p = text; p < at; p++) {
        line += *p == '\n';
    }
    return line;
}

/* The token at p (up to a delimiter), for messages. */
static void token(const char *p, char *out, size_t len) {
    size_t i = 0;
    while (p[i] != '\0' && strchr(",]}\n\r\t ", p[i]) == NULL && i + 1 < len) {
        out[i] = p[i];
        i++;
    }
    out[i] = '\0';
    if (i == 0 && len > 1 && p[0] != '\0') {
        out[0] = p[0];
        out[1] = '\0';
    }
}

static int fail_at(const char *text, const char *at, const char *what) {
    char tok[48];
    token(at, tok, sizeof(tok));
    fprintf(stderr, "spot_trace: %s:%zu: %s, got '%s'\n", g_path, line_of(text, at), what,
            at[0] == '\0' ? "end of file" : tok);
    return 0;
}

static const char *skip_ws(const char *p) {
    while (isspace((unsigned char)*p)) {
        p++;
    }
    return p;
}

/* Finds the value of "key" (the first occurrence, anywhere: the format has no nesting that
 * repeats it); returns a pointer past the colon or NULL. */
static const char *find_key(const char *text, const char *key) {
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\"", key);
    const char *p = strstr(text, pat);
    if (p == NULL) {
        return NULL;
    }
    p = skip_ws(p + strlen(pat));
    return *p == ':' ? skip_ws(p + 1) : NULL;
}

static int parse(const char *text, trace_t *t) {
    const char *p = skip_ws(text);
    if (*p != '{') {
        return fail_at(text, p, "expected a JSON object {\"metadata\": ..., \"data\": [...]}");
    }
    const char *g = find_key(text, "gap_seconds");
    if (g == NULL) {
        fprintf(stderr, "spot_trace: %s: no \"metadata\": {\"gap_seconds\": N}\n", g_path);
        return 0;
    }
    char *end = NULL;
    errno = 0;
    t->gap_s = strtod(g, &end);
    if (errno != 0 || end == g || !(t->gap_s > 0) || t->gap_s > 86400 ||
        strchr(",} \t\r\n", *end) == NULL) {
        return fail_at(text, g, "gap_seconds must be a number of seconds in (0, 86400]");
    }
    const char *d = find_key(text, "data");
    if (d == NULL) {
        fprintf(stderr, "spot_trace: %s: no \"data\": [N, ...] array\n", g_path);
        return 0;
    }
    if (*d != '[') {
        return fail_at(text, d, "\"data\" must be an array of counts");
    }
    p = skip_ws(d + 1);
    if (*p == ']') {
        return fail_at(text, p, "\"data\" is empty");
    }
    for (;;) {
        char msg[96];
        snprintf(msg, sizeof(msg), "data[%zu] must be a count of instances (0..100000)", t->len);
        if (!isdigit((unsigned char)*p)) {
            return fail_at(text, p, msg);
        }
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno != 0 || v > 100000 || strchr(",] \t\r\n", *end) == NULL) {
            return fail_at(text, p, msg);
        }
        if (t->len == t->cap) {
            size_t nc = t->cap ? t->cap * 2 : 1024;
            long *nn = realloc(t->n, nc * sizeof(*nn));
            if (nn == NULL) {
                fprintf(stderr, "spot_trace: %s: out of memory\n", g_path);
                return 0;
            }
            t->n = nn;
            t->cap = nc;
        }
        t->n[t->len++] = v;
        p = skip_ws(end);
        if (*p == ']') {
            break;
        }
        if (*p != ',') {
            return fail_at(text, p, "expected ',' or ']' after a count");
        }
        p = skip_ws(p + 1);
    }
    return 1;
}

static char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "spot_trace: %s: cannot open: %s\n", path, strerror(errno));
        return NULL;
    }
    char *buf = malloc(MAX_TEXT + 1);
    size_t n = buf ? fread(buf, 1, MAX_TEXT + 1, f) : 0;
    int bad = ferror(f);
    fclose(f);
    if (buf == NULL || bad || n > MAX_TEXT) {
        fprintf(stderr, "spot_trace: %s: %s\n", path,
                buf == NULL ? "out of memory" : (bad ? "read error" : "larger than 64 MiB"));
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    if (memchr(buf, '\0', n) != NULL) {
        fprintf(stderr, "spot_trace: %s: holds a NUL byte: not a JSON trace\n", path);
        free(buf);
        return NULL;
    }
    return buf;
}

static int usage(void) {
    fprintf(stderr, "usage: spot_trace FILE [--type spot] [--nodes W] [--trace-nodes M] [--scale K]"
                    " [--notice S] [--no-notice F] [--start TICK|full] [--ticks N] [--bound T"
                    " [--slack 0.15] [--price-ratio 0.25]]\n");
    return 2;
}

/* Node-seconds of spot capacity from the window's start to x s (capacity c[i] over tick i,
 * the last tick's held beyond the window). */
static double spot_ns(const long *c, size_t n, double tick_s, double x) {
    double sum = 0;
    for (size_t i = 0; i < n && x > 0; i++) {
        double span = i + 1 == n ? x : (x < tick_s ? x : tick_s);
        sum += (double)c[i] * span;
        x -= span;
    }
    return sum;
}

/* The --bound summary: see the top of the file. */
static void bound(const long *c, size_t n, double tick_s, long w, double job_s, double slack,
                  double price_ratio) {
    double work = (double)w * job_s;
    /* spot only: the least x with spot_ns(x) >= work, by bisection over a bounded range */
    double hi = (double)n * tick_s + job_s * 1000, lo = 0;
    int reach = spot_ns(c, n, tick_s, hi) >= work;
    for (int k = 0; reach && k < 100; k++) {
        double mid = (lo + hi) / 2;
        *(spot_ns(c, n, tick_s, mid) >= work ? &hi : &lo) = mid;
    }
    double s = spot_ns(c, n, tick_s, job_s * (1 + slack));
    s = s < work ? s : work;
    double od = work - s; /* on-demand node-seconds that must fill in */
    double cost = (s * price_ratio + od) / work;
    if (reach) {
        fprintf(stderr,
                "spot_trace: bound for a job of %.1f s on %ld nodes (linear, no boot or round): "
                "spot only at best %+.0f%% wall; ",
                job_s, w, 100 * (hi / job_s - 1));
    } else {
        fprintf(stderr,
                "spot_trace: bound for a job of %.1f s on %ld nodes (linear, no boot or round): "
                "spot only never finishes (the trace's capacity runs out); ",
                job_s, w);
    }
    fprintf(stderr,
            "within %+.0f%% wall at least %.0f%% of the work on on-demand and the cost per "
            "useful step at best %+.0f%% vs on demand: the goal (<= %+.0f%%, >= 60%% cheaper) "
            "is %s on this window\n",
            100 * slack, 100 * od / work, 100 * (cost - 1), 100 * slack,
            cost <= 0.4 + 1e-9 ? "possible" : "out of reach");
}

static int num_arg(const char *name, const char *v, double lo, double hi, double *out) {
    char *end = NULL;
    errno = 0;
    double d = strtod(v, &end);
    if (errno != 0 || end == v || *end != '\0' || !(d >= lo) || d > hi) {
        fprintf(stderr, "spot_trace: %s: '%s' is not a number in [%g, %g]\n", name, v, lo, hi);
        return 0;
    }
    *out = d;
    return 1;
}

int main(int argc, char **argv) {
    const char *path = NULL, *type = "spot";
    double nodes = 4, tnodes = 0, scale = 10, notice = 120, nonotice = 0.1, start = 0, ticks = 0;
    double job_s = 0, slack = 0.15, price_ratio = 0.25;
    int start_full = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-') {
            if (path != NULL) {
                return usage();
            }
            path = a;
            continue;
        }
        if (i + 1 >= argc) {
            return usage();
        }
        const char *v = argv[++i];
        int ok = 1;
        if (strcmp(a, "--type") == 0) {
            type = v;
        } else if (strcmp(a, "--nodes") == 0) {
            ok = num_arg(a, v, 1, 100000, &nodes);
        } else if (strcmp(a, "--trace-nodes") == 0) {
            ok = num_arg(a, v, 1, 100000, &tnodes);
        } else if (strcmp(a, "--scale") == 0) {
            ok = num_arg(a, v, 0.001, 1e6, &scale);
        } else if (strcmp(a, "--notice") == 0) {
            ok = num_arg(a, v, 0, 86400, &notice);
        } else if (strcmp(a, "--no-notice") == 0) {
            ok = num_arg(a, v, 0, 1, &nonotice);
        } else if (strcmp(a, "--start") == 0 && strcmp(v, "full") == 0) {
            start_full = 1;
        } else if (strcmp(a, "--start") == 0) {
            ok = num_arg(a, v, 0, 1e9, &start);
        } else if (strcmp(a, "--ticks") == 0) {
            ok = num_arg(a, v, 0, 1e9, &ticks);
        } else if (strcmp(a, "--bound") == 0) {
            ok = num_arg(a, v, 0.001, 1e9, &job_s);
        } else if (strcmp(a, "--slack") == 0) {
            ok = num_arg(a, v, 0, 100, &slack);
        } else if (strcmp(a, "--price-ratio") == 0) {
            ok = num_arg(a, v, 0, 1, &price_ratio);
        } else {
            return usage();
        }
        if (!ok) {
            return 2;
        }
    }
    if (path == NULL) {
        return usage();
    }
    g_path = path;
    char *text = read_all(path);
    if (text == NULL) {
        return 1;
    }
    trace_t t = {0};
    int ok = parse(text, &t);
    free(text);
    if (!ok) {
        free(t.n);
        return 1;
    }
    long m = (long)tnodes;
    if (m == 0) {
        for (size_t i = 0; i < t.len; i++) {
            m = t.n[i] > m ? t.n[i] : m;
        }
    }
    if (m == 0) {
        fprintf(stderr, "spot_trace: %s: every count is 0 (no instance ever available)\n", path);
        free(t.n);
        return 1;
    }
    long w = (long)nodes;
    size_t s0 = (size_t)start;
    if (start_full) { /* the first tick at which the whole cluster could be had */
        for (s0 = 0; s0 < t.len && ((t.n[s0] > m ? m : t.n[s0]) * w + m / 2) / m < w; s0++) {
        }
    }
    if (s0 >= t.len) {
        fprintf(stderr, "spot_trace: %s: --start %s is past the trace's last tick (%zu ticks)\n",
                path, start_full ? "full: no tick has the whole cluster; it" : "", t.len);
        free(t.n);
        return 1;
    }
    size_t s1 = ticks > 0 && s0 + (size_t)ticks < t.len ? s0 + (size_t)ticks : t.len;
    double tick_s = t.gap_s / scale, notice_s = notice / scale;
    printf("# spot_trace %s: ticks %zu..%zu of %zu, %g s each / %g = %.3f s, counts of %ld scaled "
           "to %ld nodes, notice %g s / %g, %g without notice\n",
           path, s0, s1 - 1, t.len, t.gap_s, scale, tick_s, m, w, notice, scale, nonotice);
    long prev = -1;
    unsigned long npre = 0, nkill = 0, nrise = 0, zero_ticks = 0;
    for (size_t i = s0; i < s1; i++) {
        long v = t.n[i] > m ? m : t.n[i];
        long c = (v * w + m / 2) / m; /* round(v x w / m) */
        t.n[i - s0] = c;              /* the window's scaled capacity, for --bound (i - s0 <= i) */
        double at = (double)(i - s0) * tick_s;
        zero_ticks += c == 0;
        if (prev < 0 || c > prev) {
            nrise += prev >= 0;
            printf("%.3f %s capacity %ld\n", at, type, c);
        } else if (c < prev) {
            for (long k = 0; k < prev - c; k++) {
                unsigned long nth = npre + nkill + 1; /* this preemption, counted from 1 */
                int without = floor((double)nth * nonotice + 1e-9) >
                              floor((double)(nth - 1) * nonotice + 1e-9);
                if (without) {
                    printf("%.3f %s kill\n", at, type);
                    nkill++;
                } else {
                    double n_at = at - notice_s < 0 ? 0 : at - notice_s;
                    printf("%.3f %s preempt\n", n_at, type);
                    npre++;
                }
            }
            printf("%.3f %s reclaim %ld\n", at, type, c);
        }
        prev = c;
    }
    fprintf(stderr,
            "spot_trace: %s: %zu ticks (%.1f s scaled), %lu preemptions with notice, %lu without, "
            "%lu rises, %lu ticks with no capacity\n",
            path, s1 - s0, (double)(s1 - s0) * tick_s, npre, nkill, nrise, zero_ticks);
    if (job_s > 0) {
        bound(t.n, s1 - s0, tick_s, w, job_s, slack, price_ratio);
    }
    free(t.n);
    return 0;
}
