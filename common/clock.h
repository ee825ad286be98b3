/* The one monotonic clock every thread and timer of reclass reads (CLOCK_MONOTONIC: never
 * steps with the wall clock). */
#ifndef RECLASS_COMMON_CLOCK_H
#define RECLASS_COMMON_CLOCK_H

#include <stdint.h>

double common_now_s(void);   /* monotonic seconds */
int64_t common_now_ms(void); /* the same clock in whole milliseconds */

#endif
