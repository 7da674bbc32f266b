/*
 * svgchart_test: data series -> SVG text. The stacked areas' corners are where the step values
 * put them (pixel coordinates computed from the chart's geometry), labels are escaped, bad
 * charts are refused. `svgchart_test <case>` runs one case.
 */
#include "svgchart.h"
#include "hv_check.h"

#include <stdint.h>
#include <string.h>

#include "mem.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static size_t count(const char *hay, const char *needle) {
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle)) {
        n++;
    }
    return n;
}

/* The d attribute of the path labelled label (into buf). */
static int path_of(const char *svg, const char *label, char *buf, size_t len) {
    char key[128];
    snprintf(key, sizeof(key), "data-label=\"%s\"", label);
    const char *p = strstr(svg, key);
    if (p == NULL || (p = strstr(p, " d=\"")) == NULL) {
        return 0;
    }
    p += 4;
    const char *e = strchr(p, '"');
    size_t n = (size_t)(e - p) < len - 1 ? (size_t)(e - p) : len - 1;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return 1;
}

/* A 400x200 chart of t = 1000..1100 ms, values up to 8. */
static hv_svg_chart_t chart_400(const char *title, const char *unit, int stacked) {
    hv_svg_chart_t c = {.title = title, .unit = unit, .stacked = stacked, .y_max = 8};
    c.width = 400;
    c.height = 200;
    c.t0_ms = 1000;
    c.t1_ms = 1100;
    return c;
}

/* Draws the chart, which must succeed, and checks that the text is one whole <svg> element. */
static char *render(const hv_svg_chart_t *c, const hv_svg_series_t *s, size_t n) {
    char *svg = NULL;
    size_t len = 0;
    CHECK_RC(hv_svg_chart(c, s, n, &svg, &len), HV_OK);
    CHECK(svg != NULL && strlen(svg) == len);
    CHECK(svg != NULL && strncmp(svg, "<svg ", 5) == 0);
    CHECK(svg != NULL && len > 6 && strcmp(svg + len - 6, "</svg>") == 0);
    return svg;
}

/* Two jobs stacked: job 1 has 2 slots from t=0 and 4 from t=50; job 2 has 2 from t=50. The plot
 * is 44..250 wide (width 400 - 150 legend), 22..180 high (height 200 - 20); y_max 8. */
static void case_stacked(void) {
    hv_svg_point_t a[] = {{1000, 2}, {1050, 4}};
    hv_svg_point_t b[] = {{1050, 2}};
    hv_svg_series_t s[] = {{"job 1", 0x1f77b4, a, N(a)}, {"job 2", 0xff7f0e, b, N(b)}};
    hv_svg_chart_t c = chart_400("slots by job", "slots", 1);
    char *svg = render(&c, s, N(s));
    CHECK_EQ(count(svg, "class=\"hv-series\""), 2);
    CHECK_HAS(svg, "fill=\"#1f77b4\"");
    CHECK_HAS(svg, "fill=\"#ff7f0e\"");
    char d[2048];
    /* y(v) = 180 - v * 158 / 8: y(2) = 140.5, y(4) = 101.0, y(6) = 61.5; x(1050) = 147.0. */
    CHECK(path_of(svg, "job 1", d, sizeof(d)));
    CHECK_STR(d, "M44.0 140.5L147.0 140.5L147.0 101.0L250.0 101.0"
                 "L250.0 180.0L147.0 180.0L147.0 180.0L44.0 180.0Z");
    CHECK(path_of(svg, "job 2", d, sizeof(d)));
    CHECK_STR(d, "M44.0 140.5L147.0 140.5L147.0 61.5L250.0 61.5" /* no height before t=50 */
                 "L250.0 101.0L147.0 101.0L147.0 140.5L44.0 140.5Z");
    CHECK_HAS(svg, "<title>slots by job</title>");
    CHECK_HAS(svg, ">8</text>"); /* the axis' top */
    hv_free(svg);
}

/* The value axis from the data: the stack's top (3 + 4 = 7) rounded up to 10. */
static void case_auto_max(void) {
    hv_svg_point_t a[] = {{0, 3}};
    hv_svg_point_t b[] = {{0, 4}};
    hv_svg_series_t s[] = {{"a", 1, a, 1}, {"b", 2, b, 1}};
    hv_svg_chart_t c = {.title = "t", .unit = "u", .width = 300, .height = 100, .t1_ms = 10};
    c.stacked = 1;
    char *svg = render(&c, s, 2);
    CHECK_HAS(svg, ">10</text>");
    hv_free(svg);
    c.stacked = 0; /* lines: the highest single value, 4 -> 5 */
    svg = render(&c, s, 2);
    CHECK_HAS(svg, ">5</text>");
    CHECK_HAS(svg, "fill=\"none\" stroke=\"#000001\"");
    hv_free(svg);
    /* Stacked, the top is the highest stack at one time, not the sum of the maxima: 3 then 4
     * after a, b 2 only while a is 3 -> 5, rounded up to 5. */
    hv_svg_point_t a2[] = {{0, 3}, {5, 4}};
    hv_svg_point_t b2[] = {{0, 2}, {5, 0}};
    hv_svg_series_t s2[] = {{"a", 1, a2, 2}, {"b", 2, b2, 2}};
    c.stacked = 1;
    svg = render(&c, s2, 2);
    CHECK_HAS(svg, ">5</text>");
    CHECK_LACKS(svg, ">10</text>");
    hv_free(svg);
    CHECK(hv_svg_nice_max(0) == 1);
    CHECK(hv_svg_nice_max(1) == 1);
    CHECK(hv_svg_nice_max(1.5) == 2);
    CHECK(hv_svg_nice_max(3) == 5);
    CHECK(hv_svg_nice_max(7) == 10);
    CHECK(hv_svg_nice_max(0.03) == 0.05);
    CHECK(hv_svg_nice_max(120) == 200);
}

/* A step line: from its first point, each later point moves horizontally then vertically. */
static void case_line(void) {
    hv_svg_point_t a[] = {{1000, 2}, {1050, 4}, {2000, 1}};
    hv_svg_series_t s[] = {{"size", 0x2ca02c, a, N(a)}};
    hv_svg_chart_t c = chart_400("world size", "workers", 0);
    char *svg = render(&c, s, 1);
    char d[512];
    CHECK(path_of(svg, "size", d, sizeof(d)));
    CHECK_STR(d, "M44.0 140.5H147.0V101.0H250.0"); /* the point after t1 is not drawn */
    hv_free(svg);
}

/* Labels and the title are escaped; a series with nothing in the span draws no area but keeps
 * its legend entry. */
static void case_escape_empty(void) {
    hv_svg_point_t a[] = {{0, 0}};
    hv_svg_series_t s[] = {{"<b>\"x\" & 'y'\n", 0xd62728, a, 1}};
    hv_svg_chart_t c = {
        .title = "a<b", .unit = "u&v", .width = 300, .height = 100, .t1_ms = 10, .stacked = 1};
    char *svg = render(&c, s, 1);
    CHECK_LACKS(svg, "<b>");
    CHECK_HAS(svg, "&lt;b&gt;&quot;x&quot; &amp; &#39;y&#39;?");
    CHECK_HAS(svg, "<title>a&lt;b</title>");
    CHECK_HAS(svg, "u&amp;v");
    CHECK_EQ(count(svg, "class=\"hv-series\""), 0);
    CHECK_EQ(count(svg, "class=\"hv-legend\""), 1);
    hv_free(svg);
    /* No series at all: the axes only. */
    svg = render(&c, NULL, 0);
    CHECK_HAS(svg, "hv-plot");
    hv_free(svg);
}

static void case_bad(void) {
    hv_svg_chart_t c = {.title = "t", .width = 400, .height = 200, .t0_ms = 5, .t1_ms = 5};
    char *svg = (char *)1;
    size_t len = 7;
    CHECK_RC(hv_svg_chart(&c, NULL, 0, &svg, &len), HV_EINVAL);
    CHECK(svg == NULL && len == 0);
    c.t1_ms = 6;
    c.width = 10;
    CHECK_RC(hv_svg_chart(&c, NULL, 0, &svg, &len), HV_EINVAL);
    c.width = 400;
    hv_svg_point_t a[] = {{5, 1}};
    hv_svg_series_t s[] = {{"a", 1, a, 1}};
    for (long k = 1; k <= 3; k++) {
        hv_mem_fail_after(k);
        hv_err rc = hv_svg_chart(&c, s, 1, &svg, &len);
        hv_mem_fail_after(0);
        CHECK(rc == HV_ENOMEM || rc == HV_OK);
        if (rc == HV_OK) {
            hv_free(svg);
        } else {
            CHECK(svg == NULL);
        }
    }
}

static void case_colors(void) {
    for (uint64_t k = 0; k < 24; k++) {
        uint32_t c = hv_svg_color(k);
        CHECK(c != hv_svg_color(k + 1));
        CHECK(((c >> 16) & 0xff) + ((c >> 8) & 0xff) + (c & 0xff) < 3 * 230); /* not white */
    }
    hv_svg_point_t a[] = {{10, 2}, {20, 5}};
    hv_svg_series_t s = {"a", 1, a, 2};
    CHECK(hv_svg_value_at(&s, 5) == 0);
    CHECK(hv_svg_value_at(&s, 10) == 2);
    CHECK(hv_svg_value_at(&s, 19) == 2);
    CHECK(hv_svg_value_at(&s, 99) == 5);
}

HV_CHECK_MAIN(NULL, NULL, {"stacked", case_stacked}, {"auto_max", case_auto_max},
              {"line", case_line}, {"escape_empty", case_escape_empty}, {"bad", case_bad},
              {"colors", case_colors})
