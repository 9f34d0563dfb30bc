/* The docker backend's private state and the functions its files share.
 * Implementer-only: included by backends/docker_*.c and their own tests and
 * fuzz target, never by other modules. */
#ifndef ALTAR_BACKENDS_DOCKER_INT_H
#define ALTAR_BACKENDS_DOCKER_INT_H

#include "backends/docker.h"
#include "backends/log_retention.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct altar_docker {
  char *data_root; /* absolute host path, bind-mounted at /mnt/volume */
  int64_t slots;
  char *user;         /* NULL = the image's user */
  char *docker_bin;   /* the client program */
  char *storage_name; /* Storage adapter for transfers; NULL = by uri scheme */
  double command_timeout_s;
  bool trust_records;
  /* Of <data_root>/logs (backend.logs_keep, logs_keep_count,
   * logs_keep_days): only ended containers' output is kept there, so none
   * of it is a running task's. */
  altar_log_retention_t retention;
  const altar_command_runner_t *runner; /* borrowed */
} altar_docker_t;

static inline altar_docker_t *altar__docker(altar_backend_t *be) { return altar_backend_impl(be); }

/* Runs `docker ARGS...` (args NULL-terminated, without the program) through
 * the runner. Returns 0 when docker ran (check pres->exit_code) or an error
 * naming what. *pres always needs altar_cmd_result_clear. */
int altar__docker_cli(altar_docker_t *dk, const char *const *args, altar_cmd_result_t *pres, altar_error_t *err);

/* Whether s can be a container id (1..64 lowercase hex). Anything else never
 * reaches the docker argv. */
bool altar__docker_valid_id(const char *s);

/* The last non-empty line of text (docker prints its reason, or the new
 * container id, there), trimmed and made printable, into buf; "" if none. */
void altar__docker_last_line(const char *text, char *buf, size_t cap);

/* ---- inspect parsing (docker_inspect.c) ---- */

/* What poll needs of one container, read from `docker inspect` JSON. */
typedef struct altar_docker_info {
  char id[65];
  char status[16]; /* created, running, paused, restarting, removing, exited, dead */
  int64_t exit_code;
  bool oom_killed;
  double started_at;         /* Unix seconds; 0 if never started */
  double finished_at;        /* Unix seconds; 0 if not finished */
  altar_opt_i64_t timeout_s; /* from the altar.timeout_s label */
  char error[256];           /* State.Error, cut */
  char task_key[65];         /* the altar.task_key label when it is one, else "" */
} altar_docker_info_t;

/* ---- a failed container's output (docker_logs.c) ---- */

/* For a container that failed: its output (`docker logs`) is kept under
 * <data_root>/logs/<task key>/ (task_key "" : not kept) and its tails are
 * added to f's detail (bounded, redacted; see altar/log_tail.h). Best
 * effort: f is left as it was when docker cannot say. */
void altar__docker_add_logs(altar_docker_t *dk, const char *id, const char *task_key, altar_failure_t *f);

/* Parses the JSON array `docker inspect` prints (len bytes, untrusted) into a
 * malloc'd array in *pinfos (caller frees) of *pn entries. ALTAR_EDECODE
 * naming the field for malformed input. */
int altar__docker_parse_inspect(const char *json, size_t len, altar_docker_info_t **pinfos, size_t *pn,
                                altar_error_t *err);

/* RFC 3339 time as docker prints it ("2026-12-02T14:19:13.267320236Z", or
 * with an offset) → Unix seconds. Docker's zero time gives 0. ALTAR_EDECODE
 * for anything else. */
int altar__docker_parse_time(const char *s, double *pt);

/* ---- staging (docker_staging.c) ---- */
int altar__docker_stage_inputs(altar_backend_t *be, const altar_transfer_t *inputs, size_t n, altar_error_t *err);
int altar__docker_collect_outputs(altar_backend_t *be, const altar_transfer_t *outputs, size_t n, altar_error_t *err);

/* ---- submit, poll, cancel ---- */
int altar__docker_submit(altar_backend_t *be, const altar_spec_t *spec, altar_handle_t *phandle, altar_error_t *err);
/* Prunes <data_root>/logs by dk->retention when a prune is due (poll). */
void altar__docker_logs_prune_if_due(altar_docker_t *dk);

int altar__docker_poll(altar_backend_t *be, const altar_handle_t *handles, size_t n, altar_status_t *pstatuses,
                       altar_error_t *err);
int altar__docker_cancel(altar_backend_t *be, const altar_handle_t *handle, altar_error_t *err);

#endif
