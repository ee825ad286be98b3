#include "common/status.h"

const char *common_status_name(common_status_t st) {
    switch (st) {
    case COMMON_OK:
        return "ok";
    case COMMON_FATAL:
        return "runtime failure";
    case COMMON_USAGE:
        return "usage error";
    case COMMON_FOUND:
        return "found";
    case COMMON_RETRY:
        return "transient failure";
    case COMMON_BUG:
        return "internal error";
    case COMMON_DONE:
        return "done";
    case COMMON_MISSING:
        return "not found";
    case COMMON_DATA:
        return "data refused";
    }
    return "unknown status";
}

int common_status_exit(common_status_t st) {
    switch (st) {
    case COMMON_OK:
    case COMMON_DONE:
        return 0;
    case COMMON_USAGE:
        return 2;
    case COMMON_FOUND:
        return 3;
    case COMMON_FATAL:
    case COMMON_RETRY: /* still failing when the command gave up retrying */
    case COMMON_BUG:
    case COMMON_MISSING:
    case COMMON_DATA:
        return 1;
    }
    return 1;
}

int common_status_retriable(common_status_t st) {
    return st == COMMON_RETRY;
}
