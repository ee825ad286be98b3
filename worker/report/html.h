/* The pieces of reclass report's HTML: escaping and inline SVG charts. Everything is written
 * into the one file (no script, no font, no network), so the report opens anywhere. */
#ifndef RECLASS_WORKER_REPORT_HTML_H
#define RECLASS_WORKER_REPORT_HTML_H

#include <stdio.h>

/* s with & < > " ' escaped (NULL writes nothing). */
void report_html_text(FILE *f, const char *s);

/* How a chart writes a value on its axis and in tooltips. */
typedef enum {
    REPORT_FMT_COUNT,
    REPORT_FMT_BYTES,
    REPORT_FMT_SHARE,
    REPORT_FMT_SCORE
} report_fmt_t;

/* value as fmt says into buf ("1.2k", "3.4 MiB", "12.5%", "0.123"). */
void report_fmt_value(char *buf, size_t len, double value, report_fmt_t fmt);

/* Horizontal bars, one per label (n of them, in the order given), with each value and its
 * share of total (total <= 0: no share). */
void report_svg_hbars(FILE *f, int n, const char *const *labels, const double *values, double total,
                      report_fmt_t fmt);

/* Vertical bars of n bins named by labels (a histogram), one color. */
void report_svg_vbars(FILE *f, int n, const char *const *labels, const double *values,
                      report_fmt_t fmt);

/* One line of a line chart: n points (x = Unix seconds, ascending). */
typedef struct {
    const char *name;
    const double *x, *y;
    int n;
} report_series_t;

/* Lines over time, a legend when there are several; hlines (n_hlines of them, may be 0) are
 * dashed reference levels (e.g. the PSI thresholds). Nothing to draw writes a note instead. */
void report_svg_lines(FILE *f, int n_series, const report_series_t *series, report_fmt_t fmt,
                      int n_hlines, const double *hlines);

#endif
