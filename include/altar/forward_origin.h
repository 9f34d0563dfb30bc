/* Reading who forwarded a job record (docs/forwarding.md). */
#ifndef ALTAR_FORWARD_ORIGIN_H
#define ALTAR_FORWARD_ORIGIN_H

#include "altar/export.h"
#include "altar/transport.h"

#include <stdbool.h>
#include <stddef.h>

ALTAR_API_BEGIN

/* When m carries ALTAR_FORWARD_FROM_HEADER ("worker/topic/partition/offset"
 * of the original), copies the forwarding worker's id into worker (cap
 * bytes, NUL-terminated) and returns true. The header is untrusted: a value
 * that is not printable ASCII, has fewer than three '/', or names a worker
 * longer than 255 bytes or than cap - 1 answers false. */
bool altar_forward_origin(const altar_msg_t *m, char *worker, size_t cap);

ALTAR_API_END

#endif
