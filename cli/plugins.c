/* The one place that knows every built-in plug-in: backends, storage
 * adapters, transports. Each registration is one line. Third-party
 * plug-ins come after them, from ALTAR_PLUGIN_PATH and the config. */
#include "cli/cli.h"

#include "altar/plugin/backend.h"
#include "altar/modal.h"
#include "backends/docker.h"
#include "altar/plugin/transport_kafka.h"
#include "altar/plugin.h"
#include "altar/registry.h"
#include "altar/suggest.h"
#include "altar/storage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void altar_cli_register_plugins(void) {
  altar_backend_register(&altar_backend_process_ops);                /* "process", the default */
  altar_backend_register(&altar_backend_docker_ops);                 /* "local" */
  altar_backend_register_alias("docker", &altar_backend_docker_ops); /* its common name */
  altar_backend_register(&altar_backend_kubernetes_ops);             /* "kubernetes" */
  altar_backend_register(&altar_backend_modal_ops);                  /* "modal" */
  altar_backend_register(&altar_backend_python_ops);                 /* "python": adapters in Python */
  altar_transport_register(&altar_transport_kafka_ops);              /* "kafka" */
  altar_transport_register(&altar_transport_local_ops);              /* "local", the embedded log */
  altar_storage_register_builtin(); /* "local", "file", "http", "https", "gs", "gcs", "s3" */
}

int altar_cli_load_env_plugins(void) {
  altar_error_t err = {0};
  if (altar_plugin_load_path(getenv(ALTAR_PLUGIN_PATH_ENV), ALTAR_PLUGIN_PATH_ENV, &err) < 0) {
    fprintf(stderr, "altar %s: %s\n", altar__cli_cmd, err.msg);
    return -1;
  }
  return 0;
}

int altar_cli_check_name(altar_registry_kind_t kind, const char *key, const char *name, const char *where,
                         altar_error_t *err) {
  if (altar_registry_lookup(kind, name)) return ALTAR_OK;
  const char *names[ALTAR_REGISTRY_MAX + 1];
  size_t n = altar_registry_names(kind, names, ALTAR_REGISTRY_MAX);
  if (n > ALTAR_REGISTRY_MAX) n = ALTAR_REGISTRY_MAX;
  names[n] = NULL;
  char hint[160] = "", known[512];
  const char *s = altar_suggest(name, names);
  if (s) snprintf(hint, sizeof hint, "did you mean \"%s\"? ", s);
  size_t at = 0;
  known[0] = 0;
  for (size_t i = 0; i < n && at < sizeof known; i++) {
    int k = snprintf(known + at, sizeof known - at, "%s%s", i ? ", " : "", names[i]);
    if (k < 0) break;
    at += (size_t)k;
  }
  return altar_error_set(err, ALTAR_ECONFIG, "%s: %s: unknown %s \"%.64s\" (%sknown: %s)", where, key,
                         altar_registry_kind_name(kind), name, hint, n ? known : "none");
}

/* transport.name and backend.name as the file gave them, checked once every
 * plug-in is registered: a typo names its line and the closest name. */
static int check_file_names(const altar_config_t *cfg, altar_error_t *err) {
  char where[4200];
  if (cfg->path && cfg->transport_name_line) {
    snprintf(where, sizeof where, "%s:%zu", cfg->path, cfg->transport_name_line);
    if (altar_cli_check_name(ALTAR_REGISTRY_TRANSPORT, "transport.name", cfg->transport_name, where, err))
      return ALTAR_ECONFIG;
  }
  if (cfg->path && cfg->backend_name_line) {
    snprintf(where, sizeof where, "%s:%zu", cfg->path, cfg->backend_name_line);
    if (altar_cli_check_name(ALTAR_REGISTRY_BACKEND, "backend.name", cfg->backend_name, where, err))
      return ALTAR_ECONFIG;
  }
  return ALTAR_OK;
}

/* The Python storage adapters the file names, registered by scheme once
 * every other adapter is (a scheme already taken names its line). */
static int configure_storage(const altar_config_t *cfg, altar_error_t *err) {
  return altar_storage_python_configure(cfg->storage_python, cfg->path, err);
}

int altar_cli_config_load(const char *path, altar_config_t *cfg, altar_error_t *err) {
  int rc = altar_config_load(path, cfg, err);
  if (rc < 0) return rc;
  if (!cfg->n_plugins) {
    rc = check_file_names(cfg, err);
    return rc < 0 ? rc : configure_storage(cfg, err);
  }
  rc = altar_plugin_load_config(cfg, err);
  if (rc < 0) return rc;
  /* Read once more with the plug-ins registered, so keys under transport:
   * are checked against a plug-in transport's own keys too (a typo must
   * not fall back to a default). Loading the same files again is a no-op. */
  char *file = strdup(cfg->path);
  altar_config_clear(cfg);
  if (!file) return altar_error_set(err, ALTAR_ENOMEM, "out of memory");
  rc = altar_config_load(file, cfg, err);
  free(file);
  if (rc < 0) return rc;
  rc = check_file_names(cfg, err);
  return rc < 0 ? rc : configure_storage(cfg, err);
}
