/* The docker backend: configuration, construction, the vtable, capacity,
 * resource checks and the path resolver. Submit/cancel live in docker_run.c,
 * poll in docker_poll.c, inspect parsing in docker_inspect.c, staging in
 * docker_staging.c. */
#include "backends/docker_int.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define DOCKER_DEFAULT_DATA_ROOT "./var/data"
#define DOCKER_DEFAULT_SLOTS 4
#define DOCKER_DEFAULT_CMD_TIMEOUT_S 120.0
#define DOCKER_MAX_SLOTS 100000

/* The keys docker_new reads (the config reader refuses others). */
static const altar_plugin_key_t docker_keys[] = {
    {"data_root", "host directory bind-mounted as the task's mount root (default ./var/data)"},
    {"slots", "containers at once (default 4)"},
    {"user", "docker run --user (name or uid, optionally :group)"},
    {"docker", "the docker client to run (default docker)"},
    {"storage", "adapter for inputs and outputs: auto (by uri scheme) or an adapter name"},
    {"command_timeout_s", "longest one docker command may take, in seconds (default 120)"},
    {"trust_records", "trust verification records of staged inputs instead of hashing again (default true)"},
    {"logs_keep", "bytes of kept task output under data_root/logs (default 1 GiB)"},
    {"logs_keep_count", "task output directories kept (default 10000)"},
    {"logs_keep_days", "days task output is kept (default 14; 0: no age bound)"},
    {"logs_keep_s", "seconds task output is kept, for tests and soaks (overrides logs_keep_days)"},
    ALTAR_PLUGIN_KEYS_END,
};

bool altar__docker_valid_id(const char *s) {
  if (!s) return false;
  size_t n = strlen(s);
  if (n == 0 || n > 64) return false;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
  return true;
}

void altar__docker_last_line(const char *text, char *buf, size_t cap) {
  if (!cap) return;
  buf[0] = '\0';
  if (!text) return;
  /* The last non-empty line: docker prints its reason there, but for a hint
   * on usage ("See 'docker run --help'.", "Run 'docker run --help' for more
   * information") after it, which says nothing of the cause. */
  const char *best = NULL;
  size_t best_len = 0;
  const char *p = text;
  while (*p) {
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    const char *s = p;
    size_t l = len;
    while (l && (*s == ' ' || *s == '\t' || *s == '\r')) s++, l--;
    while (l && (s[l - 1] == ' ' || s[l - 1] == '\t' || s[l - 1] == '\r')) l--;
    bool hint = l > 6 && (!strncmp(s, "See '", 5) || !strncmp(s, "Run '", 5)) && memmem(s, l, "--help'", 7);
    if (l && !hint) {
      best = s;
      best_len = l;
    }
    if (!e) break;
    p = e + 1;
  }
  if (!best) return;
  if (best_len >= cap) best_len = cap - 1;
  memcpy(buf, best, best_len);
  buf[best_len] = '\0';
  /* Printable ASCII only: the text came from another program. */
  for (size_t i = 0; i < best_len; i++)
    if ((unsigned char)buf[i] < 0x20 || (unsigned char)buf[i] > 0x7e) buf[i] = '?';
}

#define DOCKER_MAX_ARGS 8192

int altar__docker_cli(altar_docker_t *dk, const char *const *args, altar_cmd_result_t *pres, altar_error_t *err) {
  size_t n = 0;
  while (args[n]) n++;
  if (n + 2 > DOCKER_MAX_ARGS) {
    memset(pres, 0, sizeof *pres);
    return altar_error_set(err, ALTAR_ETOOBIG, "docker: %zu arguments exceed the bound", n);
  }
  const char **argv = malloc((n + 2) * sizeof *argv);
  if (!argv) {
    memset(pres, 0, sizeof *pres);
    return altar_error_set(err, ALTAR_ENOMEM, "docker: argv");
  }
  argv[0] = dk->docker_bin;
  for (size_t i = 0; i < n; i++) argv[i + 1] = args[i];
  argv[n + 1] = NULL;
  altar_cmd_opts_t opts = {.timeout_s = dk->command_timeout_s, .max_output = 0};
  int rc = altar_command_run(dk->runner, argv, &opts, pres, err);
  free(argv);
  if (rc == ALTAR_ENOTFOUND)
    return altar_error_set(err, ALTAR_EBACKEND,
                           "docker: cannot run the client '%s' (install docker.io; see "
                           "scripts/services/dockerd.sh)",
                           dk->docker_bin);
  if (rc == ALTAR_ETIMEOUT) {
    if (err) err->retriable = true;
    altar_error_prefix(err, "docker %s", args[0] ? args[0] : "");
    return ALTAR_ETIMEOUT;
  }
  return rc;
}

/* ---- configuration ------------------------------------------------------ */

static int parse_i64(const char *key, const char *s, int64_t min, int64_t max, int64_t *pv, altar_error_t *err) {
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < min || v > max) {
    altar_error_set(err, ALTAR_ECONFIG, "backend 'local' (docker): %s: want an integer in [%lld, %lld], got '%.64s'",
                    key, (long long)min, (long long)max, s);
    return -1;
  }
  *pv = v;
  return 0;
}

static int parse_bool(const char *key, const char *s, bool *pv, altar_error_t *err) {
  if (!strcmp(s, "true") || !strcmp(s, "1") || !strcmp(s, "yes")) *pv = true;
  else if (!strcmp(s, "false") || !strcmp(s, "0") || !strcmp(s, "no")) *pv = false;
  else {
    altar_error_set(err, ALTAR_ECONFIG, "backend 'local' (docker): %s: want true or false, got '%.64s'", key, s);
    return -1;
  }
  return 0;
}

static int mkdir_p(const char *path) {
  char buf[PATH_MAX];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof buf) return -1;
  memcpy(buf, path, n + 1);
  for (size_t i = 1; i < n; i++) {
    if (buf[i] != '/') continue;
    buf[i] = '\0';
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
    buf[i] = '/';
  }
  if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
  return 0;
}

static void docker_free(altar_docker_t *dk) {
  if (!dk) return;
  altar__log_retention_clear(&dk->retention);
  free(dk->data_root);
  free(dk->user);
  free(dk->docker_bin);
  free(dk->storage_name);
  free(dk);
}

static altar_docker_t *docker_new(const altar_strmap_t *cfg, const altar_command_runner_t *runner, altar_error_t *err) {
  /* Also here: a caller with its own runner comes through wrap, not open. */
  if (altar_plugin_keys_check(docker_keys, "backend", "docker", cfg, err)) return NULL;
  const char *v;
  altar_docker_t *dk = calloc(1, sizeof *dk);
  if (!dk) goto nomem;
  dk->runner = runner ? runner : altar_command_runner_default();
  dk->slots = DOCKER_DEFAULT_SLOTS;
  dk->command_timeout_s = DOCKER_DEFAULT_CMD_TIMEOUT_S;
  dk->trust_records = true;

  if (cfg && (v = altar_strmap_get(cfg, "slots")) && parse_i64("slots", v, 0, DOCKER_MAX_SLOTS, &dk->slots, err) < 0)
    goto fail;
  if (cfg && (v = altar_strmap_get(cfg, "command_timeout_s"))) {
    int64_t t = 0;
    if (parse_i64("command_timeout_s", v, 1, 86400, &t, err) < 0) goto fail;
    dk->command_timeout_s = (double)t;
  }
  if (!altar__log_retention_parse(cfg, &dk->retention, err)) goto fail;
  if (cfg && (v = altar_strmap_get(cfg, "trust_records")) &&
      parse_bool("trust_records", v, &dk->trust_records, err) < 0)
    goto fail;

  v = cfg ? altar_strmap_get(cfg, "user") : NULL;
  if (v && v[0]) {
    /* A --user value: name or uid, optionally :group; nothing that could be
     * read as another option. */
    if (v[0] == '-' || strlen(v) > 256 || strpbrk(v, " \t\n=")) {
      altar_error_set(err, ALTAR_ECONFIG, "backend 'local' (docker): user: invalid value '%.64s'", v);
      goto fail;
    }
    if (!(dk->user = strdup(v))) goto nomem;
  }

  v = cfg ? altar_strmap_get(cfg, "docker") : NULL;
  if (!(dk->docker_bin = strdup(v && v[0] ? v : "docker"))) goto nomem;
  v = cfg ? altar_strmap_get(cfg, "storage") : NULL;
  if (v && v[0] && !(dk->storage_name = strdup(v))) goto nomem;

  v = cfg ? altar_strmap_get(cfg, "data_root") : NULL;
  if (!v || !v[0]) v = DOCKER_DEFAULT_DATA_ROOT;
  if (strlen(v) >= PATH_MAX || strpbrk(v, ":,\n")) {
    altar_error_set(err, ALTAR_ECONFIG,
                    "backend 'local' (docker): data_root: '%.128s' cannot be bind-mounted (no ':' or ',')", v);
    goto fail;
  }
  if (mkdir_p(v) != 0) {
    altar_error_set(err, ALTAR_ECONFIG, "backend 'local' (docker): data_root: cannot create '%.128s': %s", v,
                    strerror(errno));
    goto fail;
  }
  /* docker -v needs an absolute host path. */
  char abs[PATH_MAX];
  if (!realpath(v, abs)) {
    altar_error_set(err, ALTAR_ECONFIG, "backend 'local' (docker): data_root: '%.128s': %s", v, strerror(errno));
    goto fail;
  }
  if (strpbrk(abs, ":,\n")) {
    altar_error_set(err, ALTAR_ECONFIG,
                    "backend 'local' (docker): data_root: '%.128s' cannot be bind-mounted (no ':' or ',')", abs);
    goto fail;
  }
  if (!(dk->data_root = strdup(abs))) goto nomem;
  altar__docker_logs_prune_if_due(dk);
  return dk;

nomem:
  altar_error_set(err, ALTAR_ENOMEM, "backend 'local' (docker): out of memory");
fail:
  docker_free(dk);
  return NULL;
}

/* ops.open: the impl from docker_new, its message as the error. */
static int docker_open(altar_backend_t *be, const altar_strmap_t *cfg, altar_error_t *err) {
  void *impl = docker_new(cfg, NULL, err);
  if (!impl) return err->code;
  altar_backend_set_impl(be, impl);
  return 0;
}

static void docker_close(altar_backend_t *be) {
  docker_free(altar_backend_impl(be));
  altar_backend_set_impl(be, NULL);
}

altar_backend_t *altar__docker_backend_open(const altar_strmap_t *cfg, const altar_command_runner_t *runner,
                                            altar_error_t *err) {
  altar_docker_t *dk = docker_new(cfg, runner, err);
  if (!dk) return NULL;
  return altar_backend_wrap(&altar_backend_docker_ops, dk, err);
}

/* ---- small operations --------------------------------------------------- */

static int docker_capacity(altar_backend_t *be, altar_capacity_t *pcap, altar_error_t *err) {
  /* A local host has one CPU pool and no GPU pools. */
  int rc = altar_capacity_set(pcap, ALTAR_POOL_CPU, altar__docker(be)->slots);
  if (rc < 0) return altar_error_set(err, rc, "capacity: out of memory");
  return 0;
}

static int docker_check_resources(altar_backend_t *be, const altar_resources_t *r, altar_error_t *err) {
  (void)be;
  if (r->gpu)
    return altar_error_set(err, ALTAR_EINVAL,
                           "resources.gpu: backend 'local' (docker) has no GPU pool '%.64s'; it "
                           "runs CPU-only tasks",
                           r->gpu);
  if (r->memory_mb.set && (r->memory_mb.v < 6 || r->memory_mb.v > (int64_t)1 << 30))
    return altar_error_set(err, ALTAR_EINVAL, "resources.memory_mb: %lld is outside what docker accepts (6 MiB and up)",
                           (long long)r->memory_mb.v);
  return 0;
}

static const char *docker_mount_root(altar_backend_t *be) {
  (void)be;
  return ALTAR_DOCKER_MOUNT_ROOT;
}

/* From the kept-output index poll maintains: no directory read. */
static int docker_kept_logs(altar_backend_t *be, altar_kept_logs_t *pkept) {
  altar_docker_t *dk = altar_backend_impl(be);
  altar__log_retention_kept_logs(&dk->retention, (double)time(NULL), pkept);
  return ALTAR_OK;
}

const altar_backend_ops_t altar_backend_docker_ops = {
    .name = "local",
    .caps = ALTAR_BACKEND_CAP_CAPACITY | ALTAR_BACKEND_CAP_CANCEL | ALTAR_BACKEND_CAP_ADOPT | ALTAR_BACKEND_CAP_LOGS,
    .config_keys = docker_keys,
    .input_digest_verification = ALTAR_VERIFY_STAGING,
    .open = docker_open,
    .close = docker_close,
    .capacity = docker_capacity,
    .check_resources = docker_check_resources,
    .stage_inputs = altar__docker_stage_inputs,
    .collect_outputs = altar__docker_collect_outputs,
    .mount_root = docker_mount_root,
    .submit = altar__docker_submit,
    .poll = altar__docker_poll,
    .cancel = altar__docker_cancel,
    .kept_logs = docker_kept_logs,
};
