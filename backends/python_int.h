/* python backend internals shared by backends/python_*.c. Not public.
 *
 * One bridge process per backend object (so per worker): the interpreter
 * the configuration names, running altar's adapter host
 * (`python -m altar.execution.bridge`, python/altar/execution/bridge.py),
 * which loads one ExecutionBackend from the altar.execution_backends entry
 * points of that environment and answers one JSON request per line. */
#ifndef ALTAR_PYTHON_INT_H
#define ALTAR_PYTHON_INT_H

#include "altar/backend.h"
#include "bridge_pipe.h"

#include <jansson.h>
#include <stdint.h>

/* Defaults of the keys (docs/python-backends.md lists them). */
#define ALTAR_PY_REPLY_TIMEOUT_MS 60000L
#define ALTAR_PY_START_TIMEOUT_MS 60000L
#define ALTAR_PY_CANCEL_GRACE_MS 5000L
#define ALTAR_PY_BACKOFF_MIN_MS 200L
#define ALTAR_PY_BACKOFF_MAX_MS 30000L
#define ALTAR_PY_MAX_REPLY_BYTES (16u << 20)
/* The protocol this side speaks; the host's greeting names its own. */
#define ALTAR_PY_PROTOCOL 1

typedef struct altar_py {
  char *python;       /* interpreter */
  char *adapter;      /* entry-point name */
  char *options_json; /* keyword arguments of the adapter's constructor, a JSON object */
  long reply_ms, start_ms, grace_ms, backoff_min_ms, backoff_max_ms;
  altar__pipe_t pipe;
  /* What the adapter declared when it was opened. */
  altar_verification_t verification;
  char *mount_root;    /* its PathResolver's root; "" = identity */
  bool custom_resolve; /* its resolver overrides resolve(): ask it */
  /* Restarts: after a death the next start waits backoff_ms. */
  unsigned failures;
  int64_t next_start_ms; /* monotonic; 0 = at once */
  char last_death[160];  /* why the previous bridge ended */
  uint64_t starts;       /* bridges started (tests, metrics) */
} altar_py_t;

/* Builds the state from the backend's keys and starts the bridge once, so a
 * wrong interpreter or adapter name fails at open (ALTAR_ECONFIG). */
altar_py_t *altar__py_new(const altar_strmap_t *cfg, altar_error_t *err);
void altar__py_free(altar_py_t *py);

/* One request (consumed) to the adapter: the successful reply in *preply
 * (caller decrefs). Starts the bridge when it is not running (subject to the
 * restart backoff). A raised exception, a late, malformed or oversized reply,
 * a dead bridge: an error naming the operation, retriable unless the adapter
 * raised one of altar's deterministic errors (EINVAL, EPATH, EINTEGRITY). */
int altar__py_call(altar_py_t *py, const char *op, json_t *req, json_t **preply, altar_error_t *err);

/* Starts the bridge and opens the adapter now (open's eager first start). */
int altar__py_start(altar_py_t *py, altar_error_t *err);

/* Monotonic milliseconds (the one clock of this backend). */
int64_t altar__py_now_ms(void);

#endif
