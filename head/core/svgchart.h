/*
 * svgchart: a picture of figures over time as inline SVG text (the status page's fleet charts:
 * slots over time stacked by job, a job's world size and step throughput over time). Pure: a
 * function from data series to text, no I/O, no clock.
 *
 * A series is a step function: point i's value holds from its time until the next point's
 * (the last one's until the chart's end). Stacked, the series are piled in the given order (the
 * first at the bottom) over the union of their times; else each is drawn as its own step line.
 * Every series is one <path class="hv-series" data-label="..."> filled (stacked) or stroked in
 * its colour, with a legend entry; the axes carry the value scale and the time span. Labels and
 * the title are XML-escaped. Errors: HV_EINVAL (no width/height, t1 <= t0), HV_ENOMEM.
 */
#ifndef HV_HEAD_SVGCHART_H
#define HV_HEAD_SVGCHART_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

typedef struct hv_svg_point_s {
    uint64_t t_ms; /* wall ms */
    double v;      /* >= 0 (a negative value is drawn as 0) */
} hv_svg_point_t;

typedef struct hv_svg_series_s {
    const char *label;         /* the legend's word (e.g. "job 3 (train)"); NULL: "" */
    uint32_t color;            /* 0xRRGGBB */
    const hv_svg_point_t *pts; /* ascending by t_ms */
    size_t n;
} hv_svg_series_t;

typedef struct hv_svg_chart_s {
    const char *title;      /* shown above the plot and as <title> */
    const char *unit;       /* the value axis' unit ("slots", "steps/s") */
    const char *css_class;  /* the <svg>'s class (NULL: "hv-chart") */
    uint32_t width, height; /* pixels */
    uint64_t t0_ms, t1_ms;  /* the time axis */
    int stacked;
    double y_max; /* the value axis' top (0: from the data, rounded up) */
} hv_svg_chart_t;

/* The chart as one <svg> element: *out (hv_free it) of *len bytes, NUL-terminated. */
hv_err hv_svg_chart(const hv_svg_chart_t *c, const hv_svg_series_t *s, size_t ns, char **out,
                    size_t *len);

/* A colour for key (a job id): distinct for neighbouring keys, never white or near-white. */
uint32_t hv_svg_color(uint64_t key);

/* The value of series s at time t (0 before its first point). */
double hv_svg_value_at(const hv_svg_series_t *s, uint64_t t_ms);

/* A "nice" top for a value axis: the least of 1, 2, 5 times a power of ten >= v (v <= 0: 1). */
double hv_svg_nice_max(double v);

#endif
