/* The python backend: any ExecutionBackend registered under the
 * altar.execution_backends entry points of a Python environment, run in the
 * fleet through one bridge process (python_host.c). This file holds its
 * keys, its ExecutionBackend vtable, and the translation of each operation
 * into a request and of each reply back, checked as strictly as a message
 * read from the log: a reply is only data. */
#include "python_int.h"

#include "altar/codec.h"
#include "altar/log_tail.h"
#include "altar/paths.h"
#include "altar/plugin/backend.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

static altar_py_t *python_of(altar_backend_t *be) { return altar_backend_impl(be); }

/* ---- requests ---- */

static json_t *opt_str(const char *s) { return s ? json_string(s) : json_null(); }

static json_t *transfers_json(const altar_transfer_t *ts, size_t n) {
  json_t *a = json_array();
  for (size_t i = 0; a && i < n; i++) {
    json_t *t = json_pack("{s:s, s:s, s:o, s:o}", "uri", ts[i].uri, "logical_path", ts[i].logical_path, "locality_key",
                          opt_str(ts[i].locality_key), "digest", opt_str(ts[i].digest));
    if (!t || json_array_append_new(a, t)) {
      json_decref(a);
      return NULL;
    }
  }
  return a;
}

/* A JSON value from one of the codec's *_to_json strings. */
static json_t *from_codec(char *text) {
  json_t *j = text ? json_loads(text, 0, NULL) : NULL;
  free(text);
  return j;
}

static json_t *handles_json(const altar_handle_t *hs, size_t n, altar_error_t *err) {
  json_t *a = json_array();
  for (size_t i = 0; a && i < n; i++) {
    json_t *h = from_codec(altar_handle_to_json(&hs[i], err));
    if (!h || json_array_append_new(a, h)) {
      json_decref(a);
      return NULL;
    }
  }
  return a;
}

/* ---- replies ---- */

static int bad_reply(altar_py_t *py, const char *op, const char *what, altar_error_t *err) {
  return altar_error_set_retriable(err, ALTAR_EDECODE, "python %s (%s): bad reply: %s", op, py->tag, what);
}

static int handle_from(altar_py_t *py, const char *op, const json_t *v, altar_handle_t *ph, altar_error_t *err) {
  char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
  if (!text) return bad_reply(py, op, "no handle", err);
  int rc = altar_handle_from_json(text, strlen(text), ph, err);
  free(text);
  if (rc) {
    altar_error_prefix(err, "python %s (%s): bad reply", op, py->tag);
    err->retriable = true;
  }
  return rc;
}

/* The adapter's own words in a failure pass the same redaction as any
 * task output. */
static int redact_failure(altar_failure_t *f) {
  if (!f || !f->detail) return ALTAR_OK;
  char *clean = altar_redact_env(f->detail, (const char *const *)environ);
  if (!clean) return ALTAR_ENOMEM;
  free(f->detail);
  f->detail = clean;
  return ALTAR_OK;
}

/* ---- operations ---- */

static void pb_close(altar_backend_t *be) { altar__py_free(python_of(be)); }

static int pb_capacity(altar_backend_t *be, altar_capacity_t *pcap, altar_error_t *err) {
  altar_py_t *py = python_of(be);
  json_t *reply = NULL;
  int rc = altar__py_call(py, "capacity", json_pack("{s:s}", "op", "capacity"), &reply, err);
  if (rc) return rc;
  json_t *pools = json_object_get(reply, "pools");
  if (!json_is_object(pools) || json_object_size(pools) > ALTAR_MAX_MAP)
    rc = bad_reply(py, "capacity", "pools: want an object of at most 1024 pools", err);
  const char *name;
  json_t *n;
  json_object_foreach(pools, name, n) {
    if (rc) break;
    if (!json_is_integer(n) || json_integer_value(n) < 0 || !*name || strlen(name) > 256)
      rc = bad_reply(py, "capacity", "pools: want pool names with free slot counts >= 0", err);
    else if (altar_capacity_set(pcap, name, (int64_t)json_integer_value(n)))
      rc = altar_error_set(err, ALTAR_ENOMEM, "python capacity: out of memory");
  }
  json_decref(reply);
  return rc;
}

static int transfer_call(altar_backend_t *be, const char *op, const altar_transfer_t *ts, size_t n,
                         altar_error_t *err) {
  if (!n) return ALTAR_OK; /* nothing to move: no round trip */
  json_t *list = transfers_json(ts, n);
  if (!list) return altar_error_set(err, ALTAR_ENOMEM, "python %s: out of memory", op);
  json_t *reply = NULL;
  int rc = altar__py_call(python_of(be), op, json_pack("{s:s, s:o}", "op", op, "transfers", list), &reply, err);
  json_decref(reply);
  return rc;
}

static int pb_stage(altar_backend_t *be, const altar_transfer_t *ts, size_t n, altar_error_t *err) {
  return transfer_call(be, "stage_inputs", ts, n, err);
}
static int pb_collect(altar_backend_t *be, const altar_transfer_t *ts, size_t n, altar_error_t *err) {
  return transfer_call(be, "collect_outputs", ts, n, err);
}

static const char *pb_mount_root(altar_backend_t *be) {
  return python_of(be)->mount_root ? python_of(be)->mount_root : "";
}

static int pb_resolve(altar_backend_t *be, const char *logical, char **pphysical, altar_error_t *err) {
  altar_py_t *py = python_of(be);
  *pphysical = NULL;
  if (!py->custom_resolve) return altar_path_resolve(pb_mount_root(be), logical, pphysical, err);
  json_t *reply = NULL;
  int rc =
      altar__py_call(py, "resolve", json_pack("{s:s, s:s}", "op", "resolve", "logical_path", logical), &reply, err);
  if (rc) return rc;
  const json_t *v = json_object_get(reply, "physical_path");
  if (!json_is_string(v) || json_string_length(v) > ALTAR_MAX_STRING ||
      strlen(json_string_value(v)) != json_string_length(v))
    rc = bad_reply(py, "resolve", "physical_path: want a string", err);
  else if (!(*pphysical = strdup(json_string_value(v))))
    rc = altar_error_set(err, ALTAR_ENOMEM, "python resolve: out of memory");
  json_decref(reply);
  return rc;
}

static int pb_submit(altar_backend_t *be, const altar_spec_t *spec, altar_handle_t *ph, altar_error_t *err) {
  altar_py_t *py = python_of(be);
  json_t *js = from_codec(altar_spec_to_json(spec, err));
  if (!js) return err && err->code ? err->code : altar_error_set(err, ALTAR_ENOMEM, "python submit: out of memory");
  json_t *reply = NULL;
  int rc = altar__py_call(py, "submit", json_pack("{s:s, s:o}", "op", "submit", "spec", js), &reply, err);
  if (rc) return rc;
  altar_handle_t h;
  rc = handle_from(py, "submit", json_object_get(reply, "handle"), &h, err);
  json_decref(reply);
  if (rc) return rc;
  /* Identity comes from the spec, never from the adapter: only its id is kept. */
  if (!*h.external_id) rc = bad_reply(py, "submit", "handle.external_id is empty", err);
  else if (altar_handle_init_for_spec(ph, altar_backend_name(be), h.external_id, spec))
    rc = altar_error_set(err, ALTAR_ENOMEM, "python submit: out of memory");
  altar_handle_clear(&h);
  return rc;
}

/* poll, or await_completion within its own deadline: one status per handle asked about. */
static int statuses_call(altar_backend_t *be, const char *op, long limit_ms, const altar_handle_t *hs, size_t n,
                         altar_status_t *pst, altar_error_t *err) {
  altar_py_t *py = python_of(be);
  if (!n) return ALTAR_OK;
  json_t *list = handles_json(hs, n, err);
  if (!list) return err && err->code ? err->code : altar_error_set(err, ALTAR_ENOMEM, "python %s: out of memory", op);
  json_t *reply = NULL;
  int rc = altar__py_call_within(py, op, json_pack("{s:s, s:o}", "op", op, "handles", list), limit_ms, &reply, err);
  if (rc) return rc;
  json_t *sts = json_object_get(reply, "statuses");
  if (!json_is_array(sts) || json_array_size(sts) != n) {
    char what[96];
    snprintf(what, sizeof what, "%zu statuses for %zu handles", json_is_array(sts) ? json_array_size(sts) : 0, n);
    rc = bad_reply(py, op, what, err);
  }
  for (size_t i = 0; !rc && i < n; i++) {
    char *text = json_dumps(json_array_get(sts, i), JSON_COMPACT);
    altar_status_t st;
    rc = text ? altar_status_result_from_json(text, strlen(text), &st, err)
              : altar_error_set(err, ALTAR_ENOMEM, "python %s: out of memory", op);
    free(text);
    if (rc) {
      altar_error_prefix(err, "python %s (%s): bad reply: statuses[%zu]", op, py->tag, i);
      err->retriable = true;
      break;
    }
    /* The status is for the handle asked about, whatever handle came back. */
    if (redact_failure(st.failure) || altar_status_init(&pst[i], &hs[i], st.state, st.failure))
      rc = altar_error_set(err, ALTAR_ENOMEM, "python %s: out of memory", op);
    else st.failure = NULL;
    altar_status_clear(&st);
  }
  json_decref(reply);
  return rc;
}

static int pb_poll(altar_backend_t *be, const altar_handle_t *hs, size_t n, altar_status_t *pst, altar_error_t *err) {
  return statuses_call(be, "poll", python_of(be)->reply_ms, hs, n, pst, err);
}

/* Forwarded only to an adapter that overrides it; its deadline is
 * await_timeout_ms, past which the wait is cancelled (retriable). */
static int pb_await(altar_backend_t *be, const altar_handle_t *hs, size_t n, altar_status_t *pst, altar_error_t *err) {
  altar_py_t *py = python_of(be);
  if (!py->has_await)
    return altar_error_set(err, ALTAR_ENOTSUP,
                           "backend '%s': await_completion is not supported by adapter %s; poll "
                           "instead",
                           altar_backend_name(be), py->adapter);
  return statuses_call(be, "await_completion", py->await_ms, hs, n, pst, err);
}

static int pb_cancel(altar_backend_t *be, const altar_handle_t *h, altar_error_t *err) {
  json_t *jh = from_codec(altar_handle_to_json(h, err));
  if (!jh) return err && err->code ? err->code : altar_error_set(err, ALTAR_ENOMEM, "python cancel: out of memory");
  json_t *reply = NULL;
  int rc = altar__py_call(python_of(be), "cancel", json_pack("{s:s, s:o}", "op", "cancel", "handle", jh), &reply, err);
  json_decref(reply);
  return rc;
}

static int pb_recover(altar_backend_t *be, const altar_status_t *fs, size_t n, const char *const *banned,
                      size_t n_banned, altar_handle_t **phs, size_t *pn, altar_error_t *err) {
  altar_py_t *py = python_of(be);
  json_t *list = json_array(), *ban = json_array();
  for (size_t i = 0; list && i < n; i++)
    json_array_append_new(list, from_codec(altar_status_result_to_json(&fs[i], err)));
  for (size_t i = 0; ban && i < n_banned; i++) json_array_append_new(ban, json_string(banned[i]));
  if (!list || !ban || json_array_size(list) != n || json_array_size(ban) != n_banned) {
    json_decref(list);
    json_decref(ban);
    return altar_error_set(err, ALTAR_ENOMEM, "python recover: out of memory");
  }
  json_t *reply = NULL;
  int rc = altar__py_call(py, "recover", json_pack("{s:s, s:o, s:o}", "op", "recover", "failures", list, "banned", ban),
                          &reply, err);
  if (rc) return rc;
  json_t *hl = json_object_get(reply, "handles");
  size_t m = json_is_array(hl) ? json_array_size(hl) : 0;
  if (!json_is_array(hl) || m > ALTAR_MAX_ARRAY) rc = bad_reply(py, "recover", "handles: want a list", err);
  altar_handle_t *out = !rc && m ? calloc(m, sizeof *out) : NULL;
  if (!rc && m && !out) rc = altar_error_set(err, ALTAR_ENOMEM, "python recover: out of memory");
  size_t k = 0;
  for (; !rc && k < m; k++) {
    altar_handle_t h;
    if ((rc = handle_from(py, "recover", json_array_get(hl, k), &h, err))) break;
    /* The backend's name on the handle is this backend's, as for submit. */
    rc = altar_handle_init(&out[k], altar_backend_name(be), h.external_id);
    if (!rc && h.labels.n) rc = altar_strmap_copy(&out[k].labels, &h.labels);
    if (!rc && h.plugin_identity && !(out[k].plugin_identity = calloc(1, sizeof *out[k].plugin_identity)))
      rc = ALTAR_ENOMEM;
    if (!rc && h.plugin_identity) rc = altar_strmap_copy(out[k].plugin_identity, h.plugin_identity);
    if (rc && !err->code) altar_error_set(err, rc, "python recover: out of memory");
    altar_handle_clear(&h);
  }
  json_decref(reply);
  if (rc) {
    altar_handles_free(out, m);
    return rc;
  }
  *phs = out;
  *pn = m;
  return ALTAR_OK;
}

/* ---- keys ---- */

/* slots is the worker's intake bound, read by the worker; data_root is
 * accepted for configs moved from another backend (the adapter's own
 * directories are its options). */
static const altar_plugin_key_t pb_keys[] = {
    {"adapter", "the adapter's name under the altar.execution_backends entry points"},
    {"python", "the interpreter that runs the bridge (default python3)"},
    {"options", "a mapping passed to the adapter's constructor"},
    {"reply_timeout_ms", "longest one call may take"},
    {"start_timeout_ms", "longest the bridge may take to start and open the adapter"},
    {"cancel_grace_ms", "how long a call past its deadline gets before the bridge is killed"},
    {"restart_backoff_ms", "first wait before the bridge is started again"},
    {"restart_backoff_max_ms", "longest wait before the bridge is started again"},
    {"max_reply_bytes", "largest reply read from the bridge"},
    {"await_timeout_ms", "longest await_completion may block"},
    {"data_root", "accepted (configs moved from another backend)"},
    {"slots", "the worker's intake bound"},
    ALTAR_PLUGIN_KEYS_END,
};

static int parse_positive(const char *key, const char *v, long *pout, altar_error_t *err) {
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (!*v || *end || errno || x <= 0)
    return altar_error_set(err, ALTAR_ECONFIG, "backend.%s: want a positive integer (got '%s')", key, v);
  *pout = x;
  return ALTAR_OK;
}

/* The backend's step of every bridge start: build the adapter and learn
 * what it declares (its verification may not change across restarts). */
static int backend_on_start(altar_py_t *py, altar_error_t *err) {
  json_error_t je;
  json_t *opts = json_loads(py->options_json ? py->options_json : "{}", JSON_REJECT_DUPLICATES, &je);
  json_t *req = json_pack("{s:s, s:s, s:O}", "op", "open", "adapter", py->adapter, "options", opts);
  json_t *opened = NULL;
  int rc = req ? altar__py_exchange(py, "open", req, py->start_ms, &opened, err)
               : altar_error_set(err, ALTAR_ENOMEM, "python bridge: out of memory");
  json_decref(req);
  json_decref(opts);
  if (rc) return rc;
  const char *v = json_string_value(json_object_get(opened, "verification"));
  const char *root = json_string_value(json_object_get(opened, "mount_root"));
  altar_verification_t want = v && !strcmp(v, "staging") ? ALTAR_VERIFY_STAGING
                              : v && !strcmp(v, "task")  ? ALTAR_VERIFY_TASK
                                                         : ALTAR_VERIFY_NONE;
  char *copy = strdup(root ? root : "");
  if (!copy) {
    rc = altar_error_set(err, ALTAR_ENOMEM, "python bridge: out of memory");
  } else if (want == ALTAR_VERIFY_NONE) {
    free(copy);
    rc = altar_error_set(err, ALTAR_ECONFIG,
                         "python adapter %s: input_digest_verification is %s; altar needs \"staging\" or \"task\"",
                         py->adapter, v ? v : "None");
  } else if (py->verification != ALTAR_VERIFY_NONE && want != py->verification) {
    free(copy);
    rc = altar_error_set(err, ALTAR_ECONFIG, "python adapter %s: input_digest_verification changed from %s to %s",
                         py->adapter, altar_verification_name(py->verification), v);
  } else {
    free(py->mount_root);
    py->mount_root = copy;
    py->verification = want;
    py->custom_resolve = json_is_true(json_object_get(opened, "custom_resolve"));
    py->has_await = json_is_true(json_object_get(opened, "await_completion"));
  }
  json_decref(opened);
  return rc;
}

altar_py_t *altar__py_new(const altar_strmap_t *cfg, altar_error_t *err) {
  const char *python = cfg ? altar_strmap_get(cfg, "python") : NULL;
  altar_py_t *py = altar__py_alloc(python, ALTAR_PY_MAX_REPLY_BYTES);
  if (!py) {
    altar_error_set(err, ALTAR_ENOMEM, "python backend: out of memory");
    return NULL;
  }
  py->on_start = backend_on_start;
  long max_reply = ALTAR_PY_MAX_REPLY_BYTES;
  int rc = ALTAR_OK;
  for (size_t i = 0; !rc && cfg && i < cfg->n; i++) {
    const char *key = cfg->keys[i], *v = cfg->vals[i];
    char **s = !strcmp(key, "adapter")   ? &py->adapter
               : !strcmp(key, "python")  ? &py->python
               : !strcmp(key, "options") ? &py->options_json
                                         : NULL;
    long *ms = !strcmp(key, "reply_timeout_ms")         ? &py->reply_ms
               : !strcmp(key, "start_timeout_ms")       ? &py->start_ms
               : !strcmp(key, "cancel_grace_ms")        ? &py->grace_ms
               : !strcmp(key, "restart_backoff_ms")     ? &py->backoff_min_ms
               : !strcmp(key, "restart_backoff_max_ms") ? &py->backoff_max_ms
               : !strcmp(key, "max_reply_bytes")        ? &max_reply
               : !strcmp(key, "await_timeout_ms")       ? &py->await_ms
                                                        : NULL;
    if (s) {
      free(*s);
      if (!(*s = strdup(v))) rc = altar_error_set(err, ALTAR_ENOMEM, "python backend: out of memory");
    } else if (ms) {
      rc = parse_positive(key, v, ms, err);
    }
  }
  if (!rc && (!py->adapter || !*py->adapter))
    rc = altar_error_set(err, ALTAR_ECONFIG,
                         "backend.adapter: name the adapter's entry point (altar.execution_backends)");
  if (!rc && py->options_json) {
    json_error_t je;
    json_t *o = json_loads(py->options_json, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(o))
      rc = altar_error_set(err, ALTAR_ECONFIG,
                           "backend.options: want a mapping (JSON object) of the adapter's keyword arguments");
    json_decref(o);
  }
  if (!rc && py->backoff_max_ms < py->backoff_min_ms) py->backoff_max_ms = py->backoff_min_ms;
  if (rc) {
    altar__py_free(py);
    return NULL;
  }
  py->pipe.max_reply = (size_t)max_reply;
  snprintf(py->tag, sizeof py->tag, "adapter %s", py->adapter);
  if ((rc = altar__py_start(py, err))) {
    altar__py_free(py);
    return NULL;
  }
  return py;
}

static int pb_open(altar_backend_t *be, const altar_strmap_t *cfg, altar_error_t *err) {
  altar_py_t *py = altar__py_new(cfg, err);
  if (!py) return err && err->code ? err->code : ALTAR_ECONFIG;
  altar_backend_set_impl(be, py);
  /* Declared by the adapter, learnt at its first start. */
  be->ops.input_digest_verification = py->verification;
  if (!py->has_await) altar_backend_drop_caps(be, ALTAR_BACKEND_CAP_AWAIT);
  return ALTAR_OK;
}

const altar_backend_ops_t altar_backend_python_ops = {
    .name = "python",
    /* What the bridge can forward; open drops await without an adapter's own. */
    .caps = ALTAR_BACKEND_CAP_CAPACITY | ALTAR_BACKEND_CAP_CANCEL | ALTAR_BACKEND_CAP_AWAIT | ALTAR_BACKEND_CAP_RECOVER,
    .config_keys = pb_keys,
    /* Replaced at open by what the adapter declares. */
    .input_digest_verification = ALTAR_VERIFY_STAGING,
    .open = pb_open,
    .close = pb_close,
    .capacity = pb_capacity,
    .stage_inputs = pb_stage,
    .collect_outputs = pb_collect,
    .mount_root = pb_mount_root,
    .resolve_path = pb_resolve,
    .submit = pb_submit,
    .poll = pb_poll,
    .await_completion = pb_await,
    .cancel = pb_cancel,
    .recover = pb_recover,
};
