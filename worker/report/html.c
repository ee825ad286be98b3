#include "worker/report/html.h"

#include <math.h>
#include <string.h>
#include <time.h>

static const char *const report_colors[] = {"#2563eb", "#dc2626", "#16a34a", "#9333ea",
                                            "#ea580c", "#0891b2", "#4b5563", "#ca8a04"};
#define REPORT_N_COLORS (int)(sizeof(report_colors) / sizeof(report_colors[0]))

void report_html_text(FILE *f, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        case '\'':
            fputs("&#39;", f);
            break;
        default:
            fputc(*s, f);
        }
    }
}

void report_fmt_value(char *buf, size_t len, double v, report_fmt_t fmt) {
    switch (fmt) {
    case REPORT_FMT_BYTES: {
        static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
        int u = 0;
        while (fabs(v) >= 1024 && u < 4) {
            v /= 1024;
            u++;
        }
        snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, units[u]);
        break;
    }
    case REPORT_FMT_SHARE:
        snprintf(buf, len, "%.1f%%", 100 * v);
        break;
    case REPORT_FMT_SCORE:
        snprintf(buf, len, "%.3f", v);
        break;
    default:
        if (fabs(v) >= 1e6)
            snprintf(buf, len, "%.1fM", v / 1e6);
        else if (fabs(v) >= 1e4)
            snprintf(buf, len, "%.1fk", v / 1e3);
        else
            snprintf(buf, len, v == floor(v) ? "%.0f" : "%.1f", v);
    }
}

void report_svg_hbars(FILE *f, int n, const char *const *labels, const double *values, double total,
                      report_fmt_t fmt) {
    const int row = 18, left = 200, width = 760, bar_w = 430;
    double max = 0;
    for (int i = 0; i < n; i++)
        if (values[i] > max) max = values[i];
    fprintf(f, "<svg class=\"chart\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", width,
            n * row + 4, width, n * row + 4);
    for (int i = 0; i < n; i++) {
        int y = i * row + 2;
        double w = max > 0 ? bar_w * values[i] / max : 0;
        char v[32];
        report_fmt_value(v, sizeof v, values[i], fmt);
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", left - 6, y + 13);
        report_html_text(f, labels[i]);
        fprintf(f,
                "</text><rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\">"
                "<title>",
                left, y + 2, w, row - 4, report_colors[0]);
        report_html_text(f, labels[i]);
        fprintf(f, ": %s</title></rect><text x=\"%.1f\" y=\"%d\">%s", v, left + w + 5, y + 13, v);
        if (total > 0) fprintf(f, " (%.1f%%)", 100 * values[i] / total);
        fprintf(f, "</text>\n");
    }
    fprintf(f, "</svg>\n");
}

void report_svg_vbars(FILE *f, int n, const char *const *labels, const double *values,
                      report_fmt_t fmt) {
    const int width = 760, height = 220, left = 50, bottom = 30, top = 18;
    const double plot_w = width - left - 10, plot_h = height - top - bottom;
    double max = 0;
    for (int i = 0; i < n; i++)
        if (values[i] > max) max = values[i];
    fprintf(f, "<svg class=\"chart\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", width,
            height, width, height);
    fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#999\"/>\n", left,
            top + plot_h, width - 10, top + plot_h);
    for (int i = 0; i < n && max > 0; i++) {
        double bw = plot_w / n, h = plot_h * values[i] / max;
        double x = left + i * bw + 2, y = top + plot_h - h;
        char v[32];
        report_fmt_value(v, sizeof v, values[i], fmt);
        fprintf(f,
                "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\">"
                "<title>",
                x, y, bw - 4, h, report_colors[0]);
        report_html_text(f, labels[i]);
        fprintf(f, ": %s</title></rect>\n", v);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
                x + (bw - 4) / 2, y - 4, v);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">", x + (bw - 4) / 2,
                height - 10);
        report_html_text(f, labels[i]);
        fprintf(f, "</text>\n");
    }
    fprintf(f, "</svg>\n");
}

/* Unix seconds as HH:MM:SS UTC. */
static void report_fmt_time(char *buf, size_t len, double t) {
    time_t s = (time_t)t;
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(buf, len, "%H:%M:%S", &tm);
}

/* A legend entry's width: its swatch and name (11px text: about 6px a character). */
static int report_legend_w(const char *name) {
    return 24 + 6 * (int)strlen(name) + 16;
}

/* Whether an entry of width w starts a new legend row, used of its row taken already: the
 * rows are as wide as the plot (pw), less the legend's 10px indent. */
static int report_legend_wraps(int used, int w, double pw) {
    return used > 0 && used + w > pw - 10;
}

void report_svg_lines(FILE *f, int n_series, const report_series_t *series, report_fmt_t fmt,
                      int n_hlines, const double *hlines) {
    double x0 = INFINITY, x1 = -INFINITY, ymax = 0;
    for (int s = 0; s < n_series; s++)
        for (int i = 0; i < series[s].n; i++) {
            x0 = fmin(x0, series[s].x[i]);
            x1 = fmax(x1, series[s].x[i]);
            ymax = fmax(ymax, series[s].y[i]);
        }
    if (!(x0 <= x1)) {
        fprintf(f, "<p class=\"note\">nothing recorded for this job</p>\n");
        return;
    }
    for (int i = 0; i < n_hlines; i++)
        ymax = fmax(ymax, hlines[i]);
    if (ymax <= 0) ymax = 1; /* a flat line at 0 (allocations_after_init) still shows */
    ymax *= 1.1;
    if (x1 == x0) x1 = x0 + 1;
    const int width = 760, left = 70, right = 10, bottom = 28;
    const double pw = width - left - right, ph = 200;
    int rows = 0; /* the legend's, above the plot: entries in rows as wide as the plot */
    for (int s = 0, lx = 0; s < n_series && n_series > 1; s++) {
        int w = report_legend_w(series[s].name);
        if (s == 0 || report_legend_wraps(lx, w, pw)) rows++, lx = 0;
        lx += w;
    }
    const int top = 12 + 14 * rows, height = top + (int)ph + bottom;
    fprintf(f, "<svg class=\"chart\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", width,
            height, width, height);
    fprintf(f,
            "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
            "stroke=\"#ccc\"/>\n",
            left, top, pw, ph);
    char a[32], b[32];
    for (int k = 0; k <= 2; k++) { /* y axis: 0, half, top */
        double v = ymax * k / 2, y = top + ph - ph * k / 2;
        report_fmt_value(a, sizeof a, v, fmt);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", left - 4, y + 4, a);
    }
    report_fmt_time(a, sizeof a, x0);
    report_fmt_time(b, sizeof b, x1);
    fprintf(f,
            "<text x=\"%d\" y=\"%d\">%s</text><text x=\"%d\" y=\"%d\" "
            "text-anchor=\"end\">%s UTC</text>\n",
            left, height - 8, a, width - right, height - 8, b);
    for (int i = 0; i < n_hlines; i++) {
        double y = top + ph - ph * hlines[i] / ymax;
        report_fmt_value(a, sizeof a, hlines[i], fmt);
        fprintf(f,
                "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#f59e0b\" "
                "stroke-dasharray=\"4 3\"><title>%s</title></line>\n",
                left, y, left + pw, y, a);
    }
    int lx = left + 10, ly = 6; /* the next legend entry's place */
    for (int s = 0; s < n_series; s++) {
        const char *color = report_colors[s % REPORT_N_COLORS];
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\" points=\"", color);
        for (int i = 0; i < series[s].n; i++)
            fprintf(f, "%.1f,%.1f ", left + pw * (series[s].x[i] - x0) / (x1 - x0),
                    top + ph - ph * series[s].y[i] / ymax);
        fprintf(f, "\"/>\n");
        for (int i = 0; i < series[s].n && series[s].n <= 60; i++) { /* points, with values */
            report_fmt_value(a, sizeof a, series[s].y[i], fmt);
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"><title>",
                    left + pw * (series[s].x[i] - x0) / (x1 - x0),
                    top + ph - ph * series[s].y[i] / ymax, color);
            report_html_text(f, series[s].name);
            fprintf(f, ": %s</title></circle>\n", a);
        }
        if (n_series > 1) {
            int w = report_legend_w(series[s].name);
            if (report_legend_wraps(lx - (left + 10), w, pw)) lx = left + 10, ly += 14;
            fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"10\" height=\"10\" fill=\"%s\"/>", lx, ly,
                    color);
            fprintf(f, "<text x=\"%d\" y=\"%d\">", lx + 14, ly + 9);
            report_html_text(f, series[s].name);
            fprintf(f, "</text>\n");
            lx += w;
        }
    }
    fprintf(f, "</svg>\n");
}
