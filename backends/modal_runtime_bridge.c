/* The real ModalRuntime: tools/modal_bridge.py (python3 + the official
 * `modal` SDK) as a child process, one JSON request per line on its stdin,
 * one JSON reply per line on its stdout. A socketpair rather than pipes, so
 * a write to a bridge that died fails with an error instead of SIGPIPE.
 *
 * Deadlines: a reply that is late gets the bridge a SIGINT first, which
 * cancels the SDK call in flight so the SDK's own clean-up runs (a sandbox
 * created but not yet scheduled is terminated, not orphaned); only a bridge
 * that then stays silent is killed. */
#include "altar/modal.h"
#include "bridge_pipe.h"

#include <dlfcn.h>
#include <errno.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Set by CMakeLists.txt for this file: the bridge relative to the installed
 * binary's directory (and, in the installed libraries, to the library's),
 * and the build tree whose binaries may use the source tree's copy. The
 * installed libraries are built without the build and source paths. */
#ifndef ALTAR_BRIDGE_FROM_BINDIR
#define ALTAR_BRIDGE_FROM_BINDIR "../share/altar/modal_bridge.py"
#endif
#ifndef ALTAR_BRIDGE_FROM_LIBDIR
#define ALTAR_BRIDGE_FROM_LIBDIR ALTAR_BRIDGE_FROM_BINDIR
#endif

#define MAX_REPLY (16u << 20)
#define DEFAULT_REPLY_MS 600000L
/* How long a bridge sent SIGINT has to answer "cancelled" (the SDK makes a
 * terminate call on the way out) before it is killed. */
#define CANCEL_GRACE_MS 30000L

typedef struct bridge {
  char *python;
  char *script;
  long reply_ms, run_ms;
  altar__pipe_t pipe;
} bridge_t;

static void bridge_stop(bridge_t *b) { altar__pipe_stop(&b->pipe); }

/* The error a failed reply stands for. */
static int reply_error(const json_t *reply, const char *op, altar_error_t *err) {
  const char *kind = json_string_value(json_object_get(reply, "kind"));
  const char *msg = json_string_value(json_object_get(reply, "error"));
  if (!msg) msg = "no message";
  if (kind && !strcmp(kind, "not_found")) return altar_error_set(err, ALTAR_ENOTFOUND, "modal %s: %s", op, msg);
  if (kind && !strcmp(kind, "invalid")) return altar_error_set(err, ALTAR_EINVAL, "modal %s: %s", op, msg);
  if (kind && !strcmp(kind, "sdk_missing")) return altar_error_set(err, ALTAR_ECONFIG, "modal %s: %s", op, msg);
  return altar_error_set(err, ALTAR_EBACKEND, "modal %s: %s", op, msg);
}

static int bridge_start(bridge_t *b, altar_error_t *err) {
  char *argv[] = {b->python, "-u", b->script, NULL};
  int rc = altar__pipe_spawn(&b->pipe, argv, NULL, err);
  if (rc) return rc;
  /* The bridge says hello once the SDK imported, or why it could not. */
  char *line = NULL;
  rc = altar__pipe_read_line(&b->pipe, b->reply_ms, &line, err);
  if (rc == ALTAR_EBACKEND)
    rc = altar_error_set(err, ALTAR_ECONFIG, "modal bridge: %s %s exited before it was ready (see stderr)", b->python,
                         b->script);
  json_t *hello = rc ? NULL : json_loads(line, 0, NULL);
  free(line);
  if (!rc && !json_is_true(json_object_get(hello, "ok")))
    rc = hello ? reply_error(hello, "start", err)
               : altar_error_set(err, ALTAR_EDECODE, "modal bridge: greeting is not JSON");
  json_decref(hello);
  if (rc) bridge_stop(b);
  return rc;
}

/* After a missed deadline: SIGINT cancels the bridge's SDK call; its
 * answer (normally "cancelled") keeps the bridge in step. A bridge that
 * stays silent is killed. Returns the line or NULL. */
static char *cancel_in_flight(bridge_t *b) { return altar__pipe_interrupt(&b->pipe, CANCEL_GRACE_MS); }

/* Sends req (consumed) and returns the successful reply in *preply; the
 * reply is awaited for limit_ms. */
static int call(bridge_t *b, json_t *req, const char *op, long limit_ms, json_t **preply, altar_error_t *err) {
  *preply = NULL;
  int rc = ALTAR_OK;
  if (!req) return altar_error_set(err, ALTAR_ENOMEM, "modal %s: out of memory", op);
  if (!altar__pipe_running(&b->pipe)) rc = bridge_start(b, err);
  char *text = rc ? NULL : json_dumps(req, JSON_COMPACT);
  json_decref(req);
  if (rc) return rc;
  if (!text) return altar_error_set(err, ALTAR_ENOMEM, "modal %s: out of memory", op);
  rc = altar__pipe_send(&b->pipe, text, err);
  free(text);
  char *line = NULL;
  if (!rc) rc = altar__pipe_read_line(&b->pipe, limit_ms, &line, err);
  if (rc == ALTAR_ETIMEOUT) {
    char *late = cancel_in_flight(b);
    json_t *r = late ? json_loads(late, 0, NULL) : NULL;
    free(late);
    if (json_is_true(json_object_get(r, "ok"))) { /* it finished after all */
      *preply = r;
      return ALTAR_OK;
    }
    const char *kind = json_string_value(json_object_get(r, "kind"));
    if (kind && !strcmp(kind, "cancelled"))
      altar_error_prefix(err, "modal %s: cancelled in the SDK after its deadline", op);
    else if (!r) altar_error_prefix(err, "modal %s: bridge killed after its deadline", op);
    json_decref(r);
    return rc;
  }
  if (rc) {
    bridge_stop(b); /* out of step with it now: the next call starts afresh */
    return rc;
  }
  json_error_t je;
  /* NUL is allowed: a sandbox's output may hold one (json_string_length). */
  json_t *reply = json_loads(line, JSON_ALLOW_NUL, &je);
  free(line);
  if (!reply) {
    bridge_stop(b);
    return altar_error_set(err, ALTAR_EDECODE, "modal %s: reply is not JSON (%s)", op, je.text);
  }
  if (!json_is_true(json_object_get(reply, "ok"))) {
    rc = reply_error(reply, op, err);
    json_decref(reply);
    return rc;
  }
  *preply = reply;
  return ALTAR_OK;
}

static int b_run(void *impl, const altar_modal_sandbox_req_t *r, char **pid, altar_error_t *err) {
  json_t *cmd = json_array(), *tags = json_object();
  for (size_t i = 0; cmd && i < r->n_command; i++) json_array_append_new(cmd, json_string(r->command[i]));
  for (size_t i = 0; tags && r->tags && i < r->tags->n; i++)
    json_object_set_new(tags, r->tags->keys[i], json_string(r->tags->vals[i]));
  json_t *req =
      json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:I, s:o, s:o}", "op", "run_sandbox", "app_name", r->app_name,
                "volume_name", r->volume_name, "mount_root", r->mount_root, "image", r->image, "command", cmd, "gpu",
                r->gpu ? json_string(r->gpu) : json_null(), "memory_mb",
                r->memory_mb.set ? json_integer(r->memory_mb.v) : json_null(), "timeout_s", (json_int_t)r->timeout_s,
                "tags", tags, "task_key", r->task_key ? json_string(r->task_key) : json_null());
  json_t *reply = NULL;
  bridge_t *b = impl;
  int rc = call(b, req, "run_sandbox", b->run_ms, &reply, err);
  if (rc) return rc;
  const char *id = json_string_value(json_object_get(reply, "sandbox_id"));
  *pid = id ? strdup(id) : NULL;
  json_decref(reply);
  return *pid ? ALTAR_OK : altar_error_set(err, ALTAR_EDECODE, "modal run_sandbox: reply without sandbox_id");
}

static int b_poll(void *impl, const char *id, bool *pdone, int *pcode, altar_error_t *err) {
  bridge_t *b = impl;
  json_t *reply = NULL;
  int rc = call(b, json_pack("{s:s, s:s}", "op", "poll_sandbox", "sandbox_id", id), "poll_sandbox", b->reply_ms, &reply,
                err);
  if (rc) return rc;
  json_t *code = json_object_get(reply, "exit_code");
  *pdone = json_is_integer(code);
  *pcode = *pdone ? (int)json_integer_value(code) : 0;
  json_decref(reply);
  return ALTAR_OK;
}

static int b_oom(void *impl, const char *id, bool *poom, altar_error_t *err) {
  bridge_t *b = impl;
  json_t *reply = NULL;
  *poom = false;
  int rc = call(b, json_pack("{s:s, s:s}", "op", "sandbox_oom_killed", "sandbox_id", id), "sandbox_oom_killed",
                b->reply_ms, &reply, err);
  if (rc) return rc;
  *poom = json_is_true(json_object_get(reply, "oom_killed"));
  json_decref(reply);
  return ALTAR_OK;
}

static int b_upload(void *impl, const char *vol, const char *local, const char *remote, altar_error_t *err) {
  bridge_t *b = impl;
  json_t *reply = NULL;
  int rc = call(
      b,
      json_pack("{s:s, s:s, s:s, s:s}", "op", "upload", "volume_name", vol, "local_path", local, "remote_path", remote),
      "upload", b->reply_ms, &reply, err);
  json_decref(reply);
  return rc;
}

static int b_download(void *impl, const char *vol, const char *remote, const char *local, altar_error_t *err) {
  bridge_t *b = impl;
  json_t *reply = NULL;
  int rc = call(b,
                json_pack("{s:s, s:s, s:s, s:s}", "op", "download", "volume_name", vol, "remote_path", remote,
                          "local_path", local),
                "download", b->reply_ms, &reply, err);
  json_decref(reply);
  return rc;
}

static int b_terminate(void *impl, const char *id, altar_error_t *err) {
  bridge_t *b = impl;
  json_t *reply = NULL;
  int rc = call(b, json_pack("{s:s, s:s}", "op", "terminate_sandbox", "sandbox_id", id), "terminate_sandbox",
                b->reply_ms, &reply, err);
  json_decref(reply);
  return rc;
}

/* A malloc'd copy of the string member key of reply (NUL bytes kept). */
static char *string_copy(const json_t *reply, const char *key, size_t *plen) {
  const json_t *v = json_object_get(reply, key);
  size_t n = json_is_string(v) ? json_string_length(v) : 0;
  char *s = malloc(n + 1);
  if (!s) return NULL;
  if (n) memcpy(s, json_string_value(v), n);
  s[n] = '\0';
  *plen = n;
  return s;
}

static int b_output(void *impl, const char *id, size_t max_bytes, char **perr, size_t *perr_len, char **pout,
                    size_t *pout_len, altar_error_t *err) {
  bridge_t *b = impl;
  json_t *reply = NULL;
  *perr = *pout = NULL;
  *perr_len = *pout_len = 0;
  int rc = call(
      b, json_pack("{s:s, s:s, s:I}", "op", "sandbox_output", "sandbox_id", id, "max_bytes", (json_int_t)max_bytes),
      "sandbox_output", b->reply_ms, &reply, err);
  if (rc) return rc;
  *perr = string_copy(reply, "stderr", perr_len);
  *pout = string_copy(reply, "stdout", pout_len);
  json_decref(reply);
  if (*perr && *pout) return ALTAR_OK;
  free(*perr);
  free(*pout);
  *perr = *pout = NULL;
  return altar_error_set(err, ALTAR_ENOMEM, "modal sandbox_output: out of memory");
}

static void b_destroy(void *impl) {
  bridge_t *b = impl;
  if (!b) return;
  altar__pipe_free(&b->pipe);
  free(b->python);
  free(b->script);
  free(b);
}

static const altar_modal_runtime_ops_t bridge_ops = {
    .name = "modal-bridge",
    .run_sandbox = b_run,
    .poll_sandbox = b_poll,
    .upload = b_upload,
    .download = b_download,
    .terminate_sandbox = b_terminate,
    .read_output = b_output,
    .oom_killed = b_oom,
    .destroy = b_destroy,
};

/* realpath(dir of the running binary); false when /proc is not there. */
static bool binary_dir(char *out, size_t sz) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return false;
  exe[n] = '\0';
  snprintf(out, sz, "%s", dirname(exe));
  return true;
}

/* The dir of the shared object this code was loaded from (libaltar.so when
 * altar is embedded); false when it is the main program (glibc then names
 * argv[0], which binary_dir reads more reliably). */
static bool library_dir(char *out, size_t sz) {
  Dl_info info;
  char path[PATH_MAX], exe[PATH_MAX];
  if (!dladdr((void *)library_dir, &info) || !info.dli_fname || !strchr(info.dli_fname, '/')) return false;
  if (!realpath(info.dli_fname, path)) return false;
  if (realpath("/proc/self/exe", exe) && !strcmp(path, exe)) return false;
  snprintf(out, sz, "%s", dirname(path));
  return true;
}

#ifdef ALTAR_SOURCE_BRIDGE
/* Whether dir is the build tree (or below it). */
static bool in_build_tree(const char *dir) {
#ifdef ALTAR_BUILD_DIR
  char build[PATH_MAX];
  if (!realpath(ALTAR_BUILD_DIR, build)) return false;
  size_t n = strlen(build);
  return !strncmp(dir, build, n) && (dir[n] == '\0' || dir[n] == '/');
#else
  (void)dir;
  return false;
#endif
}
#endif

int altar_modal_bridge_find(const char *bridge, char *out, size_t sz, altar_error_t *err) {
  if (!bridge || !*bridge) bridge = getenv("ALTAR_MODAL_BRIDGE");
  if (bridge && *bridge) {
    if (access(bridge, R_OK) == 0) return snprintf(out, sz, "%s", bridge), ALTAR_OK;
    return altar_error_set(err, ALTAR_ECONFIG, "modal bridge: %s: %s (from bridge or $ALTAR_MODAL_BRIDGE)", bridge,
                           strerror(errno));
  }
  char dir[PATH_MAX] = "", installed[PATH_MAX + 64] = "(no /proc/self/exe)";
  if (library_dir(dir, sizeof dir)) {
    snprintf(installed, sizeof installed, "%s/%s", dir, ALTAR_BRIDGE_FROM_LIBDIR);
    if (access(installed, R_OK) == 0) return snprintf(out, sz, "%s", installed), ALTAR_OK;
  }
  if (binary_dir(dir, sizeof dir)) {
    snprintf(installed, sizeof installed, "%s/%s", dir, ALTAR_BRIDGE_FROM_BINDIR);
    if (access(installed, R_OK) == 0) return snprintf(out, sz, "%s", installed), ALTAR_OK;
  }
#ifdef ALTAR_SOURCE_BRIDGE
  if (*dir && in_build_tree(dir) && access(ALTAR_SOURCE_BRIDGE, R_OK) == 0)
    return snprintf(out, sz, "%s", ALTAR_SOURCE_BRIDGE), ALTAR_OK;
#endif
  return altar_error_set(err, ALTAR_ECONFIG,
                         "modal bridge: not found at %s (installed with altar); set the backend's bridge key or "
                         "$ALTAR_MODAL_BRIDGE",
                         installed);
}

altar_modal_runtime_t *altar_modal_bridge_runtime_new(const altar_modal_bridge_config_t *cfg, altar_error_t *err) {
  altar_modal_bridge_config_t none = {0};
  if (!cfg) cfg = &none;
  char script[PATH_MAX + 64];
  if (altar_modal_bridge_find(cfg->bridge, script, sizeof script, err)) return NULL;
  bridge_t *b = calloc(1, sizeof *b);
  if (b) {
    altar__pipe_init(&b->pipe, "modal bridge", MAX_REPLY);
    b->reply_ms = cfg->reply_timeout_ms > 0 ? cfg->reply_timeout_ms : DEFAULT_REPLY_MS;
    b->run_ms = cfg->run_timeout_ms > 0 ? cfg->run_timeout_ms : b->reply_ms + ALTAR_MODAL_SCHEDULE_WAIT_MS;
    b->python = strdup(cfg->python && *cfg->python ? cfg->python : "python3");
    b->script = strdup(script);
  }
  altar_modal_runtime_t *rt = b && b->python && b->script ? altar_modal_runtime_new(&bridge_ops, b) : NULL;
  if (!rt) {
    b_destroy(b);
    altar_error_set(err, ALTAR_ENOMEM, "modal bridge: out of memory");
  }
  return rt;
}
