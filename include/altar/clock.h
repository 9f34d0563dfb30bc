/* altar — the clocks, read one way everywhere. Monotonic time measures
 * intervals and deadlines (it never jumps); wall time is what records and
 * events carry (Unix seconds, as the wire schema's times are). */
#ifndef ALTAR_CLOCK_H
#define ALTAR_CLOCK_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include <stdint.h>

int64_t altar_mono_ms(void); /* CLOCK_MONOTONIC, milliseconds */
double altar_mono_s(void);   /* CLOCK_MONOTONIC, seconds */
int64_t altar_wall_ms(void); /* CLOCK_REALTIME, milliseconds since the Unix epoch */
double altar_wall_s(void);   /* CLOCK_REALTIME, seconds since the Unix epoch */

ALTAR_API_END

#endif
