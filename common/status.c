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
    }
    return "unknown status";
}
