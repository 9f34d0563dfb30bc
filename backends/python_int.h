/* The Python bridge's internals, shared by backends/python_*.c and the
 * Python storage adapters (backends/python_storage.c). Not public.
 *
 * A bridge is one process running altar's adapter host
 * (`python -m altar.execution.bridge`, python/altar/execution/bridge.py)
 * under the interpreter the configuration names, answering one JSON request
 * per line. The python backend keeps one per backend object (so per worker)
 * and opens one ExecutionBackend from the altar.execution_backends entry
 * points in it; the storage side keeps one per process and opens the
 * altar.storage adapters of storage.python.schemes in it. What is opened
 * after the greeting is the owner's on_start; everything else (deadlines,
 * bounds, validation, restart with backoff) is python_host.c's. */
#ifndef ALTAR_PYTHON_INT_H
#define ALTAR_PYTHON_INT_H

#include "altar/backend.h"
#include "altar/clock.h"
#include "bridge_pipe.h"

#include <jansson.h>
#include <stdint.h>

/* Defaults of the keys (docs/python-backends.md lists them). */
#define ALTAR_PY_REPLY_TIMEOUT_MS 60000L
#define ALTAR_PY_AWAIT_TIMEOUT_MS 3600000L
#define ALTAR_PY_START_TIMEOUT_MS 60000L
#define ALTAR_PY_CANCEL_GRACE_MS 5000L
#define ALTAR_PY_BACKOFF_MIN_MS 200L
#define ALTAR_PY_BACKOFF_MAX_MS 30000L
#define ALTAR_PY_MAX_REPLY_BYTES (16u << 20)
/* The protocol this side speaks; the host's greeting names its own. */
#define ALTAR_PY_PROTOCOL 1

typedef struct altar_py altar_py_t;

struct altar_py {
  char *python;  /* interpreter */
  char *adapter; /* entry-point name (the backend's); NULL for storage */
  /* How messages name what answered: "adapter NAME" for the backend; the
   * storage side sets it before each call ("mem: adapter memstore"). */
  char tag[160];
  /* Runs on every start, after the greeting: opens what the bridge hosts
   * with altar__py_exchange. A failure stops the bridge. */
  int (*on_start)(altar_py_t *py, altar_error_t *err);
  void *owner;        /* on_start's state */
  char *options_json; /* keyword arguments of the adapter's constructor, a JSON object */
  long reply_ms, start_ms, grace_ms, backoff_min_ms, backoff_max_ms;
  long await_ms; /* deadline of one await_completion call */
  altar__pipe_t pipe;
  /* What the adapter declared when it was opened. */
  altar_verification_t verification;
  char *mount_root;    /* its PathResolver's root; "" = identity */
  bool custom_resolve; /* its resolver overrides resolve(): ask it */
  bool has_await;      /* it overrides await_completion: forward it */
  /* Restarts: after a death the next start waits backoff_ms. */
  unsigned failures;
  int64_t next_start_ms; /* monotonic; 0 = at once */
  char last_death[160];  /* why the previous bridge ended */
  uint64_t starts;       /* bridges started (tests, metrics) */
};

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

/* altar__py_call with its own deadline (await_completion's). */
int altar__py_call_within(altar_py_t *py, const char *op, json_t *req, long limit_ms, json_t **preply,
                          altar_error_t *err);

/* Starts the bridge and opens the adapter now (open's eager first start). */
int altar__py_start(altar_py_t *py, altar_error_t *err);

/* One request (borrowed) and its successful reply within limit_ms on a
 * running bridge; for on_start. Errors as altar__py_call's. */
int altar__py_exchange(altar_py_t *py, const char *op, json_t *req, long limit_ms, json_t **preply, altar_error_t *err);

/* A stopped bridge for python with the default deadlines and bound; the
 * caller sets on_start, owner and tag. NULL when out of memory. */
altar_py_t *altar__py_alloc(const char *python, size_t max_reply);

/* How many times the storage bridge has been started (python_storage.c);
 * tests read it to tell a restart from a bridge that served on. */
long long altar__storage_python_starts(void);

#endif
