#include "fleet_common.h"
#include "cli.h"

#include "altar/fleet_topics.h"
#include "altar/plugin/backend.h"
#include "altar/plugin/transport.h"
#include "altar/suggest.h"
#include "altar/registry.h"
#include "altar/storage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* "a | b | c": the names registered for kind, for help texts. */
void altar_cli_registry_names(altar_registry_kind_t kind, char *out, size_t size) {
  const char *names[ALTAR_REGISTRY_MAX];
  size_t n = altar_registry_names(kind, names, ALTAR_REGISTRY_MAX);
  size_t at = 0;
  out[0] = 0;
  for (size_t i = 0; i < n && i < ALTAR_REGISTRY_MAX && at < size; i++) {
    int k = snprintf(out + at, size - at, "%s%s", i ? " | " : "", names[i]);
    if (k < 0) break;
    at += (size_t)k;
  }
}

const char *altar_cli_fleet_flags(unsigned which) {
  static char text[4096];
  char transports[512], backends[512];
  altar_cli_registry_names(ALTAR_REGISTRY_TRANSPORT, transports, sizeof transports);
  altar_cli_registry_names(ALTAR_REGISTRY_BACKEND, backends, sizeof backends);
  size_t at = 0;
  text[0] = 0;
#define ADD(...)                                                                                                       \
  do {                                                                                                                 \
    int k_ = snprintf(text + at, sizeof text - at, __VA_ARGS__);                                                       \
    if (k_ > 0) at = (size_t)k_ < sizeof text - at ? at + (size_t)k_ : sizeof text - 1;                                \
  } while (0)
  ADD("  --config FILE        fleet settings (default ./altar.yaml when present)\n");
  if (!(which & ALTAR_CLI_FLAGS_NO_LOG)) {
    ADD("  --transport NAME     %s\n", transports);
    ADD("  --brokers HOST:PORT  Kafka bootstrap servers (implies --transport kafka)\n");
    ADD("  --log-dir DIR        directory of the local log\n");
  }
  if (which & ALTAR_CLI_FLAGS_BACKEND) {
    ADD("  --backend NAME       %s\n", backends);
    ADD("  --data-root DIR      backend data root\n");
    ADD("  --slots N            tasks in flight at most\n");
  } else if (which & ALTAR_CLI_FLAGS_DATA_ROOT) {
    ADD("  --data-root DIR      backend data root (backend.data_root)\n");
  }
  if (which & ALTAR_CLI_FLAGS_LEDGER) ADD("  --ledger DIR         RocksDB ledger directory\n");
  if (which & ALTAR_CLI_FLAGS_PARTITIONS)
    ADD("  --partitions N       partitions of the topics the fleet creates (topics.partitions, 32)\n");
  ADD("  --set KEY=VALUE      any other setting, e.g. --set transport.kafka.compression.type=lz4\n");
#undef ADD
  return text;
}

/* Whether the log's location came from a config file or a flag, not from the
 * built-in default (altar_cli_require_log_location). */
static bool log_location_given;

static bool names_log_location(const char *key) {
  return !strcmp(key, "transport.dir") || !strcmp(key, "transport.kafka.bootstrap.servers") ||
         !strcmp(key, "transport.bootstrap.servers");
}

int altar_cli_require_log_location(const altar_config_t *cfg, const char *cmd) {
  if (cfg->path || log_location_given) return 0;
  fprintf(stderr,
          "altar %s: no configuration: give --config FILE (or put altar.yaml in this directory), "
          "--log-dir DIR for the local log or --brokers HOST:PORT for Kafka; the built-in default "
          "./var/log is not used, so that jobs never go to a log no worker reads\n",
          cmd);
  return -1;
}

/* The common flags the running command takes (altar_cli_fleet_only); all
 * of them unless it said otherwise. */
static unsigned accepted = ALTAR_CLI_FLAGS_ALL | ALTAR_CLI_FLAGS_DATA_ROOT;

void altar_cli_fleet_only(unsigned which) { accepted = which; }

/* Whether the running command takes a mapped flag (the --help it prints
 * lists exactly these). */
static bool flag_accepted(const char *flag) {
  if (!strcmp(flag, "--transport") || !strcmp(flag, "--brokers") || !strcmp(flag, "--log-dir"))
    return !(accepted & ALTAR_CLI_FLAGS_NO_LOG);
  if (!strcmp(flag, "--backend") || !strcmp(flag, "--slots")) return accepted & ALTAR_CLI_FLAGS_BACKEND;
  if (!strcmp(flag, "--data-root")) return accepted & (ALTAR_CLI_FLAGS_BACKEND | ALTAR_CLI_FLAGS_DATA_ROOT);
  if (!strcmp(flag, "--ledger")) return accepted & ALTAR_CLI_FLAGS_LEDGER;
  if (!strcmp(flag, "--partitions")) return accepted & ALTAR_CLI_FLAGS_PARTITIONS;
  return true;
}

/* What a flag or --set gave, checked once every flag is read (the backend's
 * name may come after its keys): the plug-in names, and keys under
 * backend. and transport. against the named plug-in's own keys, so that
 * --set backend.slotz=2 is refused (exit 2) as the same typo in the file is. */
#define FLEET_SET_KEYS_MAX 64
typedef struct flag_sets {
  const char *transport_flag, *backend_flag; /* the flag that named the plug-in, NULL when none */
  const char *keys[FLEET_SET_KEYS_MAX];      /* KEY of each --set KEY=VALUE under backend./transport. */
  char *owned[FLEET_SET_KEYS_MAX];
  size_t n;
} flag_sets_t;

static void flag_sets_clear(flag_sets_t *fs) {
  for (size_t i = 0; i < fs->n; i++) free(fs->owned[i]);
  fs->n = 0;
}

static int check_flag_sets(const char *cmd, const altar_config_t *cfg, const flag_sets_t *fs) {
  altar_error_t err = {0};
  if (fs->transport_flag &&
      altar_cli_check_name(ALTAR_REGISTRY_TRANSPORT, "transport.name", cfg->transport_name, fs->transport_flag, &err))
    goto bad;
  if (fs->backend_flag &&
      altar_cli_check_name(ALTAR_REGISTRY_BACKEND, "backend.name", cfg->backend_name, fs->backend_flag, &err))
    goto bad;
  for (size_t i = 0; i < fs->n; i++) {
    const char *key = fs->keys[i];
    altar_error_t kerr = {0};
    if (!strncmp(key, "backend.", 8)) {
      const altar_backend_ops_t *ops = altar_registry_lookup(ALTAR_REGISTRY_BACKEND, cfg->backend_name);
      if (!ops || altar_plugin_keys_allow(altar_backend_ops_keys(ops), key + 8, NULL, 0)) continue;
      altar_plugin_keys_refuse(altar_backend_ops_keys(ops), "--set ", "backend", cfg->backend_name, key + 8, &kerr);
      fprintf(stderr, "altar %s: %s\n", cmd, kerr.msg);
      return -1;
    }
    if (!strncmp(key, "transport.", 10) && strncmp(key, "transport.kafka.", 16)) {
      const altar_transport_ops_t *ops = altar_registry_lookup(ALTAR_REGISTRY_TRANSPORT, cfg->transport_name);
      if (!ops || altar_plugin_keys_allow(ops->config_keys, key + 10, NULL, 0)) continue;
      altar_plugin_keys_refuse(ops->config_keys, "--set ", "transport", ops->name, key + 10, &kerr);
      fprintf(stderr, "altar %s: %s\n", cmd, kerr.msg);
      return -1;
    }
  }
  return 0;
bad:
  fprintf(stderr, "altar %s: %s\n", cmd, err.msg);
  return -1;
}

int altar_cli_id_and_view_flags(int argc, char **argv, const char *cmd, void (*usage)(FILE *), altar_config_t *cfg,
                                const char **pid, bool *pjson, bool *poutputs) {
  *pid = NULL;
  *pjson = *poutputs = false;
  for (int i = 1; argc > 0 && i < argc; i++) {
    if (!strcmp(argv[i], "--json")) *pjson = true;
    else if (!strcmp(argv[i], "--outputs")) *poutputs = true;
    else if (argv[i][0] != '-' && !*pid) *pid = argv[i];
    else {
      fprintf(stderr, "altar %s: unexpected argument '%s'\n", cmd, argv[i]);
      argc = -1;
    }
  }
  int rc = 0;
  if (argc < 0 || !*pid) {
    if (argc >= 0) usage(stderr);
    rc = 2;
  } else {
    rc = altar_cli_require_existing_log(cfg, cmd);
  }
  if (rc) altar_config_clear(cfg);
  return rc;
}

int altar_cli_require_existing_log(const altar_config_t *cfg, const char *cmd) {
  if (strcmp(cfg->transport_name, "local")) return 0;
  const char *dir = altar_strmap_get(&cfg->transport_props, "dir");
  if (!dir || !*dir) dir = "./var/log";
  char topics[4200];
  snprintf(topics, sizeof topics, "%s/topics", dir);
  struct stat st;
  if (stat(topics, &st) == 0 && S_ISDIR(st.st_mode)) return 0;
  if (!cfg->path && !log_location_given) {
    fprintf(stderr,
            "altar %s: no configuration: give --config FILE (or put altar.yaml in this directory) or --log-dir DIR; "
            "there is no log at the built-in default %s, and a command that only reads creates none\n",
            cmd, dir);
    return 2;
  }
  fprintf(stderr,
          "altar %s: no local log at %s (%s does not exist; nothing was created): is transport.dir%s%s right?\n", cmd,
          dir, topics, cfg->path ? " in " : "", cfg->path ? cfg->path : "");
  return 1;
}

int altar_cli_fleet_config(int argc, char **argv, altar_config_t *cfg) {
  const char *path = NULL;
  flag_sets_t fs = {0};
  log_location_given = false;
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], "--config")) path = argv[i + 1];
  altar_error_t err = {0};
  if (altar_cli_config_load(path, cfg, &err)) {
    fprintf(stderr, "altar %s: %s\n", argv[0], err.msg);
    return -1;
  }
  static const struct {
    const char *flag, *key;
  } map[] = {
      {"--transport", "transport.name"},    {"--brokers", "transport.kafka.bootstrap.servers"},
      {"--log-dir", "transport.dir"},       {"--backend", "backend.name"},
      {"--data-root", "backend.data_root"}, {"--slots", "backend.slots"},
      {"--ledger", "ledger.path"},          {"--partitions", "topics.partitions"},
  };
  int out = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool used = false;
    if (!strcmp(a, "--config") && i + 1 < argc) {
      i++;
      continue;
    }
    for (size_t k = 0; k < sizeof map / sizeof map[0]; k++) {
      if (strcmp(a, map[k].flag)) continue;
      if (!flag_accepted(a)) {
        fprintf(stderr, "altar %s: unknown option '%s' (see altar %s --help)\n", argv[0], a, argv[0]);
        goto fail;
      }
      if (i + 1 >= argc) {
        fprintf(stderr, "altar %s: %s needs a value\n", argv[0], a);
        goto fail;
      }
      if (altar_config_set(cfg, map[k].key, argv[++i], &err)) {
        fprintf(stderr, "altar %s: %s: %s\n", argv[0], a, err.msg);
        goto fail;
      }
      if (!strcmp(a, "--brokers")) altar_config_set(cfg, "transport.name", "kafka", &err);
      if (!strcmp(map[k].key, "transport.name") || !strcmp(a, "--brokers")) fs.transport_flag = a;
      if (!strcmp(map[k].key, "backend.name")) fs.backend_flag = a;
      if (names_log_location(map[k].key)) log_location_given = true;
      used = true;
    }
    if (!used && !strcmp(a, "--set")) {
      if (i + 1 >= argc || !strchr(argv[i + 1], '=')) {
        fprintf(stderr, "altar %s: --set needs KEY=VALUE\n", argv[0]);
        goto fail;
      }
      char *kv = strdup(argv[++i]);
      char *eq = kv ? strchr(kv, '=') : NULL;
      if (!eq) {
        free(kv);
        goto fail;
      }
      *eq = 0;
      int rc = altar_config_set(cfg, kv, eq + 1, &err);
      if (!rc && names_log_location(kv)) log_location_given = true;
      if (rc == ALTAR_EINVAL && strstr(err.msg, ": unknown setting")) {
        /* The keys altar_config_set knows outside backend. and transport. */
        static const char *const known[] = {"transport.name",      "transport.dir",
                                            "topics.jobs",         "topics.status",
                                            "topics.ready",        "topics.dead",
                                            "topics.dlq",          "topics.fleet",
                                            "topics.partitions",   "backend.name",
                                            "ledger.path",         "metrics.addr",
                                            "metrics.worker_addr", NULL};
        char hint[160];
        altar_suggest_hint(kv, known, hint, sizeof hint);
        fprintf(stderr, "altar %s: --set %s: unknown setting%s\n", argv[0], kv, hint);
        free(kv);
        goto fail;
      }
      if (rc) {
        fprintf(stderr, "altar %s: --set %s: %s\n", argv[0], kv, err.msg);
        free(kv);
        goto fail;
      }
      if (!strcmp(kv, "transport.name")) fs.transport_flag = "--set transport.name";
      else if (!strcmp(kv, "backend.name")) fs.backend_flag = "--set backend.name";
      else if ((!strncmp(kv, "backend.", 8) || !strncmp(kv, "transport.", 10)) && fs.n < FLEET_SET_KEYS_MAX) {
        fs.keys[fs.n] = fs.owned[fs.n] = kv;
        fs.n++;
        kv = NULL;
      }
      free(kv);
      used = true;
    }
    if (!used) argv[out++] = argv[i];
  }
  argv[out] = NULL;
  if (check_flag_sets(argv[0], cfg, &fs)) goto fail;
  flag_sets_clear(&fs);
  return out;
fail:
  flag_sets_clear(&fs);
  return -1;
}

int altar_cli_fleet_begin(int argc, char **argv, void (*usage)(FILE *), altar_config_t *cfg, int *pexit) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      memset(cfg, 0, sizeof *cfg);
      *pexit = 0;
      return -1;
    }
  }
  argc = altar_cli_fleet_config(argc, argv, cfg);
  if (argc < 0) {
    altar_config_clear(cfg);
    *pexit = 2;
  }
  return argc;
}

int altar_cli_fleet_begin_on_log(int argc, char **argv, void (*usage)(FILE *), altar_config_t *cfg, int *pexit) {
  argc = altar_cli_fleet_begin(argc, argv, usage, cfg, pexit);
  if (argc < 0) return -1;
  if (altar_cli_require_log_location(cfg, argv[0])) {
    altar_config_clear(cfg);
    *pexit = 2;
    return -1;
  }
  return argc;
}

int altar_cli_parse_int(const char *cmd, const char *flag, const char *s, long long min, long long max, long long *pv) {
  char *end;
  long long v = strtoll(s, &end, 10);
  if (!*s || *end || v < min || v > max) {
    fprintf(stderr, "altar %s: %s: expected an integer in [%lld, %lld], got '%s'\n", cmd, flag, min, max, s);
    return -1;
  }
  *pv = v;
  return 0;
}

altar_transport_t *altar_cli_open_transport(const altar_config_t *cfg, const altar_transport_opts_t *opts) {
  altar_error_t err = {0};
  altar_transport_t *t = altar_transport_open(cfg->transport_name, &cfg->transport_props, opts, &err);
  if (!t) fprintf(stderr, "altar %s: transport %s: %s\n", altar__cli_cmd, cfg->transport_name, err.msg);
  return t;
}

altar_backend_t *altar_cli_open_backend(const altar_config_t *cfg) {
  altar_error_t err = {0};
  /* The Python storage adapters the backend stages through start now, so a
   * wrong interpreter or adapter name stops the worker before any job. */
  if (altar_storage_python_start(&err)) {
    fprintf(stderr, "altar %s: %s\n", altar__cli_cmd, err.msg);
    return NULL;
  }
  altar_strmap_t props;
  if (altar_strmap_copy(&props, &cfg->backend_props)) return NULL;
  /* slots is the worker's intake bound; backends that size pools read it too. */
  const altar_backend_ops_t *ops = altar_backend_lookup(cfg->backend_name);
  if (ops && (!strcmp(ops->name, "kubernetes") || !strcmp(ops->name, "modal"))) altar_strmap_remove(&props, "slots");
  altar_backend_t *be = altar_backend_open_by_name(cfg->backend_name, &props, &err);
  altar_strmap_clear(&props);
  if (!be) fprintf(stderr, "altar %s: backend %s: %s\n", altar__cli_cmd, cfg->backend_name, err.msg);
  return be;
}

int altar_cli_load_groups(const altar_config_t *cfg, altar_group_specs_t *groups) {
  memset(groups, 0, sizeof *groups);
  if (!cfg->path) return 0;
  altar_error_t err = {0};
  if (altar_group_specs_load_file(cfg->path, groups, &err)) {
    fprintf(stderr, "altar %s: %s\n", altar__cli_cmd, err.msg);
    return -1;
  }
  return 0;
}

int altar_cli_ensure_topics(altar_transport_t *t, const altar_config_t *cfg) {
  altar_error_t err = {0};
  if (!altar_fleet_topics_ensure(t, cfg, &err)) return 0;
  fprintf(stderr, "altar %s: %s\n", altar__cli_cmd, err.msg);
  return -1;
}

static volatile sig_atomic_t *stop_flag;

static void on_stop_signal(int sig) {
  (void)sig;
  if (stop_flag) *stop_flag = *stop_flag ? 2 : 1;
}

void altar_cli_install_stop_signals(volatile sig_atomic_t *flag) {
  stop_flag = flag;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
}
