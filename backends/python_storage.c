/* Python storage adapters: every Storage subclass registered under the
 * altar.storage entry points of a Python environment, served by URI scheme
 * (storage.python.schemes in altar.yaml) wherever altar reads a URI.
 *
 * Each configured scheme is an entry of the storage registry whose
 * operations are requests to one bridge process per altar process
 * (backends/python_host.c, the same host, protocol, deadlines, bounds and
 * restart with backoff as the python backend's). Bytes never cross the
 * protocol: a read asks the bridge to write the file into a temp file this
 * side made, a write hands it the path of one; every reply is a small JSON
 * object checked like a message from the log. One call at a time (a mutex),
 * so a storage handle may be used from any thread. */
#include "python_int.h"
#include "core/storage_int.h"

#include "altar/file_read.h"
#include "altar/registry.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Default deadline of one call: a call moves a whole file. */
#define PS_REPLY_TIMEOUT_MS 300000L
/* A restart backoff up to this long is waited out by the next call. */
#define PS_WAIT_BACKOFF_MS 1000
/* The largest file read_bytes holds in memory. */
#define PS_MAX_READ (1024u * 1024u * 1024u)

typedef struct ps_scheme {
  altar_storage_ops_t ops; /* registered under scheme */
  char *scheme, *adapter, *options_json;
  size_t line;
} ps_scheme_t;

static struct {
  pthread_mutex_t mu;
  char *json, *file; /* as configured: a second identical configure is a no-op */
  altar_py_t *py;
  ps_scheme_t schemes[ALTAR_REGISTRY_MAX];
  size_t n;
  size_t n_open;            /* handles open: the configuration cannot change under them */
  size_t line, python_line; /* of storage.python and of its python: key (0: not given) */
  bool scheme_error;        /* the last on_start failed opening a scheme (its message says where) */
} G = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* ---- the bridge's start: open every scheme's adapter ---- */

static int ps_on_start(altar_py_t *py, altar_error_t *err) {
  (void)py;
  G.scheme_error = false;
  char tag[sizeof G.py->tag]; /* the call that started the bridge names its own scheme again after */
  memcpy(tag, G.py->tag, sizeof tag);
  for (size_t i = 0; i < G.n; i++) {
    ps_scheme_t *sc = &G.schemes[i];
    json_error_t je;
    json_t *opts = json_loads(sc->options_json ? sc->options_json : "{}", JSON_REJECT_DUPLICATES, &je);
    json_t *req = json_pack("{s:s, s:s, s:s, s:O}", "op", "st_open", "scheme", sc->scheme, "adapter", sc->adapter,
                            "options", opts);
    json_decref(opts);
    snprintf(G.py->tag, sizeof G.py->tag, "%s: adapter %s", sc->scheme, sc->adapter);
    json_t *reply = NULL;
    int rc = req ? altar__py_exchange(G.py, "storage open", req, G.py->start_ms, &reply, err)
                 : altar_error_set(err, ALTAR_ENOMEM, "python storage: out of memory");
    json_decref(req);
    json_decref(reply);
    if (rc) {
      G.scheme_error = true;
      if (G.file && sc->line)
        altar_error_prefix(err, "%s:%zu: storage.python.schemes.%s", G.file, sc->line, sc->scheme);
      else altar_error_prefix(err, "storage.python.schemes.%s", sc->scheme);
      memcpy(G.py->tag, tag, sizeof tag);
      return rc;
    }
  }
  memcpy(G.py->tag, tag, sizeof tag);
  return ALTAR_OK;
}

/* ---- one call ---- */

static ps_scheme_t *SC(altar_storage_t *s) { return altar_storage_impl(s); }

/* A request {op, scheme, path, [key: value]}; NULL with err set when a
 * path is not UTF-8 (JSON cannot carry it). */
static json_t *request(const ps_scheme_t *sc, const char *op, const char *path, const char *key, const char *value,
                       altar_error_t *err) {
  json_t *jp = json_string(path);
  json_t *jv = key ? json_string(value) : NULL;
  if (!jp || (key && !jv)) {
    json_decref(jp);
    json_decref(jv);
    altar_error_set(err, ALTAR_EINVAL, "storage '%s': %.300s: not UTF-8 text", sc->scheme, jp ? value : path);
    return NULL;
  }
  json_t *req = json_pack("{s:s, s:s, s:o}", "op", op, "scheme", sc->scheme, "path", jp); /* jp stolen */
  if (req && key && json_object_set_new(req, key, jv)) {                                  /* jv stolen */
    json_decref(req);
    req = NULL;
  } else if (!req) {
    json_decref(jv);
  }
  if (!req) altar_error_set(err, ALTAR_ENOMEM, "python storage: out of memory");
  return req;
}

/* Refuses what no adapter of sc's should see: an empty path, or a URI of
 * another scheme (a plain path is the adapter's to read). */
static int check_path(const ps_scheme_t *sc, const char *path, altar_error_t *err) {
  if (!path || !*path) return altar_error_set(err, ALTAR_EINVAL, "storage '%s': path must not be empty", sc->scheme);
  const char *colon = strstr(path, "://");
  size_t n = strlen(sc->scheme);
  if (colon && ((size_t)(colon - path) != n || strncasecmp(path, sc->scheme, n)))
    return altar_error_set(err, ALTAR_EINVAL, "storage '%s': '%.300s' is not a %s:// URI", sc->scheme, path,
                           sc->scheme);
  return ALTAR_OK;
}

/* Sends req (consumed) for scheme sc; the successful reply in *preply. */
static int call(const ps_scheme_t *sc, const char *op, json_t *req, json_t **preply, altar_error_t *err) {
  *preply = NULL;
  if (!req) return err && err->code ? err->code : ALTAR_ENOMEM;
  pthread_mutex_lock(&G.mu);
  int rc;
  if (!G.py) {
    json_decref(req);
    rc = altar_error_set(err, ALTAR_ENOTFOUND, "storage '%s': storage.python is no longer configured", sc->scheme);
  } else {
    /* A staging should not fail because the call before it killed the
     * bridge a moment ago: a short backoff is waited out; a long one (a
     * bridge dying again and again) fails the call at once. */
    int64_t wait = altar__pipe_running(&G.py->pipe) ? 0 : G.py->next_start_ms - altar_mono_ms();
    if (wait > 0 && wait <= PS_WAIT_BACKOFF_MS) {
      struct timespec ts = {(time_t)(wait / 1000), (long)(wait % 1000) * 1000000L};
      nanosleep(&ts, NULL);
    }
    snprintf(G.py->tag, sizeof G.py->tag, "%s: adapter %s", sc->scheme, sc->adapter);
    rc = altar__py_call(G.py, op, req, preply, err);
  }
  pthread_mutex_unlock(&G.mu);
  /* The adapter's own trouble is a storage error, worth a retry. */
  if (rc == ALTAR_EBACKEND) {
    rc = ALTAR_ESTORAGE;
    if (err) err->code = rc;
  }
  return rc;
}

static int bad_reply(const ps_scheme_t *sc, const char *op, const char *what, altar_error_t *err) {
  return altar_error_set_retriable(err, ALTAR_EDECODE, "python %s (%s: adapter %s): bad reply: %s", op, sc->scheme,
                                   sc->adapter, what);
}

/* Asks the bridge to write the stored file at path into the local file
 * dest (read_bytes, or as_local_file when local), and checks the size it
 * reports against the file's. */
static int fetch_into(const ps_scheme_t *sc, const char *path, const char *dest, bool local, altar_error_t *err) {
  int bad = check_path(sc, path, err);
  if (bad) return bad;
  const char *op = local ? "storage as_local_file" : "storage read_bytes";
  json_t *reply = NULL;
  int rc = call(sc, op, request(sc, local ? "st_fetch" : "st_read", path, "dest", dest, err), &reply, err);
  if (rc) return rc;
  json_t *size = json_object_get(reply, "size");
  struct stat st;
  if (!json_is_integer(size) || json_integer_value(size) < 0) rc = bad_reply(sc, op, "size: want an integer >= 0", err);
  else if (stat(dest, &st) != 0 || (json_int_t)st.st_size != json_integer_value(size))
    rc = bad_reply(sc, op, "the file written does not have the size reported", err);
  json_decref(reply);
  return rc;
}

/* ---- operations ---- */

static int ps_open(altar_storage_t *s, const altar_strmap_t *cfg, altar_error_t *err) {
  if (cfg && cfg->n)
    return altar_error_set(err, ALTAR_EINVAL,
                           "option '%s': a Python storage adapter takes its options from storage.python.schemes",
                           cfg->keys[0]);
  ps_scheme_t *sc = NULL;
  pthread_mutex_lock(&G.mu);
  for (size_t i = 0; i < G.n && !sc; i++)
    if (s->table == &G.schemes[i].ops) sc = &G.schemes[i];
  if (sc) G.n_open++;
  pthread_mutex_unlock(&G.mu);
  if (!sc) return altar_error_set(err, ALTAR_ENOTFOUND, "storage.python no longer serves this scheme");
  altar_storage_set_impl(s, sc);
  return ALTAR_OK;
}

static void ps_close(altar_storage_t *s) {
  if (!SC(s)) return;
  pthread_mutex_lock(&G.mu);
  G.n_open--;
  pthread_mutex_unlock(&G.mu);
}

static int ps_read_bytes(altar_storage_t *s, const char *path, altar_buf_t *out, altar_error_t *err) {
  altar_local_file_t lf = {0};
  int fd = -1;
  int rc = check_path(SC(s), path, err);
  if (!rc) rc = altar__storage_mktemp(path, &lf, &fd, err);
  if (rc) return rc;
  close(fd);
  rc = fetch_into(SC(s), path, lf.path, false, err);
  if (!rc) {
    size_t len = 0;
    char *data = altar_file_read(lf.path, path, PS_MAX_READ, &len, err);
    if (!data) rc = err && err->code ? err->code : ALTAR_EIO;
    else if (altar_buf_append(out, data, len)) rc = altar_error_set(err, ALTAR_ENOMEM, "%.300s: out of memory", path);
    free(data);
  }
  altar_local_file_release(&lf);
  return rc;
}

static int ps_as_local_file(altar_storage_t *s, const char *path, altar_local_file_t *out, altar_error_t *err) {
  out->path = NULL;
  out->release = NULL;
  int fd = -1;
  int rc = check_path(SC(s), path, err);
  if (!rc) rc = altar__storage_mktemp(path, out, &fd, err);
  if (rc) return rc;
  close(fd);
  if ((rc = fetch_into(SC(s), path, out->path, true, err))) altar_local_file_release(out);
  return rc;
}

static int ps_exists(altar_storage_t *s, const char *path, bool *pexists, altar_error_t *err) {
  const ps_scheme_t *sc = SC(s);
  int bad = check_path(sc, path, err);
  if (bad) return bad;
  json_t *reply = NULL;
  int rc = call(sc, "storage exists", request(sc, "st_exists", path, NULL, NULL, err), &reply, err);
  if (rc) return rc;
  json_t *v = json_object_get(reply, "exists");
  if (!json_is_boolean(v)) rc = bad_reply(sc, "storage exists", "exists: want true or false", err);
  else *pexists = json_is_true(v);
  json_decref(reply);
  return rc;
}

/* Sends a local file: st_write (the adapter's write_bytes) or st_upload. */
static int send_file(const ps_scheme_t *sc, const char *op, const char *wire, const char *local, const char *dest,
                     altar_error_t *err) {
  int bad = check_path(sc, dest, err);
  if (bad) return bad;
  char abs[PATH_MAX];
  const char *src = local[0] == '/' || !realpath(local, abs) ? local : abs; /* the bridge's cwd may differ */
  json_t *reply = NULL;
  int rc = call(sc, op, request(sc, wire, dest, "src", src, err), &reply, err);
  json_decref(reply);
  return rc;
}

static int ps_write_bytes(altar_storage_t *s, const char *path, const void *data, size_t len, altar_error_t *err) {
  altar_local_file_t lf = {0};
  int fd = -1;
  int rc = check_path(SC(s), path, err);
  if (!rc) rc = altar__storage_mktemp(path, &lf, &fd, err);
  if (rc) return rc;
  for (size_t off = 0; !rc && off < len;) {
    ssize_t w = write(fd, (const char *)data + off, len - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) rc = altar_error_set(err, ALTAR_EIO, "%s: write failed: %s", lf.path, strerror(errno));
    else off += (size_t)w;
  }
  if (close(fd) != 0 && !rc) rc = altar_error_set(err, ALTAR_EIO, "%s: close failed", lf.path);
  if (!rc) rc = send_file(SC(s), "storage write_bytes", "st_write", lf.path, path, err);
  altar_local_file_release(&lf);
  return rc;
}

static int ps_upload(altar_storage_t *s, const char *local_path, const char *dest_path, altar_error_t *err) {
  return send_file(SC(s), "storage upload", "st_upload", local_path, dest_path, err);
}

static int ps_mkdirs(altar_storage_t *s, const char *path, altar_error_t *err) {
  const ps_scheme_t *sc = SC(s);
  int bad = check_path(sc, path, err);
  if (bad) return bad;
  json_t *reply = NULL;
  int rc = call(sc, "storage mkdirs", request(sc, "st_mkdirs", path, NULL, NULL, err), &reply, err);
  json_decref(reply);
  return rc;
}

static const altar_storage_ops_t ps_template = {
    .caps = ALTAR_STORAGE_CAP_READ | ALTAR_STORAGE_CAP_WRITE,
    .open = ps_open,
    .close = ps_close,
    .read_bytes = ps_read_bytes,
    .exists = ps_exists,
    .write_bytes = ps_write_bytes,
    .mkdirs = ps_mkdirs,
    .upload = ps_upload,
    .as_local_file = ps_as_local_file,
};

/* ---- configuration ---- */

static void teardown(void) {
  for (size_t i = 0; i < G.n; i++) {
    ps_scheme_t *sc = &G.schemes[i];
    if (sc->ops.name) altar_registry_unregister(ALTAR_REGISTRY_STORAGE, sc->ops.name); /* set once registered */
    free(sc->scheme);
    free(sc->adapter);
    free(sc->options_json);
    memset(sc, 0, sizeof *sc);
  }
  G.n = 0;
  altar__py_free(G.py);
  G.py = NULL;
  free(G.json);
  free(G.file);
  G.json = G.file = NULL;
  G.line = G.python_line = 0;
  G.scheme_error = false;
}

static long ms_key(const json_t *cfg, const char *key, long def) {
  json_t *v = json_object_get(cfg, key);
  return json_is_integer(v) && json_integer_value(v) > 0 ? (long)json_integer_value(v) : def;
}

/* Builds G from the configuration (G is empty). */
static int build(const char *json_text, const char *file, altar_error_t *err) {
  const char *where = file ? file : "storage.python";
  json_error_t je;
  json_t *cfg = json_loads(json_text, JSON_REJECT_DUPLICATES, &je);
  json_t *schemes = json_object_get(cfg, "schemes");
  int rc = ALTAR_OK;
  if (!json_is_object(cfg) || !json_is_array(schemes) || json_array_size(schemes) > ALTAR_REGISTRY_MAX) {
    json_decref(cfg);
    return altar_error_set(err, ALTAR_ECONFIG, "%s: storage.python: not a configuration this altar wrote", where);
  }
  const char *python = json_string_value(json_object_get(cfg, "python"));
  json_int_t max_reply = json_integer_value(json_object_get(cfg, "max_reply_bytes"));
  G.py = altar__py_alloc(python, max_reply > 0 ? (size_t)max_reply : ALTAR_PY_MAX_REPLY_BYTES);
  G.json = strdup(json_text);
  G.file = file ? strdup(file) : NULL;
  G.line = (size_t)json_integer_value(json_object_get(cfg, "line"));
  G.python_line = (size_t)json_integer_value(json_object_get(cfg, "python_line"));
  if (!G.py || !G.json || (file && !G.file)) rc = altar_error_set(err, ALTAR_ENOMEM, "python storage: out of memory");
  if (!rc) {
    G.py->reply_ms = ms_key(cfg, "reply_timeout_ms", PS_REPLY_TIMEOUT_MS);
    G.py->start_ms = ms_key(cfg, "start_timeout_ms", ALTAR_PY_START_TIMEOUT_MS);
    G.py->grace_ms = ms_key(cfg, "cancel_grace_ms", ALTAR_PY_CANCEL_GRACE_MS);
    G.py->backoff_min_ms = ms_key(cfg, "restart_backoff_ms", ALTAR_PY_BACKOFF_MIN_MS);
    G.py->backoff_max_ms = ms_key(cfg, "restart_backoff_max_ms", ALTAR_PY_BACKOFF_MAX_MS);
    if (G.py->backoff_max_ms < G.py->backoff_min_ms) G.py->backoff_max_ms = G.py->backoff_min_ms;
    G.py->on_start = ps_on_start;
    snprintf(G.py->tag, sizeof G.py->tag, "storage");
  }
  for (size_t i = 0; !rc && i < json_array_size(schemes); i++) {
    json_t *e = json_array_get(schemes, i);
    const char *scheme = json_string_value(json_object_get(e, "scheme"));
    const char *adapter = json_string_value(json_object_get(e, "adapter"));
    json_t *opts = json_object_get(e, "options");
    size_t line = (size_t)json_integer_value(json_object_get(e, "line"));
    if (!scheme || !adapter) {
      rc = altar_error_set(err, ALTAR_ECONFIG, "%s: storage.python.schemes: not a configuration this altar wrote",
                           where);
      break;
    }
    const void *taken = altar_registry_lookup(ALTAR_REGISTRY_STORAGE, scheme);
    if (taken) {
      rc = altar_error_set(err, ALTAR_ECONFIG,
                           "%s:%zu: storage.python.schemes.%s: %s:// is served by the '%s' adapter "
                           "already (altar's own or a plug-in's); pick another scheme",
                           where, line, scheme, scheme, ((const altar_storage_ops_t *)taken)->name);
      break;
    }
    ps_scheme_t *sc = &G.schemes[G.n];
    sc->ops = ps_template;
    sc->line = line;
    sc->scheme = strdup(scheme);
    sc->adapter = strdup(adapter);
    sc->options_json = json_is_object(opts) ? json_dumps(opts, JSON_COMPACT) : strdup("{}");
    G.n++;
    if (!sc->scheme || !sc->adapter || !sc->options_json) {
      rc = altar_error_set(err, ALTAR_ENOMEM, "python storage: out of memory");
      break;
    }
    sc->ops.name = sc->scheme;
    if ((rc = altar_registry_register(ALTAR_REGISTRY_STORAGE, scheme, &sc->ops, err))) {
      altar_error_prefix(err, "%s:%zu: storage.python.schemes.%s", where, line, scheme);
      free(sc->scheme); /* not registered: teardown must not unregister another's */
      sc->scheme = NULL;
      sc->ops.name = NULL;
      G.n--;
      free(sc->adapter);
      free(sc->options_json);
      memset(sc, 0, sizeof *sc);
      break;
    }
  }
  json_decref(cfg);
  return rc;
}

int altar_storage_python_configure(const char *json_text, const char *file, altar_error_t *err) {
  pthread_mutex_lock(&G.mu);
  int rc = ALTAR_OK;
  bool same = json_text && G.json && !strcmp(json_text, G.json) &&
              ((!file && !G.file) || (file && G.file && !strcmp(file, G.file)));
  if (same) {
    /* nothing changed (a config read twice) */
  } else if (G.n_open) {
    rc = altar_error_set(err, ALTAR_ESTATE, "storage.python: cannot change while %zu storage handles are open",
                         G.n_open);
  } else {
    teardown();
    if (json_text && (rc = build(json_text, file, err))) teardown();
  }
  pthread_mutex_unlock(&G.mu);
  return rc;
}

int altar_storage_python_start(altar_error_t *err) {
  pthread_mutex_lock(&G.mu);
  int rc = ALTAR_OK;
  if (G.py && !altar__pipe_running(&G.py->pipe)) {
    G.scheme_error = false;
    rc = altar__py_start(G.py, err);
    /* A scheme's failure names its line already; any other is the interpreter's. */
    if (rc && !G.scheme_error && G.python_line)
      altar_error_prefix(err, "%s:%zu: storage.python.python", G.file ? G.file : "config", G.python_line);
    else if (rc && !G.scheme_error)
      altar_error_prefix(err, "%s:%zu: storage.python (python: python3 on PATH)", G.file ? G.file : "config", G.line);
  }
  pthread_mutex_unlock(&G.mu);
  return rc;
}

long long altar__storage_python_starts(void) {
  pthread_mutex_lock(&G.mu);
  long long n = G.py ? (long long)G.py->starts : 0;
  pthread_mutex_unlock(&G.mu);
  return n;
}
