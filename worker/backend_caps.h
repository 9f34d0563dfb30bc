/* What the worker tells its operator about the backend's declared
 * capabilities (altar/backend.h, ALTAR_BACKEND_CAP_*) before it relies on
 * them, so a lack shows at start or at the cancel, not as a surprise later. */
#ifndef ALTAR_WORKER_BACKEND_CAPS_H
#define ALTAR_WORKER_BACKEND_CAPS_H

#include "altar/backend.h"

#include <stddef.h>

/* The capabilities the fleet leans on that be lacks, as one sentence into
 * out naming the backend ("" when it has them all): adopting a live run by
 * task key (a moved partition's tasks are not run twice) and stopping a
 * running task (altar cancel, the drain deadline). */
void altar__worker_caps_note(const altar_backend_t *be, char *out, size_t size);

/* Whether be can stop a running task; when not, out gets why a cancel of
 * job_id leaves its running tasks running. */
bool altar__worker_can_stop(const altar_backend_t *be, const char *job_id, char *out, size_t size);

#endif
