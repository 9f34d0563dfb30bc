/* Loading plug-in shared objects (altar/plugin.h): dlopen, the ABI check,
 * the entry point, and registration through the host so every name a
 * plug-in brings lands in this process's registries. */
#include "altar/plugin.h"
#include "altar/plugin/host.h"

#include "altar/registry.h"
#include "altar/version.h"
#include "core/transport_int.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Files loaded and the names each registered, so a clash can say who holds
 * the name. Fixed tables: a process loads a handful of plug-ins. */
#define LOADED_MAX 64
#define OWNED_MAX (ALTAR_REGISTRY_MAX * ALTAR_REGISTRY_KINDS)

static char loaded[LOADED_MAX][PATH_MAX];
static size_t n_loaded;

static struct {
  altar_registry_kind_t kind;
  char name[ALTAR_REGISTRY_NAME_MAX + 1];
  size_t file; /* index into loaded */
} owned[OWNED_MAX];
static size_t n_owned;

/* One load in progress: its file, its slot in loaded, its first failure. */
typedef struct load_state {
  const char *file;
  size_t slot;
  size_t first_owned;
  int rc;
  altar_error_t err;
} load_state_t;

size_t altar_plugin_count(void) { return n_loaded; }

static const char *holder_of(altar_registry_kind_t kind, const char *name) {
  for (size_t i = 0; i < n_owned; i++)
    if (owned[i].kind == kind && !strcmp(owned[i].name, name)) return loaded[owned[i].file];
  return NULL;
}

/* A refused registration: kept as the load's first failure, so the load
 * fails even if the plug-in ignores the return code. */
static int host_refuse(const altar_plugin_host_t *host, int rc, const altar_error_t *e, altar_error_t *err) {
  load_state_t *ls = host->loader;
  if (ls->rc == ALTAR_OK) {
    ls->rc = rc;
    ls->err = *e;
  }
  if (err) *err = *e;
  return rc;
}

/* Registers ptr under name for the plug-in being loaded; the first failure
 * is kept so the load fails even if the plug-in ignores the return code. */
static int host_register(const altar_plugin_host_t *host, altar_registry_kind_t kind, const char *name, const void *ptr,
                         const char *missing, altar_error_t *err) {
  load_state_t *ls = host->loader;
  const char *what = altar_registry_kind_name(kind);
  int rc = ALTAR_OK;
  altar_error_t e = {0};
  if (missing) {
    rc = altar_error_set(&e, ALTAR_EINVAL, "%s '%s' lacks the required operation '%s'", what, name ? name : "(null)",
                         missing);
  } else if (n_owned >= OWNED_MAX) {
    rc = altar_error_set(&e, ALTAR_ETOOBIG, "too many names registered by plug-ins");
  } else if (altar_registry_lookup(kind, name)) {
    const char *by = holder_of(kind, name);
    rc = altar_error_set(&e, ALTAR_EEXIST, "%s '%s' is already registered by %s%s", what, name,
                         by ? "plug-in " : "altar itself (a built-in)", by ? by : "");
  } else {
    rc = altar_registry_register(kind, name, ptr, &e);
  }
  if (rc == ALTAR_OK) {
    owned[n_owned].kind = kind;
    snprintf(owned[n_owned].name, sizeof owned[n_owned].name, "%s", name);
    owned[n_owned].file = ls->slot;
    n_owned++;
    return ALTAR_OK;
  }
  return host_refuse(host, rc, &e, err);
}

static const char *backend_missing(const altar_backend_ops_t *ops) {
  if (!ops) return "(the vtable)";
  if (!ops->name || !ops->name[0]) return "name";
  if (ops->input_digest_verification != ALTAR_VERIFY_STAGING && ops->input_digest_verification != ALTAR_VERIFY_TASK)
    return "input_digest_verification (staging or task)";
  if (!ops->open) return "open";
  if (!ops->close) return "close";
  if (!ops->submit) return "submit";
  if (!ops->poll) return "poll";
  return NULL;
}

static int reg_backend_alias(const altar_plugin_host_t *host, const char *alias, const altar_backend_ops_t *ops,
                             altar_error_t *err) {
  const char *missing = backend_missing(ops);
  altar_error_t e = {0};
  /* Capability bits that disagree with the operations: refused at load, not at first open. */
  int rc = missing ? ALTAR_OK : altar_backend_check_table(ops, &e);
  if (rc) return host_refuse(host, rc, &e, err);
  return host_register(host, ALTAR_REGISTRY_BACKEND, alias, ops, missing, err);
}

static int reg_backend(const altar_plugin_host_t *host, const altar_backend_ops_t *ops, altar_error_t *err) {
  return reg_backend_alias(host, ops ? ops->name : NULL, ops, err);
}

static int reg_storage(const altar_plugin_host_t *host, const altar_storage_ops_t *ops, altar_error_t *err) {
  const char *missing = !ops               ? "(the vtable)"
                        : !ops->name       ? "name"
                        : !ops->read_bytes ? "read_bytes"
                        : !ops->exists     ? "exists"
                                           : NULL;
  return host_register(host, ALTAR_REGISTRY_STORAGE, ops ? ops->name : NULL, ops, missing, err);
}

static int reg_transport(const altar_plugin_host_t *host, const altar_transport_ops_t *ops, altar_error_t *err) {
  return host_register(host, ALTAR_REGISTRY_TRANSPORT, ops ? ops->name : NULL, ops, altar__transport_missing(ops), err);
}

/* Undoes what a failed plug-in registered, so nothing points into it. */
static void forget_from(size_t first) {
  for (size_t i = first; i < n_owned; i++) altar_registry_unregister(owned[i].kind, owned[i].name);
  n_owned = first;
}

#define FAIL(code, ...)                                                                                                \
  do {                                                                                                                 \
    rc = altar_error_set(err, code, __VA_ARGS__);                                                                      \
    goto fail;                                                                                                         \
  } while (0)

int altar_plugin_load(const char *path, const char *where, altar_error_t *err) {
  const char *at = where ? where : "";
  const char *sep = where ? ": " : "";
  if (!path || !*path) return altar_error_set(err, ALTAR_EINVAL, "%s%splug-in: empty path", at, sep);
  char real[PATH_MAX];
  struct stat st;
  if (!realpath(path, real) || stat(real, &st) < 0)
    return altar_error_set(err, ALTAR_ENOTFOUND, "%s%splug-in %s: %s", at, sep, path, strerror(errno));
  if (!S_ISREG(st.st_mode))
    return altar_error_set(err, ALTAR_EINVAL, "%s%splug-in %s: not a regular file", at, sep, path);
  for (size_t i = 0; i < n_loaded; i++)
    if (!strcmp(loaded[i], real)) return ALTAR_OK;
  if (n_loaded >= LOADED_MAX)
    return altar_error_set(err, ALTAR_ETOOBIG, "%s%splug-in %s: too many plug-ins (at most %d)", at, sep, path,
                           LOADED_MAX);

  int rc = ALTAR_OK;
  dlerror();
  /* RTLD_LOCAL: one plug-in's symbols never satisfy another's. */
  void *dl = dlopen(real, RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    const char *why = dlerror();
    return altar_error_set(err, ALTAR_EINVAL, "%s%splug-in %s: cannot be loaded: %s", at, sep, path,
                           why ? why : "unknown dlopen error");
  }
  const unsigned *abi = dlsym(dl, ALTAR_PLUGIN_ABI_SYMBOL);
  if (!abi)
    FAIL(ALTAR_EINVAL,
         "%s%splug-in %s: no %s symbol: not an altar plug-in, or not built with "
         "ALTAR_PLUGIN_DECLARE_ABI()",
         at, sep, path, ALTAR_PLUGIN_ABI_SYMBOL);
  if (*abi != ALTAR_PLUGIN_ABI)
    FAIL(ALTAR_EINVAL,
         "%s%splug-in %s: built for plug-in ABI %u, this altar (%s) has ABI %u: rebuild "
         "it against this altar's headers",
         at, sep, path, *abi, altar_version(), ALTAR_PLUGIN_ABI);
  altar_plugin_init_fn init;
  /* POSIX's sanctioned way from dlsym's void * to a function pointer. */
  *(void **)&init = dlsym(dl, ALTAR_PLUGIN_ENTRY_SYMBOL);
  if (!init) FAIL(ALTAR_EINVAL, "%s%splug-in %s: no entry point %s", at, sep, path, ALTAR_PLUGIN_ENTRY_SYMBOL);

  size_t slot = n_loaded;
  snprintf(loaded[slot], sizeof loaded[slot], "%s", real);
  load_state_t ls = {.file = real, .slot = slot, .first_owned = n_owned};
  altar_plugin_host_t host = {
      .abi = ALTAR_PLUGIN_ABI,
      .version = altar_version(),
      .path = real,
      .register_backend = reg_backend,
      .register_backend_alias = reg_backend_alias,
      .register_storage = reg_storage,
      .register_transport = reg_transport,
      .loader = &ls,
  };
  altar_error_t e = {0};
  int irc = init(&host, &e);
  if (ls.rc < 0) {
    forget_from(ls.first_owned);
    FAIL(ls.rc, "%s%splug-in %s: %s", at, sep, path, ls.err.msg);
  }
  if (irc < 0) {
    forget_from(ls.first_owned);
    FAIL(irc, "%s%splug-in %s: %s failed: %s", at, sep, path, ALTAR_PLUGIN_ENTRY_SYMBOL,
         e.msg[0] ? e.msg : altar_strerror(irc));
  }
  n_loaded++;
  return ALTAR_OK;
fail:
  dlclose(dl);
  return rc;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Every *.so in dir, in name order. */
static int load_dir(const char *dir, const char *where, altar_error_t *err) {
  DIR *d = opendir(dir);
  if (!d) return altar_error_set(err, ALTAR_ENOTFOUND, "%s: %s: %s", where, dir, strerror(errno));
  char *names[LOADED_MAX];
  size_t n = 0;
  int rc = ALTAR_OK;
  for (struct dirent *de; (de = readdir(d));) {
    size_t len = strlen(de->d_name);
    if (len < 4 || strcmp(de->d_name + len - 3, ".so")) continue;
    if (n >= LOADED_MAX) {
      rc = altar_error_set(err, ALTAR_ETOOBIG, "%s: %s: more than %d plug-ins", where, dir, LOADED_MAX);
      break;
    }
    if (!(names[n] = strdup(de->d_name))) {
      rc = altar_error_set(err, ALTAR_ENOMEM, "out of memory");
      break;
    }
    n++;
  }
  closedir(d);
  qsort(names, n, sizeof names[0], by_name);
  for (size_t i = 0; i < n && rc == ALTAR_OK; i++) {
    char file[PATH_MAX];
    if ((size_t)snprintf(file, sizeof file, "%s/%s", dir, names[i]) >= sizeof file)
      rc = altar_error_set(err, ALTAR_ETOOBIG, "%s: %s/%s: path too long", where, dir, names[i]);
    else rc = altar_plugin_load(file, where, err);
  }
  for (size_t i = 0; i < n; i++) free(names[i]);
  return rc;
}

int altar_plugin_load_path(const char *list, const char *where, altar_error_t *err) {
  if (!list) return ALTAR_OK;
  if (!where) where = ALTAR_PLUGIN_PATH_ENV;
  for (const char *p = list; *p;) {
    const char *end = strchr(p, ':');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len >= PATH_MAX) return altar_error_set(err, ALTAR_ETOOBIG, "%s: an entry is too long", where);
    if (len) {
      char entry[PATH_MAX];
      memcpy(entry, p, len);
      entry[len] = '\0';
      struct stat st;
      int rc = stat(entry, &st) == 0 && S_ISDIR(st.st_mode) ? load_dir(entry, where, err)
                                                            : altar_plugin_load(entry, where, err);
      if (rc < 0) return rc;
    }
    p += len;
    if (*p == ':') p++;
  }
  return ALTAR_OK;
}

int altar_plugin_load_config(const altar_config_t *cfg, altar_error_t *err) {
  for (size_t i = 0; i < cfg->n_plugins; i++) {
    char where[PATH_MAX + 64];
    snprintf(where, sizeof where, "%s:%zu: plugins[%zu]", cfg->path ? cfg->path : "(config)", cfg->plugin_lines[i], i);
    int rc = altar_plugin_load(cfg->plugins[i], where, err);
    if (rc < 0) return rc;
  }
  return ALTAR_OK;
}
