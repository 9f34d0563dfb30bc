/* altar — a running fleet seen from a program: submit jobs to it and read the
 * group events of a job, with the same settings file the fleet's daemons
 * read. What `altar submit` does, as a library call, for embedders and the
 * Python package (python/altar/execution, docs/python.md).
 *
 * Threads: one client or reader is used by one thread at a time; separate
 * objects may be used from separate threads. */
#ifndef ALTAR_FLEET_CLIENT_H
#define ALTAR_FLEET_CLIENT_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/error.h"

#include <stdbool.h>
#include <stddef.h>

/* Room for a job id (the run handle id) and its NUL. */
#define ALTAR_JOB_ID_BUFSZ 65

typedef struct altar_fleet_client altar_fleet_client_t;
typedef struct altar_group_reader altar_group_reader_t;

/* Reads the fleet's settings from config_path (NULL: ./altar.yaml when it
 * exists, else the defaults), applies each of the n "KEY=VALUE" overrides
 * as altar_config_set does ("transport.dir=/srv/log"), loads the groups of
 * every kind, opens the transport and creates the fleet's topics when they
 * are missing. Errors name the file and line or the override. NULL with err
 * set; free with altar_fleet_client_close. The transport must be registered
 * (the altar binary and the Python package register the built-in ones). */
altar_fleet_client_t *altar_fleet_client_open(const char *config_path, const char *const *overrides, size_t n,
                                              altar_error_t *err);
void altar_fleet_client_close(altar_fleet_client_t *c); /* NULL is fine */

/* Submits the specs in text (one JSON object, a JSON array or JSON Lines)
 * as one job, as `altar submit` does: every spec is validated and checked
 * against the configured kinds (kind non-NULL: every spec must be of it)
 * before anything is published; returns once the log acknowledged every
 * message. The job id is written to job_id. 0, or ALTAR_EINVAL naming the
 * spec (its line or index) and field, or the transport's error; nothing is
 * published when a spec is refused. */
int altar_fleet_client_submit_json(altar_fleet_client_t *c, const char *kind, const char *text, size_t len,
                                   char job_id[ALTAR_JOB_ID_BUFSZ], altar_error_t *err);

/* Sends a cancel for job_id (group_key NULL: the whole job; else that group
 * of it) to every partition of the jobs, pool and status topics, as
 * `altar cancel` does, and waits for the log's acknowledgement. Sending it
 * again changes nothing. 0, ALTAR_EINVAL for an empty or overlong id,
 * ALTAR_ENOTFOUND when the log has no status topic, or the transport's error. */
int altar_fleet_client_cancel(altar_fleet_client_t *c, const char *job_id, const char *group_key, altar_error_t *err);

/* The fleet's ledger directory (ledger.path, relative paths as given), owned
 * by c: what `altar status` opens read-only to show a job's records. */
const char *altar_fleet_client_ledger_path(const altar_fleet_client_t *c);

/* A reader of the group events (fired, dead-lettered, cancelled) of one job
 * (job_id NULL: of every job) on the fleet's ready and dead topics, from
 * their beginning. It has its own connection to the log. NULL with err
 * set; free with altar_group_reader_close. */
altar_group_reader_t *altar_group_reader_open(altar_fleet_client_t *c, const char *job_id, altar_error_t *err);
void altar_group_reader_close(altar_group_reader_t *r); /* NULL is fine */

/* Waits up to timeout_ms for the reader's next group event: 1 with *pjson a
 * malloc'd JSON text of it (schemas/README.md, "group"; caller frees), 0
 * when none came in time, or a negative code. Undecodable records are
 * skipped (the reconciler never writes them). */
int altar_group_reader_next(altar_group_reader_t *r, int timeout_ms, char **pjson, altar_error_t *err);

/* *pdone = true once the reader has read every group event the log held
 * when this was called (each assigned partition consumed to its end), so
 * "the events so far" are all in. 0, or the transport's error (ALTAR_ENOTSUP
 * when it cannot tell). */
int altar_group_reader_caught_up(altar_group_reader_t *r, bool *pdone, altar_error_t *err);

ALTAR_API_END

#endif
