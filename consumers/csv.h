/* Streaming RFC 4180 CSV reader: quoted fields with embedded commas, quotes ("" escape),
 * LF / CRLF / CR newlines inside quotes; records end in CRLF, LF or CR; a UTF-8 byte-order
 * mark at the start is skipped; blank lines are skipped. A quote inside an unquoted field is
 * kept as text (common in exports); text after a closing quote and an unterminated quote at
 * end of input are errors that name the line. */
#ifndef RECLASS_CONSUMERS_CSV_H
#define RECLASS_CONSUMERS_CSV_H

#include <stddef.h>
#include <stdio.h>

#include "common/err.h"

typedef struct consumers_csv consumers_csv_t;

typedef struct {
    size_t n;          /* number of fields */
    char **field;      /* field[i] is NUL-terminated; may also contain NUL bytes */
    const size_t *len; /* len[i] = bytes in field[i], without the terminator */
    long line;         /* 1-based line on which the record starts */
} consumers_csv_row_t;

/* Reads from f, which stays the caller's (not closed by consumers_csv_free). */
int consumers_csv_init(FILE *f, consumers_csv_t **out);
void consumers_csv_free(consumers_csv_t *csv);

/* COMMON_OK with *row filled, COMMON_DONE at end of input, COMMON_USAGE on malformed input (e
 * says where). The row's memory belongs to csv and is valid until the next call. */
common_status_t consumers_csv_next(consumers_csv_t *csv, consumers_csv_row_t *row, common_err_t *e);

/* Index of the column named name in a header row, or -1. */
int consumers_csv_column(const consumers_csv_row_t *header, const char *name);

#endif
