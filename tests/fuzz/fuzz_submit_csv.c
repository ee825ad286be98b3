/* Fuzz target: a FILE.csv as `reclass submit` reads and sends it (worker_submit_input over the CSV
 * reader). The input is read twice: with the usual "text"/"id" columns, and with the header's
 * last and first columns, so that any header reaches the records. */
#include <stdint.h>
#include <string.h>

#include "consumers/csv.h"
#include "tests/fuzz/fuzz_submit.h"
#include "tests/fuzz/fuzz_util.h"

/* The header row's first and last field names, via the same CSV reader. */
static int header_ends(const uint8_t *data, size_t size, char **first, char **last) {
    *first = *last = NULL;
    FILE *f = fmemopen((void *)data, size, "rb");
    if (!f) return -1;
    consumers_csv_t *csv;
    consumers_csv_row_t h;
    common_err_t e;
    int rc = -1;
    if (consumers_csv_init(f, &csv) == 0) {
        if (consumers_csv_next(csv, &h, &e) == COMMON_OK && h.n > 0) {
            FUZZ_CHECK(h.field[h.n - 1][h.len[h.n - 1]] == '\0');
            *first = strdup(h.field[0]);
            *last = strdup(h.field[h.n - 1]);
            rc = *first && *last ? 0 : -1;
        }
        consumers_csv_free(csv);
    }
    fclose(f);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0; /* fmemopen refuses an empty buffer; the file path covers it */
    const char *path = fuzz_write_tmp("tickets.csv", data, size);
    fuzz_submit_read_all(path, "text", NULL);
    char *first, *last;
    if (header_ends(data, size, &first, &last) == 0) fuzz_submit_read_all(path, last, first);
    free(first);
    free(last);
    return 0;
}
