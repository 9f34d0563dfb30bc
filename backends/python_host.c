/* The python backend's bridge process: start and greeting, opening the
 * adapter, one call at a time with its deadline, and restart with backoff.
 *
 * Nothing the adapter or the bridge does may end the worker: an exception
 * is an error reply; a bridge that dies, hangs past its deadline and grace,
 * writes a line that is not a reply or a reply larger than the bound is
 * stopped, the call in flight fails as retriable, and the next call starts
 * a new bridge once the backoff has passed. */
#include "python_int.h"

#include "altar/log_tail.h"

#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* The adapter's own words, with secret-looking environment values replaced. */
static void set_redacted(altar_error_t *err, int code, bool retriable, const char *text) {
  char *clean = altar_redact_env(text, (const char *const *)environ);
  const char *s = clean ? clean : "(out of memory)";
  if (retriable) altar_error_set_retriable(err, code, "%s", s);
  else altar_error_set(err, code, "%s", s);
  free(clean);
}

/* The altar error an exception stands for: altar's own error classes keep
 * their code (the host sends the name); everything else is the backend's
 * trouble, worth a retry. */
static int code_for(const char *name) {
  static const struct {
    const char *name;
    int code;
  } known[] = {{"EINVAL", ALTAR_EINVAL},    {"EPATH", ALTAR_EPATH},         {"EINTEGRITY", ALTAR_EINTEGRITY},
               {"ENOTSUP", ALTAR_ENOTSUP},  {"ENOTFOUND", ALTAR_ENOTFOUND}, {"ECONFIG", ALTAR_ECONFIG},
               {"ETIMEOUT", ALTAR_ETIMEOUT}};
  for (size_t i = 0; name && i < sizeof known / sizeof known[0]; i++)
    if (!strcmp(name, known[i].name)) return known[i].code;
  return ALTAR_EBACKEND;
}

/* A failed reply as an error: "python <op>: <Type>: <message>" then the
 * last lines of the traceback, all within the message's bound. */
static int reply_error(altar_py_t *py, const json_t *reply, const char *op, altar_error_t *err) {
  const char *kind = json_string_value(json_object_get(reply, "kind"));
  const char *msg = json_string_value(json_object_get(reply, "error"));
  const char *type = json_string_value(json_object_get(reply, "type"));
  const char *trace = json_string_value(json_object_get(reply, "trace"));
  int code = kind && !strcmp(kind, "config")      ? ALTAR_ECONFIG
             : kind && !strcmp(kind, "cancelled") ? ALTAR_ETIMEOUT
             : kind && !strcmp(kind, "raised")    ? code_for(json_string_value(json_object_get(reply, "code")))
                                                  : ALTAR_EBACKEND;
  char text[ALTAR_ERRMSG_MAX];
  snprintf(text, sizeof text, "python %s (%s): %s%s%s%s%s", op, py->tag, type ? type : "", type ? ": " : "",
           msg ? msg : "no message", trace && *trace ? "\n" : "", trace ? trace : "");
  bool deterministic = code == ALTAR_EINVAL || code == ALTAR_EPATH || code == ALTAR_EINTEGRITY || code == ALTAR_ECONFIG;
  set_redacted(err, code, !deterministic, text);
  return code;
}

static void note_death(altar_py_t *py, const altar_error_t *why) {
  altar__pipe_stop(&py->pipe);
  int64_t backoff = py->backoff_min_ms;
  for (unsigned i = 0; i < py->failures && backoff < py->backoff_max_ms; i++) backoff *= 2;
  if (backoff > py->backoff_max_ms) backoff = py->backoff_max_ms;
  py->failures++;
  py->next_start_ms = altar_mono_ms() + backoff;
  snprintf(py->last_death, sizeof py->last_death, "%s", why && why->msg[0] ? why->msg : "stopped");
}

/* Reads one reply within limit_ms as a JSON object; stops the bridge on
 * anything else (it is out of step with us then). */
static int read_reply(altar_py_t *py, const char *op, long limit_ms, json_t **preply, altar_error_t *err) {
  *preply = NULL;
  char *line = NULL;
  int rc = altar__pipe_read_line(&py->pipe, limit_ms, &line, err);
  if (rc == ALTAR_ETIMEOUT) {
    /* SIGINT cancels the adapter's coroutine; the host answers "cancelled". */
    char *late = altar__pipe_interrupt(&py->pipe, py->grace_ms);
    json_t *r = late ? json_loads(late, 0, NULL) : NULL;
    free(late);
    if (json_is_true(json_object_get(r, "ok"))) { /* it finished after all */
      *preply = r;
      return ALTAR_OK;
    }
    json_decref(r);
    if (!altar__pipe_running(&py->pipe)) {
      altar_error_set_retriable(err, ALTAR_ETIMEOUT, "python %s (%s): no reply within %ld ms; bridge killed", op,
                                py->tag, limit_ms);
      note_death(py, err);
    } else {
      altar_error_set_retriable(err, ALTAR_ETIMEOUT, "python %s (%s): no reply within %ld ms; cancelled", op, py->tag,
                                limit_ms);
    }
    return ALTAR_ETIMEOUT;
  }
  if (rc) {
    altar_error_prefix(err, "python %s (%s)", op, py->tag);
    err->retriable = true;
    note_death(py, err);
    return rc;
  }
  json_error_t je;
  json_t *reply = json_loads(line, JSON_REJECT_DUPLICATES, &je);
  free(line);
  if (!json_is_object(reply) || !json_is_boolean(json_object_get(reply, "ok"))) {
    json_decref(reply);
    altar_error_set_retriable(err, ALTAR_EDECODE, "python %s (%s): the bridge wrote a line that is not a reply%s%s", op,
                              py->tag, reply ? "" : ": ", reply ? "" : je.text);
    note_death(py, err);
    return ALTAR_EDECODE;
  }
  *preply = reply;
  return ALTAR_OK;
}

/* One exchange on a running bridge. */
static int exchange(altar_py_t *py, const char *op, json_t *req, long limit_ms, json_t **preply, altar_error_t *err) {
  *preply = NULL;
  char *text = json_dumps(req, JSON_COMPACT);
  if (!text) return altar_error_set(err, ALTAR_ENOMEM, "python %s: out of memory", op);
  int rc = altar__pipe_send(&py->pipe, text, err);
  free(text);
  if (rc) {
    altar_error_prefix(err, "python %s (%s)", op, py->tag);
    note_death(py, err);
    return rc;
  }
  json_t *reply = NULL;
  if ((rc = read_reply(py, op, limit_ms, &reply, err))) return rc;
  py->failures = 0; /* it answered: the next death starts the backoff afresh */
  if (!json_is_true(json_object_get(reply, "ok"))) {
    rc = reply_error(py, reply, op, err);
    json_decref(reply);
    return rc;
  }
  *preply = reply;
  return ALTAR_OK;
}

/* The libaltar the host's `import altar` should load: this one. From the
 * shared object this code runs in, else beside the binary (a build tree)
 * or in ../lib (an install). Empty when none is found: the package then
 * asks the dynamic linker. */
static void own_library(char *out, size_t sz) {
  out[0] = '\0';
  Dl_info info;
  char path[PATH_MAX], exe[PATH_MAX];
  bool have_exe = realpath("/proc/self/exe", exe) != NULL;
  if (dladdr((void *)own_library, &info) && info.dli_fname && realpath(info.dli_fname, path) &&
      (!have_exe || strcmp(path, exe))) {
    snprintf(out, sz, "%s", path);
    return;
  }
  if (!have_exe) return;
  static const char *const rel[] = {"libaltar.so.0", "libaltar.so", "../lib/libaltar.so.0", "../lib64/libaltar.so.0",
                                    "../lib/x86_64-linux-gnu/libaltar.so.0"};
  char *dir = dirname(exe);
  for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
    char cand[PATH_MAX + 64];
    snprintf(cand, sizeof cand, "%s/%s", dir, rel[i]);
    if (access(cand, R_OK) == 0 && realpath(cand, path)) {
      snprintf(out, sz, "%s", path);
      return;
    }
  }
}

/* This environment, plus ALTAR_LIBRARY when it is unset and a library was
 * found; *pvar holds the added entry (free both with free()). */
static char **host_environ(char **pvar) {
  *pvar = NULL;
  char lib[PATH_MAX];
  if (getenv("ALTAR_LIBRARY") || (own_library(lib, sizeof lib), !lib[0])) return NULL;
  size_t n = 0;
  while (environ[n]) n++;
  char **env = calloc(n + 2, sizeof *env);
  size_t len = strlen("ALTAR_LIBRARY=") + strlen(lib) + 1;
  char *var = malloc(len);
  if (!env || !var) {
    free(env);
    free(var);
    return NULL;
  }
  snprintf(var, len, "ALTAR_LIBRARY=%s", lib);
  memcpy(env, environ, n * sizeof *env);
  env[n] = var;
  *pvar = var;
  return env;
}

/* Spawns the host, reads its greeting and opens what it hosts (on_start). */
static int start(altar_py_t *py, altar_error_t *err) {
  char *argv[] = {py->python, "-u", "-m", "altar.execution.bridge", NULL};
  char *var;
  char **env = host_environ(&var);
  int rc = altar__pipe_spawn(&py->pipe, argv, env, err);
  free(env);
  free(var);
  if (rc) return rc;
  py->starts++;
  json_t *hello = NULL;
  rc = read_reply(py, "start", py->start_ms, &hello, err);
  if (rc == ALTAR_EBACKEND)
    altar_error_set(err, ALTAR_ECONFIG,
                    "python bridge: %s exited before it was ready (is altar's Python package installed there? see "
                    "its stderr)",
                    py->python);
  if (!rc && !json_is_true(json_object_get(hello, "ok"))) rc = reply_error(py, hello, "start", err);
  if (!rc) {
    json_int_t proto = json_integer_value(json_object_get(hello, "protocol"));
    if (proto != ALTAR_PY_PROTOCOL)
      rc = altar_error_set(err, ALTAR_ECONFIG,
                           "python bridge: speaks protocol %lld, this altar %d (install the altar "
                           "package of this version into %s)",
                           (long long)proto, ALTAR_PY_PROTOCOL, py->python);
  }
  json_decref(hello);
  if (!rc && py->on_start) rc = py->on_start(py, err);
  if (rc) altar__pipe_stop(&py->pipe);
  return rc;
}

int altar__py_call(altar_py_t *py, const char *op, json_t *req, json_t **preply, altar_error_t *err) {
  return altar__py_call_within(py, op, req, py->reply_ms, preply, err);
}

int altar__py_call_within(altar_py_t *py, const char *op, json_t *req, long limit_ms, json_t **preply,
                          altar_error_t *err) {
  *preply = NULL;
  if (!req) return altar_error_set(err, ALTAR_ENOMEM, "python %s: out of memory", op);
  int rc = ALTAR_OK;
  if (!altar__pipe_running(&py->pipe)) {
    int64_t now = altar_mono_ms();
    if (now < py->next_start_ms) {
      rc = altar_error_set_retriable(err, ALTAR_EBACKEND, "python %s (%s): bridge restarting in %lld ms after: %.100s",
                                     op, py->tag, (long long)(py->next_start_ms - now), py->last_death);
    } else if ((rc = start(py, err))) {
      err->retriable = true;                                         /* it may come back: the worker keeps running */
      if (altar_mono_ms() >= py->next_start_ms) note_death(py, err); /* not yet counted */
    }
  }
  if (!rc) rc = exchange(py, op, req, limit_ms, preply, err);
  json_decref(req);
  return rc;
}

void altar__py_free(altar_py_t *py) {
  if (!py) return;
  altar__pipe_free(&py->pipe);
  free(py->python);
  free(py->adapter);
  free(py->options_json);
  free(py->mount_root);
  free(py);
}

int altar__py_start(altar_py_t *py, altar_error_t *err) { return start(py, err); }

int altar__py_exchange(altar_py_t *py, const char *op, json_t *req, long limit_ms, json_t **preply,
                       altar_error_t *err) {
  return exchange(py, op, req, limit_ms, preply, err);
}

altar_py_t *altar__py_alloc(const char *python, size_t max_reply) {
  altar_py_t *py = calloc(1, sizeof *py);
  if (!py) return NULL;
  py->reply_ms = ALTAR_PY_REPLY_TIMEOUT_MS;
  py->await_ms = ALTAR_PY_AWAIT_TIMEOUT_MS;
  py->start_ms = ALTAR_PY_START_TIMEOUT_MS;
  py->grace_ms = ALTAR_PY_CANCEL_GRACE_MS;
  py->backoff_min_ms = ALTAR_PY_BACKOFF_MIN_MS;
  py->backoff_max_ms = ALTAR_PY_BACKOFF_MAX_MS;
  snprintf(py->tag, sizeof py->tag, "python");
  if (!(py->python = strdup(python ? python : "python3"))) {
    free(py);
    return NULL;
  }
  altar__pipe_init(&py->pipe, "python bridge", max_reply ? max_reply : ALTAR_PY_MAX_REPLY_BYTES);
  return py;
}
