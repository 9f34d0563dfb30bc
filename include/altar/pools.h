/* altar — resource pools on the log, and how large a spec the fleet carries.
 *
 * Pools: jobs of one pool travel on a jobs topic of their own, so a job
 * reaches only workers whose backend serves that pool. CPU-only jobs
 * (resources.gpu NULL) stay on the configured jobs topic; pool P goes to
 * "<jobs>.<P>". A pool name that is to become such a suffix is checked here.
 *
 * Size bounds: every message a job causes must fit ALTAR_MAX_MESSAGE — the
 * job message, the "submitted" status event (the spec, and the handle with a
 * copy of its labels), the other status events, and the group event that
 * lists the handles of a whole group. A worker adds fields of its own to
 * those events; each is bounded below, so submit can tell from a spec alone
 * whether everything it causes fits. */
#ifndef ALTAR_POOLS_H
#define ALTAR_POOLS_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/error.h"
#include "altar/spec.h"
#include "altar/task.h"

#include <stddef.h>

#define ALTAR_POOL_NAME_MAX 64 /* bytes in a pool name used as a topic suffix */

/* Checks pool as a topic suffix: 1..ALTAR_POOL_NAME_MAX of [A-Za-z0-9_-],
 * and not the CPU pool's capacity key ("normal"). err names field. */
int altar_pool_check(const char *field, const char *pool, altar_error_t *err);
/* The jobs topic of pool (NULL or ALTAR_POOL_CPU: jobs itself) into out.
 * ALTAR_EINVAL (err naming "resources.gpu") for a bad pool name,
 * ALTAR_ETOOBIG when the name would not fit size. */
int altar_pool_topic(const char *jobs, const char *pool, char *out, size_t size, altar_error_t *err);
/* The pool a jobs topic carries, when topic is jobs (*ppool NULL: CPU) or
 * "<jobs>.<pool>" with a valid pool (*ppool points into topic). False when
 * topic is not one of jobs' pool topics. */
bool altar_pool_of_topic(const char *jobs, const char *topic, const char **ppool);

/* Widths of what a worker adds to a job's events, at most (longer values
 * are cut or refused by the worker, never sent). */
#define ALTAR_BOUND_WORKER_ID 255
#define ALTAR_BOUND_BACKEND 64
#define ALTAR_BOUND_EXTERNAL_ID 512
#define ALTAR_BOUND_TOPIC 255
#define ALTAR_BOUND_DETAIL 2048 /* failure detail in a status event */
/* Everything of a status event besides the spec, the handle's labels and
 * plugin identity and the kind, at most (keys, the worker's fields, the
 * failure, numbers). */
#define ALTAR_BOUND_STATUS_FIXED 8192u
/* Everything of one shard in a group event besides its labels and plugin
 * identity, and everything of a group event besides its shards, group key
 * and kind. */
#define ALTAR_BOUND_SHARD_FIXED 768u
#define ALTAR_BOUND_GROUP_FIXED 512u

/* An upper bound of a string map's msgpack encoding. */
size_t altar_strmap_bound(const altar_strmap_t *m);
/* An upper bound of the largest status event a worker makes for spec (its
 * "submitted" event), into *psize. 0, or ALTAR_ETOOBIG when the spec alone
 * does not encode within ALTAR_MAX_MESSAGE (*psize is then a lower bound). */
int altar_spec_status_bound(const altar_spec_t *spec, size_t *psize, altar_error_t *err);
/* An upper bound of the bytes one shard of spec adds to a group event. */
size_t altar_spec_group_share(const altar_spec_t *spec);
/* 0 when every status event of spec fits ALTAR_MAX_MESSAGE; else
 * ALTAR_ETOOBIG with err naming the spec's largest field, its size, the
 * event's size and the bound. */
int altar_spec_check_carriable(const altar_spec_t *spec, altar_error_t *err);
/* The same for a spec whose canonical encoding (altar_encode_spec) is
 * spec_bytes long: it is not encoded again. */
int altar_spec_check_carriable_encoded(const altar_spec_t *spec, size_t spec_bytes, altar_error_t *err);

ALTAR_API_END

#endif
